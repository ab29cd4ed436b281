//! `capstan new tool|hook|skill NAME --lang rust|python|js`: a project that
//! builds, passes its own test and installs without edits; and `capstan new
//! skill NAME` without a language: a plugin of one `SKILL.md` skill, which
//! needs no build.

use std::path::{Path, PathBuf};

use super::{Kind, Lang, ProjectError, embedded};

/// What `capstan new` wrote.
#[derive(Debug, Clone)]
pub struct Created {
    /// The project folder.
    pub dir: PathBuf,
    /// The files written, relative to it.
    pub files: Vec<String>,
    /// How to run the project's own tests.
    pub test_command: &'static str,
}

/// Checks a plugin name: what `plugin.toml` accepts.
pub fn check_name(name: &str) -> Result<(), String> {
    let starts = name.chars().next().is_some_and(|c| c.is_ascii_lowercase());
    let chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !starts || !chars || name.len() > 64 {
        return Err(format!(
            "`{name}` is not a valid plugin name: use lowercase letters, digits, `-` and `_`, starting with a letter (at most 64)"
        ));
    }
    Ok(())
}

/// Writes a new project for a `kind` plugin called `name` in `lang`, in
/// `dir` (which must not exist or be empty).
pub fn create(dir: &Path, name: &str, kind: Kind, lang: Lang) -> Result<Created, ProjectError> {
    check_name(name).map_err(|message| ProjectError::Config {
        path: dir.to_path_buf(),
        message,
    })?;
    if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(ProjectError::Exists(dir.to_path_buf()));
    }
    let files = files(name, kind, lang);
    for (path, contents) in &files {
        super::write(&dir.join(path), contents.as_bytes())?;
    }
    Ok(Created {
        dir: dir.to_path_buf(),
        files: files.into_iter().map(|(path, _)| path).collect(),
        test_command: match lang {
            Lang::Rust => "cargo test",
            Lang::Python => "python3 -m unittest",
            Lang::Js => "node --test",
        },
    })
}

/// Writes a new plugin of one Markdown skill (`skills/NAME/SKILL.md` and a
/// supporting file) called `name` in `dir`: nothing to build, ready to
/// install.
pub fn create_markdown_skill(dir: &Path, name: &str) -> Result<Created, ProjectError> {
    check_name(name).map_err(|message| ProjectError::Config {
        path: dir.to_path_buf(),
        message,
    })?;
    if name.contains('_') {
        return Err(ProjectError::Config {
            path: dir.to_path_buf(),
            message: format!(
                "`{name}` cannot name a skill: a skill's name is lowercase letters, digits and `-`"
            ),
        });
    }
    if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(ProjectError::Exists(dir.to_path_buf()));
    }
    let files = vec![
        ("plugin.toml".to_string(), markdown_manifest(name)),
        (
            format!("skills/{name}/SKILL.md"),
            fill_skill(SKILL_MD, name),
        ),
        (
            format!("skills/{name}/checklist.md"),
            fill_skill(SKILL_CHECKLIST, name),
        ),
    ];
    for (path, contents) in &files {
        super::write(&dir.join(path), contents.as_bytes())?;
    }
    Ok(Created {
        dir: dir.to_path_buf(),
        files: files.into_iter().map(|(path, _)| path).collect(),
        test_command: "capstan skill show",
    })
}

fn markdown_manifest(name: &str) -> String {
    format!(
        r#"name = "{name}"
version = "0.1.0"
description = "The {name} skill"
# Skills written in Markdown only (skills/NAME/SKILL.md): no components,
# nothing to build.
components = []

# A skill runs with the tools the session already has; a plugin of Markdown
# skills asks for nothing.
[capabilities]
"#
    )
}

fn fill_skill(template: &str, name: &str) -> String {
    template.replace("{{name}}", name)
}

const SKILL_MD: &str = r#"---
name: {{name}}
description: Reviews files against the team's checklist and reports what to fix. Replace this with what your skill does; until the model loads the skill, this line and when_to_use are all it sees.
when_to_use: The user asks for a review of some files or of a change.
argument-hint: "[files or folder]"
# The tools the model may use while the skill is loaded (optional; this
# narrows what the session allows, never widens it).
allowed-tools: fs.read, fs.glob, fs.grep
---

# {{name}}

Review $ARGUMENTS.

1. Read each file named above (or every file under the folder named).
2. Check it against `checklist.md`, next to this file: load it with the
   skill tool's `resource` ("checklist.md").
