//! Plugins at rest: the memory a loaded plugin holds, given back while the
//! session is idle.
//!
//! A loaded plugin holds its compiled code and, once used, pool slots with
//! its linear memory kept resident (reset by copying its image back, see
//! [`super::engine`]) and an instance made ahead ([`super::warm`]). For a
//! componentize-py plugin that is about 35 MB of code and 13 MB a slot.
//! Wasmtime unmaps a slot's copy of the memory image only when the module
//! that used it is dropped, so resting means dropping the compiled
//! component itself. What a slot keeps even then — the zeroed pages ahead
//! of the image, about 1 MB — is bounded by waking plugins into the slots
//! they left ([`super::engine`]), and the heap the component's metadata
//! used is handed back to the system after parking.
//!
//! When no call has used a plugin for [`PARK_AFTER`] and no turn is under
//! way ([`KeepWarm`]), the warm-up thread parks it: its instances made
//! ahead are dropped, then its linked component, which unmaps the code and
//! remaps the slots its instances used. A parked plugin is linked again
//! from the compile cache (the entry's seal checked and the file mapped,
//! as at load) when a turn starts — on the warm-up thread, which then
//! makes its next instance ahead while the model is busy — or else by the
//! next call that needs it, on that call's path. A built-in plugin running
//! from the binary's own pages keeps its code (the binary's), and is linked
//! again from it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use wasmtime::Store;

use super::bindings::ToolPlugin;
use super::bindings::ToolPluginPre;
use super::bindings::hook_world::{HookPlugin, HookPluginPre};
use super::error::LoadError;
use super::state::{CallState, FileIo};
use super::warm::{Job, WarmSlot, Warmer, make_now};

/// How long a plugin stays loaded with no call and no turn under way.
pub const PARK_AFTER: Duration = Duration::from_secs(5);

/// A component linked against the host, ready to be instantiated.
#[derive(Clone)]
pub(super) struct Linked {
    pub tool: Option<ToolPluginPre<CallState>>,
    pub hook: Option<HookPluginPre<CallState>>,
}

/// Links a component again from the compile cache.
pub(super) type Relink = Box<dyn Fn() -> Result<Linked, LoadError> + Send + Sync>;

/// One loaded plugin's code: linked or parked, and when it was last used.
pub(super) struct Resident {
    pub name: Arc<str>,
    code: Mutex<Code>,
    relink: Relink,
    /// Its compile-cache entry; when that is gone it is never parked, as
    /// it could not be linked again. None for a built-in plugin running
    /// from the binary's own pages, which can always be linked again.
    entry: Option<PathBuf>,
    /// Its next tool instance, made ahead ([`super::warm`]).
    pub tool_warm: Arc<WarmSlot<ToolPlugin>>,
    /// Its next hook instance, made ahead.
    pub hook_warm: Arc<WarmSlot<HookPlugin>>,
    /// Whether it is parked, readable without waiting for a relink under
    /// way (which holds `code`).
    parked: AtomicBool,
    /// Whether a wake is queued or under way on the warm-up thread.
    waking: AtomicBool,
    /// Calls under way.
    calls: AtomicUsize,
    last_used: Mutex<Instant>,
    /// Whether instances were made ahead when it was parked, so they are
    /// made again when it is woken.
    tool_was_warm: AtomicBool,
    hook_was_warm: AtomicBool,
}

enum Code {
    Linked(Linked),
    Parked,
}

impl Resident {
    /// A plugin just loaded as `linked`; `relink` loads it again from its
    /// compile-cache `entry` (none: from the binary).
    pub fn new(
        name: Arc<str>,
        linked: Linked,
        relink: Relink,
        entry: Option<PathBuf>,
    ) -> Arc<Self> {
        Arc::new(Self {
            name,
            code: Mutex::new(Code::Linked(linked)),
            relink,
            entry,
            tool_warm: WarmSlot::new(),
            hook_warm: WarmSlot::new(),
            parked: AtomicBool::new(false),
            waking: AtomicBool::new(false),
            calls: AtomicUsize::new(0),
            last_used: Mutex::new(Instant::now()),
            tool_was_warm: AtomicBool::new(false),
            hook_was_warm: AtomicBool::new(false),
        })
    }

