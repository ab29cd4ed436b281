//! What a language server is, as Claude Code plugins define it: the
//! entries of `.lsp.json` or of `lspServers` in `plugin.json` (and in
//! marketplace entries), one object per server:
//!
//! ```json
//! {"pyright": {"command": "pyright-langserver", "args": ["--stdio"],
//!              "extensionToLanguage": {".py": "python"},
//!              "env": {}, "initializationOptions": {}, "settings": {},
//!              "startupTimeout": 30000, "restartOnCrash": true, "maxRestarts": 3}}
//! ```
//!
//! Only the stdio transport is run. `${CLAUDE_PLUGIN_ROOT}` in `command`,
//! `args` and `env` names the installed plugin's folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

/// How long a server may take to answer `initialize` unless it says.
pub const DEFAULT_STARTUP: Duration = Duration::from_secs(30);

/// The longest startup a definition may ask for.
const MAX_STARTUP: Duration = Duration::from_secs(300);

/// How many times a crashed server is started again unless it says.
pub const DEFAULT_MAX_RESTARTS: u32 = 3;

/// The variable Claude Code sets to the plugin's folder.
pub const PLUGIN_ROOT_VAR: &str = "${CLAUDE_PLUGIN_ROOT}";

/// One language server of a plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct LspServerSpec {
    /// Its name: `PLUGIN-SERVER` once installed, the definition's key
    /// before.
    pub name: String,
    /// The program, looked up on `PATH` unless it holds a `/`.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables set for it (besides the sandbox's scrubbed few).
    pub env: Vec<(String, String)>,
    /// File extensions (with the dot, lowercase) and their language ids.
    pub extensions: BTreeMap<String, String>,
    /// `initializationOptions` of `initialize`.
    pub initialization_options: Value,
    /// What `workspace/configuration` answers and
    /// `workspace/didChangeConfiguration` sends.
    pub settings: Value,
    /// How long `initialize` may take.
    pub startup_timeout: Duration,
    /// Whether a server that stopped is started again.
    pub restart_on_crash: bool,
    /// How many times at most.
    pub max_restarts: u32,
    /// The installed plugin's folder (readable by the server).
    pub plugin_root: Option<PathBuf>,
}

