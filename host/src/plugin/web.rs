//! What the built-in `web` plugin's calls get: no folder at all; for
//! `web.fetch`, the hosts the user allows one by one (a gate asks the
//! policy at each request, see [`crate::policy::web_hosts`]); for
//! `web.search`, the search API the user configured in `[web.search]` of
//! the user config — its origin granted, its key added by the host as a
//! header, the plugin told only the provider and endpoint.
//!
//! ```toml
//! [web.search]
//! provider = "brave"            # brave | tavily | searxng
//! endpoint = "https://api.search.brave.com/res/v1/web/search"  # optional but for searxng
//! key_secret = "BRAVE_API_KEY"  # the secret holding the key: an env variable or [secrets]
//! ```
//!
//! Only the user config counts: a project cannot send searches, or a key,
//! elsewhere.

use std::path::Path;

use serde::Deserialize;

use crate::grants::net::NetGrant;
use crate::grants::secrets::{self, SecretGrant};
use crate::grants::{Grants, SecretValues};

/// The built-in plugin's name.
pub const WEB_PLUGIN: &str = "web";

/// The fetch tool (its name within the plugin).
pub const FETCH_TOOL: &str = "fetch";

/// The search tool, offered only once `[web.search]` is set.
pub const SEARCH_TOOL: &str = "search";

/// The search APIs the plugin speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchProvider {
    /// Brave Search API (`X-Subscription-Token`).
    Brave,
    /// Tavily (`Authorization: Bearer`).
    Tavily,
    /// A SearXNG instance (its JSON format enabled); a key is optional.
    Searxng,
}

impl SearchProvider {
    fn name(self) -> &'static str {
        match self {
            Self::Brave => "brave",
            Self::Tavily => "tavily",
            Self::Searxng => "searxng",
        }
    }

    fn default_endpoint(self) -> Option<&'static str> {
        match self {
            Self::Brave => Some("https://api.search.brave.com/res/v1/web/search"),
            Self::Tavily => Some("https://api.tavily.com/search"),
            Self::Searxng => None,
        }
    }

    /// The header the key goes in, and how it is written.
    fn key_header(self) -> (&'static str, &'static str) {
        match self {
            Self::Brave => ("X-Subscription-Token", "{}"),
            Self::Tavily | Self::Searxng => ("Authorization", "Bearer {}"),
        }
    }
}

/// `[web.search]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchSettings {
    /// Which API.
    pub provider: SearchProvider,
    /// Its URL; the provider's public one by default.
    pub endpoint: Option<String>,
    /// The secret holding the API key (required but for searxng).
    pub key_secret: Option<String>,
    /// The header the key is sent as, when not the provider's usual one.
    pub key_header: Option<String>,
    /// How the key is written in it (`{}` is the key).
    pub key_format: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    #[serde(default)]
    web: WebSection,
}

#[derive(Debug, Default, Deserialize)]
struct WebSection {
    search: Option<toml::Value>,
}

/// Where the search settings live, for messages.
const WHERE: &str = "[web.search] in the user config";

/// The `[web.search]` of the user config at `config_file`: `None` when
/// the file or the section is missing, an error saying what is wrong
/// otherwise.
pub fn search_settings(config_file: &Path) -> Result<Option<SearchSettings>, String> {
    let text = match std::fs::read_to_string(config_file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", config_file.display())),
    };
    let file: ConfigFile = toml::from_str(&text).map_err(|e| {
        format!(
            "{} is not valid TOML: {}",
            config_file.display(),
            e.message()
        )
    })?;
    let Some(search) = file.web.search else {
        return Ok(None);
    };
    search.try_into().map(Some).map_err(|e: toml::de::Error| {
        format!(
            "{WHERE} ({}): {}; write provider = \"brave\" | \"tavily\" | \"searxng\", endpoint = \"https://…\", key_secret = \"NAME\"",
            config_file.display(),
            e.message()
        )
    })
}

/// Why `web.search` is not offered when `[web.search]` is missing from
/// the user config `config_file`, and how to set it up.
pub fn not_configured(config_file: Option<&Path>) -> String {
    let file = config_file.map_or_else(
        || "the user config".to_string(),
        |path| path.display().to_string(),
    );
    format!(
        "not configured — add [web.search] (provider = \"brave\" | \"tavily\" | \"searxng\", key_secret = \"NAME\") to {file}; see docs/web.md"
    )
}

/// The grants of a `web` call: nothing but, when search is configured,
/// the endpoint's origin, the key sent to its host, and the provider and
/// endpoint as `CAPSTAN_WEB_SEARCH_*` variables. A search setup that
/// cannot be used is passed as `CAPSTAN_WEB_SEARCH_ERROR`, which
/// `web.search` reports; `web.fetch` works either way. Whether search is
/// offered is the second value.
pub fn grants(config_file: Option<&Path>) -> (Grants, bool) {
    let mut grants = Grants::none();
    let settings = match config_file.map(search_settings) {
        None | Some(Ok(None)) => return (grants, false),
        Some(Ok(Some(settings))) => settings,
        Some(Err(error)) => {
            grants
                .fixed_env
                .push(("CAPSTAN_WEB_SEARCH_ERROR".into(), error));
            return (grants, true);
        }
    };
    match search_grants(&settings, config_file) {
        Ok(search) => grants = search,
        Err(error) => grants
            .fixed_env
            .push(("CAPSTAN_WEB_SEARCH_ERROR".into(), error)),
    }
    (grants, true)
}

