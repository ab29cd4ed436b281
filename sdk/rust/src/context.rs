//! What a tool knows about the call it is serving.

use std::path::{Component, Path, PathBuf};

use crate::ToolError;
use crate::bindings::capstan::plugin::types::CallContext;

/// The context of one tool call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Context {
    /// A unique id for this call.
    pub call_id: String,
    /// The workspace folder as the tool sees it, if the call may reach it.
    pub workspace: Option<PathBuf>,
    /// The agent session making the call, if any.
    pub session_id: Option<String>,
}

impl From<CallContext> for Context {
    fn from(ctx: CallContext) -> Self {
        Self {
            call_id: ctx.call_id,
            workspace: ctx.workspace.map(PathBuf::from),
            session_id: ctx.session_id,
        }
    }
}

impl Context {
    /// The workspace folder, or an error saying the call was granted none.
    pub fn workspace(&self) -> Result<&Path, ToolError> {
        self.workspace
            .as_deref()
            .ok_or_else(|| ToolError::denied("this call was not granted a workspace folder"))
    }

    /// Resolves a path from the input against the workspace: relative paths
    /// are taken from the workspace, `.` and `..` are folded, and a result
    /// outside the workspace is refused with [`ToolError::Denied`].
    ///
    /// This is a courtesy that gives the model a clear message; the sandbox
    /// enforces the same boundary (including through symbolic links) whatever
    /// the tool does.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, ToolError> {
        let workspace = self.workspace()?;
        if path.is_empty() {
            return Err(ToolError::invalid_input("the path is empty"));
        }
        let joined = workspace.join(path);
        let normal = fold_dots(&joined);
        if normal.starts_with(workspace) {
            Ok(normal)
        } else {
            Err(ToolError::denied(format!(
                "{path} is outside the workspace {}; only files inside it can be reached",
                workspace.display()
            )))
        }
    }

    /// Shows a resolved path relative to the workspace when it lies inside,
    /// the way a user would type it.
    pub fn display(&self, path: &Path) -> String {
        match self.workspace.as_deref().map(|w| path.strip_prefix(w)) {
            Some(Ok(rel)) if rel.as_os_str().is_empty() => ".".to_string(),
            Some(Ok(rel)) => rel.display().to_string(),
            _ => path.display().to_string(),
        }
    }
}

/// Folds `.` and `..` without touching the file system. `..` at the root
/// stays at the root.
fn fold_dots(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Context {
        Context {
            workspace: Some(PathBuf::from("/home/u/proj")),
            ..Context::default()
        }
    }

    #[test]
    fn relative_paths_resolve_inside_the_workspace() {
        assert_eq!(
            ctx().resolve("src/./main.rs").unwrap(),
            PathBuf::from("/home/u/proj/src/main.rs")
        );
        assert_eq!(
            ctx().resolve("src/../a.txt").unwrap(),
            PathBuf::from("/home/u/proj/a.txt")
        );
        assert_eq!(ctx().resolve(".").unwrap(), PathBuf::from("/home/u/proj"));
    }

    #[test]
    fn paths_leaving_the_workspace_are_denied() {
        for path in [
            "../x",
            "src/../../x",
            "/etc/passwd",
            "/home/u/project2/a",
            "/proc/self/environ",
        ] {
            let err = ctx().resolve(path).unwrap_err();
            assert!(matches!(err, ToolError::Denied(_)), "{path}: {err:?}");
        }
    }

    #[test]
    fn absolute_paths_inside_the_workspace_are_accepted() {
        assert_eq!(
            ctx().resolve("/home/u/proj/a/b").unwrap(),
            PathBuf::from("/home/u/proj/a/b")
        );
    }

    #[test]
    fn no_workspace_means_denied() {
        let err = Context::default().resolve("a").unwrap_err();
        assert!(matches!(err, ToolError::Denied(_)));
    }

    #[test]
    fn display_is_relative_to_the_workspace() {
        let c = ctx();
        assert_eq!(c.display(Path::new("/home/u/proj/src/a.rs")), "src/a.rs");
        assert_eq!(c.display(Path::new("/home/u/proj")), ".");
        assert_eq!(c.display(Path::new("/tmp/x")), "/tmp/x");
    }
}
