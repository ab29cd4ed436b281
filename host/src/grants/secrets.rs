//! Secrets: values the host adds to a plugin's HTTP requests as a header,
//! only for the hosts the grant names. The plugin never sees the value.
//!
//! A manifest declares each secret with the header it is sent as, how the
//! value is written in it, and the hosts it goes to; every host must also be
//! reachable under the manifest's network grants ([`check_hosts_granted`]).
//! Values come from the user's environment variable of the secret's name
//! first, else from the `[secrets]` table of the user config
//! ([`SecretValues::load`]), and are looked up when a call is prepared
//! ([`resolve`]). Neither [`ResolvedSecret`] nor [`SecretValues`] prints a
//! value in its `Debug` output.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::NetGrant;
use super::net::{HostPattern, Scheme};

/// A secret as a manifest requests it and the lockfile records it:
/// `{ name = "API_KEY", header = "Authorization", format = "Bearer {}",
/// hosts = ["api.example.com"] }`, `format` being `{}` unless it says
/// otherwise.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table such as { name = \"API_KEY\", header = \"Authorization\", hosts = [\"api.example.com\"] }"
)]
pub struct SecretGrant {
    /// The secret's name; its value comes from the user's environment
    /// variable of that name or the user config.
    pub name: String,
    /// The header it is sent as.
    pub header: String,
    /// How the value is written in the header; `{}` stands for the value.
    #[serde(default = "default_format")]
    pub format: String,
    /// The hosts it is sent to (patterns as in [`super::net::host_matches`]).
    pub hosts: Vec<String>,
}

fn default_format() -> String {
    "{}".to_string()
}

/// Headers a secret may not be sent as: the ones that frame the message or
/// the connection (hop-by-hop), which the HTTP client owns.
const FORBIDDEN_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "content-type",
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "proxy-authenticate",
    "proxy-authorization",
    "http2-settings",
];

/// A secret that cannot be declared or resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// One field of a declaration is wrong.
    #[error("secret `{secret}`: {message}")]
    Invalid {
        /// The secret's name as written.
        secret: String,
        /// The field at fault: `name`, `header`, `format` or `hosts`.
        field: &'static str,
        /// What is wrong and what to write instead.
        message: String,
    },
    /// The name is one the host keeps for itself.
    #[error(
        "secret `{secret}` cannot be given to a plugin: {reason}; a plugin's secret must be a credential of its own service, under a name of its own"
    )]
    Reserved {
        /// The secret's name.
        secret: String,
        /// Why the host keeps it.
        reason: String,
    },
    /// A host the secret goes to is not covered by an https network grant.
    #[error(
        "secret `{secret}` is sent to `{host}`, but no https network grant covers that host; add an origin such as \"https://{host}\" to `net`, or remove the host from the secret"
    )]
    HostNotGranted {
        /// The secret.
        secret: String,
        /// The host.
        host: String,
    },
    /// A host the secret goes to is also reachable over plain http.
    #[error(
        "secret `{secret}` is sent to `{host}`, which a plain http network grant also reaches; secrets travel only over https, so remove the http:// origin for that host or the host from the secret"
    )]
    PlainHttp {
        /// The secret.
        secret: String,
        /// The host.
        host: String,
    },
    /// No value was found for the secret.
    #[error(
        "secret `{secret}` has no value: set the environment variable {secret}, or add {secret} = \"...\" under [secrets] in {}", config.display()
    )]
    Missing {
        /// The secret.
        secret: String,
        /// The user config file that may hold it.
        config: PathBuf,
    },
    /// The value cannot be sent in a header.
    #[error(
        "the value of secret `{secret}` (from {source_name}) cannot be sent in a header: it contains a line break or another control character"
    )]
    BadValue {
        /// The secret.
        secret: String,
        /// Where the value came from.
        source_name: String,
    },
    /// The `[secrets]` table of the user config is wrong or unreadable.
    #[error("cannot read secrets from {}: {message}", path.display())]
    Config {
        /// The config file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl SecretGrant {
    /// Checks every field: the name is an environment variable name, the
    /// header a valid HTTP header name the client does not own, the format
    /// holds `{}` exactly once, and there is at least one host, each a valid
    /// host pattern.
    pub fn validate(&self) -> Result<(), SecretError> {
        let invalid = |field, message| SecretError::Invalid {
            secret: self.name.clone(),
            field,
            message,
        };
        check_name(&self.name).map_err(|m| invalid("name", m))?;
        self.check_reserved(&[])?;
        check_header(&self.header).map_err(|m| invalid("header", m))?;
        check_format(&self.format).map_err(|m| invalid("format", m))?;
        if self.hosts.is_empty() {
            return Err(invalid(
                "hosts",
                "`hosts` is empty; list the hosts the secret is sent to, such as [\"api.example.com\"]".to_string(),
            ));
        }
        for host in &self.hosts {
            check_host(host).map_err(|m| invalid("hosts", m))?;
        }
        Ok(())
    }

    /// Checks that the name is not one the host keeps for itself;
    /// `model_keys` are the variables the user configured as the model's
    /// API key.
    pub fn check_reserved(&self, model_keys: &[&str]) -> Result<(), SecretError> {
        match super::env::reserved_reason(&self.name, model_keys) {
            Some(reason) => Err(SecretError::Reserved {
                secret: self.name.clone(),
                reason,
            }),
            None => Ok(()),
        }
    }

    /// The grant in plain words: `OPEN_METEO_KEY -> sent as header X-Api-Key
    /// to api.open-meteo.com only`.
    pub fn describe(&self) -> String {
        let shape = if self.format == "{}" {
            String::new()
        } else {
            format!(" (as \"{}\")", self.format.replace("{}", "<value>"))
        };
        format!(
            "{} -> sent as header {}{shape} to {} only",
            self.name,
            self.header,
            self.hosts.join(", ")
        )
    }

    /// Whether the secret is sent to `host` (a host name, not a pattern).
    pub fn is_sent_to(&self, host: &str) -> bool {
        self.hosts.iter().any(|p| super::net::host_matches(p, host))
    }
}

