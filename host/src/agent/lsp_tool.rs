//! The host's `lsp` tool: code intelligence from the session's language
//! servers ([`crate::lsp`]), with Claude Code's LSP tool's operations —
//! `goToDefinition`, `findReferences`, `hover`, `documentSymbol`,
//! `workspaceSymbol`, `goToImplementation`, `prepareCallHierarchy`,
//! `incomingCalls`, `outgoingCalls` — on a file of the workspace and a
//! 1-based line and character. It changes nothing (read-only for the
//! scheduler and the policy), and each request is an `lsp_request` audit
//! record. Results in files the session's rules deny reading (`Read(…)`,
//! `fs.read(…)` or `lsp(…)` deny rules) are left out and counted, as the
//! `fs` tools would refuse to read those files; and no server runs, nor
//! does any answer of one reach the model, while the workspace holds such
//! a file, since a server's text could quote it ([`crate::lsp::servers`]).
//!
//! It is also the session's [`FileWatch`]: a file a tool reads is opened
//! on its server in the background, and after a tool changes one the
//! server's new diagnostics (errors first, capped) are added to that
//! tool's result, as Claude Code does.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use futures_util::future::LocalBoxFuture;
use serde_json::{Value, json};

use super::tool::{FileWatch, ToolCall, ToolHandler, ToolOutcome};
use crate::audit::{AuditEvent, AuditScope};
use crate::lsp::LspServers;
use crate::lsp::render::{self, Files};
use crate::lsp::servers::{Diagnosed, REQUEST_TIMEOUT, lsp_position};
use crate::sandbox::{CallError, ToolSpec};

/// The tool's name.
pub const TOOL_NAME: &str = "lsp";

/// The most diagnostics added to a result.
const MAX_DIAGNOSTICS_SHOWN: usize = 20;

/// The operations, as Claude Code names them.
const OPERATIONS: [&str; 9] = [
    "goToDefinition",
    "findReferences",
    "hover",
    "documentSymbol",
    "workspaceSymbol",
    "goToImplementation",
    "prepareCallHierarchy",
    "incomingCalls",
    "outgoingCalls",
];

/// The `lsp` tool over a session's servers.
pub struct LspTool {
    servers: Arc<LspServers>,
    spec: ToolSpec,
}

