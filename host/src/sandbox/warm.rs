//! Instances made ahead of their calls, and stores dropped after them, on a
//! thread of their own.
//!
//! Instantiating a component is most of what a call into a Python plugin
//! costs: a componentize-py component links a dozen core modules and fills
//! their shared function table (thousands of entries) every time. So once a
//! plugin has been described or called, the sandbox makes its next instance
//! on the warm-up thread, while the model is busy with the result. The next
//! call takes that instance — each one serves exactly one call and is never
//! reused — and only then gives its store the call's grants, limits and
//! deadline. An instance that touched the host while it was being made (a
//! WASI call from a start function) is thrown away and its plugin goes back
//! to making instances in the call, since it may have kept what it saw.
//!
//! A finished call's store is dropped on the same thread, so resetting its
//! memory is not on the caller's path either. The thread also parks plugins
//! left idle, and links them again when a turn starts ([`super::rest`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak, mpsc};
use std::time::{Duration, Instant};

use wasmtime::Store;

use super::call::PreparedCall;
use super::limits::Limits;
use super::state::{CallOptions, CallState, FileIo};

/// How long making an instance ahead may take before it is given up.
const MAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the warm-up thread looks for idle plugins to park.
const TICK: Duration = Duration::from_secs(1);

/// How many jobs may wait for the warm-up thread; beyond that no instance
/// is made ahead.
const QUEUE: usize = 64;

/// How many finished stores may wait to be dropped; beyond that a caller
/// drops its own. Each holds a slot of the instance pool until it is.
const RETIRING: usize = 4;

/// An instance made ahead, with its store.
pub(super) struct Warm<T> {
    pub store: Store<CallState>,
    pub instance: T,
}

/// How long a call waits for an instance the warm-up thread is making
/// right now, rather than making one of its own beside it: finishing the
/// one under way is sooner than starting over on a busy machine, and it
/// lands in the slot the plugin used last.
const WAIT_FOR_MAKING: Duration = Duration::from_secs(1);

/// Where a plugin's next instance waits.
pub(super) struct WarmSlot<T> {
    state: Mutex<Slot<T>>,
    /// Signalled when an instance being made is settled.
    settled: Condvar,
}

enum Slot<T> {
    /// Nothing made, nothing being made.
    Empty,
    /// Claimed for the warm-up thread: queued (`started` false), or being
    /// made there now.
    Making { started: bool },
    /// Made, waiting for a call.
    Ready(Warm<T>),
    /// The plugin cannot be made ahead; every call makes its own instance.
    Off,
}

impl<T> WarmSlot<T> {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(Slot::Empty),
            settled: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Slot<T>> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The instance made ahead, if one is ready — or being made on the
    /// warm-up thread right now and ready within [`WAIT_FOR_MAKING`] — and
    /// what it has already allocated fits in `memory_limit`.
    pub fn take(&self, memory_limit: u64) -> Option<Warm<T>> {
        let mut state = self.lock();
        let waited = Instant::now();
        while matches!(*state, Slot::Making { started: true }) {
            let left = WAIT_FOR_MAKING.saturating_sub(waited.elapsed());
            if left.is_zero() {
                return None;
            }
            state = self
                .settled
                .wait_timeout(state, left)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
        let fits = match &*state {
            Slot::Ready(warm) => warm.store.data().memory_used() <= memory_limit,
            _ => false,
        };
        if !fits {
            return None;
        }
        match std::mem::replace(&mut *state, Slot::Empty) {
            Slot::Ready(warm) => Some(warm),
            _ => None,
        }
    }

    /// Drops the instance made ahead, if one is ready; returns whether
    /// there was one.
    pub fn clear(&self) -> bool {
        let mut state = self.lock();
        if !matches!(*state, Slot::Ready(_)) {
            return false;
        }
        let made = std::mem::replace(&mut *state, Slot::Empty);
        drop(state);
        drop(made);
        true
    }

    /// Whether an instance is ready for a call.
    #[cfg(test)]
    pub fn is_ready(&self) -> bool {
        matches!(*self.lock(), Slot::Ready(_))
    }

    /// Whether nothing is made nor being made (nor queued) for a call.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        matches!(*self.lock(), Slot::Empty)
    }

    /// Whether an instance should be made now; marks it as being made.
    pub(super) fn claim(&self) -> bool {
        let mut state = self.lock();
        if matches!(*state, Slot::Empty) {
            *state = Slot::Making { started: false };
            true
        } else {
            false
        }
    }

    /// Marks the claimed instance as being made now.
    fn start(&self) {
        let mut state = self.lock();
        if let Slot::Making { started } = &mut *state {
            *started = true;
        }
    }

    fn settle(&self, made: Option<Warm<T>>) {
        *self.lock() = match made {
            Some(warm) => Slot::Ready(warm),
            None => Slot::Off,
        };
        self.settled.notify_all();
    }

    /// Gives up a claim that could not be queued.
    fn release(&self) {
        let mut state = self.lock();
        if matches!(*state, Slot::Making { .. }) {
            *state = Slot::Empty;
        }
        self.settled.notify_all();
    }
}

