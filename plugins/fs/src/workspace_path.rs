//! Turning a path from a tool's input into a path the tool may use.

use std::path::PathBuf;

use capstan_sdk::prelude::*;

/// A path from the input, resolved against the workspace.
pub struct InputPath {
    /// The absolute path, inside the workspace.
    pub path: PathBuf,
    /// The path as the model should see it: relative to the workspace.
    pub shown: String,
}

/// Resolves the value of the input field `field` against the workspace.
///
/// Relative paths are taken from the workspace; a path outside it is
/// [`ToolError::Denied`]. An invalid value names the field it came from.
pub fn resolve(ctx: &Context, field: &str, raw: &str) -> Result<InputPath, ToolError> {
    let path = ctx.resolve(raw).map_err(|err| match err {
        ToolError::InvalidInput(message) => {
            ToolError::invalid_input(format!("field `{field}`: {message}"))
        }
        other => other,
    })?;
    let shown = ctx.display(&path);
    Ok(InputPath { path, shown })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_path_names_the_field() {
        let ctx = Context {
            workspace: Some(PathBuf::from("/ws")),
            ..Context::default()
        };
        let err = resolve(&ctx, "path", "").err();
        assert_eq!(
            err,
            Some(ToolError::invalid_input("field `path`: the path is empty"))
        );
    }

    #[test]
    fn the_shown_path_is_relative_to_the_workspace() {
        let ctx = Context {
            workspace: Some(PathBuf::from("/ws")),
            ..Context::default()
        };
        let resolved = resolve(&ctx, "path", "src/../a.txt").ok();
        assert_eq!(resolved.map(|p| p.shown), Some("a.txt".to_string()));
    }
}
