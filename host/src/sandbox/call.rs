//! One call into a plugin: a fresh store and instance, grants wired in as
//! WASI, limits armed, and every way it can end turned into a typed result.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::{ResourceTable, ResourceTableError};
use wasmtime::{Store, Trap, UpdateDeadline};
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi_http::{FieldMapError, WasiHttpCtx};

use super::error::CallError;
use super::events::{EventSink, LogLevel, PluginEvent, ReportBudget};
use super::limits::{Limits, MemoryCap};
use super::state::{CallOptions, CallState, FileIo};

/// How often the deadline clock ticks. A call overrunning its time limit is
/// stopped within about one tick.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// How much of a plugin's stdout and stderr is kept.
const CAPTURE_LIMIT: usize = 64 << 10;

/// A store ready for one call, with the plugin's captured output.
pub(super) struct PreparedCall {
    pub store: Store<CallState>,
    watch: CallWatch,
}

/// What is needed to turn the way a call ended into its result, apart
/// from its store: a call abandoned at its deadline while stuck in the host
/// ends without it.
pub(super) struct CallWatch {
    plugin: Arc<str>,
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
    limits: Limits,
    events: Option<EventSink>,
    audit: Option<crate::audit::AuditScope>,
    /// Where the store goes when the call is over, if not dropped here.
    retirer: Option<Retire>,
}

/// Takes a finished call's store, to drop it off the caller's path
/// ([`super::warm`]).
pub(super) type Retire = Box<dyn FnOnce(Store<CallState>) + Send>;

/// How a call run on a task of its own ended: its store and its outcome,
/// or, when it did not end within its wall-clock limit, nothing — the task
/// was abandoned (see [`super::Sandbox`]'s `in_fresh_instance`).
pub(super) type Ended<R> = Result<(Store<CallState>, wasmtime::Result<R>), Abandoned>;

/// A call that did not end within its wall-clock limit, left behind.
pub(super) enum Abandoned {
    /// The limit passed.
    Deadline,
    /// The task running it failed (a panic in the host).
    Failed(String),
}

impl PreparedCall {
    /// Builds a fresh store for `plugin` with the call's grants and limits.
    pub fn new(
        engine: &wasmtime::Engine,
        plugin: &Arc<str>,
        call_id: &str,
        options: &CallOptions,
        file_io: FileIo,
    ) -> Result<Self, CallError> {
        let mut store = Store::new(engine, CallState::placeholder(plugin));
        store.limiter(|state| &mut state.memory);
        Self::adopt(store, plugin, call_id, options, file_io)
    }

    /// Gives a store the call's grants, limits and deadline, in place of
    /// what it had: a fresh store's placeholder, or the empty context an
    /// instance made ahead ([`super::warm`]) was made with. What the store
    /// already holds counts against the call's memory limit.
    pub fn adopt(
        mut store: Store<CallState>,
        plugin: &Arc<str>,
        call_id: &str,
        options: &CallOptions,
        file_io: FileIo,
    ) -> Result<Self, CallError> {
        let used = store.data().memory.used();
        let (state, stdout, stderr) = call_state(plugin, call_id, options, file_io, used)?;
        let watch = CallWatch {
            plugin: plugin.clone(),
            stdout,
            stderr,
            limits: options.limits,
            events: state.events.clone(),
            audit: state.audit.clone(),
            retirer: None,
        };
        *store.data_mut() = state;
        arm_deadline(&mut store, options.limits.timeout);
        Ok(Self { store, watch })
    }

    /// Hands the store to `retirer` when the call is over.
    pub fn retire_to(&mut self, retirer: Retire) {
        self.watch.retirer = Some(retirer);
    }

    /// The store, for an instance made ahead of its call.
    pub fn into_store(self) -> Store<CallState> {
        self.store
    }

    /// The store, to run the call in, and what settles the call once it
    /// has ended.
    pub fn into_parts(self) -> (Store<CallState>, CallWatch) {
        (self.store, self.watch)
    }
}

impl CallWatch {
    /// The wall-clock bound for the whole call. The epoch deadline stops
    /// running code; this also covers time spent waiting in the host.
    pub fn wall_clock_limit(&self) -> Duration {
        self.limits.timeout + EPOCH_TICK * 5
    }

    /// Turns the way a call ended into its result, forwarding what the
    /// plugin printed as debug log lines.
    pub fn settle<R>(mut self, ended: Ended<R>) -> Result<R, CallError> {
        let (store, outcome) = match ended {
            Ok((store, outcome)) => (Some(store), Ok(outcome)),
            Err(abandoned) => (None, Err(abandoned)),
        };
        let mut result = self.result(store.as_ref().map(Store::data), outcome);
        if let Some(audit) = &self.audit
            && let Err(error) = audit.close()
        {
            result = Err(CallError::Failed(format!(
                "{error}; the call's capability decisions could not all be recorded, so its result is withheld"
            )));
        }
        if let (Some(retirer), Some(store)) = (self.retirer.take(), store) {
            retirer(store);
        }
        result
    }

