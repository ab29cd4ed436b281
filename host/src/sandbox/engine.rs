//! The one wasmtime `Engine` of the process, and its fingerprint.

use std::hash::{Hash, Hasher};

use sha2::{Digest, Sha256};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig};

use super::error::LoadError;
use super::limits::Limits;

/// How many plugin instances may be alive at once. Calls are short and each
/// gets a fresh instance; this bounds the pool's reservations.
pub const MAX_CONCURRENT_INSTANCES: u32 = 64;

/// How many memory slots the pool holds: one or two memories per
/// instance. Kept below 128, where wasmtime splits a pool into one free
/// list per core, each thread allocating from its own: with one list, a
/// plugin woken on the warm-up thread after parking takes the slots it
/// left, wherever its calls ran ([`super::rest`]).
const MEMORY_SLOTS: u32 = MAX_CONCURRENT_INSTANCES * 2 - 1;

/// How many used memory slots may lie free before a new instance with no
/// slot of its own takes a used one rather than one never used. A slot
/// once used keeps the zeroed pages ahead of its image resident (an
/// interpreter's stack, about 1 MB), even after its plugin is parked, so
/// the fewer slots a session ever uses, the less it holds at rest; a
/// plugin's own free slots are taken first whatever this is.
pub(super) const UNUSED_WARM_SLOTS: u32 = 2;

/// How much of a slot's linear memory is reset in place and kept mapped
/// between instances; enough for a Python or JavaScript interpreter's heap.
const KEEP_RESIDENT: usize = 32 << 20;

/// Builds the engine: component model, epoch interruption for deadlines,
/// and a pooling allocator so a fresh instance per call is cheap.
pub fn build_engine() -> Result<Engine, LoadError> {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .cranelift_opt_level(OptLevel::Speed)
        .memory_init_cow(true);
    // `CAPSTAN_PERFMAP=1` names plugins' compiled functions for `perf`
    // (in /tmp/perf-PID.map), to profile a plugin.
    if std::env::var_os("CAPSTAN_PERFMAP").is_some() {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }

    let instances = MAX_CONCURRENT_INSTANCES;
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(instances)
        // A component made by wasm-component-ld holds a handful of core
        // instances (the program plus adapter shims); a componentize-py one
        // more than a dozen (the interpreter, libc, extension modules, shims).
        .total_core_instances(instances * 16)
        .max_core_instances_per_component(64)
        .total_memories(MEMORY_SLOTS)
        .total_tables(instances * 8)
        .total_stacks(instances)
        .max_memory_size(usize::try_from(Limits::MAX_MEMORY).unwrap_or(usize::MAX))
        // Interpreted languages (Python, JavaScript) carry large instances.
        .max_core_instance_size(8 << 20)
        .max_component_instance_size(8 << 20)
        // Reset a slot between instances by copying the memory image back
        // over the first 32 MiB and keeping those pages mapped, rather than
        // unmapping what the last instance dirtied: the next instance then
        // takes no page faults there, and the copy is made off the caller's
        // path, on the warm-up thread that drops finished stores
        // ([`super::warm`]). An interpreter's call writes to pages scattered
        // all over its heap, more than Linux's PAGEMAP_SCAN-guided reset
        // tracks, and each fault in a VM costs microseconds.
        .pagemap_scan(wasmtime::Enabled::No)
        // A plugin parked while the session idles ([`super::rest`]) comes
        // back as a new module with no slot of its own; the slots it left
        // keep the zeroed pages ahead of their image resident, so it should
        // take those rather than fresh ones (see `UNUSED_WARM_SLOTS`).
        .max_unused_warm_slots(UNUSED_WARM_SLOTS)
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(1 << 20);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));

    Engine::new(&config).map_err(|e| LoadError::Engine(format!("{e:#}")))
}

/// A short, stable fingerprint of everything that makes compiled code from
/// this engine incompatible with another: wasmtime's version, the target
/// and the compilation settings. Part of every compile-cache key.
pub fn fingerprint(engine: &Engine) -> String {
    let mut hasher = DigestHasher(Sha256::new());
    env!("CARGO_PKG_VERSION").hash(&mut hasher);
    engine.precompile_compatibility_hash().hash(&mut hasher);
    let digest = hasher.0.finalize();
    hex(&digest[..8])
}

/// Feeds `Hash` output into a SHA-256, which unlike `DefaultHasher` is
/// specified and therefore stable from one build to the next.
struct DigestHasher(Sha256);

impl Hasher for DigestHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        0
    }
}

/// Lowercase hexadecimal.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// The SHA-256 of `bytes`, in hexadecimal.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}
