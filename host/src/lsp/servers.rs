//! A session's language servers: each started lazily, the first time a
//! file it serves is read, edited or asked about; documents opened and
//! kept in step with the disk (`didOpen`, then `didChange` with the whole
//! text and `didSave` when a file changed); a server that stopped started
//! again with backoff, up to its `maxRestarts`; all shut down when the
//! session ends.
//!
//! After an edit, the file's new diagnostics: asked for with
//! `textDocument/diagnostic` of a server that offers pull diagnostics;
//! otherwise waited for, up to [`DIAGNOSTICS_WAIT`] from a server that
//! published diagnostics for the file before, and only the short
//! `[lsp] diagnostics_wait` ([`DEFAULT_DIAGNOSTICS_WAIT`] unless set) from
//! one not known to, so a server that never publishes holds up no edit.
//!
//! **Files the session's rules deny reading.** A server reads every file of
//! the workspace it is given, and what it answers — hover text, diagnostic
//! messages, symbol names — may quote any of them, under any file's
//! location, in any spelling: filtering its text for a denied file's path
//! or content cannot be made sound (a server may paraphrase, re-encode or
//! split what it quotes). So no server runs over a workspace holding a
//! file the rules deny reading ([`LspServers::with_read_denials`]): before
//! a server starts, before each document is sent to it, and before any of
//! its answers is passed on, the workspace is checked ([`LspServers::screen`]);
//! a denied file found there stops every server for the rest of the
//! session (one may hold its content already) and nothing more of theirs
//! reaches the model. A workspace too large to check
//! ([`MAX_SCREENED_ENTRIES`]) is treated the same way. With no rule that
//! denies reading, nothing is checked.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::config::LspServerSpec;
use super::connection::{Connection, Published, STOP_GRACE, uri_of};
use crate::exec::ExecGrants;

/// The largest file sent to a server.
pub const MAX_DOCUMENT: u64 = 4 << 20;

/// How long a request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long an edit waits for the diagnostics of a server known to
/// publish them for the file (or that answers pull requests), unless
/// `[lsp] diagnostics_wait` is longer.
pub const DIAGNOSTICS_WAIT: Duration = Duration::from_secs(5);

/// How long an edit waits for the diagnostics of a server not known to
/// publish them for the file, unless `[lsp] diagnostics_wait` says.
pub const DEFAULT_DIAGNOSTICS_WAIT: Duration = Duration::from_secs(1);

/// What a server said of a file's diagnostics after an edit.
#[derive(Debug, Clone)]
pub enum Diagnosed {
    /// It published (or, asked, gave) these.
    Published(Published),
    /// Nothing came within this long.
    Nothing(Duration),
    /// Asked for them, it answered with this error.
    Failed(String),
}

/// The most files and folders of the workspace checked for files the
/// rules deny reading; past it, servers do not run (see the [module
/// documentation](self)).
pub const MAX_SCREENED_ENTRIES: usize = 200_000;

/// Whether the session's rules deny the model reading a file (given as
/// its path on disk).
pub type ReadDenial = Arc<dyn Fn(&Path) -> bool + Send + Sync>;

/// The first wait before a crashed server is started again (doubled at
/// each further crash); its first restart is immediate.
const BACKOFF: Duration = Duration::from_secs(1);

/// The language servers of a session.
pub struct LspServers {
    workspace: PathBuf,
    /// The base of every server's sandbox (the session's command grants),
    /// or why commands cannot run here.
    grants: Result<ExecGrants, String>,
    slots: Vec<Slot>,
    /// How long an edit waits for a server not known to publish.
    diagnostics_wait: Duration,
    /// Whether a file is one the rules deny reading; `None` when no rule
    /// denies reading anything.
    read_denied: Option<ReadDenial>,
    /// Why no server may run, nor any answer of theirs reach the model, for
    /// the rest of the session; once set, it stays.
    stopped: std::sync::Mutex<Option<String>>,
}