    fn result<R>(
        &self,
        state: Option<&CallState>,
        outcome: Result<wasmtime::Result<R>, Abandoned>,
    ) -> Result<R, CallError> {
        let plugin = self.plugin.to_string();
        let stderr = String::from_utf8_lossy(&self.stderr.contents()).into_owned();
        self.forward_output(state, &stderr);
        let err = match outcome {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(err)) => err,
            Err(Abandoned::Deadline) => {
                return Err(CallError::Timeout {
                    plugin,
                    limit: self.limits.timeout,
                });
            }
            Err(Abandoned::Failed(reason)) => {
                return Err(CallError::Crashed {
                    plugin,
                    reason,
                    stderr,
                });
            }
        };
        if state.is_some_and(|state| state.memory.was_hit()) {
            return Err(CallError::MemoryLimit {
                plugin,
                limit: self.limits.memory,
            });
        }
        // What the host holds for the plugin is bounded too (see
        // `call_state`); running into those bounds traps.
        for cause in err.chain() {
            if let Some(ResourceTableError::Full) = cause.downcast_ref::<ResourceTableError>() {
                return Err(CallError::HostResources {
                    plugin,
                    limit: self.limits.host_resources(),
                    memory: self.limits.memory,
                });
            }
            if let Some(FieldMapError::TotalSizeTooBig | FieldMapError::TooManyFields) =
                cause.downcast_ref::<FieldMapError>()
            {
                return Err(CallError::HeadersTooLarge {
                    plugin,
                    limit: Limits::FIELDS_BYTES,
                });
            }
        }
        match err.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => Err(CallError::Timeout {
                plugin,
                limit: self.limits.timeout,
            }),
            Some(trap) => {
                let reason = if stderr.contains("panicked at") {
                    "it panicked".to_string()
                } else {
                    format!("{trap}")
                };
                Err(CallError::Crashed {
                    plugin,
                    reason,
                    stderr,
                })
            }
            None => Err(CallError::Crashed {
                plugin,
                reason: format!("{err:#}"),
                stderr,
            }),
        }
    }

    fn forward_output(&self, state: Option<&CallState>, stderr: &str) {
        let Some(sink) = &self.events else {
            return;
        };
        let plugin = &self.plugin;
        if let Some(notice) = state.and_then(|state| state.reports.dropped_notice()) {
            sink(plugin, notice);
        }
        let stdout = self.stdout.contents();
        for (stream, text) in [
            ("stdout", String::from_utf8_lossy(&stdout).as_ref()),
            ("stderr", stderr),
        ] {
            if !text.trim().is_empty() {
                sink(
                    plugin,
                    PluginEvent::Log {
                        level: LogLevel::Debug,
                        message: format!("{stream}: {}", text.trim_end()),
                    },
                );
            }
        }
    }
}

/// The state of a store for one call of `plugin` under `options`, with the
/// pipes capturing its output. `used` bytes of memory are already held.
fn call_state(
    plugin: &Arc<str>,
    call_id: &str,
    options: &CallOptions,
    file_io: FileIo,
    used: u64,
) -> Result<(CallState, MemoryOutputPipe, MemoryOutputPipe), CallError> {
    let stdout = MemoryOutputPipe::new(CAPTURE_LIMIT);
    let stderr = MemoryOutputPipe::new(CAPTURE_LIMIT);
    let recorded_as = options
        .call_id
        .as_deref()
        .filter(|id| !id.is_empty())
        .unwrap_or(call_id);
    let audit = options.audit.clone().map(|log| {
        crate::audit::AuditScope::new(log, plugin, recorded_as, options.session_id.as_deref())
    });
    let mut builder = WasiCtxBuilder::new();
    builder.stdout(stdout.clone()).stderr(stderr.clone());
    let wasi = options
        .grants
        .wire(builder, audit.as_ref(), file_io == FileIo::CurrentThread)
        .map_err(|e| CallError::Setup {
            plugin: plugin.to_string(),
            reason: e.to_string(),
        })?;
    // What the plugin can make the host hold for it is bounded by its
    // memory limit: so many resources, each HTTP fields object so large.
    let mut table = ResourceTable::new();
    table.set_max_capacity(options.limits.host_resources());
    let mut http = WasiHttpCtx::new();
    http.set_field_size_limit(Limits::FIELDS_BYTES);
    let state = CallState {
        wasi,
        table,
        memory: MemoryCap::holding(options.limits.memory, used),
        plugin: plugin.clone(),
        events: options.events.clone(),
        reports: ReportBudget::default(),
        audit,
        http,
        net: options.grants.net_hooks(),
        grants: options.grants.clone(),
        deadline: std::time::Instant::now() + options.limits.timeout,
        touched: false,
    };
    Ok((state, stdout, stderr))
}

/// Arms the call's deadline: every tick the guest is still running, it
/// yields to the executor, so other tasks run and a caller that stops
/// waiting (the user pressed Ctrl-C) drops the call at once. When the
/// budget is spent the call traps, which `settle` reports as a timeout.
fn arm_deadline(store: &mut Store<CallState>, timeout: Duration) {
    let ticks = timeout.as_millis().div_ceil(EPOCH_TICK.as_millis()).max(1);
    let budget = u64::try_from(ticks).unwrap_or(u64::MAX);
    let mut spent = 0u64;
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        spent += 1;
        if spent >= budget {
            Ok(UpdateDeadline::Interrupt)
        } else {
            Ok(UpdateDeadline::Yield(1))
        }
    });
}