    fn code(&self) -> MutexGuard<'_, Code> {
        self.code.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    /// The linked component, linked again first if it was parked.
    pub fn linked(&self) -> Result<Linked, LoadError> {
        let mut code = self.code();
        if let Code::Linked(linked) = &*code {
            return Ok(linked.clone());
        }
        let linked = (self.relink)()?;
        *code = Code::Linked(linked.clone());
        self.parked.store(false, Ordering::Release);
        Ok(linked)
    }

    /// Whether it is parked; never waits for a relink under way.
    pub fn is_parked(&self) -> bool {
        self.parked.load(Ordering::Acquire)
    }

    /// Marks a wake as queued; false if one already is.
    pub fn start_waking(&self) -> bool {
        !self.waking.swap(true, Ordering::AcqRel)
    }

    /// Marks the queued wake as done (or dropped).
    pub fn end_waking(&self) {
        self.waking.store(false, Ordering::Release);
    }

    /// Marks a call under way until the returned guard is dropped.
    pub fn in_use(self: &Arc<Self>) -> InUse {
        self.calls.fetch_add(1, Ordering::AcqRel);
        self.touch();
        InUse(self.clone())
    }

    /// Parks it if no call is under way: drops its instances made ahead,
    /// then its linked component. Returns whether it was parked now.
    fn park(&self) -> bool {
        let mut code = self.code();
        if matches!(*code, Code::Parked)
            || self.calls.load(Ordering::Acquire) > 0
            || self.entry.as_ref().is_some_and(|entry| !entry.is_file())
        {
            return false;
        }
        self.tool_was_warm
            .store(self.tool_warm.clear(), Ordering::Release);
        self.hook_was_warm
            .store(self.hook_warm.clear(), Ordering::Release);
        *code = Code::Parked;
        self.parked.store(true, Ordering::Release);
        true
    }

    /// Which instances to make ahead once it is linked again: tool, hook.
    pub fn was_warm(&self) -> (bool, bool) {
        (
            self.tool_was_warm.load(Ordering::Acquire),
            self.hook_was_warm.load(Ordering::Acquire),
        )
    }
}

/// A call under way in a plugin; it may not be parked meanwhile.
pub(super) struct InUse(Arc<Resident>);

