//! The WebAssembly sandbox: one engine, compiled components cached on disk,
//! and a fresh, limited instance for every call.
//!
//! A plugin can reach only what its [`Grants`](crate::grants::Grants) wire
//! into its WASI context: no environment variables but those granted, HTTP
//! only to granted origins (checked by [`crate::grants::net`]), and no
//! sockets. Whatever it does — loop forever, allocate without end, panic,
//! return a flood — ends as a [`CallError`], never as a failure of the host.

mod bindings;
pub mod builtin;
mod call;
pub mod compile_cache;
pub mod engine;
mod engine_config;
pub mod error;
pub mod events;
mod exec_api;
mod fs_audit;
mod fs_protect;
pub mod hook;
pub mod host_api;
pub mod limits;
pub mod precompiled;
pub mod rest;
pub mod skill;
mod state;
pub mod tool;
mod warm;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use wasmtime::Engine;

use crate::grants::OwnFolders;
use crate::home::Home;
use crate::sandbox::builtin::BuiltinPlugin;
use wasmtime::component::{HasSelf, Linker};

use bindings::hook_world::HookPluginPre;
use bindings::{ToolPlugin, ToolPluginPre};
pub use call::EPOCH_TICK;
pub use compile_cache::{CacheKey, CacheOutcome, CompileCache};
pub use error::{CallError, LoadError};
pub use events::{EventSink, LogLevel, PluginEvent};
pub use limits::Limits;
pub use skill::SkillComponent;
pub use state::{CallOptions, CallState, FileIo};
pub use tool::{Content, ToolOutput, ToolSpec};

use call::{Abandoned, PreparedCall};
use futures_util::future::BoxFuture;
pub use rest::KeepWarm;
use rest::{Linked, Relink, Resident, Rest};
use warm::{WarmSlot, Warmer};

/// A component compiled and linked, ready to be instantiated per call.
/// While the session idles its code may be parked and linked again when
/// needed ([`rest`]).
pub struct LoadedComponent {
    name: Arc<str>,
    sha256: String,
    offers_tools: bool,
    offers_hooks: bool,
    resident: Arc<Resident>,
    outcome: CacheOutcome,
    /// Why a built-in plugin's precompiled code could not be used.
    fallback: Option<String>,
}

impl LoadedComponent {
    /// Whether it exports `capstan:plugin/tool`.
    pub fn offers_tools(&self) -> bool {
        self.offers_tools
    }

    /// Whether it exports `capstan:plugin/hook`.
    pub fn offers_hooks(&self) -> bool {
        self.offers_hooks
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The SHA-256 of the component's bytes.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// Whether it came from the binary, the compile cache or was compiled
    /// now.
    pub fn cache_outcome(&self) -> CacheOutcome {
        self.outcome
    }

    /// For a built-in plugin compiled rather than loaded from the binary,
    /// why its precompiled code could not be used on this machine.
    pub fn precompiled_fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// Whether its code is parked while the session idles ([`rest`]).
    pub fn is_parked(&self) -> bool {
        self.resident.is_parked()
    }

    /// Its linked form, linked again from the compile cache if parked.
    fn linked(&self) -> Result<Linked, CallError> {
        self.resident.linked().map_err(|err| CallError::Setup {
            plugin: self.name.to_string(),
            reason: format!(
                "its compiled code, given back while the session was idle, could not be loaded again: {err}"
            ),
        })
    }

    fn tool_pre(&self, linked: &Linked) -> Result<ToolPluginPre<CallState>, CallError> {
        linked.tool.clone().ok_or_else(|| CallError::Setup {
            plugin: self.name.to_string(),
            reason: "it does not export capstan:plugin/tool@0.1.0".into(),
        })
    }
}

/// The engine, the linker with everything the host provides, and the
/// compile cache.
pub struct Sandbox {
    engine: Engine,
    linker: Arc<Linker<CallState>>,
    cache: Arc<CompileCache>,
    own: OwnFolders,
    file_io: FileIo,
    warmer: Warmer,
    rest: Arc<Rest>,
    /// Whether instances are made ahead of calls ([`warm`]); off for a
    /// command that makes one call and exits.
    make_ahead: bool,
    _ticker: EpochTicker,
}

impl Sandbox {
    /// Sets up the engine for `home`: compiled components cached in its
    /// compile cache, and no grant allowed to reach its folders.
    pub fn new(home: &Home) -> Result<Self, LoadError> {
        Self::with_reuse(home, engine::MemoryReuse::KeepResident)
    }