impl super::Capability for SecretGrant {
    const WORD: &'static str = "secret";
    const ALIASES: &'static [&'static str] = &["secrets"];
    const LABEL: &'static str = "secret";
    const CONSENT_RANK: u8 = 1;
    const SAY_NONE: bool = false;
    const EXAMPLE: &'static str = "{ name = \"API_KEY\", header = \"Authorization\", format = \"Bearer {}\", hosts = [\"api.example.com\"] }";

    fn key(&self) -> String {
        self.name.clone()
    }

    fn words(&self) -> String {
        self.describe()
    }

    /// The same name, header and format, and every host covered.
    fn is_within(&self, granted: &Self) -> bool {
        self.name == granted.name
            && self.header.eq_ignore_ascii_case(&granted.header)
            && self.format == granted.format
            && self
                .hosts
                .iter()
                .all(|h| granted.hosts.iter().any(|g| host_covers(g, h)))
    }

    fn check_value(value: &str) -> Result<(), String> {
        check_name(value)
    }

    fn validate(&self) -> Result<(), super::EntryError> {
        SecretGrant::validate(self).map_err(|e| match e {
            SecretError::Invalid { field, message, .. } => super::EntryError::field(field, message),
            other => super::EntryError::entry(other.to_string()),
        })
    }

    /// Every host it is sent to must be reachable over https, and over
    /// https only ([`check_hosts_granted`]).
    fn validate_among(&self, all: &super::Capabilities) -> Result<(), super::EntryError> {
        check_hosts_granted(std::slice::from_ref(self), &all.net)
            .map_err(|e| super::EntryError::entry(e.to_string()))
    }

    fn check_reserved(&self, model_keys: &[&str]) -> Result<(), super::ReservedName> {
        Ok(SecretGrant::check_reserved(self, model_keys)?)
    }
}

/// Checks a secret's name: an environment variable name.
pub fn check_name(name: &str) -> Result<(), String> {
    super::env::check_name(name).map_err(|_| {
        format!("`{name}` is not a valid secret name: use letters, digits and `_`, not starting with a digit (it is also the environment variable the value is read from)")
    })
}

/// Checks a secret granted to a Claude Code plugin's command hooks,
/// scripts and inline commands (`plugin install --hook-secret NAME`): a
/// valid name, and none the host keeps for itself (`model_keys` are the
/// variables the user configured as the model's API key).
pub fn check_hook_secret(name: &str, model_keys: &[&str]) -> Result<(), String> {
    check_name(name)?;
    match super::env::reserved_reason(name, model_keys) {
        Some(reason) => Err(format!(
            "secret `{name}` cannot be given to a plugin's hooks and commands: {reason}"
        )),
        None => Ok(()),
    }
}

