//! Secrets: values the host adds to a plugin's HTTP requests as a header,
//! only for the hosts the grant names. The plugin never sees the value.

/// A secret as a manifest requests it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
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