struct Slot {
    spec: LspServerSpec,
    state: tokio::sync::Mutex<SlotState>,
}

#[derive(Default)]
struct SlotState {
    running: Option<Arc<Connection>>,
    /// Documents open on the running server: version and text.
    documents: HashMap<PathBuf, (i64, Arc<str>)>,
    /// Times it stopped unasked.
    crashes: u32,
    /// When it last stopped, and why.
    last_crash: Option<(Instant, String)>,
    /// Why it can never start in this session.
    refused: Option<String>,
}

/// A document synchronised with its server, ready for a request.
pub struct Opened {
    /// The server.
    pub connection: Arc<Connection>,
    /// The document's URI.
    pub uri: String,
    /// Its text, as the server has it.
    pub text: Arc<str>,
    /// The server's name.
    pub server: String,
}

impl LspServers {
    /// The servers `specs` for `workspace`, run under `grants`.
    pub fn new(
        specs: Vec<LspServerSpec>,
        workspace: &Path,
        grants: Result<ExecGrants, String>,
    ) -> Self {
        Self {
            workspace: workspace.to_path_buf(),
            grants,
            slots: specs
                .into_iter()
                .map(|spec| Slot {
                    spec,
                    state: tokio::sync::Mutex::new(SlotState::default()),
                })
                .collect(),
            diagnostics_wait: DEFAULT_DIAGNOSTICS_WAIT,
            read_denied: None,
            stopped: std::sync::Mutex::new(None),
        }
    }

    /// The same, running no server over a workspace that holds a file
    /// `denied` says the rules deny reading (see the [module
    /// documentation](self)).
    pub fn with_read_denials(mut self, denied: ReadDenial) -> Self {
        self.read_denied = Some(denied);
        self
    }

    /// Checks that servers may run and their answers reach the model: the
    /// workspace holds no file the rules deny reading. When it does, every
    /// server is stopped and stays stopped for the session; the error says
    /// why, without naming the file.
    pub fn screen(&self) -> Result<(), String> {
        let mut stopped = self
            .stopped
            .lock()
            .map_err(|_| "the language servers' state was lost".to_string())?;
        if let Some(why) = &*stopped {
            return Err(why.clone());
        }
        let Some(denied) = &self.read_denied else {
            return Ok(());
        };
        let Some(why) = denied_file_in(&self.workspace, denied.as_ref()) else {
            return Ok(());
        };
        *stopped = Some(why.clone());
        drop(stopped);
        self.stop_running();
        Err(why)
    }