    /// A sandbox for a command that makes one call and exits: no instance
    /// made ahead ([`warm`]), which nobody would take, and finished
    /// instances' memory given back rather than reset for a next call.
    pub fn for_one_call(home: &Home) -> Result<Self, LoadError> {
        let mut sandbox = Self::with_reuse(home, engine::MemoryReuse::GiveBack)?;
        sandbox.make_ahead = false;
        Ok(sandbox)
    }

    fn with_reuse(home: &Home, reuse: engine::MemoryReuse) -> Result<Self, LoadError> {
        let cache_dir = home.compile_cache_dir();
        let engine = crate::startup::time("sandbox: engine", || engine::build_engine_with(reuse))?;
        let linking = std::time::Instant::now();
        let mut linker = Linker::new(&engine);
        let link_error = |e: wasmtime::Error| LoadError::Engine(format!("{e:#}"));
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(link_error)?;
        fs_audit::add_to_linker(&mut linker).map_err(link_error)?;
        fs_protect::add_to_linker(&mut linker).map_err(link_error)?;
        crate::grants::net::lookup::add_to_linker(&mut linker, |state: &mut CallState| {
            state.touch();
            state.audit.as_ref()
        })
        .map_err(link_error)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).map_err(link_error)?;
        ToolPlugin::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)
            .map_err(link_error)?;
        crate::startup::record("sandbox: host linker", "", linking);
        let key = CacheKey::load_or_create(&home.compile_cache_key())?;
        let cache = CompileCache::new(cache_dir, &engine, key);
        let ticker = EpochTicker::start(engine.clone())
            .map_err(|e| LoadError::Engine(format!("cannot start the deadline clock: {e}")))?;
        let rest = Arc::new(Rest::default());
        let resting = rest.clone();
        let warmer = Warmer::start(move || {
            resting.park_idle(rest::PARK_AFTER);
        })
        .map_err(|e| LoadError::Engine(format!("cannot start the warm-up thread: {e}")))?;
        Ok(Self {
            engine,
            linker: Arc::new(linker),
            cache: Arc::new(cache),
            own: OwnFolders::of(home),
            file_io: FileIo::default(),
            warmer,
            rest,
            make_ahead: true,
            _ticker: ticker,
        })
    }

    /// Chooses where plugins' file operations are served.
    pub fn set_file_io(&mut self, file_io: FileIo) {
        self.file_io = file_io;
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The compile cache.
    pub fn compile_cache(&self) -> &CompileCache {
        &self.cache
    }

    /// capstan's folders, which no grant made for this sandbox may reach.
    pub fn own_folders(&self) -> &OwnFolders {
        &self.own
    }

    /// Loads a plugin component that offers tools from its bytes: from the
    /// compile cache when possible, otherwise compiling and caching it.
    /// `sha256` may be given when already known (embedded components);
    /// `origin` names the bytes in errors (a file path, or "the built-in fs
    /// plugin").
    pub fn load(
        &self,
        name: &str,
        wasm: &[u8],
        sha256: Option<&str>,
        origin: &str,
    ) -> Result<LoadedComponent, LoadError> {
        let loaded = self.load_plugin(name, wasm, sha256, origin)?;
        if !loaded.offers_tools {
            return Err(LoadError::Incompatible {
                origin: origin.to_string(),
                reason: "it does not export the tool interface capstan:plugin/tool@0.1.0".into(),
            });
        }
        Ok(loaded)
    }

    /// Compiles `wasm` (or takes it from the compile cache) and links it
    /// against what the host provides: the linked component, its SHA-256
    /// (`sha256` when already known) and where it came from.
    fn link(
        &self,
        wasm: &[u8],
        sha256: Option<&str>,
        origin: &str,
    ) -> Result<
        (
            wasmtime::component::InstancePre<CallState>,
            String,
            CacheOutcome,
        ),
        LoadError,
    > {
        let sha256 = sha256.map_or_else(|| engine::sha256_hex(wasm), str::to_string);
        let (component, outcome) = self.cache.load(&self.engine, wasm, &sha256, origin)?;
        let pre = link_component(&self.linker, &component, origin)?;
        Ok((pre, sha256, outcome))
    }

    /// Loads a component that offers tools, hooks or both.
    pub fn load_plugin(
        &self,
        name: &str,
        wasm: &[u8],
        sha256: Option<&str>,
        origin: &str,
    ) -> Result<LoadedComponent, LoadError> {
        let loading = std::time::Instant::now();
        let (pre, sha256, outcome) = self.link(wasm, sha256, origin)?;
        crate::startup::record("component load", name, loading);
        let relink: Relink = {
            let (engine, linker, cache) =
                (self.engine.clone(), self.linker.clone(), self.cache.clone());
            let (sha256, origin) = (sha256.clone(), origin.to_string());
            Box::new(move || {
                let component = cache.load_compiled(&engine, &sha256, &origin)?;
                link_component(&linker, &component, &origin).map(split)
            })
        };
        let entry = self.cache.entry_path(&sha256);
        self.resident(name, pre, sha256, outcome, origin, relink, Some(entry))
    }

    /// Loads built-in plugin `plugin` from the code precompiled into the
    /// binary ([`precompiled`]); when this machine cannot run that code,
    /// from the compile cache or compiled, as any other plugin.
    pub fn load_builtin(
        &self,
        plugin: &'static BuiltinPlugin,
    ) -> Result<LoadedComponent, LoadError> {
        let loading = std::time::Instant::now();
        let origin = format!("the built-in {} plugin", plugin.name);
        let component = match precompiled::load(&self.engine, plugin) {
            Ok(component) => component,
            Err(reason) => {
                let mut loaded =
                    self.load(plugin.name, plugin.wasm, Some(plugin.sha256), &origin)?;
                loaded.fallback = Some(reason);
                return Ok(loaded);
            }
        };
        let pre = link_component(&self.linker, &component, &origin)?;
        crate::startup::record("component load", plugin.name, loading);
        let relink: Relink = {
            let (engine, linker, origin) =
                (self.engine.clone(), self.linker.clone(), origin.clone());
            Box::new(move || {
                let component = precompiled::load(&engine, plugin).map_err(|reason| {
                    LoadError::Engine(format!("{origin}'s precompiled code: {reason}"))
                })?;
                link_component(&linker, &component, &origin).map(split)
            })
        };
        let loaded = self.resident(
            plugin.name,
            pre,
            plugin.sha256.to_string(),
            CacheOutcome::Precompiled,
            &origin,
            relink,
            None,
        )?;
        if !loaded.offers_tools {
            return Err(LoadError::Incompatible {
                origin,
                reason: "it does not export the tool interface capstan:plugin/tool@0.1.0".into(),
            });
        }
        Ok(loaded)
    }

    /// A loaded component from its linked form; `relink` links it again
    /// after it was parked, from its compile-cache `entry` (none: from the
    /// code in the binary).
    #[allow(clippy::too_many_arguments)]
    fn resident(
        &self,
        name: &str,
        pre: wasmtime::component::InstancePre<CallState>,
        sha256: String,
        outcome: CacheOutcome,
        origin: &str,
        relink: Relink,
        entry: Option<std::path::PathBuf>,
    ) -> Result<LoadedComponent, LoadError> {
        let linked = split(pre);
        if linked.tool.is_none() && linked.hook.is_none() {
            return Err(LoadError::Incompatible {
                origin: origin.to_string(),
                reason: "it does not export the tool interface capstan:plugin/tool@0.1.0, nor the hook interface capstan:plugin/hook@0.1.0"
                    .into(),
            });
        }
        let name: Arc<str> = Arc::from(name);
        let loaded = LoadedComponent {
            name: name.clone(),
            sha256,
            offers_tools: linked.tool.is_some(),
            offers_hooks: linked.hook.is_some(),
            resident: Resident::new(name, linked, relink, entry),
            outcome,
            fallback: None,
        };
        self.rest.register(&loaded.resident);
        Ok(loaded)
    }

    /// Keeps every plugin loaded while the returned guard lives — a turn is
    /// under way — and links plugins parked while the session idled again
    /// now, on the warm-up thread, making their next instances ahead, so
    /// the turn's calls find them ready ([`rest`]).
    pub fn keep_warm(&self) -> KeepWarm {
        let parked = self.rest.hold();
        let guard = KeepWarm::new(self.rest.clone());
        for resident in parked {
            self.warmer.wake(&self.engine, self.file_io, resident);
        }
        guard
    }

    /// Calls are expected soon — the user started typing a prompt: links
    /// plugins parked while the session idled again now, on the warm-up
    /// thread, making their next instances ahead, and parks nothing for
    /// the next [`rest::PARK_AFTER`]. Cheap enough to call on every key:
    /// it never waits for a relink, and queues one wake per plugin.
    pub fn expect_calls(&self) {
        for resident in self.rest.expect() {
            self.warmer.wake(&self.engine, self.file_io, resident);
        }
    }

    /// Parks every plugin not in a call now, as the warm-up thread does
    /// after [`rest::PARK_AFTER`] without calls; returns how many.
    #[cfg(test)]
    fn park_now(&self) -> usize {
        self.rest.park_idle(std::time::Duration::ZERO)
    }

    /// Asks a component which tools it offers. Runs with no grants, and
    /// makes no instance ahead.
    pub async fn describe(&self, component: &LoadedComponent) -> Result<Vec<ToolSpec>, CallError> {
        let options = CallOptions::listing();
        let _in_use = component.resident.in_use();
        let linked = component.linked()?;
        let pre = component.tool_pre(&linked)?;
        let specs = self
            .in_fresh_instance(
                &component.name,
                Some(&component.resident.tool_warm),
                &options,
                instantiate_with(move |store| {
                    Box::pin(async move { pre.instantiate_async(store).await })
                }),
                run_with(|plugin: ToolPlugin, store, _| {
                    Box::pin(async move { plugin.capstan_plugin_tool().call_describe(store).await })
                }),
            )
            .await;
        // No instance is made ahead for a plugin only described: a plugin
        // the session never calls holds no pool slot for it. Its first call
        // makes one ahead for the next.
        let specs = specs?;
        specs
            .into_iter()
            .map(ToolSpec::from_wit)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|reason| CallError::Crashed {
                plugin: component.name.to_string(),
                reason: format!("it described its tools wrongly: {reason}"),
                stderr: String::new(),
            })
    }

    /// Calls tool `tool` of a component with a JSON `input`, in a fresh
    /// instance with the given grants and limits.
    pub async fn call_tool(
        &self,
        component: &LoadedComponent,
        tool: &str,
        input: &str,
        options: &CallOptions,
    ) -> Result<ToolOutput, CallError> {
        let _in_use = component.resident.in_use();
        let linked = component.linked()?;
        let pre = component.tool_pre(&linked)?;
        let (tool_name, input) = (tool.to_string(), input.to_string());
        let settled = self
            .in_fresh_instance(
                &component.name,
                Some(&component.resident.tool_warm),
                options,
                instantiate_with(move |store| {
                    Box::pin(async move { pre.instantiate_async(store).await })
                }),
                run_with(move |plugin: ToolPlugin, store, context| {
                    Box::pin(async move {
                        let result = plugin
                            .capstan_plugin_tool()
                            .call_call(&mut *store, &tool_name, &input, &context)
                            .await?;
                        Ok((result, store.data().net_refusals()))
                    })
                }),
            )
            .await;
        self.make_tool_ahead(component, &linked);
        let plugin = component.name.to_string();
        use bindings::exports::capstan::plugin::tool::ToolError as WitError;
        let (result, refusals) = settled?;
        // A refused request the plugin's error does not explain (its HTTP
        // client may have dropped the reason) is added to the error.
        let explained =
            |message: String| match crate::grants::net::refusal_note(&message, &refusals) {
                Some(note) => format!("{message} {note}"),
                None => message,
            };
        match result {
            Ok(output) => {
                let size = tool::wit_output_size(&output);
                if size > options.limits.output {
                    return Err(CallError::OutputTooLarge {
                        plugin,
                        size: size as u64,
                        limit: options.limits.output as u64,
                    });
                }
                Ok(ToolOutput::from_wit(output))
            }
            Err(WitError::InvalidInput(m)) => Err(CallError::InvalidInput(m)),
            Err(WitError::Denied(m)) => Err(CallError::Denied(explained(m))),
            Err(WitError::Failed(m)) => Err(CallError::Failed(explained(m))),
        }
    }
}

