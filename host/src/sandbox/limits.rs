//! The limits every call runs under: memory, wall-clock time, result size.
//! How sizes and durations are written is [`crate::quantity`]'s.

use std::time::Duration;

/// Resource limits for one call of a plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most linear memory, in bytes, all of the instance's memories may
    /// hold together.
    pub memory: u64,
    /// The wall-clock time a call may take, instantiation included.
    pub timeout: Duration,
    /// The largest result, in bytes, a call may return.
    pub output: usize,
}

impl Limits {
    /// The largest memory cap a plugin may be given (the pool reserves this
    /// much address space per instance).
    pub const MAX_MEMORY: u64 = super::engine_config::MAX_MEMORY;

    /// The most a `wasi:http` fields object (the headers or trailers of a
    /// request or response) may hold in the host, in wasmtime-wasi-http's
    /// measure (names and values plus their bookkeeping): 32 KiB, four
    /// times what HTTP servers commonly accept. A guest setting more is
    /// stopped (wasmtime-wasi-http traps), which the call reports as
    /// `CallError::HeadersTooLarge`.
    pub const FIELDS_BYTES: usize = 32 << 10;

    /// The fewest resources (open files, streams, pollables, HTTP fields and
    /// requests, ...) a call may hold in the host at once, whatever its
    /// memory limit.
    pub const MIN_HOST_RESOURCES: usize = 256;

    /// How many resources the call may hold in the host at once: its
    /// memory limit divided by [`Limits::FIELDS_BYTES`], so that what a
    /// plugin makes the host keep for it (each resource at most about a
    /// full fields object) is bounded by the same limit as its own memory
    /// (2,048 at 64 MiB, 8,192 at 256 MiB).
    pub fn host_resources(&self) -> usize {
        let per_memory = self.memory / Self::FIELDS_BYTES as u64;
        usize::try_from(per_memory)
            .unwrap_or(usize::MAX)
            .max(Self::MIN_HOST_RESOURCES)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory: 256 << 20,
            timeout: Duration::from_secs(30),
            output: 1 << 20,
        }
    }
}

/// Keeps a store's linear memories under a cap and remembers whether the
/// guest ran into it, so the host can say so instead of reporting a crash.
#[derive(Debug)]
pub struct MemoryCap {
    cap: usize,
    used: usize,
    hit: bool,
}

impl MemoryCap {
    /// A cap of `bytes` bytes.
    pub fn new(bytes: u64) -> Self {
        Self {
            cap: usize::try_from(bytes).unwrap_or(usize::MAX),
            used: 0,
            hit: false,
        }
    }

    /// A cap of `bytes` bytes of which `used` are already held.
    pub fn holding(bytes: u64, used: u64) -> Self {
        Self {
            used: usize::try_from(used).unwrap_or(usize::MAX),
            ..Self::new(bytes)
        }
    }

    /// Bytes held.
    pub fn used(&self) -> u64 {
        u64::try_from(self.used).unwrap_or(u64::MAX)
    }

    /// Whether a growth was refused because of the cap.
    pub fn was_hit(&self) -> bool {
        self.hit
    }
}

impl wasmtime::ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let after = self.used - current.min(self.used) + desired;
        if after > self.cap {
            self.hit = true;
            return Ok(false);
        }
        self.used = after;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Tables hold pointers; a million entries is far beyond any real plugin.
        Ok(desired <= 1_000_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_resources_follow_the_memory_limit() {
        let limits = |memory: u64| Limits {
            memory,
            ..Limits::default()
        };
        assert_eq!(limits(64 << 20).host_resources(), 2048);
        assert_eq!(Limits::default().host_resources(), 8192);
        assert_eq!(limits(1 << 20).host_resources(), Limits::MIN_HOST_RESOURCES);
    }

    #[test]
    fn the_cap_refuses_growth_past_it_and_remembers() {
        use wasmtime::ResourceLimiter;
        let mut cap = MemoryCap::new(1 << 20);
        assert!(cap.memory_growing(0, 512 << 10, None).unwrap());
        assert!(cap.memory_growing(512 << 10, 1 << 20, None).unwrap());
        assert!(!cap.was_hit());
        assert!(!cap.memory_growing(1 << 20, 2 << 20, None).unwrap());
        assert!(cap.was_hit());
    }
}
