//! Environment grants: the variables a plugin may read, by name. Nothing
//! else from the host's environment reaches it.
//!
//! A name must be portable (`[A-Za-z_][A-Za-z0-9_]*`), and some names are
//! never granted, whatever a manifest asks and whatever a user answers:
//!
//! - `ANTHROPIC_API_KEY`, `OPENAI_API_KEY` and any variable the user
//!   configured as the model's API key (see [`EnvGrant::check`]): the key
//!   that pays for the model is the host's, never a plugin's;
//! - `CAPSTAN_*`: the host's own configuration (its home folder, its
//!   child-process plumbing);
//! - `LD_*` and `DYLD_*`: the dynamic loader's settings of the host process.
//!   They mean nothing to a WebAssembly component, so asking for them only
//!   probes how the host was started (injected libraries, library paths);
//! - `SSH_AUTH_SOCK`, `SSH_AGENT_PID`, `GPG_AGENT_INFO`: where the user's
//!   key agents listen. A plugin has no sockets to use them with, and a
//!   key agent is the user's identity, not a setting.
//!
//! A plugin that needs a credential declares it as a secret instead, so the
//! host sends it for the plugin without the plugin ever seeing it.
//!
//! Values are read from the host's environment at call time
//! ([`granted_values`]); a granted name that is not set is simply absent.

use crate::audit::{AuditEvent, AuditScope};

/// One granted variable name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct EnvGrant(String);

/// Model API key variables capstan itself reads, refused whatever the
/// configuration says.
const MODEL_KEYS: &[&str] = &["ANTHROPIC_API_KEY", "OPENAI_API_KEY"];

/// Prefixes of names the host keeps for itself.
const RESERVED_PREFIXES: &[(&str, &str)] = &[
    ("CAPSTAN_", "it is capstan's own configuration"),
    (
        "LD_",
        "it is the dynamic loader's setting for capstan itself, not for plugins",
    ),
    (
        "DYLD_",
        "it is the dynamic loader's setting for capstan itself, not for plugins",
    ),
];

/// Exact names the host keeps for itself.
const RESERVED_NAMES: &[(&str, &str)] = &[
    ("SSH_AUTH_SOCK", "it locates the user's SSH key agent"),
    ("SSH_AGENT_PID", "it locates the user's SSH key agent"),
    ("GPG_AGENT_INFO", "it locates the user's GPG key agent"),
];

/// An environment grant that cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    /// The name is not a portable variable name.
    #[error(
        "`{name}` is not a valid environment variable name: use letters, digits and `_`, not starting with a digit"
    )]
    InvalidName {
        /// The name as written.
        name: String,
    },
    /// The host keeps the variable for itself.
    #[error(
        "environment variable `{name}` cannot be granted to a plugin: {reason}; if the plugin needs a credential, declare it under `secrets` so the host sends it without the plugin seeing it"
    )]
    Reserved {
        /// The name.
        name: String,
        /// Why it is kept.
        reason: String,
    },
}

impl EnvGrant {
    /// A grant of the variable `name`, unchecked (for tests and for grants
    /// read back from the lockfile; see [`EnvGrant::parse`]).
    pub fn new(name: &str) -> Self {
        Self(name.to_string())
    }

    /// A checked grant of `name`; `model_keys` are the variables the user
    /// configured as the model's API key, which are refused too.
    pub fn parse(name: &str, model_keys: &[&str]) -> Result<Self, EnvError> {
        let grant = Self::new(name);
        grant.check(model_keys)?;
        Ok(grant)
    }

    /// The variable's name.
    pub fn name(&self) -> &str {
        &self.0
    }

    /// Checks that the name is portable and not one the host keeps for
    /// itself; `model_keys` are the variables the user configured as the
    /// model's API key.
    pub fn check(&self, model_keys: &[&str]) -> Result<(), EnvError> {
        check_name(&self.0)?;
        match reserved_reason(&self.0, model_keys) {
            Some(reason) => Err(EnvError::Reserved {
                name: self.0.clone(),
                reason,
            }),
            None => Ok(()),
        }
    }
}

impl super::Capability for EnvGrant {
    const WORD: &'static str = "env";
    const ALIASES: &'static [&'static str] = &[];
    const LABEL: &'static str = "env";
    const CONSENT_RANK: u8 = 3;
    const SAY_NONE: bool = false;
    const EXAMPLE: &'static str = "\"TZ\"";

    fn key(&self) -> String {
        self.0.clone()
    }

    fn words(&self) -> String {
        self.0.clone()
    }

    fn is_within(&self, granted: &Self) -> bool {
        self == granted
    }

    fn check_value(value: &str) -> Result<(), String> {
        check_name(value).map_err(|e| e.to_string())
    }

    fn validate(&self) -> Result<(), super::EntryError> {
        self.check(&[])
            .map_err(|e| super::EntryError::entry(e.to_string()))
    }

    /// A variable named like a secret of the same request would hand the
    /// plugin the secret's value.
    fn validate_among(&self, all: &super::Capabilities) -> Result<(), super::EntryError> {
        if all.secrets.iter().any(|secret| secret.name == self.0) {
            return Err(super::EntryError::entry(format!(
                "`{}` is also declared as a secret; a secret is never readable by the plugin, so remove it from `env`",
                self.0
            )));
        }
        Ok(())
    }

    fn check_reserved(&self, model_keys: &[&str]) -> Result<(), super::ReservedName> {
        Ok(self.check(model_keys)?)
    }
}

