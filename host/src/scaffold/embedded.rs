//! Files capstan carries for the projects it builds: the plugin WIT, the
//! WASI packages it refers to, and the SDKs for Python, JavaScript and Rust.

/// The `capstan:plugin@0.1.0` package, file by file.
pub const PLUGIN_WIT: &[(&str, &str)] = &[
    ("types.wit", include_str!("../../../wit/types.wit")),
    ("host.wit", include_str!("../../../wit/host.wit")),
    ("exec.wit", include_str!("../../../wit/exec.wit")),
    ("tool.wit", include_str!("../../../wit/tool.wit")),
    ("hook.wit", include_str!("../../../wit/hook.wit")),
    ("skill.wit", include_str!("../../../wit/skill.wit")),
    ("worlds.wit", include_str!("../../../wit/worlds.wit")),
];

/// The WASI 0.2 packages (as wasmtime 48 implements them), each a folder
/// under `deps/`.
pub const WASI_WIT: &[(&str, &str)] = &[
    ("io", include_str!("../../../sdk/wit-deps/io.wit")),
    ("clocks", include_str!("../../../sdk/wit-deps/clocks.wit")),
    ("random", include_str!("../../../sdk/wit-deps/random.wit")),
    (
        "filesystem",
        include_str!("../../../sdk/wit-deps/filesystem.wit"),
    ),
    ("sockets", include_str!("../../../sdk/wit-deps/sockets.wit")),
    ("cli", include_str!("../../../sdk/wit-deps/cli.wit")),
    ("http", include_str!("../../../sdk/wit-deps/http.wit")),
];

/// The version of the WASI packages above.
pub const WASI_VERSION: &str = "0.2.12";

/// `capstan.py`, the Python SDK.
pub const PYTHON_SDK: &str = include_str!("../../../sdk/python/capstan.py");

/// `capstan.js`, the JavaScript SDK.
pub const JS_SDK: &str = include_str!("../../../sdk/js/capstan.js");

/// The `capstan-sdk` crate's sources, by path inside the crate.
pub const RUST_SDK: &[(&str, &str)] = &[
    ("src/lib.rs", include_str!("../../../sdk/rust/src/lib.rs")),
    (
        "src/arguments.rs",
        include_str!("../../../sdk/rust/src/arguments.rs"),
    ),
    (
        "src/context.rs",
        include_str!("../../../sdk/rust/src/context.rs"),
    ),
    (
        "src/error.rs",
        include_str!("../../../sdk/rust/src/error.rs"),
    ),
    ("src/exec.rs", include_str!("../../../sdk/rust/src/exec.rs")),
    ("src/fs.rs", include_str!("../../../sdk/rust/src/fs.rs")),
    ("src/hook.rs", include_str!("../../../sdk/rust/src/hook.rs")),
    (
        "src/skill.rs",
        include_str!("../../../sdk/rust/src/skill.rs"),
    ),
    ("src/log.rs", include_str!("../../../sdk/rust/src/log.rs")),
    (
        "src/output.rs",
        include_str!("../../../sdk/rust/src/output.rs"),
    ),
    ("src/tool.rs", include_str!("../../../sdk/rust/src/tool.rs")),
];

/// The crate's manifest, which inherits from capstan's workspace.
const RUST_SDK_MANIFEST: &str = include_str!("../../../sdk/rust/Cargo.toml");

/// The crate's manifest made standalone: inherited fields spelt out, the
/// workspace's lints left behind.
pub fn rust_sdk_manifest() -> String {
    let mut out = String::new();
    let mut skip_lints = false;
    for line in RUST_SDK_MANIFEST.lines() {
        if line.starts_with('[') {
            skip_lints = line == "[lints]";
        }
        if skip_lints {
            continue;
        }
        let line = match line.trim() {
            "version.workspace = true" => "version = \"0.1.0\"",
            "edition.workspace = true" => "edition = \"2024\"",
            "license.workspace = true" => "license = \"Apache-2.0\"",
            "rust-version.workspace = true" | "repository.workspace = true" => continue,
            _ => line,
        };
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names a JavaScript snippet imports from `./capstan.js`.
    fn imported_from_the_sdk(block: &str) -> Vec<String> {
        block
            .lines()
            .filter(|line| line.starts_with("import {") && line.contains("\"./capstan.js\""))
            .flat_map(|line| {
                let list = line["import {".len()..]
                    .split('}')
                    .next()
                    .unwrap_or_default();
                list.split(',')
                    .map(|name| name.trim().to_string())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn the_js_guide_imports_every_sdk_name_its_examples_use() {
        let guide = include_str!("../../../docs/write-a-tool-js.md");
        let exported: Vec<&str> = JS_SDK
            .lines()
            .filter_map(|line| {
                let rest = line.strip_prefix("export ")?;
                let rest = ["class ", "async function ", "function ", "const "]
                    .iter()
                    .find_map(|kind| rest.strip_prefix(kind))?;
                rest.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .next()
            })
            .collect();
        assert!(exported.contains(&"Failed"), "{exported:?}");
        let blocks: Vec<&str> = guide
            .split("```js")
            .skip(1)
            .map(|b| b.split("```").next().unwrap())
            .collect();
        assert!(blocks.len() >= 3);
        for block in blocks {
            let imported = imported_from_the_sdk(block);
            if imported.is_empty() {
                continue;
            }
            // The code without its imports and string literals.
            let mut body = String::new();
            let mut quote: Option<char> = None;
            for line in block.lines().filter(|line| !line.starts_with("import ")) {
                for c in line.chars().chain(['\n']) {
                    match quote {
                        Some(open) if c == open => quote = None,
                        Some(_) => {}
                        None if matches!(c, '"' | '\'' | '`') => quote = Some(c),
                        None => body.push(c),
                    }
                }
            }
            for name in &exported {
                // Used as a name of its own, not as a property (`.json()`).
                let word = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
                let used = body.match_indices(name).any(|(at, _)| {
                    let before = body[..at].chars().next_back();
                    let after = body[at + name.len()..].chars().next();
                    !before.is_some_and(|c| word(c) || c == '.') && !after.is_some_and(word)
                });
                if used {
                    assert!(
                        imported.iter().any(|i| i == name),
                        "an example uses `{name}` without importing it:\n{block}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_rust_sdk_manifest_stands_alone() {
        let manifest = rust_sdk_manifest();
        assert!(!manifest.contains("workspace"), "{manifest}");
        assert!(manifest.contains("name = \"capstan-sdk\""));
        assert!(manifest.contains("edition = \"2024\""));
        assert!(manifest.contains("wit-bindgen"));
    }

    #[test]
    fn every_source_file_of_the_rust_sdk_is_carried() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/rust/src");
        for entry in std::fs::read_dir(&src).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            let path = format!("src/{name}");
            assert!(
                RUST_SDK.iter().any(|(carried, _)| *carried == path),
                "sdk/rust/{path} is not in RUST_SDK"
            );
        }
    }

    #[test]
    fn wasi_packages_are_of_one_version() {
        for (name, text) in WASI_WIT {
            assert!(
                text.contains(&format!("package wasi:{name}@{WASI_VERSION};")),
                "{name}"
            );
        }
    }
}