3. Report, file by file, each item that fails, quoting the line, and say
   what to change. Say so plainly when a file passes.
"#;

const SKILL_CHECKLIST: &str = r#"# {{name}}: checklist

- Every public function says what it does in one line.
- Errors say what failed and what to do about it.
- No secrets, tokens or passwords in the code or its tests.
"#;

/// The identifier form of a plugin name (`my-tool` -> `my_tool`).
fn ident(name: &str) -> String {
    name.replace('-', "_")
}

fn manifest(name: &str, kind: Kind, lang: Lang) -> String {
    let description = match kind {
        Kind::Tool => format!("The {name} tools"),
        Kind::Hook => format!("The {name} hooks"),
        Kind::Skill => format!("The {name} skills"),
    };
    let source = match lang {
        Lang::Python => "source = \"app.py\"\n",
        Lang::Js => "source = \"app.js\"\n",
        Lang::Rust => "",
    };
    format!(
        r#"name = "{name}"
version = "0.1.0"
description = "{description}"
components = ["{name}.wasm"]      # written by `capstan plugin build`

# What the plugin may touch; nothing is granted unless listed here, and the
# user agrees to it at install.
[capabilities]
# fs = [{{ path = "$WORKSPACE", access = "read" }}]
# net = ["https://api.example.com"]
# env = ["TZ"]

[build]
lang = "{lang}"
{source}exports = ["{kind}"]
"#,
        kind = kind.name()
    )
}

const GITIGNORE: &str = "/.capstan/\n*.wasm\n__pycache__/\n/target/\n";

fn files(name: &str, kind: Kind, lang: Lang) -> Vec<(String, String)> {
    let mut files = vec![
        ("plugin.toml".to_string(), manifest(name, kind, lang)),
        (".gitignore".to_string(), GITIGNORE.to_string()),
    ];
    let fill = |text: &str| {
        text.replace("__NAME__", name)
            .replace("__IDENT__", &ident(name))
    };
    match lang {
        Lang::Python => {
            let (app, test) = match kind {
                Kind::Tool => (PY_TOOL, PY_TOOL_TEST),
                Kind::Hook => (PY_HOOK, PY_HOOK_TEST),
                Kind::Skill => (PY_SKILL, PY_SKILL_TEST),
            };
            files.push(("app.py".to_string(), fill(app)));
            files.push(("test_app.py".to_string(), fill(test)));
            files.push(("capstan.py".to_string(), embedded::PYTHON_SDK.to_string()));
        }
        Lang::Js => {
            let (app, test) = match kind {
                Kind::Tool => (JS_TOOL, JS_TOOL_TEST),
                Kind::Hook => (JS_HOOK, JS_HOOK_TEST),
                Kind::Skill => (JS_SKILL, JS_SKILL_TEST),
            };
            files.push(("app.js".to_string(), fill(app)));
            files.push(("app.test.js".to_string(), fill(test)));
            files.push(("capstan.js".to_string(), embedded::JS_SDK.to_string()));
            files.push(("package.json".to_string(), fill(JS_PACKAGE)));
        }
        Lang::Rust => {
            let (cargo, lib) = match kind {
                Kind::Tool => (RUST_TOOL_CARGO, RUST_TOOL),
                Kind::Hook => (RUST_BINDGEN_CARGO, RUST_HOOK),
                Kind::Skill => (RUST_BINDGEN_CARGO, RUST_SKILL),
            };
            files.push(("Cargo.toml".to_string(), fill(cargo)));
            files.push(("src/lib.rs".to_string(), fill(lib)));
        }
    }
    files
}

const PY_TOOL: &str = r##""""The __NAME__ tools. Each @tool function is a tool the model can call as
__NAME__.FUNCTION; its type hints and docstring are the schema it sees."""

from capstan import tool, InvalidInput


@tool(read_only=True)
def hello(name: str, excitement: int = 1) -> str:
    """Greets someone by name.

    Args:
        name: Who to greet.
        excitement: How many exclamation marks, 0 to 10.
    """
    if not 0 <= excitement <= 10:
        raise InvalidInput("field `excitement`: must be between 0 and 10")
    return f"Hello, {name}" + "!" * excitement
"##;

const PY_TOOL_TEST: &str = r##"import unittest

import capstan
import app  # noqa: F401  (registers the tools)


class HelloTest(unittest.TestCase):
    def test_greets(self):
        self.assertEqual(capstan.call_tool("hello", {"name": "Ada"}), "Hello, Ada!")

    def test_rejects_a_wrong_type(self):
        with self.assertRaises(capstan.InvalidInput) as err:
            capstan.call_tool("hello", {"name": 3})
        self.assertIn("name", str(err.exception))

    def test_rejects_too_much_excitement(self):
        with self.assertRaises(capstan.InvalidInput):
            capstan.call_tool("hello", {"name": "Ada", "excitement": 11})


if __name__ == "__main__":
    unittest.main()
"##;

const PY_HOOK: &str = r##""""The __NAME__ hooks: functions run when something happens in a session."""