/// Checks that `name` is a portable variable name, `[A-Za-z_][A-Za-z0-9_]*`.
pub fn check_name(name: &str) -> Result<(), EnvError> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Ok(())
    } else {
        Err(EnvError::InvalidName {
            name: name.to_string(),
        })
    }
}

/// Why the host keeps `name` for itself, if it does; `model_keys` are the
/// variables the user configured as the model's API key. Secrets are held
/// to the same names (see [`super::secrets`]).
pub fn reserved_reason(name: &str, model_keys: &[&str]) -> Option<String> {
    if MODEL_KEYS.contains(&name) || model_keys.contains(&name) {
        return Some("it holds the API key capstan uses for the model".to_string());
    }
    if let Some((_, reason)) = RESERVED_NAMES.iter().find(|(n, _)| *n == name) {
        return Some((*reason).to_string());
    }
    RESERVED_PREFIXES
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|(_, reason)| (*reason).to_string())
}

/// The values a plugin sees: each granted name that `lookup` (the host's
/// environment, read at call time) has a value for, in grant order, once
/// each. Names the host keeps for itself are left out even if a grant lists
/// them, so a hand-edited lockfile cannot reach them. Nothing else is
/// returned.
pub fn granted_values(
    grants: &[EnvGrant],
    lookup: impl Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    let mut values: Vec<(String, String)> = Vec::new();
    for grant in grants {
        let name = grant.name();
        if grant.check(&[]).is_err() || values.iter().any(|(n, _)| n == name) {
            continue;
        }
        if let Some(value) = lookup(name) {
            values.push((name.to_string(), value));
        }
    }
    values
}

/// Records in a call's audit log which granted variables it was given
/// (`values`, from [`granted_values`]), if it was given any.
pub fn record_read(values: &[(String, String)], audit: Option<&AuditScope>) {
    if let Some(scope) = audit
        && !values.is_empty()
    {
        let names = values.iter().map(|(name, _)| name.clone()).collect();
        scope.record(AuditEvent::EnvRead { names });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn portable_names_are_accepted() {
        for name in ["TZ", "_X", "LANG", "a_b_9", "GIT_AUTHOR_NAME"] {
            assert_eq!(EnvGrant::parse(name, &[]), Ok(EnvGrant::new(name)));
        }
    }

    #[test]
    fn other_names_are_refused() {
        for name in ["", "9X", "A-B", "A B", "A=B", "É", "$HOME"] {
            assert!(
                matches!(
                    EnvGrant::parse(name, &[]),
                    Err(EnvError::InvalidName { .. })
                ),
                "{name:?}"
            );
        }
    }

    #[test]
    fn the_hosts_own_names_are_refused() {
        for name in [
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "CAPSTAN_HOME",
            "CAPSTAN_ANYTHING",
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "DYLD_INSERT_LIBRARIES",
            "SSH_AUTH_SOCK",
        ] {
            let err = EnvGrant::parse(name, &[]).unwrap_err();
            assert!(matches!(err, EnvError::Reserved { .. }), "{name}");
            assert!(err.to_string().contains(name), "{err}");
        }
    }

    #[test]
    fn configured_model_keys_are_refused() {
        assert!(EnvGrant::parse("MY_LLM_KEY", &[]).is_ok());
        let err = EnvGrant::parse("MY_LLM_KEY", &["MY_LLM_KEY"]).unwrap_err();
        assert!(err.to_string().contains("API key"), "{err}");
        assert!(err.to_string().contains("secrets"), "{err}");
    }

    #[test]
    fn only_granted_and_set_names_are_passed() {
        let host = |name: &str| match name {
            "TZ" => Some("Europe/Paris".to_string()),
            "HOME" => Some("/home/u".to_string()),
            "ANTHROPIC_API_KEY" => Some("sk-host".to_string()),
            "CAPSTAN_HOME" => Some("/x".to_string()),
            _ => None,
        };
        let grants = [
            EnvGrant::new("TZ"),
            EnvGrant::new("UNSET"),
            EnvGrant::new("TZ"),
            EnvGrant::new("ANTHROPIC_API_KEY"),
            EnvGrant::new("CAPSTAN_HOME"),
        ];
        assert_eq!(
            granted_values(&grants, host),
            [("TZ".to_string(), "Europe/Paris".to_string())]
        );
        assert!(granted_values(&[], host).is_empty());
    }

    #[test]
    fn values_come_from_the_lookup_each_time() {
        let value = std::cell::RefCell::new("first".to_string());
        let grants = [EnvGrant::new("TZ")];
        let read = || granted_values(&grants, |n| (n == "TZ").then(|| value.borrow().clone()));
        assert_eq!(read(), [("TZ".to_string(), "first".to_string())]);
        *value.borrow_mut() = "second".to_string();
        assert_eq!(read(), [("TZ".to_string(), "second".to_string())]);
    }

    #[test]
    fn the_process_environment_is_read_by_name() {
        let path = std::env::var("PATH").ok();
        let got = granted_values(&[EnvGrant::new("PATH")], |n| std::env::var(n).ok());
        assert_eq!(got.first().map(|(_, v)| v.clone()), path);
        assert!(got.iter().all(|(n, _)| n == "PATH"));
    }
}