/// The values of the secrets `names`, from `env` (the user's environment)
/// first, else the user config's `[secrets]`; a secret with no value, or
/// one holding control characters, is left out (the commands run without
/// it).
pub fn hook_secret_values(
    names: &[String],
    env: impl Fn(&str) -> Option<String>,
    config: &SecretValues,
) -> Vec<(String, String)> {
    names
        .iter()
        .filter(|name| super::env::reserved_reason(name, &[]).is_none())
        .filter_map(|name| {
            let value = env(name)
                .filter(|v| !v.is_empty())
                .or_else(|| config.get(name).map(str::to_string))?;
            (!value.chars().any(char::is_control)).then(|| (name.clone(), value))
        })
        .collect()
}

/// Checks a header name: an HTTP token, and not one the client owns.
pub fn check_header(header: &str) -> Result<(), String> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if header.is_empty() || !header.chars().all(token) {
        return Err(format!(
            "`{header}` is not a valid HTTP header name: use letters, digits and `-`, such as \"X-Api-Key\" or \"Authorization\""
        ));
    }
    if FORBIDDEN_HEADERS.contains(&header.to_ascii_lowercase().as_str()) {
        return Err(format!(
            "a secret cannot be sent as header `{header}`: the HTTP client sets it; use a header such as \"Authorization\" or \"X-Api-Key\""
        ));
    }
    Ok(())
}

/// Checks a header format: `{}` exactly once, no line breaks.
pub fn check_format(format: &str) -> Result<(), String> {
    let holes = format.matches("{}").count();
    if holes != 1 {
        return Err(format!(
            "`format` must contain `{{}}` (where the value goes) exactly once, found {holes} in \"{format}\"; for example \"Bearer {{}}\""
        ));
    }
    if format.chars().any(|c| c.is_control() && c != '\t') {
        return Err("`format` must not contain line breaks or control characters".to_string());
    }
    Ok(())
}

/// Checks a host pattern a secret is sent to.
pub fn check_host(host: &str) -> Result<(), String> {
    HostPattern::parse(host)
        .map(drop)
        .map_err(|m| format!("`{host}` in `hosts` is not a host pattern: {m}"))
}

/// Whether host pattern `wide` matches every host `narrow` does.
pub fn host_covers(wide: &str, narrow: &str) -> bool {
    match (HostPattern::parse(wide), HostPattern::parse(narrow)) {
        (Ok(wide), Ok(narrow)) => wide.covers(&narrow),
        _ => false,
    }
}

/// Checks that every host each secret is sent to is covered by an `https`
/// network grant and by no plain `http` one, so a secret never travels
/// unencrypted; names the first host that fails.
pub fn check_hosts_granted(secrets: &[SecretGrant], net: &[NetGrant]) -> Result<(), SecretError> {
    for secret in secrets {
        for host in &secret.hosts {
            let Ok(pattern) = HostPattern::parse(host) else {
                return Err(SecretError::HostNotGranted {
                    secret: secret.name.clone(),
                    host: host.clone(),
                });
            };
            let reaches = |scheme: Scheme| {
                net.iter()
                    .any(|grant| grant.scheme() == scheme && grant.host().covers(&pattern))
            };
            if reaches(Scheme::Http) {
                return Err(SecretError::PlainHttp {
                    secret: secret.name.clone(),
                    host: host.clone(),
                });
            }
            let covered = reaches(Scheme::Https);
            if !covered {
                return Err(SecretError::HostNotGranted {
                    secret: secret.name.clone(),
                    host: host.clone(),
                });
            }
        }
    }
    Ok(())
}

/// Secret values from the `[secrets]` table of the user config
/// (`NAME = "value"`). `Debug` shows the names only.
#[derive(Clone, Default)]
pub struct SecretValues {
    path: PathBuf,
    values: BTreeMap<String, String>,
    /// The variable the same config names as the model's API key
    /// (`[model] api_key_env`), which no secret may be.
    model_key: Option<String>,
}

