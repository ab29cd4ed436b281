//! Running a tool natively against a folder, for unit tests.

use std::path::Path;

use capstan_sdk::{Content, Context, Tool, ToolError};

/// Runs `tool` with `input` as if `dir` were the workspace, and returns its
/// single text result.
pub fn run_text(tool: &Tool, dir: &Path, input: &str) -> Result<String, ToolError> {
    let ctx = Context {
        workspace: Some(dir.to_path_buf()),
        ..Context::default()
    };
    let out = tool.run(input, &ctx)?;
    match out.content.as_slice() {
        [Content::Text(text)] => Ok(text.clone()),
        other => panic!("expected one text, got {other:?}"),
    }
}
