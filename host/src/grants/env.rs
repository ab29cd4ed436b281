//! Environment grants: the variables a plugin may read, by name. Nothing
//! else from the host's environment reaches it.

/// One granted variable name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct EnvGrant(String);

impl EnvGrant {
    /// The variable's name.
    pub fn name(&self) -> &str {
        &self.0
    }
}
