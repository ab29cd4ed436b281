//! The output styles of a Claude Code plugin: the markdown files of its
//! `output-styles/` folder and of the paths its `plugin.json` lists in
//! `outputStyles` (folders or files), read at install and listed in the
//! consent text. The package keeps each as `output-styles/NAME.md`, where
//! a session finds it ([`crate::agent::output_styles`]); a style runs
//! nothing and changes the system prompt only while the user has chosen it.

use std::path::Path;

use serde_json::Value;

use super::claude_import::{listed_paths, read_text};
use crate::front_matter;

/// The package folder a session reads output styles from.
pub const STYLES_DIR: &str = "output-styles";

/// One output style found in a plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundStyle {
    /// Its file in the plugin.
    pub from: String,
    /// Its file in the package (`output-styles/NAME.md`).
    pub to: String,
    /// What it is, for the consent text.
    pub line: String,
}

/// The output styles of the plugin at `root` whose manifest is `manifest`;
/// files that cannot be used are added to `warnings`, with why.
pub fn find(root: &Path, manifest: &Value, warnings: &mut Vec<String>) -> Vec<FoundStyle> {
    let mut places = vec![STYLES_DIR.to_string()];
    let mut listed = Vec::new();
    for path in listed_paths(manifest, "outputStyles", warnings).unwrap_or_default() {
        if !places.contains(&path) {
            listed.push(path.clone());
            places.push(path);
        }
    }
    let mut found: Vec<FoundStyle> = Vec::new();
    for place in &places {
        let path = root.join(place);
        let meta = std::fs::symlink_metadata(&path);
        let files: Vec<String> = match meta {
            Ok(meta) if meta.is_dir() => {
                let mut names: Vec<String> = std::fs::read_dir(&path)
                    .map(|entries| {
                        entries
                            .flatten()
                            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                            .filter_map(|e| e.file_name().into_string().ok())
                            .filter(|name| name.ends_with(".md"))
                            .collect()
                    })
                    .unwrap_or_default();
                names.sort();
                names
                    .into_iter()
                    .map(|name| {
                        if place.is_empty() {
                            name
                        } else {
                            format!("{place}/{name}")
                        }
                    })
                    .collect()
            }
            Ok(meta) if meta.is_file() && place.ends_with(".md") => vec![place.clone()],
            _ => {
                if listed.contains(place) {
                    warnings.push(format!(
                        "`outputStyles` path `{place}` is not a folder or a .md file in the plugin; ignored"
                    ));
                }
                continue;
            }
        };
        for rel in files {
            let stem = rel
                .rsplit('/')
                .next()
                .and_then(|name| name.strip_suffix(".md"))
                .unwrap_or_default()
                .to_string();
            let to = format!("{STYLES_DIR}/{stem}.md");
            if found.iter().any(|f| f.from == rel) {
                continue;
            }
            if let Some(other) = found.iter().find(|f| f.to == to) {
                warnings.push(format!(
                    "{rel}: an output style file of the same name as {}; not imported",
                    other.from
                ));
                continue;
            }
            let text = match read_text(root, &root.join(&rel)) {
                Ok(Some(text)) => text,
                Ok(None) => continue,
                Err(e) => {
                    warnings.push(format!("{rel}: {e}; not imported as an output style"));
                    continue;
                }
            };
            match front_matter::parse_output_style(&text, &stem) {
                Ok(style) => {
                    let description = if style.description.is_empty() {
                        String::new()
                    } else {
                        format!(" — {}", crate::escape::line(&style.description))
                    };
                    let line = format!(
                        "`{}` ({rel}){description}; added to the system prompt while you choose it (--output-style, /output-style){}; runs nothing",
                        crate::escape::line(&style.name),
                        if style.keep_coding_instructions {
                            ""
                        } else {
                            ", in place of capstan's coding instructions"
                        }
                    );
                    found.push(FoundStyle {
                        from: rel,
                        to,
                        line,
                    });
                }
                Err(e) => warnings.push(format!(
                    "{rel}:{}: {}; not imported as an output style",
                    e.line, e.message
                )),
            }
        }
    }
    found
}

/// Copies the styles of `found` kept elsewhere in the plugin to their
/// place in the package at `out`.
pub fn place(root: &Path, out: &Path, found: &[FoundStyle]) -> Result<(), String> {
    for style in found.iter().filter(|s| s.from != s.to) {
        let to = out.join(&style.to);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::copy(root.join(&style.from), &to)
            .map_err(|e| format!("cannot copy {}: {e}", style.from))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn styles_come_from_the_default_folder_and_the_listed_paths() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let write = |rel: &str, text: &str| {
            let path = root.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write(
            "output-styles/explanatory.md",
            "---\nname: Explanatory\ndescription: Explains choices.\n---\nExplain.\n",
        );
        write("styles/terse.md", "Be terse.\n");
        write("styles/explanatory.md", "Another.\n");
        write("more/empty.md", "---\nname: Empty\n---\n");
        let mut warnings = Vec::new();
        let found = find(
            root,
            &json!({"outputStyles": ["./styles/", "./more/empty.md", "./missing"]}),
            &mut warnings,
        );
        let tos: Vec<&str> = found.iter().map(|f| f.to.as_str()).collect();
        assert_eq!(
            tos,
            ["output-styles/explanatory.md", "output-styles/terse.md"]
        );
        assert!(
            found[0]
                .line
                .starts_with("`Explanatory` (output-styles/explanatory.md) — Explains choices.;"),
            "{}",
            found[0].line
        );
        let all = warnings.join("\n");
        assert!(
            all.contains("styles/explanatory.md: an output style file of the same name")
                && all.contains("more/empty.md:1: the output style has no text")
                && all.contains("`missing` is not a folder"),
            "{all}"
        );
        let out = tempfile::tempdir().unwrap();
        place(root, out.path(), &found).unwrap();
        assert_eq!(
            std::fs::read_to_string(out.path().join("output-styles/terse.md")).unwrap(),
            "Be terse.\n"
        );
    }
}