impl Sandbox {
    /// One call in a fresh instance of a component offered as `plugin`: a
    /// store set up for the call under `options`, holding the instance made
    /// ahead in `warm` when there is one that fits the call, else an
    /// instance made now by `instantiate`; then `run` on it with the call's
    /// context, within the call's wall-clock limit, its end turned into a
    /// result. The store is dropped on the warm-up thread.
    ///
    /// On a runtime with worker threads the call runs on a task of its own,
    /// which this one waits for until the wall-clock limit. Running code is
    /// stopped by the epoch deadline, but code blocked in the host — a file
    /// operation on a hung mount, an open waiting for a lease — cannot be;
    /// such a call is abandoned at its limit: the caller gets a timeout, and
    /// the stuck task is left to finish on its worker, its store dropped
    /// when it does.
    async fn in_fresh_instance<T, R>(
        &self,
        plugin: &Arc<str>,
        warm: Option<&WarmSlot<T>>,
        options: &CallOptions,
        instantiate: Instantiate<T>,
        run: Run<T, R>,
    ) -> Result<R, CallError>
    where
        T: Send + 'static,
        R: Send + 'static,
    {
        let call_id = new_call_id();
        let made_ahead = warm.and_then(|slot| slot.take(options.limits.memory));
        // The tool call's span (if any) says whether its instance was made
        // ahead (between calls) or here.
        tracing::Span::current().record(
            "instance",
            if made_ahead.is_some() {
                "made ahead"
            } else {
                "fresh"
            },
        );
        let (mut call, ready) = match made_ahead {
            Some(warm) => (
                PreparedCall::adopt(warm.store, plugin, &call_id, options, self.file_io)?,
                Some(warm.instance),
            ),
            None => (
                PreparedCall::new(&self.engine, plugin, &call_id, options, self.file_io)?,
                None,
            ),
        };
        let retirer = self.warmer.retirer();
        call.retire_to(Box::new(move |store| retirer.retire(store)));
        let context = call_context(call_id, options);
        let (mut store, watch) = call.into_parts();
        let limit = watch.wall_clock_limit();
        let work = async move {
            let outcome = async {
                let instance = match ready {
                    Some(instance) => instance,
                    None => instantiate(&mut store).await?,
                };
                run(instance, &mut store, context).await
            }
            .await;
            (store, outcome)
        };
        // On a runtime with one thread, a call stuck in the host would hold
        // that thread whatever waits for it: the call runs right here.
        let single_thread = matches!(
            tokio::runtime::Handle::current().runtime_flavor(),
            tokio::runtime::RuntimeFlavor::CurrentThread
        );
        let ended = if single_thread {
            tokio::time::timeout(limit, work)
                .await
                .map_err(|_elapsed| Abandoned::Deadline)
        } else {
            let mut task = CallTask(tokio::spawn(work));
            match tokio::time::timeout(limit, &mut task.0).await {
                Ok(Ok(ended)) => Ok(ended),
                Ok(Err(failed)) => Err(Abandoned::Failed(format!(
                    "the host failed while running it: {failed}"
                ))),
                Err(_elapsed) => Err(Abandoned::Deadline),
            }
        };
        watch.settle(ended)
    }

