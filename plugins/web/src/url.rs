//! The few URL operations the tools need: parsing an absolute http(s) URL,
//! resolving a link or a redirect against it, and percent-encoding a query.

use std::fmt;

/// An absolute `http` or `https` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// `http` or `https`, lowercase.
    pub scheme: String,
    /// The host as written (IPv6 in brackets), lowercase.
    pub host: String,
    /// The port, when one was written.
    pub port: Option<u16>,
    /// The path and query, starting with `/`; the fragment is dropped.
    pub path_and_query: String,
}

impl Url {
    /// Parses an absolute URL; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let Some((scheme, rest)) = text.split_once("://") else {
            return Err(format!(
                "`{text}` is not an absolute URL; write it like https://example.com/page"
            ));
        };
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(format!(
                "`{text}` uses the scheme `{scheme}`; only http and https pages can be fetched"
            ));
        }
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        if authority.contains('@') {
            return Err(format!(
                "`{text}` carries a user name or password; drop the part before `@`"
            ));
        }
        let (host, port) = split_host_port(authority)
            .ok_or_else(|| format!("`{text}` has no valid host (and port)"))?;
        let tail = tail.split('#').next().unwrap_or_default();
        let path_and_query = if tail.starts_with('/') {
            tail.to_string()
        } else {
            format!("/{tail}")
        };
        Ok(Self {
            scheme,
            host: host.to_ascii_lowercase(),
            port,
            path_and_query: escape_spaces(&path_and_query),
        })
    }

    /// `host[:port]`.
    pub fn authority(&self) -> String {
        match self.port {
            Some(port) => format!("{}:{port}", self.host),
            None => self.host.clone(),
        }
    }

    /// `scheme://host[:port]`.
    pub fn origin(&self) -> String {
        format!("{}://{}", self.scheme, self.authority())
    }

    /// Whether the host is this machine (a loopback address or
    /// `localhost`), where plain http is kept.
    pub fn is_loopback(&self) -> bool {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        host == "localhost"
            || host.ends_with(".localhost")
            || host == "::1"
            || host
                .parse::<std::net::Ipv4Addr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    /// The same URL over https, as pages are fetched unless the host is
    /// this machine; whether it changed.
    pub fn upgrade(&mut self) -> bool {
        if self.scheme == "http" && !self.is_loopback() {
            self.scheme = "https".to_string();
            if self.port == Some(80) {
                self.port = None;
            }
            return true;
        }
        false
    }

    /// Resolves `reference` (a link or a `Location` header) against this
    /// URL.
    pub fn join(&self, reference: &str) -> Result<Url, String> {
        let reference = reference.trim();
        if reference.contains("://") && !reference.starts_with('/') {
            return Url::parse(reference);
        }
        if let Some(rest) = reference.strip_prefix("//") {
            return Url::parse(&format!("{}://{rest}", self.scheme));
        }
        let path = if reference.starts_with('/') {
            reference.to_string()
        } else if reference.starts_with('?') {
            let path = self.path_and_query.split('?').next().unwrap_or("/");
            format!("{path}{reference}")
        } else if reference.is_empty() || reference.starts_with('#') {
            self.path_and_query.clone()
        } else {
            let path = self.path_and_query.split('?').next().unwrap_or("/");
            let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
            format!("{dir}{reference}")
        };
        let mut url = self.clone();
        url.path_and_query = escape_spaces(&normalize_dots(&path));
        Ok(url)
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.origin(), self.path_and_query)
    }
}

/// Splits `host[:port]`, IPv6 in brackets.
fn split_host_port(authority: &str) -> Option<(&str, Option<u16>)> {
    let (host, port) = if authority.starts_with('[') {
        let close = authority.find(']')?;
        let (host, after) = authority.split_at(close + 1);
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() || host.contains(char::is_whitespace) {
        return None;
    }
    let port = match port {
        None | Some("") => None,
        Some(port) => Some(port.parse::<u16>().ok().filter(|p| *p != 0)?),
    };
    Some((host, port))
}

/// Folds `.` and `..` segments of a path (the query is left alone).
fn normalize_dots(path_and_query: &str) -> String {
    let (path, query) = match path_and_query.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path_and_query, None),
    };
    let mut segments: Vec<&str> = Vec::new();
    let parts: Vec<&str> = path.split('/').skip(1).collect();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        match *part {
            "." => {
                if last {
                    segments.push("");
                }
            }
            ".." => {
                segments.pop();
                if last {
                    segments.push("");
                }
            }
            other => segments.push(other),
        }
    }
    let mut out = format!("/{}", segments.join("/"));
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

fn escape_spaces(text: &str) -> String {
    text.replace(' ', "%20")
}

/// Percent-encodes a query value (`application/x-www-form-urlencoded`).
pub fn encode_query_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(byte));
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_resolves() {
        let base = Url::parse("https://Docs.rs:8443/a/b/c.html?x=1#top").unwrap();
        assert_eq!(base.host, "docs.rs");
        assert_eq!(base.port, Some(8443));
        assert_eq!(base.path_and_query, "/a/b/c.html?x=1");
        assert_eq!(
            base.join("d.html").unwrap().to_string(),
            "https://docs.rs:8443/a/b/d.html"
        );
        assert_eq!(
            base.join("../e").unwrap().to_string(),
            "https://docs.rs:8443/a/e"
        );
        assert_eq!(
            base.join("/root").unwrap().to_string(),
            "https://docs.rs:8443/root"
        );
        assert_eq!(
            base.join("//other.org/x").unwrap().to_string(),
            "https://other.org/x"
        );
        assert_eq!(
            base.join("http://other.org").unwrap().to_string(),
            "http://other.org/"
        );
        assert!(Url::parse("ftp://x.org").unwrap_err().contains("only http"));
        assert!(Url::parse("docs.rs").unwrap_err().contains("absolute"));
        assert!(
            Url::parse("https://u:p@x.org")
                .unwrap_err()
                .contains("user")
        );
    }

    #[test]
    fn http_is_upgraded_except_on_this_machine() {
        let mut url = Url::parse("http://example.com:80/x").unwrap();
        assert!(url.upgrade());
        assert_eq!(url.to_string(), "https://example.com/x");
        for local in [
            "http://127.0.0.1:8080/",
            "http://[::1]:9/",
            "http://localhost/",
        ] {
            let mut url = Url::parse(local).unwrap();
            assert!(!url.upgrade(), "{local}");
        }
    }

    #[test]
    fn query_values_are_encoded() {
        assert_eq!(
            encode_query_value("rust wasm&x=é"),
            "rust+wasm%26x%3D%C3%A9"
        );
    }
}