impl Drop for InUse {
    fn drop(&mut self) {
        self.0.touch();
        self.0.calls.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The sandbox's loaded plugins, and whether a turn is under way.
#[derive(Default)]
pub(super) struct Rest {
    residents: Mutex<Vec<Weak<Resident>>>,
    holds: AtomicUsize,
    last_hold: Mutex<Option<Instant>>,
}

impl Rest {
    fn residents(&self) -> MutexGuard<'_, Vec<Weak<Resident>>> {
        self.residents.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Follows a newly loaded plugin.
    pub fn register(&self, resident: &Arc<Resident>) {
        let mut residents = self.residents();
        residents.retain(|r| r.strong_count() > 0);
        residents.push(Arc::downgrade(resident));
    }

    /// Parks every plugin unused for `idle` while no turn is under way;
    /// returns how many were parked.
    pub fn park_idle(&self, idle: Duration) -> usize {
        if self.holds.load(Ordering::Acquire) > 0 {
            return 0;
        }
        let now = Instant::now();
        let held = *self.last_hold.lock().unwrap_or_else(|p| p.into_inner());
        if held.is_some_and(|at| now.duration_since(at) < idle) {
            return 0;
        }
        let residents: Vec<Arc<Resident>> =
            self.residents().iter().filter_map(Weak::upgrade).collect();
        let parked = residents
            .iter()
            .filter(|r| {
                let used = *r.last_used.lock().unwrap_or_else(|p| p.into_inner());
                now.duration_since(used) >= idle
            })
            .filter(|r| r.park())
            .count();
        if parked > 0 {
            give_back_freed_heap();
        }
        parked
    }

    /// Starts a hold; returns the plugins parked now.
    pub fn hold(&self) -> Vec<Arc<Resident>> {
        self.holds.fetch_add(1, Ordering::AcqRel);
        self.parked()
    }

    /// Calls are expected soon (the user is typing a prompt): nothing is
    /// parked for the next [`PARK_AFTER`] of no calls; returns the plugins
    /// parked now.
    pub fn expect(&self) -> Vec<Arc<Resident>> {
        *self.last_hold.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        self.parked()
    }

    fn parked(&self) -> Vec<Arc<Resident>> {
        self.residents()
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|r| r.is_parked())
            .collect()
    }

    /// Ends a hold.
    pub fn release(&self) {
        *self.last_hold.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        self.holds.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Returns to the system the heap pages that parking freed.
///
/// A parked component's metadata (its types, function tables and the
/// like, a few MB for an interpreter's component) was allocated on the
/// warm-up thread that linked it, in that thread's glibc arena. glibc gives
/// an arena's free pages back only from its top, so once freed they stay
/// resident, and the next wake allocates beside them: each park and wake
/// would leave a few MB behind. `malloc_trim` releases the free pages of
/// every arena.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn give_back_freed_heap() {
    // SAFETY: `malloc_trim` takes no pointer; it locks each of glibc's
    // arenas in turn and advises the kernel that pages no allocation holds
    // may be dropped, which any thread may do at any time.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Other allocators give memory back on their own terms.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn give_back_freed_heap() {}

/// While alive, no plugin is parked: a turn is under way, and its calls
/// should find their plugins linked and their next instances made. Made by
/// [`super::Sandbox::keep_warm`], which also wakes parked plugins.
pub struct KeepWarm {
    rest: Arc<Rest>,
}

impl KeepWarm {
    pub(super) fn new(rest: Arc<Rest>) -> Self {
        Self { rest }
    }
}

impl Drop for KeepWarm {
    fn drop(&mut self) {
        self.rest.release();
    }
}

/// Waking is the warm-up thread's job for plugins at rest.
impl Warmer {
    /// Links a parked plugin again on the warm-up thread, then makes the
    /// instances it had made ahead when it was parked.
    /// Does nothing while a wake of it is already queued.
    pub fn wake(&self, engine: &wasmtime::Engine, file_io: FileIo, resident: Arc<Resident>) {
        if !resident.start_waking() {
            return;
        }
        let engine = engine.clone();
        let queued = resident.clone();
        let job: Job = Box::new(move |runtime| {
            // Whatever happens below, a later wake may be queued again.
            struct Done<'a>(&'a Resident);
            impl Drop for Done<'_> {
                fn drop(&mut self) {
                    self.0.end_waking();
                }
            }
            let _done = Done(&resident);
            // A failure shows again, with its reason, on the call that
            // needs the plugin.
            let Ok(linked) = resident.linked() else {
                return;
            };
            let (tool, hook) = resident.was_warm();
            if let (true, Some(pre)) = (tool, linked.tool) {
                prime(&resident.tool_warm, |slot| {
                    let pre = pre.clone();
                    let instantiate = async move |store: &mut Store<CallState>| {
                        pre.instantiate_async(store).await
                    };
                    make_now(runtime, &engine, &resident.name, file_io, slot, instantiate);
                });
            }
            if let (true, Some(pre)) = (hook, linked.hook) {
                prime(&resident.hook_warm, |slot| {
                    let pre = pre.clone();
                    let instantiate = async move |store: &mut Store<CallState>| {
                        pre.instantiate_async(store).await
                    };
                    make_now(runtime, &engine, &resident.name, file_io, slot, instantiate);
                });
            }
        });
        // A full queue: the calls link it themselves.
        if !self.submit(job) {
            queued.end_waking();
        }
    }
}

/// Makes the next instance of a plugin just linked again into `slot` with
/// `make`, twice: the first instance lands in a pool slot whose memory was
/// given back, so a call in it would take a page fault for every page it
/// touches; dropping it resets the slot by copying the memory image back
/// and keeping it resident ([`super::engine`]), and the second instance,
/// in the same slot, is as warm as one made during a busy session.
fn prime<T>(slot: &WarmSlot<T>, mut make: impl FnMut(&WarmSlot<T>)) {
    if !slot.claim() {
        return;
    }
    make(slot);
    if slot.clear() && slot.claim() {
        make(slot);
    }
}

#[cfg(test)]
mod tests {