from capstan import hook, deny, proceed


@hook("pre-tool-use", matcher="fs.write|fs.edit")
def protect_env_files(event: dict):
    """Refuses edits to .env files, which hold secrets."""
    path = str(event.get("tool_input", {}).get("path", ""))
    if path == ".env" or path.endswith("/.env"):
        return deny(f"{path} holds secrets; edit it by hand")
    return proceed()
"##;

const PY_HOOK_TEST: &str = r##"import unittest

import capstan
import app  # noqa: F401  (registers the hooks)


class ProtectEnvFilesTest(unittest.TestCase):
    def test_denies_an_edit_of_env(self):
        decision = capstan.handle_event("pre-tool-use", {"tool_name": "fs.write", "tool_input": {"path": ".env"}})
        self.assertEqual(decision.kind, "deny")

    def test_lets_other_files_through(self):
        decision = capstan.handle_event("pre-tool-use", {"tool_name": "fs.write", "tool_input": {"path": "a.txt"}})
        self.assertEqual(decision.kind, "proceed")


if __name__ == "__main__":
    unittest.main()
"##;

const PY_SKILL: &str = r##""""The __NAME__ skills: Markdown instructions the model loads when needed."""

from capstan import skill


@skill(name="__NAME__", argument_hint="[topic]", resources={"checklist.md": "- [ ] tests pass\n"})
def checklist(arguments: str) -> str:
    """A review checklist for a change."""
    topic = arguments.strip() or "this change"
    return f"# Reviewing {topic}\n\nGo through checklist.md and report each item.\n"
"##;

const PY_SKILL_TEST: &str = r##"import unittest

import capstan
import app  # noqa: F401  (registers the skills)


class ChecklistTest(unittest.TestCase):
    def test_names_the_topic(self):
        self.assertIn("the parser", capstan.load_skill("__NAME__", "the parser"))


if __name__ == "__main__":
    unittest.main()
"##;

const JS_PACKAGE: &str = r##"{
  "name": "__NAME__",
  "private": true,
  "type": "module",
  "scripts": {
    "test": "node --test"
  }
}
"##;

const JS_TOOL: &str = r##"// The __NAME__ tools. Each tool({...}) is a tool the model can call as
// __NAME__.NAME; `input` is the schema it sees.
import { tool, InvalidInput } from "./capstan.js";

tool({
  name: "hello",
  description: "Greets someone by name.",
  input: {
    name: { type: "string", description: "Who to greet." },
    excitement: { type: "integer", default: 1, description: "How many exclamation marks, 0 to 10." },
  },
  readOnly: true,
  run({ name, excitement = 1 }) {
    if (excitement < 0 || excitement > 10) {
      throw new InvalidInput("field `excitement`: must be between 0 and 10");
    }
    return `Hello, ${name}` + "!".repeat(excitement);
  },
});
"##;

const JS_TOOL_TEST: &str = r##"import { test } from "node:test";
import assert from "node:assert/strict";

import { callTool, InvalidInput } from "./capstan.js";
import "./app.js";

test("greets", async () => {
  assert.equal(await callTool("hello", { name: "Ada" }), "Hello, Ada!");
});

test("rejects a wrong type", async () => {
  await assert.rejects(callTool("hello", { name: 3 }), (err) => err instanceof InvalidInput && /name/.test(err.message));
});

test("rejects too much excitement", async () => {
  await assert.rejects(callTool("hello", { name: "Ada", excitement: 11 }), InvalidInput);
});
"##;

const JS_HOOK: &str = r##"// The __NAME__ hooks: functions run when something happens in a session.
import { hook, deny, proceed } from "./capstan.js";