pub(super) type Job = Box<dyn FnOnce(&tokio::runtime::Runtime) + Send>;

/// Drops finished stores off the caller's path.
#[derive(Clone)]
pub(super) struct Retirer {
    jobs: mpsc::SyncSender<Job>,
    retiring: Arc<AtomicUsize>,
}

impl Retirer {
    /// Drops `store` on the warm-up thread, or here if that one is busy.
    pub fn retire(&self, store: Store<CallState>) {
        if self.retiring.fetch_add(1, Ordering::AcqRel) >= RETIRING {
            self.retiring.fetch_sub(1, Ordering::AcqRel);
            drop(store);
            return;
        }
        let retiring = self.retiring.clone();
        let job: Job = Box::new(move |_| {
            drop(store);
            retiring.fetch_sub(1, Ordering::AcqRel);
        });
        // A full queue hands the job back; dropping it drops the store here.
        if let Err(mpsc::TrySendError::Full(job) | mpsc::TrySendError::Disconnected(job)) =
            self.jobs.try_send(job)
        {
            drop(job);
            self.retiring.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// The warm-up thread.
pub(super) struct Warmer {
    retirer: Retirer,
}

impl Warmer {
    /// Starts the thread. It ends when the last `Warmer`/`Retirer` is gone.
    /// Between jobs, and at least every [`TICK`] when there are none, it
    /// runs `tick` (which parks idle plugins, [`super::rest`]).
    pub fn start(mut tick: impl FnMut() + Send + 'static) -> std::io::Result<Self> {
        let (jobs, queue) = mpsc::sync_channel::<Job>(QUEUE);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()?;
        std::thread::Builder::new()
            .name("capstan-warm".into())
            .spawn(move || {
                let mut ticked = Instant::now();
                loop {
                    match queue.recv_timeout(TICK) {
                        Ok(job) => job(&runtime),
                        Err(mpsc::RecvTimeoutError::Timeout) => {}
                        Err(mpsc::RecvTimeoutError::Disconnected) => return,
                    }
                    if ticked.elapsed() >= TICK {
                        tick();
                        ticked = Instant::now();
                    }
                }
            })?;
        Ok(Self {
            retirer: Retirer {
                jobs,
                retiring: Arc::new(AtomicUsize::new(0)),
            },
        })
    }

    /// What finished calls hand their stores to.
    pub fn retirer(&self) -> Retirer {
        self.retirer.clone()
    }

    /// Makes the next instance of `plugin` into `slot`, unless one is ready,
    /// being made, or the plugin cannot be made ahead.
    pub fn make<T>(
        &self,
        engine: &wasmtime::Engine,
        plugin: &Arc<str>,
        file_io: FileIo,
        slot: &Arc<WarmSlot<T>>,
        instantiate: impl AsyncFnOnce(&mut Store<CallState>) -> wasmtime::Result<T> + Send + 'static,
    ) where
        T: Send + 'static,
    {
        if !slot.claim() {
            return;
        }
        let weak: Weak<WarmSlot<T>> = Arc::downgrade(slot);
        let engine = engine.clone();
        let plugin = plugin.clone();
        let job: Job = Box::new(move |runtime| {
            if let Some(slot) = weak.upgrade() {
                make_now(runtime, &engine, &plugin, file_io, &slot, instantiate);
            }
        });
        if let Err(mpsc::TrySendError::Full(job) | mpsc::TrySendError::Disconnected(job)) =
            self.retirer.jobs.try_send(job)
        {
            drop(job);
            slot.release();
        }
    }
}

impl Warmer {
    /// Runs `job` on the warm-up thread; a full queue drops it (whatever it
    /// would have made ahead, the calls make themselves). Returns whether
    /// it was queued.
    pub(super) fn submit(&self, job: Job) -> bool {
        self.retirer.jobs.try_send(job).is_ok()
    }
}

/// Makes `plugin`'s next instance into `slot`, claimed for it, here on the
/// warm-up thread.
pub(super) fn make_now<T>(
    runtime: &tokio::runtime::Runtime,
    engine: &wasmtime::Engine,
    plugin: &Arc<str>,
    file_io: FileIo,
    slot: &WarmSlot<T>,
    instantiate: impl AsyncFnOnce(&mut Store<CallState>) -> wasmtime::Result<T>,
) {
    slot.start();
    let options = CallOptions {
        limits: Limits {
            timeout: MAKE_TIMEOUT,
            memory: Limits::MAX_MEMORY,
            ..Limits::default()
        },
        ..CallOptions::default()
    };
    let made = PreparedCall::new(engine, plugin, "warm-up", &options, file_io)
        .ok()
        .and_then(|call| {
            let mut store = call.into_store();
            let instance = runtime.block_on(instantiate(&mut store)).ok()?;
            // A start function that reached the host may have kept what it
            // saw of this empty context.
            (!store.data().touched_host()).then_some(Warm { store, instance })
        });
    slot.settle(made);
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::grants::Grants;
    use crate::sandbox::builtin;
    use crate::sandbox::{CallError, LoadedComponent, Sandbox};

    /// Waits until the component's next tool instance has been made ahead.
    pub(in crate::sandbox) async fn until_ready(component: &LoadedComponent) {
        for _ in 0..1000 {
            if component.resident.tool_warm.is_ready() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no instance was made ahead within 10 s");
    }

    fn in_workspace(dir: &std::path::Path) -> CallOptions {
        CallOptions {
            grants: Grants::workspace(dir, false, &crate::grants::OwnFolders::default()).unwrap(),
            ..CallOptions::default()
        }
    }

    #[tokio::test]
    async fn an_instance_made_ahead_serves_one_call_under_that_calls_grants() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(a.join("in-a.txt"), "from a\n").unwrap();
        std::fs::write(b.join("in-b.txt"), "from b\n").unwrap();
        let sandbox = Sandbox::new(&crate::home::Home::at(
            dir.path().join("home"),
            dir.path().join("cache"),
        ))
        .unwrap();
        let fs = builtin::find("fs").unwrap();
        let component = sandbox.load("fs", fs.wasm, Some(fs.sha256), "fs").unwrap();
        assert!(
            !component.resident.tool_warm.is_ready(),
            "nothing is made before a plugin is used"
        );

        let read = |path: &str| format!(r#"{{"path":"{path}"}}"#);
        let out = sandbox
            .call_tool(&component, "read", &read("in-a.txt"), &in_workspace(&a))
            .await
            .unwrap();
        assert!(out.to_text().contains("from a"));
        until_ready(&component).await;

        // The instance made while nothing was granted takes this call's
        // workspace, and only it.
        let out = sandbox
            .call_tool(&component, "read", &read("in-b.txt"), &in_workspace(&b))
            .await
            .unwrap();
        assert!(out.to_text().contains("from b"));
        until_ready(&component).await;
        let refused = sandbox
            .call_tool(
                &component,
                "read",
                &read("../a/in-a.txt"),
                &in_workspace(&b),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(
                refused,
                CallError::Denied(_) | CallError::InvalidInput(_) | CallError::Failed(_)
            ),
            "{refused:?}"
        );
        assert!(!refused.to_string().contains("from a"));
    }

    #[tokio::test]
    async fn a_call_whose_memory_limit_the_instance_made_ahead_exceeds_makes_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let sandbox = Sandbox::new(&crate::home::Home::at(
            dir.path().join("home"),
            dir.path().join("cache"),
        ))
        .unwrap();
        let fs = builtin::find("fs").unwrap();
        let component = sandbox.load("fs", fs.wasm, Some(fs.sha256), "fs").unwrap();
        std::fs::write(dir.path().join("x.txt"), "x\n").unwrap();
        let options = in_workspace(dir.path());
        sandbox
            .call_tool(&component, "read", r#"{"path":"x.txt"}"#, &options)
            .await
            .unwrap();
        until_ready(&component).await;
        let tiny = CallOptions {
            limits: Limits {
                memory: 64 << 10,
                ..Limits::default()
            },
            ..options.clone()
        };
        let err = sandbox
            .call_tool(&component, "read", r#"{"path":"x.txt"}"#, &tiny)
            .await
            .unwrap_err();
        assert!(matches!(err, CallError::MemoryLimit { .. }), "{err:?}");
        assert!(
            component.resident.tool_warm.is_ready(),
            "the instance made ahead waits for a call it fits"
        );
    }

    #[test]
    fn a_slot_is_claimed_once_until_settled() {
        let slot: Arc<WarmSlot<u32>> = WarmSlot::new();
        assert!(slot.claim());
        assert!(!slot.claim(), "being made: not claimed twice");
        slot.release();
        assert!(slot.claim(), "released: claimed again");
        slot.settle(None);
        assert!(
            !slot.claim(),
            "a plugin that cannot be made ahead stays off"
        );
        assert!(slot.take(u64::MAX).is_none());
    }

    #[test]
    fn a_call_waits_for_the_instance_being_made_but_not_for_one_only_queued() {
        let dir = tempfile::tempdir().unwrap();
        let sandbox = Sandbox::new(&crate::home::Home::at(
            dir.path().join("home"),
            dir.path().join("cache"),
        ))
        .unwrap();
        let slot: Arc<WarmSlot<u32>> = WarmSlot::new();

        assert!(slot.claim());
        assert!(
            slot.take(u64::MAX).is_none(),
            "queued, not started: the call makes its own"
        );

        let (started_tx, started_rx) = mpsc::channel();
        let maker = {
            let (slot, engine) = (slot.clone(), sandbox.engine().clone());
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                    .unwrap();
                let plugin: Arc<str> = Arc::from("slow");
                make_now(
                    &runtime,
                    &engine,
                    &plugin,
                    FileIo::default(),
                    &slot,
                    async move |_store: &mut Store<CallState>| {
                        started_tx.send(()).unwrap();
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        Ok(7)
                    },
                );
            })
        };
        started_rx.recv().unwrap();
        let warm = slot.take(u64::MAX).expect("the instance under way");
        assert_eq!(warm.instance, 7);
        maker.join().unwrap();
        assert!(slot.claim(), "taken: the slot is empty again");
    }
}