    /// Makes the component's next tool instance on the warm-up thread.
    fn make_tool_ahead(&self, component: &LoadedComponent, linked: &Linked) {
        let Some(pre) = linked.tool.clone().filter(|_| self.make_ahead) else {
            return;
        };
        self.warmer.make(
            &self.engine,
            &component.name,
            self.file_io,
            &component.resident.tool_warm,
            async move |store| pre.instantiate_async(store).await,
        );
    }

    /// Makes the component's next hook instance on the warm-up thread.
    fn make_hook_ahead(&self, component: &LoadedComponent, linked: &Linked) {
        let Some(pre) = linked.hook.clone().filter(|_| self.make_ahead) else {
            return;
        };
        self.warmer.make(
            &self.engine,
            &component.name,
            self.file_io,
            &component.resident.hook_warm,
            async move |store| pre.instantiate_async(store).await,
        );
    }
}

/// Links `component` against what the host provides.
fn link_component(
    linker: &Linker<CallState>,
    component: &wasmtime::component::Component,
    origin: &str,
) -> Result<wasmtime::component::InstancePre<CallState>, LoadError> {
    linker
        .instantiate_pre(component)
        .map_err(|e| LoadError::Incompatible {
            origin: origin.to_string(),
            reason: format!("{e:#}"),
        })
}

