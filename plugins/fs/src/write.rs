//! `fs.write`: create or overwrite a file.

use std::fs;
use std::io;

use capstan_sdk::fs::Kind;
use capstan_sdk::prelude::*;

use crate::atomic;
use crate::workspace_path;

/// Input of `fs.write`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteInput {
    /// The file to write, relative to the workspace (or absolute inside it).
    /// Missing parent folders are created.
    path: String,
    /// The complete new contents of the file.
    content: String,
}

const DESCRIPTION: &str = "Writes a file with the given contents, creating it (and any missing \
parent folders) or replacing it whole. The write is atomic: the file holds either its old \
contents or the new ones, never a mix. To change part of an existing file, prefer fs.edit, \
which does not need the whole contents. Needs the workspace to be writable.";

/// The `fs.write` tool.
pub fn tool() -> Tool {
    Tool::new("write", DESCRIPTION, write)
        .destructive()
        .idempotent()
}

fn write(input: WriteInput, ctx: &Context) -> Result<String, ToolError> {
    let target = workspace_path::resolve(ctx, "path", &input.path)?;
    let shown = &target.shown;
    let existed = match capstan_sdk::fs::kind(&target.path) {
        Ok(Kind::Folder) => {
            return Err(ToolError::failed(format!(
                "{shown} is a folder; give the path of a file to write"
            )));
        }
        Ok(Kind::Special(what)) => {
            return Err(ToolError::failed(format!(
                "{shown} is {what}, not a regular file; fs.write replaces regular files only"
            )));
        }
        Ok(Kind::File) => true,
        Err(err) if err.kind() == io::ErrorKind::NotFound => false,
        Err(err) => return Err(ToolError::from_io(&err, format!("cannot write {shown}"))),
    };
    // Only a missing folder is created: `create_dir_all` reports a folder
    // that exists in a read-only workspace as a failure to create it, which
    // would blame the wrong thing.
    if !existed
        && let Some(folder) = target.path.parent()
        && !fs::metadata(folder).is_ok_and(|meta| meta.is_dir())
    {
        fs::create_dir_all(folder).map_err(|err| {
            ToolError::from_io(
                &err,
                format!(
                    "cannot create the folder {} for {shown}",
                    ctx.display(folder)
                ),
            )
        })?;
    }
    let _lock = atomic::lock_file(&target.path, shown)?;
    atomic::replace_file(ctx, &target.path, input.content.as_bytes(), shown, None)?;
    let verb = if existed { "Overwrote" } else { "Created" };
    let size = input.content.len();
    let bytes = if size == 1 { "byte" } else { "bytes" };
    Ok(format!("{verb} {shown} ({size} {bytes})"))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn run(dir: &Path, input: &str) -> Result<Output, ToolError> {
        let ctx = Context {
            call_id: "call-7".to_string(),
            workspace: Some(dir.to_path_buf()),
            ..Context::default()
        };
        tool().run(input, &ctx)
    }

    #[test]
    fn creates_a_file_and_its_folders_then_overwrites_it() {
        let dir = tempfile::tempdir().unwrap();
        let out = run(dir.path(), r#"{"path":"src/new/a.txt","content":"héllo"}"#).unwrap();
        assert_eq!(out, Output::text("Created src/new/a.txt (6 bytes)"));
        let out = run(dir.path(), r#"{"path":"src/new/a.txt","content":"!"}"#).unwrap();
        assert_eq!(out, Output::text("Overwrote src/new/a.txt (1 byte)"));
        assert_eq!(
            fs::read_to_string(dir.path().join("src/new/a.txt")).unwrap(),
            "!"
        );
        let names: Vec<_> = fs::read_dir(dir.path().join("src/new")).unwrap().collect();
        assert_eq!(names.len(), 1, "a temporary file was left behind");
    }

    #[test]
    fn refuses_to_write_over_a_folder() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("src")).unwrap();
        let err = run(dir.path(), r#"{"path":"src","content":"x"}"#).unwrap_err();
        assert_eq!(
            err,
            ToolError::failed("src is a folder; give the path of a file to write")
        );
    }

    #[test]
    fn refuses_paths_outside_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let err = run(dir.path(), r#"{"path":"../x.txt","content":"x"}"#).unwrap_err();
        assert!(matches!(err, ToolError::Denied(_)), "{err:?}");
    }
}