// Refuses edits to .env files, which hold secrets.
hook("pre-tool-use", "fs.write|fs.edit", (event) => {
  const path = String(event.tool_input?.path ?? "");
  if (path === ".env" || path.endsWith("/.env")) {
    return deny(`${path} holds secrets; edit it by hand`);
  }
  return proceed();
});
"##;

const JS_HOOK_TEST: &str = r##"import { test } from "node:test";
import assert from "node:assert/strict";

import { handleEvent } from "./capstan.js";
import "./app.js";

test("denies an edit of .env", async () => {
  const d = await handleEvent("pre-tool-use", { tool_name: "fs.write", tool_input: { path: ".env" } });
  assert.equal(d.kind, "deny");
});

test("lets other files through", async () => {
  const d = await handleEvent("pre-tool-use", { tool_name: "fs.write", tool_input: { path: "a.txt" } });
  assert.equal(d.kind, "proceed");
});
"##;

const JS_SKILL: &str = r##"// The __NAME__ skills: Markdown instructions the model loads when needed.
import { skill } from "./capstan.js";

skill({
  name: "__NAME__",
  description: "A review checklist for a change.",
  argumentHint: "[topic]",
  resources: { "checklist.md": "- [ ] tests pass\n" },
  load(args) {
    const topic = args.trim() || "this change";
    return `# Reviewing ${topic}\n\nGo through checklist.md and report each item.\n`;
  },
});
"##;

const JS_SKILL_TEST: &str = r##"import { test } from "node:test";
import assert from "node:assert/strict";

import { loadSkill } from "./capstan.js";
import "./app.js";

test("names the topic", async () => {
  assert.match(await loadSkill("__NAME__", "the parser"), /the parser/);
});
"##;

const RUST_TOOL_CARGO: &str = r##"[package]
name = "__NAME__"
version = "0.1.0"
edition = "2024"

[lib]
crate-type = ["cdylib", "rlib"]

[dependencies]
# capstan's Rust SDK, written into .capstan/ by `capstan plugin build`.
capstan-sdk = { path = ".capstan/sdk/rust" }
serde = { version = "1", features = ["derive"] }
schemars = "1"

[profile.release]
opt-level = "s"
strip = true

# A project of its own, even inside another Cargo workspace.
[workspace]
"##;

const RUST_BINDGEN_CARGO: &str = r##"[package]
name = "__NAME__"
version = "0.1.0"
edition = "2024"

[lib]
crate-type = ["cdylib", "rlib"]

[dependencies]
# Bindings for the WIT that `capstan plugin build` writes into .capstan/wit.
wit-bindgen = "0.51"
serde_json = "1"

[profile.release]
opt-level = "s"
strip = true

# A project of its own, even inside another Cargo workspace.
[workspace]
"##;

const RUST_TOOL: &str = r##"//! The __NAME__ tools.

use capstan_sdk::prelude::*;

/// Input of the `hello` tool.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    /// Who to greet.
    pub name: String,
    /// How many exclamation marks, 0 to 10.
    pub excitement: Option<u8>,
}

/// Greets someone by name.
pub fn hello(input: Hello, _ctx: &Context) -> Result<String, ToolError> {
    let excitement = input.excitement.unwrap_or(1);
    if excitement > 10 {
        return Err(ToolError::invalid_input("field `excitement`: must be between 0 and 10"));
    }
    Ok(format!("Hello, {}{}", input.name, "!".repeat(excitement.into())))
}

#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
fn tools() -> Vec<Tool> {
    vec![Tool::new("hello", "Greets someone by name.", hello).read_only()]
}

// Exported only in the component, so `cargo test` can link natively.
#[cfg(target_arch = "wasm32")]
capstan_sdk::export_tools!(tools);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greets() {
        let out = hello(Hello { name: "Ada".into(), excitement: None }, &Context::default());
        assert_eq!(out.ok().as_deref(), Some("Hello, Ada!"));
    }

    #[test]
    fn rejects_too_much_excitement() {
        let out = hello(Hello { name: "Ada".into(), excitement: Some(11) }, &Context::default());
        assert!(out.is_err());
    }
}
"##;

const RUST_HOOK: &str = r##"//! The __NAME__ hooks.

wit_bindgen::generate!({ path: ".capstan/wit", world: "build" });

use exports::capstan::plugin::hook::{Decision, Event, EventInput, Guest, HookOutput, Subscription};

#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
struct Hooks;

