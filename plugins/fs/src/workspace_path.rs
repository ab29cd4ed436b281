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

/// [`resolve`], or, for an absolute path outside the workspace, the path
/// itself when the call was granted the folder it is in (an installed
/// plugin's files that a skill names, read-only): the sandbox holds only
/// granted folders, so a path that exists there is one the call may read.
/// A path with `..`, or one the sandbox does not hold, gets the
/// workspace's refusal.
pub fn resolve_readable(ctx: &Context, field: &str, raw: &str) -> Result<InputPath, ToolError> {
    match resolve(ctx, field, raw) {
        Err(ToolError::Denied(message)) => {
            let path = std::path::Path::new(raw);
            let plain = path.is_absolute()
                && !path
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir));
            if plain && std::fs::symlink_metadata(path).is_ok() {
                Ok(InputPath {
                    path: path.to_path_buf(),
                    shown: raw.to_string(),
                })
            } else {
                Err(ToolError::Denied(message))
            }
        }
        other => other,
    }
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

    #[test]
    fn outside_the_workspace_only_a_plain_existing_absolute_path_is_tried() {
        let ws = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("t.md"), "x").unwrap();
        let ctx = Context {
            workspace: Some(ws.path().to_path_buf()),
            ..Context::default()
        };
        let file = other.path().join("t.md");
        let found = resolve_readable(&ctx, "path", file.to_str().unwrap()).ok();
        assert_eq!(found.map(|p| p.path), Some(file.clone()));
        let missing = other.path().join("none.md");
        let dotted = format!("{}/../t.md", other.path().display());
        for refused in [missing.to_str().unwrap(), dotted.as_str(), "../t.md"] {
            assert!(
                matches!(
                    resolve_readable(&ctx, "path", refused),
                    Err(ToolError::Denied(_))
                ),
                "{refused}"
            );
        }
    }
}