fn search_grants(settings: &SearchSettings, config_file: Option<&Path>) -> Result<Grants, String> {
    let provider = settings.provider;
    let endpoint = match (&settings.endpoint, provider.default_endpoint()) {
        (Some(endpoint), _) => endpoint.trim().to_string(),
        (None, Some(default)) => default.to_string(),
        (None, None) => {
            return Err(format!(
                "{WHERE} names provider \"searxng\" without an endpoint; add endpoint = \"https://your-searxng.example\""
            ));
        }
    };
    let (scheme, rest) = endpoint.split_once("://").ok_or_else(|| {
        format!("{WHERE}: the endpoint `{endpoint}` is not an absolute http(s) URL")
    })?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let grant = NetGrant::parse(&format!("{scheme}://{authority}"))
        .map_err(|e| format!("{WHERE}: the endpoint `{endpoint}`: {e}"))?;
    let mut grants = Grants::none();
    grants.net = vec![grant.clone()];
    grants.fixed_env = vec![
        ("CAPSTAN_WEB_SEARCH_PROVIDER".into(), provider.name().into()),
        ("CAPSTAN_WEB_SEARCH_ENDPOINT".into(), endpoint.clone()),
    ];
    let Some(secret) = &settings.key_secret else {
        if provider == SearchProvider::Searxng {
            return Ok(grants);
        }
        return Err(format!(
            "{WHERE} names provider \"{}\" without key_secret; add key_secret = \"NAME\" and set the key as the environment variable NAME or under [secrets]",
            provider.name()
        ));
    };
    let (header, format) = provider.key_header();
    let secret_grant = SecretGrant {
        name: secret.clone(),
        header: settings.key_header.clone().unwrap_or_else(|| header.into()),
        format: settings.key_format.clone().unwrap_or_else(|| format.into()),
        hosts: vec![grant.host().to_string()],
    };
    secret_grant
        .validate()
        .map_err(|e| format!("{WHERE}: {e}"))?;
    let values = match config_file {
        Some(path) => SecretValues::load(path).map_err(|e| e.to_string())?,
        None => SecretValues::default(),
    };
    grants.secrets = secrets::resolve(&[secret_grant], |name| std::env::var(name).ok(), &values)
        .map_err(|e| format!("web.search cannot use its API key: {e}"))?;
    Ok(grants)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    fn env<'a>(grants: &'a Grants, name: &str) -> Option<&'a str> {
        grants
            .fixed_env
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn search_is_off_until_configured() {
        let (_dir, path) = write("[model]\nname = \"x\"\n");
        let (granted, offered) = grants(Some(&path));
        assert!(!offered && granted.net.is_empty() && granted.fixed_env.is_empty());
        assert!(!grants(None).1);
    }

    #[test]
    fn a_configured_search_gets_its_endpoint_and_its_key_as_a_header() {
        let (_dir, path) = write(
            "[web.search]\nprovider = \"brave\"\nendpoint = \"http://127.0.0.1:9/res/v1/web/search\"\nkey_secret = \"WEB_TEST_KEY\"\n\n[secrets]\nWEB_TEST_KEY = \"k-123\"\n",
        );
        let (granted, offered) = grants(Some(&path));
        assert!(offered);
        assert_eq!(granted.net[0].to_string(), "http://127.0.0.1:9");
        assert_eq!(env(&granted, "CAPSTAN_WEB_SEARCH_PROVIDER"), Some("brave"));
        assert_eq!(granted.secrets[0].grant.header, "X-Subscription-Token");
        assert_eq!(granted.secrets[0].grant.hosts, ["127.0.0.1"]);
        assert!(!granted.fixed_env.iter().any(|(_, v)| v.contains("k-123")));
    }

    #[test]
    fn a_bad_search_setup_is_reported_by_the_tool() {
        for (text, expect) in [
            ("[web.search]\nprovider = \"bing\"\n", "provider"),
            (
                "[web.search]\nprovider = \"searxng\"\n",
                "without an endpoint",
            ),
            ("[web.search]\nprovider = \"brave\"\n", "without key_secret"),
            (
                "[web.search]\nprovider = \"tavily\"\nkey_secret = \"WEB_TEST_MISSING_KEY\"\n",
                "WEB_TEST_MISSING_KEY",
            ),
        ] {
            let (_dir, path) = write(text);
            let (granted, offered) = grants(Some(&path));
            assert!(offered, "{text}");
            let error = env(&granted, "CAPSTAN_WEB_SEARCH_ERROR").unwrap();
            assert!(error.contains(expect), "{text}: {error}");
            assert!(granted.net.is_empty(), "{text}");
        }
    }
}
