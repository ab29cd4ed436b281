//! Plugins: which components exist, where their bytes come from, and how a
//! tool name like `fs.read` finds its component.
//!
//! Plugins are the first-party ones embedded in the binary, the ones the
//! user installed (with the capabilities they granted, checked against the
//! lockfile on every load), and component files named on the command line
//! (`--plugin`).

pub mod availability;
pub mod catalog;
pub mod claude_import;
pub mod claude_lsp;
pub mod claude_marketplace;
pub mod claude_output_styles;
pub mod command_hooks;
pub mod hooks;
pub mod inspect;
pub mod install;
pub mod lock;
pub mod manifest;
pub mod package;
pub mod provision;
pub mod readable;
pub mod remote_source;
pub mod signature;
pub mod store;
pub mod web;

pub use availability::{Unavailable, UnavailablePlugins};
pub use catalog::{Catalog, CatalogError, PluginSource};
pub use hooks::{HookLoadError, load_hooks, missing_guards};
pub use provision::{Provision, ProvisionError, Writes};

/// A tool addressed as `PLUGIN.TOOL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRef<'a> {
    /// The plugin's name.
    pub plugin: &'a str,
    /// The tool's name within the plugin.
    pub tool: &'a str,
}

impl<'a> ToolRef<'a> {
    /// Splits `fs.read` into plugin and tool; `None` when there is no dot.
    pub fn parse(name: &'a str) -> Option<Self> {
        let (plugin, tool) = name.split_once('.')?;
        (!plugin.is_empty() && !tool.is_empty()).then_some(Self { plugin, tool })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_refs_split_at_the_first_dot() {
        assert_eq!(
            ToolRef::parse("fs.read"),
            Some(ToolRef {
                plugin: "fs",
                tool: "read"
            })
        );
        assert_eq!(ToolRef::parse("read"), None);
        assert_eq!(ToolRef::parse(".read"), None);
        assert_eq!(ToolRef::parse("fs."), None);
    }
}