/// Refuses edits to .env files, which hold secrets.
pub fn decide(payload: &serde_json::Value) -> Decision {
    let path = payload["tool_input"]["path"].as_str().unwrap_or_default();
    if path == ".env" || path.ends_with("/.env") {
        Decision::Deny(format!("{path} holds secrets; edit it by hand"))
    } else {
        Decision::Proceed
    }
}

impl Guest for Hooks {
    fn subscriptions() -> Vec<Subscription> {
        vec![Subscription { event: Event::PreToolUse, matcher: Some("fs.write|fs.edit".into()) }]
    }

    fn handle(input: EventInput, _ctx: capstan::plugin::types::CallContext) -> Result<HookOutput, String> {
        let payload: serde_json::Value =
            serde_json::from_str(&input.payload).map_err(|e| format!("the event is not JSON: {e}"))?;
        Ok(HookOutput { decision: decide(&payload), system_message: None })
    }
}

// Exported only in the component, so `cargo test` can link natively.
#[cfg(target_arch = "wasm32")]
export!(Hooks);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denies_an_edit_of_env() {
        let payload = serde_json::json!({ "tool_name": "fs.write", "tool_input": { "path": ".env" } });
        assert!(matches!(decide(&payload), Decision::Deny(_)));
    }
}
"##;

const RUST_SKILL: &str = r##"//! The __NAME__ skills.

wit_bindgen::generate!({ path: ".capstan/wit", world: "build" });

use exports::capstan::plugin::skill::{Guest, SkillMeta};

#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
struct Skills;

/// The skill's text for the user's arguments.
pub fn checklist(arguments: &str) -> String {
    let topic = if arguments.trim().is_empty() { "this change" } else { arguments.trim() };
    format!("# Reviewing {topic}\n\nGo through checklist.md and report each item.\n")
}

impl Guest for Skills {
    fn list() -> Vec<SkillMeta> {
        vec![SkillMeta {
            name: "__NAME__".into(),
            description: "A review checklist for a change.".into(),
            when_to_use: None,
            argument_hint: Some("[topic]".into()),
            user_invocable: true,
            model_invocable: true,
            allowed_tools: Vec::new(),
        }]
    }

    fn load(name: String, arguments: String) -> Result<String, String> {
        match name.as_str() {
            "__NAME__" => Ok(checklist(&arguments)),
            _ => Err(format!("unknown skill `{name}`")),
        }
    }

    fn resource(name: String, path: String) -> Result<Vec<u8>, String> {
        match (name.as_str(), path.as_str()) {
            ("__NAME__", "checklist.md") => Ok(b"- [ ] tests pass\n".to_vec()),
            _ => Err(format!("skill `{name}` has no resource `{path}`")),
        }
    }
}

// Exported only in the component, so `cargo test` can link natively.
#[cfg(target_arch = "wasm32")]
export!(Skills);

#[cfg(test)]
mod tests {
    #[test]
    fn names_the_topic() {
        assert!(super::checklist("the parser").contains("the parser"));
    }
}
"##;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_has_a_manifest_source_and_test() {
        for kind in [Kind::Tool, Kind::Hook, Kind::Skill] {
            for lang in [Lang::Rust, Lang::Python, Lang::Js] {
                let files = files("my-plugin", kind, lang);
                let manifest = &files[0].1;
                let parsed =
                    crate::plugin::manifest::Manifest::parse(manifest, Path::new("plugin.toml"));
                assert!(parsed.is_ok(), "{kind:?} {lang:?}: {parsed:?}");
                let config =
                    super::super::build::BuildConfig::parse(manifest, Path::new("plugin.toml"))
                        .unwrap();
                assert_eq!(config.lang, lang);
                assert_eq!(config.exports, vec![kind]);
                assert!(files.iter().all(|(_, text)| !text.contains("__NAME__")));
                assert!(
                    files.iter().any(|(_, text)| text.contains("test")),
                    "{kind:?} {lang:?}"
                );
            }
        }
    }

    #[test]
    fn names_are_checked_and_folders_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let err = create(&dir.path().join("x"), "Bad Name", Kind::Tool, Lang::Python).unwrap_err();
        assert!(err.to_string().contains("not a valid plugin name"), "{err}");
        std::fs::write(dir.path().join("keep.txt"), "mine").unwrap();
        let err = create(dir.path(), "ok", Kind::Tool, Lang::Python).unwrap_err();
        assert!(matches!(err, ProjectError::Exists(_)));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("keep.txt")).unwrap(),
            "mine"
        );
    }
}