impl LspServerSpec {
    /// Reads the definition `value` of server `name`.
    pub fn parse(name: &str, value: &Value) -> Result<Self, String> {
        let object = value
            .as_object()
            .ok_or_else(|| format!("LSP server {name}: its definition is not an object"))?;
        if let Some(transport) = object.get("transport").and_then(Value::as_str)
            && transport != "stdio"
        {
            return Err(format!(
                "LSP server {name}: transport `{transport}` is not supported (capstan talks to language servers over stdio only)"
            ));
        }
        let command = object
            .get("command")
            .and_then(Value::as_str)
            .filter(|c| !c.trim().is_empty())
            .ok_or_else(|| format!("LSP server {name}: it has no `command`"))?
            .to_string();
        let args = match object.get("args") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(args)) => args
                .iter()
                .map(|a| {
                    a.as_str().map(str::to_string).ok_or_else(|| {
                        format!("LSP server {name}: `args` must be a list of strings")
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(format!(
                    "LSP server {name}: `args` must be a list of strings"
                ));
            }
        };
        let env = match object.get("env") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(env)) => env
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), s.clone())),
                    Value::Number(n) => Ok((k.clone(), n.to_string())),
                    Value::Bool(b) => Ok((k.clone(), b.to_string())),
                    _ => Err(format!("LSP server {name}: variable {k} is not a string")),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(format!("LSP server {name}: `env` must be an object")),
        };
        let mut extensions = BTreeMap::new();
        match object.get("extensionToLanguage") {
            Some(Value::Object(map)) => {
                for (ext, language) in map {
                    let language = language.as_str().ok_or_else(|| {
                        format!("LSP server {name}: the language of {ext} is not a string")
                    })?;
                    let ext = ext.trim().to_lowercase();
                    let ext = if ext.starts_with('.') {
                        ext
                    } else {
                        format!(".{ext}")
                    };
                    if ext.len() > 1 {
                        extensions.insert(ext, language.to_string());
                    }
                }
            }
            _ => {
                return Err(format!(
                    "LSP server {name}: it has no `extensionToLanguage` (which files it serves)"
                ));
            }
        }
        if extensions.is_empty() {
            return Err(format!(
                "LSP server {name}: `extensionToLanguage` lists no extension"
            ));
        }
        let startup_timeout = match object.get("startupTimeout").and_then(Value::as_u64) {
            Some(ms) if ms > 0 => Duration::from_millis(ms).min(MAX_STARTUP),
            _ => DEFAULT_STARTUP,
        };
        Ok(Self {
            name: name.to_string(),
            command,
            args,
            env,
            extensions,
            initialization_options: object
                .get("initializationOptions")
                .cloned()
                .unwrap_or_else(|| serde_json::json!({})),
            settings: object.get("settings").cloned().unwrap_or(Value::Null),
            startup_timeout,
            restart_on_crash: object
                .get("restartOnCrash")
                .and_then(Value::as_bool)
                .unwrap_or(true),
            max_restarts: object
                .get("maxRestarts")
                .and_then(Value::as_u64)
                .map_or(DEFAULT_MAX_RESTARTS, |n| n.min(100) as u32),
            plugin_root: None,
        })
    }

    /// The servers of a `{"NAME": {...}}` object (an `lspServers` value or
    /// a `.lsp.json`), and one problem per definition that cannot be used.
    pub fn parse_all(servers: &Value) -> (Vec<Self>, Vec<String>) {
        let mut specs = Vec::new();
        let mut problems = Vec::new();
        let Some(servers) = servers.as_object() else {
            problems.push("the LSP servers are not an object of servers by name".to_string());
            return (specs, problems);
        };
        for (name, value) in servers {
            match Self::parse(name, value) {
                Ok(spec) => specs.push(spec),
                Err(problem) => problems.push(problem),
            }
        }
        (specs, problems)
    }

    /// This server installed in `root`: `${CLAUDE_PLUGIN_ROOT}` replaced by
    /// it, and its folder remembered (the sandbox lets the server read
    /// it).
    pub fn installed_in(mut self, root: &Path) -> Self {
        let root_text = root.display().to_string();
        let put = |text: &str| text.replace(PLUGIN_ROOT_VAR, &root_text);
        self.command = put(&self.command);
        self.args = self.args.iter().map(|a| put(a)).collect();
        self.env = self.env.iter().map(|(k, v)| (k.clone(), put(v))).collect();
        self.plugin_root = Some(root.to_path_buf());
        self
    }

    /// The extensions it serves, as a list (`.py, .pyi`).
    pub fn extension_list(&self) -> String {
        self.extensions
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The command line, as shown to the user.
    pub fn command_line(&self) -> String {
        let mut line = self.command.clone();
        for arg in &self.args {
            line.push(' ');
            line.push_str(arg);
        }
        line
    }

    /// What it runs and reaches, in one line for the consent text.
    pub fn describe(&self) -> String {
        let mut line = format!(
            "{}: runs `{}` for {} files in the OS sandbox: the workspace read-only, the plugin's folder readable, no network, no secrets",
            self.name,
            crate::escape::line(&self.command_line()),
            self.extension_list()
        );
        if !self.env.is_empty() {
            let names: Vec<&str> = self.env.iter().map(|(k, _)| k.as_str()).collect();
            line.push_str(&format!("; variables {}", names.join(", ")));
        }
        line
    }

    /// Where its program is, when it can be found: a path (with a `/`)
    /// that is a file, or the first match on `path` (a `PATH` value).
    pub fn find_program(&self, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
        if self.command.contains('/') {
            let program = PathBuf::from(&self.command);
            return program.is_file().then_some(program);
        }
        std::env::split_paths(path?)
            .map(|dir| dir.join(&self.command))
            .find(|candidate| is_executable(candidate))
    }

    /// Why it cannot start here, when its program is missing: what to
    /// install.
    pub fn missing_program(&self) -> Option<String> {
        if self.command.contains(PLUGIN_ROOT_VAR) {
            return None;
        }
        let path = std::env::var_os("PATH");
        self.find_program(path.as_deref()).is_none().then(|| {
            format!(
                "`{}` is not on PATH: install it to get code intelligence for {} files (as Claude Code expects too)",
                crate::escape::line(&self.command),
                self.extension_list()
            )
        })
    }
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_definition_is_read_with_its_defaults() {
        let spec = LspServerSpec::parse(
            "pyright",
            &json!({"command": "pyright-langserver", "args": ["--stdio"],
                    "extensionToLanguage": {".py": "python", "PYI": "python"}}),
        )
        .unwrap();
        assert_eq!(spec.args, ["--stdio"]);
        assert_eq!(spec.extension_list(), ".py, .pyi");
        assert_eq!(spec.startup_timeout, DEFAULT_STARTUP);
        assert!(spec.restart_on_crash);
        assert_eq!(spec.max_restarts, DEFAULT_MAX_RESTARTS);
        assert!(spec.describe().contains("no network"));
    }

    #[test]
    fn unusable_definitions_say_why() {
        let (specs, problems) = LspServerSpec::parse_all(&json!({
            "a": {"command": "x"},
            "b": {"extensionToLanguage": {".x": "x"}},
            "c": {"command": "x", "transport": "socket", "extensionToLanguage": {".x": "x"}},
            "d": {"command": "x", "args": "no", "extensionToLanguage": {".x": "x"}},
            "e": {"command": "x", "extensionToLanguage": {".x": "x"}, "startupTimeout": 5000,
                  "restartOnCrash": false}
        }));
        assert_eq!(specs.len(), 1);
        assert_eq!(specs[0].startup_timeout, Duration::from_secs(5));
        assert!(!specs[0].restart_on_crash);
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems[0].contains("extensionToLanguage"));
        assert!(problems[1].contains("no `command`"));
        assert!(problems[2].contains("stdio only"));
    }

    #[test]
    fn the_plugin_root_is_substituted_once_installed() {
        let spec = LspServerSpec::parse(
            "fake",
            &json!({"command": "python3", "args": ["${CLAUDE_PLUGIN_ROOT}/server.py"],
                    "env": {"LIB": "${CLAUDE_PLUGIN_ROOT}/lib"},
                    "extensionToLanguage": {".x": "x"}}),
        )
        .unwrap()
        .installed_in(Path::new("/store/p"));
        assert_eq!(spec.args, ["/store/p/server.py"]);
        assert_eq!(spec.env, [("LIB".to_string(), "/store/p/lib".to_string())]);
        assert_eq!(spec.plugin_root.as_deref(), Some(Path::new("/store/p")));
    }

    #[test]
    fn a_program_is_found_on_the_path_or_reported_missing() {
        let dir = tempfile::tempdir().unwrap();
        let spec = LspServerSpec::parse(
            "x",
            &json!({"command": "no-such-language-server-here", "extensionToLanguage": {".x": "x"}}),
        )
        .unwrap();
        assert!(spec.find_program(Some(dir.path().as_os_str())).is_none());
        assert!(spec.missing_program().unwrap().contains("not on PATH"));
    }
}