impl std::fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretValues")
            .field("path", &self.path)
            .field("names", &self.values.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl SecretValues {
    /// Reads the `[secrets]` table of the user config at `path`; a missing
    /// file or table means no values.
    pub fn load(path: &Path) -> Result<Self, SecretError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Self::from_pairs(path, []));
            }
            Err(e) => {
                return Err(SecretError::Config {
                    path: path.to_path_buf(),
                    message: e.to_string(),
                });
            }
        };
        Self::parse(&text, path)
    }

    /// Reads the `[secrets]` table from a config file's text; `path` is the
    /// file, named in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Self, SecretError> {
        let config_error = |message: String| SecretError::Config {
            path: path.to_path_buf(),
            message,
        };
        let table: toml::Table = toml::from_str(text).map_err(|e| config_error(e.to_string()))?;
        let mut values = BTreeMap::new();
        let model_key = table
            .get("model")
            .and_then(|model| model.get("api_key_env"))
            .and_then(toml::Value::as_str)
            .map(str::to_string);
        match table.get("secrets") {
            None => {}
            Some(toml::Value::Table(secrets)) => {
                for (name, value) in secrets {
                    let toml::Value::String(value) = value else {
                        return Err(config_error(format!(
                            "[secrets] {name} must be a string, such as {name} = \"...\""
                        )));
                    };
                    values.insert(name.clone(), value.clone());
                }
            }
            Some(_) => {
                return Err(config_error(
                    "`secrets` must be a table: write [secrets] and then NAME = \"value\" lines"
                        .to_string(),
                ));
            }
        }
        Ok(Self {
            path: path.to_path_buf(),
            values,
            model_key,
        })
    }

    /// Values given directly; `path` is the config file named in messages.
    pub fn from_pairs<'a>(
        path: &Path,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Self {
        Self {
            path: path.to_path_buf(),
            values: pairs
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            model_key: None,
        }
    }

    /// The config file the values come from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// The value the user config gives secret `name`, if any (the
    /// environment is not looked at).
    pub fn value(&self, name: &str) -> Option<&str> {
        self.get(name)
    }
}

/// Looks up each granted secret's value: the environment variable of its
/// name (through `env`) first, else the user config's `[secrets]` table.
/// A secret with no value, or a value that cannot be sent in a header, is
/// an error naming what to set; a secret named like a variable the host
/// keeps for itself (a hand-edited lockfile) is refused before any value is
/// looked up.
pub fn resolve(
    grants: &[SecretGrant],
    env: impl Fn(&str) -> Option<String>,
    config: &SecretValues,
) -> Result<Vec<ResolvedSecret>, SecretError> {
    grants
        .iter()
        .map(|grant| {
            grant.check_reserved(&config.model_key.as_deref().into_iter().collect::<Vec<_>>())?;
            let (value, source_name) = match env(&grant.name) {
                Some(value) if !value.is_empty() => {
                    (value, format!("environment variable {}", grant.name))
                }
                _ => match config.get(&grant.name) {
                    Some(value) => (
                        value.to_string(),
                        format!("[secrets] in {}", config.path.display()),
                    ),
                    None => {
                        return Err(SecretError::Missing {
                            secret: grant.name.clone(),
                            config: config.path.clone(),
                        });
                    }
                },
            };
            if value.chars().any(char::is_control) {
                return Err(SecretError::BadValue {
                    secret: grant.name.clone(),
                    source_name,
                });
            }
            Ok(ResolvedSecret::new(grant.clone(), value))
        })
        .collect()
}

/// A granted secret with its value, ready to be added to requests.
#[derive(Clone)]
pub struct ResolvedSecret {
    /// The grant.
    pub grant: SecretGrant,
    value: String,
}

impl ResolvedSecret {
    /// A grant with its value.
    pub fn new(grant: SecretGrant, value: String) -> Self {
        Self { grant, value }
    }

    /// The header value: the grant's format with `{}` replaced by the value.
    pub fn header_value(&self) -> String {
        self.grant.format.replace("{}", &self.value)
    }
}

