//! The state of one call's store: what the call is allowed
//! ([`CallOptions`]), the plugin's WASI view of the world and the host's
//! bookkeeping ([`CallState`]). A leaf: the host interfaces implemented on
//! it ([`super::host_api`], [`super::fs_audit`]) and the call lifecycle
//! ([`super::call`], [`super::warm`]) depend on it, not it on them.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::events::{EventSink, ReportBudget};
use super::limits::{Limits, MemoryCap};
use crate::grants::Grants;
use crate::grants::net::NetHooks;

/// Where the host serves a plugin's file operations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FileIo {
    /// On the thread running the call. File operations are short local-disk
    /// calls, and this avoids a hop to another thread per operation, which
    /// otherwise dominates the cost of a small tool call. What could block
    /// for ever — opening a named pipe or a device — is refused before it
    /// is opened ([`crate::grants::fs::openable`]). The default.
    #[default]
    CurrentThread,
    /// On tokio's blocking pool, one hop per operation. Slower, but a call
    /// stuck in a file operation (a hung network mount) cannot hold up the
    /// thread, so its deadline still ends it.
    BlockingPool,
}

/// What a call is allowed, besides the tool name and input.
#[derive(Clone, Default)]
pub struct CallOptions {
    /// What the call may touch.
    pub grants: Grants,
    /// Memory, time and output limits.
    pub limits: Limits,
    /// The agent session making the call, if any.
    pub session_id: Option<String>,
    /// Where log lines and progress reports go.
    pub events: Option<EventSink>,
    /// Where capability decisions are recorded, if anywhere.
    pub audit: Option<crate::audit::AuditLog>,
    /// The id the call's records carry: the tool call's (the model's
    /// tool-use id) when the caller knows it, else the sandbox's own id
    /// for the call.
    pub call_id: Option<String>,
}

impl CallOptions {
    /// What a call that only asks a component what it offers (its tools,
    /// its hook subscriptions, its skills) gets: no grants, and 10 s.
    pub fn listing() -> Self {
        Self {
            limits: Limits {
                timeout: std::time::Duration::from_secs(10),
                ..Limits::default()
            },
            ..Self::default()
        }
    }
}

/// The state of one store: the plugin's WASI view of the world and the
/// host's bookkeeping for the call.
pub struct CallState {
    pub(super) wasi: WasiCtx,
    pub(super) table: ResourceTable,
    pub(super) memory: MemoryCap,
    pub(super) plugin: Arc<str>,
    pub(super) events: Option<EventSink>,
    /// The log lines and progress reports sent so far.
    pub(super) reports: ReportBudget,
    /// Where this call's capability decisions are recorded.
    pub(crate) audit: Option<crate::audit::AuditScope>,
    pub(super) http: WasiHttpCtx,
    pub(super) net: NetHooks,
    /// What the call may touch, for host interfaces that decide each
    /// request (`capstan:plugin/exec`).
    pub(super) grants: Grants,
    /// When the call must be over.
    pub(super) deadline: std::time::Instant,
    /// Whether the guest has called into the host through this state.
    pub(super) touched: bool,
}

impl CallState {
    /// The network requests the call's grants refused so far.
    pub(crate) fn net_refusals(&self) -> Vec<crate::grants::net::Refusal> {
        self.net.refusals()
    }

    /// A state granting nothing, replaced before the store is used.
    pub(super) fn placeholder(plugin: &Arc<str>) -> Self {
        Self {
            wasi: WasiCtxBuilder::new().build(),
            table: ResourceTable::new(),
            memory: MemoryCap::new(0),
            plugin: plugin.clone(),
            events: None,
            reports: ReportBudget::default(),
            audit: None,
            http: WasiHttpCtx::new(),
            net: NetHooks::new(&[], &[]),
            grants: Grants::none(),
            deadline: std::time::Instant::now(),
            touched: false,
        }
    }

    /// Whether the guest has called into the host (WASI, HTTP, capstan's
    /// host interface) through this state.
    pub(super) fn touched_host(&self) -> bool {
        self.touched
    }

    /// Notes a call into the host.
    pub(crate) fn touch(&mut self) {
        self.touched = true;
    }

    /// Bytes of linear memory the guest holds.
    pub(super) fn memory_used(&self) -> u64 {
        self.memory.used()
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        self.touched = true;
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Outgoing HTTP goes through the call's network grants
/// ([`crate::grants::net`]).
impl WasiHttpView for CallState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        self.touched = true;
        if self.net.audit.is_none() && self.audit.is_some() {
            self.net.audit = self.audit.clone();
        }
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.net,
        }
    }
}