    use crate::grants::{Grants, OwnFolders};
    use crate::sandbox::builtin;
    use crate::sandbox::warm::tests::until_ready;
    use crate::sandbox::{CallOptions, LoadedComponent, Sandbox, engine};

    /// A sandbox whose data and cache live under `dir`, with the built-in
    /// `fs` component loaded.
    fn fs_in(dir: &std::path::Path) -> (Sandbox, LoadedComponent) {
        let sandbox =
            Sandbox::new(&crate::home::Home::at(dir.join("home"), dir.join("cache"))).unwrap();
        let fs = builtin::find("fs").unwrap();
        let component = sandbox.load("fs", fs.wasm, Some(fs.sha256), "fs").unwrap();
        (sandbox, component)
    }

    /// Calls `fs.read` once, as a session does, so its next instance is
    /// made ahead.
    async fn use_once(sandbox: &Sandbox, component: &LoadedComponent, dir: &std::path::Path) {
        std::fs::write(dir.join("used.txt"), "used\n").unwrap();
        let options = CallOptions {
            grants: Grants::workspace(dir, false, &OwnFolders::default()).unwrap(),
            ..CallOptions::default()
        };
        sandbox
            .call_tool(component, "read", r#"{"path":"used.txt"}"#, &options)
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn describing_a_plugin_makes_no_instance_ahead() {
        let dir = tempfile::tempdir().unwrap();
        let (sandbox, component) = fs_in(dir.path());
        sandbox.describe(&component).await.unwrap();
        assert!(
            component.resident.tool_warm.is_empty(),
            "an instance is made or queued for a plugin nobody called"
        );
        use_once(&sandbox, &component, dir.path()).await;
        until_ready(&component).await;
    }

    fn resident_bytes(sandbox: &Sandbox) -> usize {
        sandbox
            .engine()
            .pooling_allocator_metrics()
            .unwrap()
            .unused_memory_bytes_resident()
    }

    #[tokio::test]
    async fn parking_gives_back_instances_and_slot_memory_and_a_call_links_again() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x.txt"), "x marks\n").unwrap();
        let (sandbox, component) = fs_in(dir.path());
        let options = CallOptions {
            grants: Grants::workspace(dir.path(), false, &OwnFolders::default()).unwrap(),
            ..CallOptions::default()
        };
        let read = r#"{"path":"x.txt"}"#;
        sandbox
            .call_tool(&component, "read", read, &options)
            .await
            .unwrap();
        until_ready(&component).await;
        let metrics = sandbox.engine().pooling_allocator_metrics().unwrap();
        assert!(
            metrics.memories() > 0,
            "the instance made ahead holds a slot"
        );

        assert_eq!(sandbox.park_now(), 1);
        assert!(component.is_parked());
        assert!(
            !component.resident.tool_warm.is_ready(),
            "the instance made ahead is dropped"
        );
        assert_eq!(metrics.memories(), 0);
        // Dropped alone, its slot would be reset and kept resident, image
        // included; with the component gone, the image is unmapped and
        // wasmtime counts the slot as holding nothing of its own.
        assert_eq!(
            resident_bytes(&sandbox),
            0,
            "the slots' memory is given back"
        );
        assert_eq!(sandbox.park_now(), 0, "parked once");

        // The next call links it again from the compile cache.
        let out = sandbox
            .call_tool(&component, "read", read, &options)
            .await
            .unwrap();
        assert!(out.to_text().contains("x marks"));
        assert!(!component.is_parked());
    }

    #[tokio::test]
    async fn a_turn_wakes_parked_plugins_ahead_of_their_calls_and_keeps_them() {
        let dir = tempfile::tempdir().unwrap();
        let (sandbox, component) = fs_in(dir.path());
        use_once(&sandbox, &component, dir.path()).await;
        until_ready(&component).await;
        assert_eq!(sandbox.park_now(), 1);

        let turn = sandbox.keep_warm();
        // Linked again and its next instance made, with no call.
        until_ready(&component).await;
        assert!(!component.is_parked());
        assert_eq!(sandbox.park_now(), 0, "nothing is parked during a turn");
        assert!(component.resident.tool_warm.is_ready());
        drop(turn);
        assert_eq!(sandbox.park_now(), 1, "parked again once the turn is over");
    }

    #[tokio::test]
    async fn a_key_at_the_prompt_wakes_parked_plugins_without_starting_a_turn() {
        let dir = tempfile::tempdir().unwrap();
        let (sandbox, component) = fs_in(dir.path());
        use_once(&sandbox, &component, dir.path()).await;
        until_ready(&component).await;
        assert_eq!(sandbox.park_now(), 1);

        sandbox.expect_calls();
        sandbox.expect_calls();
        until_ready(&component).await;
        assert!(!component.is_parked());
        for _ in 0..1000 {
            if !component
                .resident
                .waking
                .load(std::sync::atomic::Ordering::Acquire)
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(
            !component
                .resident
                .waking
                .load(std::sync::atomic::Ordering::Acquire),
            "the wake is over, so a later one may be queued"
        );
        // No turn holds it: once idle long enough it is parked again.
        assert_eq!(sandbox.park_now(), 1);
    }

    #[tokio::test]
    async fn parked_plugins_hold_no_slot_and_waking_reuses_the_slots_they_left() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x.txt"), "x marks\n").unwrap();
        let (sandbox, component) = fs_in(dir.path());
        let options = CallOptions {
            grants: Grants::workspace(dir.path(), false, &OwnFolders::default()).unwrap(),
            ..CallOptions::default()
        };
        let read = r#"{"path":"x.txt"}"#;
        let metrics = sandbox.engine().pooling_allocator_metrics().unwrap();
        // Slots ever used (all free) after each park.
        let mut left: Vec<u32> = Vec::new();
        for cycle in 0..8 {
            let turn = sandbox.keep_warm();
            if let Some(&before) = left.last() {
                // Woken: linked again and its next instance made, in one of
                // the slots it left rather than a fresh one (which it may
                // take only while fewer than the warm budget are free).
                until_ready(&component).await;
                assert!(!component.is_parked());
                assert!(
                    metrics.memories() > 0,
                    "the instance made ahead holds a slot"
                );
                if before >= engine::UNUSED_WARM_SLOTS {
                    assert!(
                        metrics.unused_warm_memories() as usize + metrics.memories()
                            <= before as usize,
                        "cycle {cycle}: the woken plugin took a slot never used before"
                    );
                }
            }
            // A turn's calls, each followed by its next instance made ahead.
            for _ in 0..3 {
                let out = sandbox
                    .call_tool(&component, "read", read, &options)
                    .await
                    .unwrap();
                assert!(out.to_text().contains("x marks"));
                until_ready(&component).await;
            }
            drop(turn);

            assert_eq!(sandbox.park_now(), 1, "cycle {cycle}: parked");
            assert_eq!(
                metrics.memories(),
                0,
                "cycle {cycle}: a parked plugin holds no slot"
            );
            assert_eq!(metrics.core_instances(), 0);
            left.push(metrics.unused_warm_memories());
        }
        // A new slot is taken only while fewer than the warm budget of used
        // ones are free, so the slots used stay within what one turn needs
        // at once plus that budget, however often the plugin parks.
        let most = left.iter().copied().max().unwrap_or(0);
        assert!(
            most <= left[0] + engine::UNUSED_WARM_SLOTS,
            "slots used grow with each park and wake: {left:?}"
        );
    }

    #[tokio::test]
    async fn a_plugin_whose_cache_entry_is_gone_is_not_parked() {
        let dir = tempfile::tempdir().unwrap();
        let (sandbox, component) = fs_in(dir.path());
        let fs = builtin::find("fs").unwrap();
        sandbox.compile_cache().remove(fs.sha256).unwrap();
        assert_eq!(sandbox.park_now(), 0);
        assert!(!component.is_parked());
        sandbox.describe(&component).await.unwrap();
    }
}