    /// The same, waiting `wait` after an edit for the diagnostics of a
    /// server not known to publish them for the file (`[lsp]
    /// diagnostics_wait`), and at least that long for one that is.
    pub fn with_diagnostics_wait(mut self, wait: Duration) -> Self {
        self.diagnostics_wait = wait;
        self
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The servers' definitions.
    pub fn specs(&self) -> impl Iterator<Item = &LspServerSpec> {
        self.slots.iter().map(|slot| &slot.spec)
    }

    /// The audit log the servers' sandboxes record to, if any.
    pub fn audit_log(&self) -> Option<crate::audit::AuditLog> {
        self.grants
            .as_ref()
            .ok()
            .and_then(|g| g.audit.as_ref())
            .map(|scope| scope.log.clone())
    }

    /// The workspace.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The server for `path`, by its extension.
    fn slot_for(&self, path: &Path) -> Option<&Slot> {
        let ext = format!(".{}", path.extension()?.to_string_lossy().to_lowercase());
        self.slots
            .iter()
            .find(|slot| slot.spec.extensions.contains_key(&ext))
    }

    /// Whether some server serves `path`.
    pub fn serves(&self, path: &Path) -> bool {
        self.slot_for(path).is_some()
    }

    /// Opens `path` (an absolute path in the workspace) on its server,
    /// starting it if needed, or brings the server's copy in step with the
    /// disk; with `saved`, tells it the file was saved.
    pub async fn open(&self, path: &Path, saved: bool) -> Result<Opened, String> {
        let slot = self.slot_for(path).ok_or_else(|| {
            let known: Vec<String> = self
                .slots
                .iter()
                .flat_map(|s| s.spec.extensions.keys().cloned())
                .collect();
            format!(
                "no language server serves {} (the installed ones serve {})",
                self.display(path),
                known.join(", ")
            )
        })?;
        self.screen()?;
        let mut state = slot.state.lock().await;
        let connection = self.running(slot, &mut state).await?;
        let text = read_document(path)?;
        let uri = uri_of(path);
        let language = path
            .extension()
            .map(|e| format!(".{}", e.to_string_lossy().to_lowercase()))
            .and_then(|ext| slot.spec.extensions.get(&ext).cloned())
            .unwrap_or_default();
        match state.documents.get_mut(path) {
            None => {
                connection.notify(
                    "textDocument/didOpen",
                    json!({"textDocument": {"uri": uri, "languageId": language, "version": 1, "text": &*text}}),
                );
                state
                    .documents
                    .insert(path.to_path_buf(), (1, text.clone()));
            }
            Some((version, known)) if **known != *text => {
                *version += 1;
                *known = text.clone();
                connection.notify(
                    "textDocument/didChange",
                    json!({"textDocument": {"uri": uri, "version": *version},
                           "contentChanges": [{"text": &*text}]}),
                );
            }
            Some(_) => {}
        }
        if saved {
            connection.notify(
                "textDocument/didSave",
                json!({"textDocument": {"uri": uri}, "text": &*text}),
            );
        }
        Ok(Opened {
            connection,
            uri,
            text,
            server: slot.spec.name.clone(),
        })
    }

    /// After a tool changed `path`: its server's copy brought in step, and
    /// the diagnostics it then gives (see the [module documentation](self)
    /// for how long it is waited for); `None` when no server serves the
    /// file. A server that cannot start is an error.
    pub async fn changed(&self, path: &Path) -> Result<Option<(String, Diagnosed)>, String> {
        let Some(slot) = self.slot_for(path) else {
            return Ok(None);
        };
        let uri = uri_of(path);
        let before = {
            let state = slot.state.lock().await;
            state
                .running
                .as_ref()
                .filter(|c| c.closed().is_none())
                .map(|c| (c.publication(), c.diagnostics(&uri).is_some()))
        };
        let opened = self.open(path, true).await?;
        let connection = &opened.connection;
        let long = DIAGNOSTICS_WAIT.max(self.diagnostics_wait);
        if connection.pulls_diagnostics() {
            let asked = connection
                .request(
                    "textDocument/diagnostic",
                    json!({"textDocument": {"uri": opened.uri}}),
                    long,
                )
                .await;
            self.screen()?;
            let diagnosed = match asked {
                Ok(report) => Diagnosed::Published(Published::of_report(&report)),
                Err(why) => Diagnosed::Failed(why),
            };
            return Ok(Some((opened.server, diagnosed)));
        }
        let (after, known) = before.unwrap_or((0, false));
        let wait = if known { long } else { self.diagnostics_wait };
        let came = connection
            .wait_for_diagnostics(&opened.uri, after, wait)
            .await;
        self.screen()?;
        let diagnosed = connection
            .diagnostics(&opened.uri)
            .filter(|_| came)
            .map_or(Diagnosed::Nothing(wait), Diagnosed::Published);
        Ok(Some((opened.server, diagnosed)))
    }

    /// The running server of `slot`, started (or started again) if needed.
    async fn running(&self, slot: &Slot, state: &mut SlotState) -> Result<Arc<Connection>, String> {
        if let Some(why) = &state.refused {
            return Err(why.clone());
        }
        if let Some(connection) = &state.running {
            match connection.closed() {
                None => return Ok(connection.clone()),
                Some(why) => {
                    state.crashes += 1;
                    state.last_crash = Some((Instant::now(), why));
                    state.running = None;
                    state.documents.clear();
                }
            }
        }
        let name = &slot.spec.name;
        if let Some((at, why)) = &state.last_crash {
            if !slot.spec.restart_on_crash {
                return Err(format!(
                    "language server {name} stopped ({why}) and its definition says not to restart it"
                ));
            }
            if state.crashes > slot.spec.max_restarts {
                return Err(format!(
                    "language server {name} stopped {} times, the last time: {why}; it is not started again in this session",
                    state.crashes
                ));
            }
            if state.crashes > 1 {
                let wait = BACKOFF * 2u32.saturating_pow(state.crashes - 2);
                let ready = *at + wait;
                let now = Instant::now();
                if now < ready {
                    return Err(format!(
                        "language server {name} stopped ({why}); it starts again in {} s",
                        (ready - now).as_secs() + 1
                    ));
                }
            }
        }
        let base = match &self.grants {
            Ok(grants) => grants.clone(),
            Err(why) => {
                let why = format!("language servers cannot run here: {why}");
                state.refused = Some(why.clone());
                return Err(why);
            }
        };
        let grants = server_grants(&slot.spec, base);
        #[cfg(target_os = "linux")]
        if let Some(gap) = crate::exec::sandbox_gap(&grants) {
            let why =
                format!("a language server runs only inside the whole OS sandbox, and here {gap}");
            state.refused = Some(why.clone());
            return Err(why);
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = grants;
            let why = format!(
                "language servers need the OS sandbox, which runs only on Linux for now ({} does not have it)",
                std::env::consts::OS
            );
            state.refused = Some(why.clone());
            return Err(why);
        }
        #[cfg(target_os = "linux")]
        {
            if let Some(missing) = slot.spec.missing_program() {
                let why = format!("language server {name} cannot start: {missing}");
                state.refused = Some(why.clone());
                return Err(why);
            }
            match Connection::start(&slot.spec, grants, &self.workspace).await {
                Ok(connection) => {
                    state.running = Some(connection.clone());
                    Ok(connection)
                }
                Err(why) => {
                    state.crashes += 1;
                    let why = format!("language server {name} did not start: {why}");
                    state.last_crash = Some((Instant::now(), why.clone()));
                    Err(why)
                }
            }
        }
    }

    /// `path` as shown: relative to the workspace when inside it.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.workspace) {
            Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
            _ => path.display().to_string(),
        }
    }

    /// Stops every running server — a `shutdown` request and `exit`, then
    /// its process tree once [`STOP_GRACE`] has passed — and waits (that
    /// long at most) until they have ended.
    pub fn shutdown(&self) {
        let stopping = self.stop_running();
        let deadline = Instant::now() + STOP_GRACE + Duration::from_millis(200);
        while stopping.iter().any(|c| c.closed().is_none()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl LspServers {
    /// Asks every running server to stop (see [`LspServers::shutdown`])
    /// without waiting; returns them.
    fn stop_running(&self) -> Vec<Arc<Connection>> {
        let mut stopping = Vec::new();
        for slot in &self.slots {
            if let Ok(mut state) = slot.state.try_lock()
                && let Some(connection) = state.running.take()
            {
                connection.stop();
                stopping.push(connection);
            }
        }
        stopping
    }
}

impl Drop for LspServers {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// What a server gets: the session's base with the workspace read-only,
/// its plugin's folder readable, no network, no variables but its own.
fn server_grants(spec: &LspServerSpec, mut grants: ExecGrants) -> ExecGrants {
    grants.write.clear();
    grants.net.clear();
    grants.env.clear();
    if let Some(root) = &spec.plugin_root
        && let Ok(root) = root.canonicalize()
    {
        grants.read.push(root);
    }
    if let Some(audit) = &mut grants.audit {
        *audit = crate::audit::AuditScope::new(
            audit.log.clone(),
            &format!("lsp__{}", spec.name),
            "",
            None,
        );
    }
    grants
}

/// Why no server may run over `workspace`, if a file or folder in it is
/// one `denied` says the rules deny reading (its path, or for a symbolic
/// link the path it leads to), or if it holds more than
/// [`MAX_SCREENED_ENTRIES`] to check. Links are not followed into folders:
/// what they lead to inside the workspace is checked where it is.
fn denied_file_in(
    workspace: &Path,
    denied: &(dyn Fn(&Path) -> bool + Send + Sync),
) -> Option<String> {
    let found = "language servers are off for the rest of this session: the workspace holds a file your rules deny reading, and a language server reads every file of the workspace, so its answers (hover text, diagnostics, symbols) could quote it; move that file out of the workspace, or drop the rule, and start a new session".to_string();
    let mut seen = 0usize;
    let mut folders = vec![workspace.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_SCREENED_ENTRIES {
                return Some(format!(
                    "language servers are off for this session: your rules deny reading some files, and the workspace holds more than {MAX_SCREENED_ENTRIES} files and folders, too many to check that none of them is one a language server (which reads every file) could quote"
                ));
            }
            let path = entry.path();
            if denied(&path) {
                return Some(found);
            }
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => folders.push(path),
                Ok(kind)
                    if kind.is_symlink() && path.canonicalize().is_ok_and(|real| denied(&real)) =>
                {
                    return Some(found);
                }
                _ => {}
            }
        }
    }
    None
}

/// The text of `path`, capped.
fn read_document(path: &Path) -> Result<Arc<str>, String> {
    let meta =
        std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a file", path.display()));
    }
    if meta.len() > MAX_DOCUMENT {
        return Err(format!(
            "{} is larger than {} MiB, more than is sent to a language server",
            path.display(),
            MAX_DOCUMENT >> 20
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(Arc::from(String::from_utf8_lossy(&bytes).into_owned()))
}

/// Position `value` of an LSP answer (`{"line": l, "character": c}`,
/// 0-based, UTF-16) as 1-based line and character (Unicode scalar values)
/// of `text` when known.
pub fn one_based(value: &Value, text: Option<&str>) -> (u64, u64) {
    let line = value.get("line").and_then(Value::as_u64).unwrap_or(0);
    let unit = value.get("character").and_then(Value::as_u64).unwrap_or(0);
    let character = text
        .and_then(|t| t.lines().nth(line as usize))
        .map_or(unit, |l| chars_for_units(l, unit));
    (line + 1, character + 1)
}

/// How many characters of `line` its first `units` UTF-16 units are.
fn chars_for_units(line: &str, units: u64) -> u64 {
    let mut seen = 0u64;
    let mut chars = 0u64;
    for c in line.chars() {
        if seen >= units {
            break;
        }
        seen += c.len_utf16() as u64;
        chars += 1;
    }
    chars
}

/// The 0-based UTF-16 position of 1-based `line` and `character` in
/// `text`.
pub fn lsp_position(text: &str, line: u64, character: u64) -> Value {
    let line0 = line.saturating_sub(1);
    let units = text.lines().nth(line0 as usize).map_or(0, |l| {
        l.chars()
            .take(character.saturating_sub(1) as usize)
            .map(|c| c.len_utf16() as u64)
            .sum::<u64>()
    });
    json!({"line": line0, "character": units})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_convert_between_characters_and_utf16_units() {
        let text = "a\n😀x = 1\n";
        let pos = lsp_position(text, 2, 2);
        assert_eq!(pos, json!({"line": 1, "character": 2}));
        assert_eq!(one_based(&pos, Some(text)), (2, 2));
        assert_eq!(one_based(&json!({"line": 0, "character": 0}), None), (1, 1));
    }
}