impl LspTool {
    /// The tool asking `servers`.
    pub fn new(servers: Arc<LspServers>) -> Self {
        let mut languages: Vec<String> = servers
            .specs()
            .flat_map(|s| s.extensions.keys().cloned())
            .collect();
        languages.sort();
        languages.dedup();
        let description = format!(
            "Code intelligence from language servers, for files of these kinds: {}.\n\
             Operations: goToDefinition (where a symbol is defined), findReferences (every use of a symbol), \
             hover (its type and documentation), documentSymbol (the symbols of a file), \
             workspaceSymbol (symbols of the workspace matching `query`), goToImplementation \
             (implementations of an interface or abstract method), prepareCallHierarchy (the \
             callable item at a position), incomingCalls (what calls it), outgoingCalls (what it \
             calls).\nGive `filePath` (relative to the workspace) and, for the operations on a \
             symbol, its 1-based `line` and `character` as an editor shows them. Results give \
             locations as path:line:character.",
            languages.join(", ")
        );
        Self {
            servers,
            spec: ToolSpec {
                name: TOOL_NAME.to_string(),
                description,
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "operation": {"type": "string", "enum": OPERATIONS,
                                      "description": "The LSP operation to perform"},
                        "filePath": {"type": "string",
                                     "description": "The file, relative to the workspace or absolute"},
                        "line": {"type": "integer", "minimum": 1,
                                 "description": "The line number, 1-based"},
                        "character": {"type": "integer", "minimum": 1,
                                      "description": "The character offset on the line, 1-based"},
                        "query": {"type": "string",
                                  "description": "For workspaceSymbol: the name (or part of it) to look for"}
                    },
                    "required": ["operation", "filePath"],
                    "additionalProperties": false
                }),
                read_only: true,
                destructive: false,
                idempotent: true,
                open_world: false,
            },
        }
    }

    /// The absolute path of `file` (relative to the workspace or
    /// absolute), which must be a file inside the workspace.
    fn resolve(&self, file: &str) -> Result<PathBuf, CallError> {
        let workspace = self.servers.workspace();
        let joined = if Path::new(file).is_absolute() {
            PathBuf::from(file)
        } else {
            workspace.join(file)
        };
        let real = joined.canonicalize().map_err(|e| {
            CallError::InvalidInput(format!("filePath {file}: cannot be read ({e})"))
        })?;
        if !real.starts_with(workspace) {
            return Err(CallError::Denied(format!(
                "filePath {file} is outside the workspace"
            )));
        }
        if !real.is_file() {
            return Err(CallError::InvalidInput(format!(
                "filePath {file} is not a file"
            )));
        }
        Ok(real)
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<String, CallError> {
        let input = call.input;
        let operation = input
            .get("operation")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                CallError::InvalidInput(format!(
                    "`operation` is required: one of {}",
                    OPERATIONS.join(", ")
                ))
            })?;
        if !OPERATIONS.contains(&operation) {
            return Err(CallError::InvalidInput(format!(
                "unknown operation `{operation}`: use one of {}",
                OPERATIONS.join(", ")
            )));
        }
        let file = input
            .get("filePath")
            .and_then(Value::as_str)
            .ok_or_else(|| CallError::InvalidInput("`filePath` is required".to_string()))?;
        let path = self.resolve(file)?;
        let needs_position = !matches!(operation, "documentSymbol" | "workspaceSymbol");
        let position_of = |name: &str| -> Result<u64, CallError> {
            input
                .get(name)
                .and_then(Value::as_u64)
                .filter(|n| *n >= 1)
                .ok_or_else(|| {
                    CallError::InvalidInput(format!(
                        "`{name}` (1-based) is required for {operation}"
                    ))
                })
        };
        let (line, character) = if needs_position {
            (position_of("line")?, position_of("character")?)
        } else {
            (0, 0)
        };
        let shown = self.servers.display(&path);
        let started = Instant::now();
        self.servers.screen().map_err(CallError::Denied)?;
        let opened = self
            .servers
            .open(&path, false)
            .await
            .map_err(CallError::Failed)?;
        let connection = opened.connection.clone();
        let text = opened.text.clone();
        let document = json!({"uri": opened.uri});
        let at = json!({
            "textDocument": document,
            "position": lsp_position(&text, line, character),
        });
        let method = match operation {
            "goToDefinition" => "textDocument/definition",
            "findReferences" => "textDocument/references",
            "hover" => "textDocument/hover",
            "documentSymbol" => "textDocument/documentSymbol",
            "workspaceSymbol" => "workspace/symbol",
            "goToImplementation" => "textDocument/implementation",
            "incomingCalls" => "callHierarchy/incomingCalls",
            "outgoingCalls" => "callHierarchy/outgoingCalls",
            _ => "textDocument/prepareCallHierarchy",
        };
        let params = match operation {
            "findReferences" => {
                let mut params = at.clone();
                params["context"] = json!({"includeDeclaration": true});
                params
            }
            "documentSymbol" => json!({"textDocument": document}),
            "workspaceSymbol" => json!({
                "query": input.get("query").and_then(Value::as_str).unwrap_or("")
            }),
            _ => at.clone(),
        };
        // The policy's workspace and the servers' (canonical) one may be
        // spelt differently; a rule of either reading covers a file.
        let denied = |file: &Path| {
            call.session.is_some_and(|session| {
                session.policy.denies_reading(file, &session.workspace)
                    || session
                        .policy
                        .denies_reading(file, self.servers.workspace())
            })
        };
        let mut files = Files::new(self.servers.workspace(), Some((&path, &text))).denying(&denied);
        let answer = async {
            if matches!(operation, "incomingCalls" | "outgoingCalls") {
                let items = connection
                    .request(
                        "textDocument/prepareCallHierarchy",
                        at.clone(),
                        REQUEST_TIMEOUT,
                    )
                    .await?;
                let Some(item) = items.as_array().and_then(|a| a.first()).cloned() else {
                    return Ok(None);
                };
                connection
                    .request(method, json!({ "item": item }), REQUEST_TIMEOUT)
                    .await
                    .map(Some)
            } else {
                connection
                    .request(method, params, REQUEST_TIMEOUT)
                    .await
                    .map(Some)
            }
        }
        .await;
        self.record(
            call,
            opened.server.as_str(),
            method,
            &shown,
            &answer,
            started,
        );
        let answer = answer.map_err(|why| {
            CallError::Failed(format!("language server {}: {why}", opened.server))
        })?;
        // Nothing of a server's answer is passed on once the workspace
        // holds a file the rules deny reading (see `crate::lsp::servers`).
        self.servers.screen().map_err(CallError::Denied)?;
        let Some(answer) = answer else {
            return Ok("No callable item (function or method) at this position.".to_string());
        };
        let text = match operation {
            "goToDefinition" => render::locations(&answer, &mut files, "definition"),
            "goToImplementation" => render::locations(&answer, &mut files, "implementation"),
            "findReferences" => render::locations(&answer, &mut files, "reference"),
            "hover" => render::hover(&answer),
            "documentSymbol" => render::document_symbols(&answer, &mut files, &opened.uri),
            "workspaceSymbol" => render::symbols(
                answer.as_array().map_or(&[][..], Vec::as_slice),
                &mut files,
                "No symbols found.",
            ),
            "prepareCallHierarchy" => render::symbols(
                answer.as_array().map_or(&[][..], Vec::as_slice),
                &mut files,
                "No callable item (function or method) at this position.",
            ),
            _ => {
                let key = if operation == "incomingCalls" {
                    "from"
                } else {
                    "to"
                };
                let items: Vec<Value> = answer
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|call| call.get(key).cloned())
                    .collect();
                render::symbols(
                    &items,
                    &mut files,
                    if operation == "incomingCalls" {
                        "No calls to it found."
                    } else {
                        "No calls from it found."
                    },
                )
            }
        };
        Ok(match files.left_out_note() {
            Some(note) => format!("{text}\n{note}"),
            None => text,
        })
    }

    fn record(
        &self,
        call: &ToolCall<'_>,
        server: &str,
        method: &str,
        file: &str,
        answer: &Result<Option<Value>, String>,
        started: Instant,
    ) {
        let Some(log) = call.audit.cloned().or_else(|| self.servers.audit_log()) else {
            return;
        };
        let scope = AuditScope::new(
            log.clone(),
            &format!("lsp__{server}"),
            call.call_id,
            call.session_id,
        );
        scope.record(AuditEvent::LspRequest {
            method: method.to_string(),
            file: file.to_string(),
            outcome: match answer {
                Ok(_) => "ok".to_string(),
                Err(why) => crate::front_matter::clip(why.clone(), 300),
            },
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        });
    }
}

