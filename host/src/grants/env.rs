//! Environment grants: the variables a plugin may read, by name. Nothing
//! else from the host's environment reaches it.

/// One granted variable name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct EnvGrant(String);

impl EnvGrant {
    /// A grant of the variable `name`.
    pub fn new(name: &str) -> Self {
        Self(name.to_string())
    }

    /// The variable's name.
    pub fn name(&self) -> &str {
        &self.0
    }
}