impl std::fmt::Debug for ResolvedSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolvedSecret")
            .field("grant", &self.grant)
            .field("value", &"<redacted>")
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(name: &str, header: &str, format: &str, hosts: &[&str]) -> SecretGrant {
        SecretGrant {
            name: name.to_string(),
            header: header.to_string(),
            format: format.to_string(),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
        }
    }

    fn key() -> SecretGrant {
        grant("OPEN_METEO_KEY", "X-Api-Key", "{}", &["api.open-meteo.com"])
    }

    fn net(patterns: &[&str]) -> Vec<NetGrant> {
        patterns
            .iter()
            .map(|p| NetGrant::parse(p).unwrap())
            .collect()
    }

    fn field_of(err: SecretError) -> &'static str {
        match err {
            SecretError::Invalid { field, .. } => field,
            other => panic!("not a field error: {other}"),
        }
    }

    #[test]
    fn valid_declarations_pass() {
        key().validate().unwrap();
        grant(
            "GH",
            "Authorization",
            "Bearer {}",
            &["*.github.com", "api.github.com"],
        )
        .validate()
        .unwrap();
    }

    #[test]
    fn each_field_is_checked() {
        let cases = [
            (grant("9KEY", "X-Key", "{}", &["a.com"]), "name"),
            (grant("A-B", "X-Key", "{}", &["a.com"]), "name"),
            (grant("K", "", "{}", &["a.com"]), "header"),
            (grant("K", "X Key", "{}", &["a.com"]), "header"),
            (grant("K", "X-Key:", "{}", &["a.com"]), "header"),
            (grant("K", "Host", "{}", &["a.com"]), "header"),
            (grant("K", "content-length", "{}", &["a.com"]), "header"),
            (grant("K", "Connection", "{}", &["a.com"]), "header"),
            (grant("K", "Transfer-Encoding", "{}", &["a.com"]), "header"),
            (grant("K", "X-Key", "Bearer", &["a.com"]), "format"),
            (grant("K", "X-Key", "{}{}", &["a.com"]), "format"),
            (grant("K", "X-Key", "a\r\nX: {}", &["a.com"]), "format"),
            (grant("K", "X-Key", "{}", &[]), "hosts"),
            (grant("K", "X-Key", "{}", &["https://a.com"]), "hosts"),
            (grant("K", "X-Key", "{}", &["a.com:443"]), "hosts"),
            (grant("K", "X-Key", "{}", &["*"]), "hosts"),
            (grant("K", "X-Key", "{}", &[""]), "hosts"),
        ];
        for (secret, field) in cases {
            let err = secret.validate().unwrap_err();
            assert!(
                err.to_string().contains(&format!("`{}`", secret.name)),
                "{err}"
            );
            assert_eq!(field_of(err), field, "{secret:?}");
        }
    }

    #[test]
    fn the_hosts_own_names_are_refused_as_secrets() {
        for name in [
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "CAPSTAN_HOME",
            "LD_PRELOAD",
            "SSH_AUTH_SOCK",
        ] {
            let secret = grant(name, "X-Collect", "{}", &["collect.example.com"]);
            let err = secret.validate().unwrap_err();
            assert!(matches!(err, SecretError::Reserved { .. }), "{name}: {err}");
            assert!(err.to_string().contains(name), "{err}");
            // Read back from a lockfile, it is refused before any value is
            // looked up.
            let err = resolve(
                std::slice::from_ref(&secret),
                |_| Some("sk-host".to_string()),
                &SecretValues::default(),
            )
            .unwrap_err();
            assert!(matches!(err, SecretError::Reserved { .. }), "{err}");
        }
        // The variable the user config names as the model's key, too.
        let mine = grant("MY_LLM_KEY", "X-Collect", "{}", &["collect.example.com"]);
        mine.validate().unwrap();
        let config = SecretValues::parse(
            "[model]\napi_key_env = \"MY_LLM_KEY\"\n",
            Path::new("config.toml"),
        )
        .unwrap();
        let err = resolve(&[mine], |_| Some("k".to_string()), &config).unwrap_err();
        assert!(err.to_string().contains("API key"), "{err}");
    }

    #[test]
    fn secret_hosts_must_be_granted_network_access() {
        let wide = grant(
            "K",
            "X-Key",
            "{}",
            &["api.example.com", "*.cdn.example.com"],
        );
        check_hosts_granted(&[key()], &net(&["https://api.open-meteo.com"])).unwrap();
        check_hosts_granted(
            std::slice::from_ref(&wide),
            &net(&["https://*.example.com"]),
        )
        .unwrap();
        let err = check_hosts_granted(
            &[key(), wide],
            &net(&["https://api.open-meteo.com", "https://api.example.com"]),
        )
        .unwrap_err();
        assert_eq!(
            err,
            SecretError::HostNotGranted {
                secret: "K".into(),
                host: "*.cdn.example.com".into()
            }
        );
        assert!(
            err.to_string().contains("https://*.cdn.example.com"),
            "{err}"
        );
        assert!(check_hosts_granted(&[key()], &[]).is_err());
    }

    #[test]
    fn secrets_never_travel_over_plain_http() {
        let only_http = check_hosts_granted(&[key()], &net(&["http://api.open-meteo.com"]));
        assert!(
            matches!(only_http, Err(SecretError::PlainHttp { .. })),
            "{only_http:?}"
        );
        let both = check_hosts_granted(
            &[key()],
            &net(&["https://api.open-meteo.com", "http://*.open-meteo.com"]),
        )
        .unwrap_err();
        assert!(both.to_string().contains("only over https"), "{both}");
    }

    #[test]
    fn values_come_from_the_environment_first_then_the_config() {
        let config = SecretValues::from_pairs(
            Path::new("/home/u/.config/capstan/config.toml"),
            [("OPEN_METEO_KEY", "from-config"), ("OTHER", "x")],
        );
        let from_env = resolve(
            &[key()],
            |n| (n == "OPEN_METEO_KEY").then(|| "from-env".to_string()),
            &config,
        )
        .unwrap();
        assert_eq!(from_env[0].header_value(), "from-env");
        let from_config = resolve(&[key()], |_| None, &config).unwrap();
        assert_eq!(from_config[0].header_value(), "from-config");
        let bearer = grant("OPEN_METEO_KEY", "Authorization", "Bearer {}", &["a.com"]);
        assert_eq!(
            resolve(&[bearer], |_| None, &config).unwrap()[0].header_value(),
            "Bearer from-config"
        );
        assert!(resolve(&[], |_| None, &config).unwrap().is_empty());
    }

    #[test]
    fn a_missing_value_says_what_to_set() {
        let config = SecretValues::from_pairs(Path::new("/cfg/config.toml"), []);
        let err = resolve(&[key()], |_| None, &config).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("environment variable OPEN_METEO_KEY"),
            "{text}"
        );
        assert!(text.contains("[secrets] in /cfg/config.toml"), "{text}");
    }

    #[test]
    fn values_that_would_break_the_header_are_refused() {
        let config = SecretValues::from_pairs(
            Path::new("/c.toml"),
            [("OPEN_METEO_KEY", "a\r\nHost: evil")],
        );
        let err = resolve(&[key()], |_| None, &config).unwrap_err();
        assert!(matches!(err, SecretError::BadValue { .. }), "{err}");
        assert!(!err.to_string().contains("evil"), "{err}");
    }

    #[test]
    fn the_config_table_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        assert!(SecretValues::load(&path).unwrap().get("X").is_none());
        std::fs::write(
            &path,
            "[model]\nname = \"m\"\n\n[secrets]\nOPEN_METEO_KEY = \"abc\"\n",
        )
        .unwrap();
        let values = SecretValues::load(&path).unwrap();
        assert_eq!(values.get("OPEN_METEO_KEY"), Some("abc"));
        assert_eq!(values.path(), path);
        std::fs::write(&path, "[secrets]\nN = 5\n").unwrap();
        let err = SecretValues::load(&path).unwrap_err();
        assert!(err.to_string().contains("N = \"...\""), "{err}");
        std::fs::write(&path, "secrets = 1\n").unwrap();
        assert!(SecretValues::load(&path).is_err());
        std::fs::write(&path, "[secrets\n").unwrap();
        assert!(SecretValues::load(&path).is_err());
    }

    #[test]
    fn debug_output_never_shows_values() {
        let config =
            SecretValues::from_pairs(Path::new("/c.toml"), [("OPEN_METEO_KEY", "hunter2-value")]);
        let resolved = resolve(&[key()], |_| None, &config).unwrap();
        assert!(!format!("{config:?}").contains("hunter2"));
        assert!(format!("{config:?}").contains("OPEN_METEO_KEY"));
        assert!(!format!("{resolved:?}").contains("hunter2"));
        assert!(!format!("{:?}", resolved[0]).contains("hunter2"));
    }

    #[test]
    fn secrets_are_described_and_matched_by_host() {
        assert_eq!(
            key().describe(),
            "OPEN_METEO_KEY -> sent as header X-Api-Key to api.open-meteo.com only"
        );
        let gh = grant(
            "GH",
            "Authorization",
            "Bearer {}",
            &["api.github.com", "*.githubusercontent.com"],
        );
        assert_eq!(
            gh.describe(),
            "GH -> sent as header Authorization (as \"Bearer <value>\") to api.github.com, *.githubusercontent.com only"
        );
        assert!(gh.is_sent_to("raw.githubusercontent.com"));
        assert!(!gh.is_sent_to("github.com"));
    }
}