impl ToolHandler for LspTool {
    fn name(&self) -> &str {
        TOOL_NAME
    }

    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call<'a>(&'a self, call: ToolCall<'a>) -> LocalBoxFuture<'a, ToolOutcome> {
        Box::pin(async move { self.run(&call).await.into() })
    }
}

/// Tells the session's language servers of the files tools read and
/// change.
pub struct LspFileWatch {
    servers: Arc<LspServers>,
}

impl LspFileWatch {
    /// The watch feeding `servers`.
    pub fn new(servers: Arc<LspServers>) -> Self {
        Self { servers }
    }
}

impl FileWatch for LspFileWatch {
    fn touched<'a>(&'a self, path: &'a str, changed: bool) -> LocalBoxFuture<'a, Option<String>> {
        Box::pin(async move {
            let workspace = self.servers.workspace();
            let joined = workspace.join(path);
            let real = joined.canonicalize().ok()?;
            if !real.starts_with(workspace) || !self.servers.serves(&real) {
                return None;
            }
            if !changed {
                let servers = self.servers.clone();
                tokio::spawn(async move {
                    let _ = servers.open(&real, false).await;
                });
                return None;
            }
            let (server, diagnosed) = self.servers.changed(&real).await.ok()??;
            let file = self.servers.display(&real);
            match diagnosed {
                Diagnosed::Published(published) => {
                    diagnostics_note(&file, &server, &published.items, published.total)
                }
                Diagnosed::Nothing(waited) => Some(format!(
                    "Language server {server} published no diagnostics for {file} within {} of this change; its errors, if any, are not known ([lsp] diagnostics_wait in the config sets how long to wait).",
                    crate::quantity::TimeSpan(waited)
                )),
                Diagnosed::Failed(why) => Some(format!(
                    "Language server {server} gave no diagnostics for {file} after this change: {}",
                    crate::escape::line(&why)
                )),
            }
        })
    }

