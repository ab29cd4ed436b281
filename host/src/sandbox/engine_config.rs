//! The wasmtime configuration of capstan's engine: what code is compiled
//! for and how instances are allocated.
//!
//! This one file is compiled twice: into capstan, which builds its engine
//! from it ([`super::engine`]), and into the build script
//! (`host/build.rs`), which precompiles the built-in plugins with it. So
//! the artifacts shipped in the binary are made with exactly the settings
//! of the engine that loads them. It must use nothing but wasmtime and
//! `std`.

use wasmtime::{Config, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig};

/// How many plugin instances may be alive at once. Calls are short and each
/// gets a fresh instance; this bounds the pool's reservations.
pub const MAX_CONCURRENT_INSTANCES: u32 = 64;

/// The largest memory cap a plugin may be given (the pool reserves this
/// much address space per instance).
pub const MAX_MEMORY: u64 = 4 << 30;

/// How many memory slots the pool holds: one or two memories per
/// instance. Kept below 128, where wasmtime splits a pool into one free
/// list per core, each thread allocating from its own: with one list, a
/// plugin woken on the warm-up thread after parking takes the slots it
/// left, wherever its calls ran (`sandbox::rest`).
const MEMORY_SLOTS: u32 = MAX_CONCURRENT_INSTANCES * 2 - 1;

/// How many used memory slots may lie free before a new instance with no
/// slot of its own takes a used one rather than one never used. A slot
/// once used keeps the zeroed pages ahead of its image resident (an
/// interpreter's stack, about 1 MB), even after its plugin is parked, so
/// the fewer slots a session ever uses, the less it holds at rest; a
/// plugin's own free slots are taken first whatever this is.
pub const UNUSED_WARM_SLOTS: u32 = 2;

/// How much of a slot's linear memory is reset in place and kept mapped
/// between instances; enough for a Python or JavaScript interpreter's heap.
const KEEP_RESIDENT: usize = 32 << 20;

/// What the pool does with a finished instance's linear memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryReuse {
    /// Reset in place and kept mapped (`KEEP_RESIDENT`), so the next
    /// instance's calls take no page faults: for a session.
    KeepResident,
    /// Given back to the kernel: for a process that makes one call and
    /// exits, where resetting memory nobody will use again only costs
    /// time and memory (zeroing a Rust plugin's 1 MB stack, for one).
    GiveBack,
}

/// The engine's configuration: component model, epoch interruption for
/// deadlines, and a pooling allocator so a fresh instance per call is
/// cheap. Code is compiled for the machine running this (the build
/// machine, in the build script), with its CPU features. `reuse` changes
/// nothing in compiled code.
pub fn config(reuse: MemoryReuse) -> Config {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .cranelift_opt_level(OptLevel::Speed)
        .memory_init_cow(true);

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
        .max_memory_size(usize::try_from(MAX_MEMORY).unwrap_or(usize::MAX))
        // Interpreted languages (Python, JavaScript) carry large instances.
        .max_core_instance_size(8 << 20)
        .max_component_instance_size(8 << 20)
        // Reset a slot between instances by copying the memory image back
        // over the first 32 MiB and keeping those pages mapped, rather than
        // unmapping what the last instance dirtied: the next instance then
        // takes no page faults there, and the copy is made off the caller's
        // path, on the warm-up thread that drops finished stores
        // (`sandbox::warm`). An interpreter's call writes to pages scattered
        // all over its heap, more than Linux's PAGEMAP_SCAN-guided reset
        // tracks, and each fault in a VM costs microseconds.
        .pagemap_scan(wasmtime::Enabled::No)
        // A plugin parked while the session idles (`sandbox::rest`) comes
        // back as a new module with no slot of its own; the slots it left
        // keep the zeroed pages ahead of their image resident, so it should
        // take those rather than fresh ones (see `UNUSED_WARM_SLOTS`).
        .max_unused_warm_slots(UNUSED_WARM_SLOTS)
        .linear_memory_keep_resident(match reuse {
            MemoryReuse::KeepResident => KEEP_RESIDENT,
            MemoryReuse::GiveBack => 0,
        })
        .table_keep_resident(match reuse {
            MemoryReuse::KeepResident => 1 << 20,
            MemoryReuse::GiveBack => 0,
        });
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    config
}
