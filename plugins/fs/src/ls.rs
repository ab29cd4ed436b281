//! `fs.ls`: list a folder.

use std::fs::{self, DirEntry};

use capstan_sdk::fs::Kind;
use capstan_sdk::prelude::*;

use crate::workspace_path;

/// Entries listed at most; past this the listing says how many there were.
const MAX_ENTRIES: usize = 1000;

/// Input of `fs.ls`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LsInput {
    /// The folder to list, relative to the workspace. Default: the
    /// workspace itself.
    path: Option<String>,
}

const DESCRIPTION: &str = "Lists a folder's entries sorted by name, one per line: folders end \
with `/`, files show their size, symbolic links show where they point. Lists everything, \
hidden and ignored files included, one level deep. Use fs.glob to find files at any depth.";

/// The `fs.ls` tool.
pub fn tool() -> Tool {
    Tool::new("ls", DESCRIPTION, ls).read_only().idempotent()
}

fn ls(input: LsInput, ctx: &Context) -> Result<String, ToolError> {
    let folder = workspace_path::resolve(ctx, "path", input.path.as_deref().unwrap_or("."))?;
    let shown = &folder.shown;
    // Looked at before it is opened: opening a named pipe waits for a writer.
    match capstan_sdk::fs::kind(&folder.path) {
        Ok(Kind::Folder) => {}
        Ok(Kind::File) => {
            return Err(ToolError::failed(format!(
                "{shown} is a file, not a folder; use fs.read to see it"
            )));
        }
        Ok(Kind::Special(what)) => {
            return Err(ToolError::failed(format!(
                "{shown} is {what}, not a folder; fs.ls lists folders only"
            )));
        }
        Err(err) => return Err(ToolError::from_io(&err, format!("cannot list {shown}"))),
    }
    let entries = fs::read_dir(&folder.path)
        .map_err(|err| ToolError::from_io(&err, format!("cannot list {shown}")))?;
    let mut listed: Vec<(String, String)> = Vec::new();
    let mut unreadable = 0;
    for entry in entries {
        match entry {
            Ok(entry) => {
                let name = entry.file_name().to_string_lossy().into_owned();
                let line = describe_entry(&entry, &name);
                listed.push((name, line));
            }
            Err(_) => unreadable += 1,
        }
    }
    listed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(render(shown, &listed, unreadable))
}

/// One line of the listing for `entry`.
fn describe_entry(entry: &DirEntry, name: &str) -> String {
    match entry.file_type() {
        Ok(kind) if kind.is_dir() => format!("{name}/"),
        Ok(kind) if kind.is_symlink() => match fs::read_link(entry.path()) {
            Ok(points_to) => format!("{name} -> {} (symbolic link)", points_to.display()),
            Err(_) => format!("{name} (symbolic link)"),
        },
        Ok(_) => match entry.metadata() {
            Ok(meta) => format!("{name}  {}", human_size(meta.len())),
            Err(_) => format!("{name}  (size unknown)"),
        },
        Err(_) => format!("{name}  (unreadable)"),
    }
}

/// The listing: a heading, then the lines, with notes.
fn render(shown: &str, listed: &[(String, String)], unreadable: usize) -> String {
    if listed.is_empty() && unreadable == 0 {
        return format!("{shown}/ is empty");
    }
    let entries = if listed.len() == 1 {
        "entry"
    } else {
        "entries"
    };
    let mut out = format!("{shown}/ ({} {entries})", listed.len());
    for (_, line) in listed.iter().take(MAX_ENTRIES) {
        out.push('\n');
        out.push_str(line);
    }
    if listed.len() > MAX_ENTRIES {
        out.push_str(&format!(
            "\n(showing the first {MAX_ENTRIES} of {} entries; use fs.glob to narrow down)",
            listed.len()
        ));
    }
    if unreadable > 0 {
        out.push_str(&format!(
            "\n(skipped {unreadable} entries that could not be read)"
        ));
    }
    out
}

/// A size in bytes as a person reads it: `812 B`, `1.2 KiB`, `3.4 MiB`.
fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    // Precision loss past 2^53 bytes does not matter for one decimal.
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn run(dir: &Path, input: &str) -> Result<String, ToolError> {
        crate::run_in_workspace::run_text(&tool(), dir, input)
    }

    #[test]
    fn sizes_read_like_a_person_would() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1023), "1023 B");
        assert_eq!(human_size(1024), "1.0 KiB");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(human_size(5 * 1024 * 1024), "5.0 MiB");
    }

    #[test]
    fn lists_sorted_with_folders_marked_and_sizes() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("src")).unwrap();
        fs::write(dir.path().join("b.txt"), "hello").unwrap();
        fs::write(dir.path().join(".env"), "").unwrap();
        fs::write(dir.path().join("src/lib.rs"), "").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink("b.txt", dir.path().join("link")).unwrap();
        let out = run(dir.path(), "{}").unwrap();
        #[cfg(unix)]
        assert_eq!(
            out,
            "./ (4 entries)\n.env  0 B\nb.txt  5 B\nlink -> b.txt (symbolic link)\nsrc/"
        );
        assert_eq!(
            run(dir.path(), r#"{"path":"src"}"#).unwrap(),
            "src/ (1 entry)\nlib.rs  0 B"
        );
    }

    #[test]
    fn an_empty_folder_says_so_and_a_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("empty")).unwrap();
        fs::write(dir.path().join("a.txt"), "").unwrap();
        assert_eq!(
            run(dir.path(), r#"{"path":"empty"}"#).unwrap(),
            "empty/ is empty"
        );
        let err = run(dir.path(), r#"{"path":"a.txt"}"#).unwrap_err();
        assert_eq!(
            err,
            ToolError::failed("a.txt is a file, not a folder; use fs.read to see it")
        );
        let err = run(dir.path(), r#"{"path":"nope"}"#).unwrap_err();
        assert_eq!(
            err,
            ToolError::failed("cannot list nope: no such file or folder")
        );
    }
}