    fn session_ended(&self) {
        self.servers.shutdown();
    }
}

/// The diagnostics of `file` as a note for the model: errors first, then
/// warnings, information and hints, at most [`MAX_DIAGNOSTICS_SHOWN`];
/// `None` when there are none.
pub fn diagnostics_note(file: &str, server: &str, items: &[Value], total: usize) -> Option<String> {
    if items.is_empty() {
        return None;
    }
    let severity = |d: &Value| d.get("severity").and_then(Value::as_u64).unwrap_or(1);
    let mut sorted: Vec<&Value> = items.iter().collect();
    sorted.sort_by_key(|d| {
        (
            severity(d),
            d.pointer("/range/start/line").and_then(Value::as_u64),
        )
    });
    let count = |s: u64| items.iter().filter(|d| severity(d) == s).count();
    let mut counts = Vec::new();
    for (s, one, many) in [(1, "error", "errors"), (2, "warning", "warnings")] {
        let n = count(s);
        if n > 0 {
            counts.push(format!("{n} {}", if n == 1 { one } else { many }));
        }
    }
    let others = count(3) + count(4);
    if others > 0 {
        counts.push(format!("{others} notes"));
    }
    let mut note = format!(
        "Diagnostics from language server {server} for {file} after this change ({}):",
        counts.join(", ")
    );
    for d in sorted.iter().take(MAX_DIAGNOSTICS_SHOWN) {
        let line = d
            .pointer("/range/start/line")
            .and_then(Value::as_u64)
            .unwrap_or(0)
            + 1;
        let character = d
            .pointer("/range/start/character")
            .and_then(Value::as_u64)
            .unwrap_or(0)
            + 1;
        let label = match severity(d) {
            1 => "error",
            2 => "warning",
            3 => "info",
            _ => "hint",
        };
        let message = d.get("message").and_then(Value::as_str).unwrap_or("");
        let message: String = message.split_whitespace().collect::<Vec<_>>().join(" ");
        let code = match d.get("code") {
            Some(Value::String(c)) => format!(" [{c}]"),
            Some(Value::Number(n)) => format!(" [{n}]"),
            _ => String::new(),
        };
        note.push_str(&format!(
            "\n  {file}:{line}:{character} {label}: {}{}",
            crate::escape::line(&crate::front_matter::clip(message, 300)),
            crate::escape::line(&code)
        ));
    }
    let shown = sorted.len().min(MAX_DIAGNOSTICS_SHOWN);
    if total > shown {
        note.push_str(&format!("\n  … and {} more", total - shown));
    }
    Some(note)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagnostics_put_errors_first_and_are_capped() {
        let mut items = vec![json!({"severity": 2, "message": "unused x",
                                    "range": {"start": {"line": 0, "character": 0}}})];
        for i in 0..30 {
            items.push(
                json!({"severity": 1, "message": format!("bad {i}"), "code": "E1",
                              "range": {"start": {"line": i, "character": 2}}}),
            );
        }
        let note = diagnostics_note("a.py", "fake", &items, 31).unwrap();
        let lines: Vec<&str> = note.lines().collect();
        assert!(lines[0].contains("(30 errors, 1 warning)"), "{note}");
        assert_eq!(lines[1], "  a.py:1:3 error: bad 0 [E1]");
        assert_eq!(lines.len(), 1 + MAX_DIAGNOSTICS_SHOWN + 1);
        assert_eq!(lines.last().unwrap(), &"  … and 11 more");
        assert!(diagnostics_note("a.py", "fake", &[], 0).is_none());
    }
}