/// A linked component's tool and hook sides, whichever it exports.
fn split(pre: wasmtime::component::InstancePre<CallState>) -> Linked {
    Linked {
        tool: ToolPluginPre::new(pre.clone()).ok(),
        hook: HookPluginPre::new(pre).ok(),
    }
}

/// What the guest is told about call `call_id` made under `options`.
fn call_context(
    call_id: String,
    options: &CallOptions,
) -> bindings::capstan::plugin::types::CallContext {
    bindings::capstan::plugin::types::CallContext {
        call_id,
        workspace: options.grants.workspace_guest_path().map(str::to_string),
        session_id: options.session_id.clone(),
    }
}

/// Makes a call's instance in its store.
type Instantiate<T> = Box<
    dyn for<'s> FnOnce(&'s mut wasmtime::Store<CallState>) -> BoxFuture<'s, wasmtime::Result<T>>
        + Send,
>;

/// Runs a call in its instance, given the call's context.
type Run<T, R> = Box<
    dyn for<'s> FnOnce(
            T,
            &'s mut wasmtime::Store<CallState>,
            bindings::capstan::plugin::types::CallContext,
        ) -> BoxFuture<'s, wasmtime::Result<R>>
        + Send,
>;

/// Boxes how a call makes its instance.
fn instantiate_with<T, F>(make: F) -> Instantiate<T>
where
    F: for<'s> FnOnce(&'s mut wasmtime::Store<CallState>) -> BoxFuture<'s, wasmtime::Result<T>>
        + Send
        + 'static,
{
    Box::new(make)
}

/// Boxes what a call does in its instance.
fn run_with<T, R, F>(run: F) -> Run<T, R>
where
    F: for<'s> FnOnce(
            T,
            &'s mut wasmtime::Store<CallState>,
            bindings::capstan::plugin::types::CallContext,
        ) -> BoxFuture<'s, wasmtime::Result<R>>
        + Send
        + 'static,
{
    Box::new(run)
}

/// The task running one call; stopped when its caller stops waiting for
/// it (the user interrupted the turn), at its next yield.
struct CallTask<R>(tokio::task::JoinHandle<R>);

impl<R> Drop for CallTask<R> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A call id unique within the process and unlikely to repeat across runs.
pub(crate) fn new_call_id() -> String {
    use std::sync::atomic::AtomicU64;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("call-{:x}-{}-{n}", nanos, std::process::id())
}

/// Advances the engine's epoch every [`EPOCH_TICK`] so deadlines fire.
struct EpochTicker {
    stop: Arc<AtomicBool>,
}

impl EpochTicker {
    fn start(engine: Engine) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::Builder::new()
            .name("capstan-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })?;
        Ok(Self { stop })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
