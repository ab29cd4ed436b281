//! The limits every call runs under: memory, wall-clock time, result size.

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
    pub const MAX_MEMORY: u64 = 4 << 30;

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

/// Splits `256MiB` into 256 and `MiB` (the unit may be empty).
fn number_and_unit(text: &str) -> Option<(u64, &str)> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    Some((number.parse().ok()?, unit.trim()))
}

/// Parses a size such as `256MiB`, `64M`, `1GiB` or `1048576` into bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let (number, unit) = number_and_unit(text)
        .ok_or_else(|| format!("`{text}` is not a size; write it like 256MiB or 1GiB"))?;
    let factor: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => {
            return Err(format!(
                "unknown size unit `{other}` in `{text}`; use KiB, MiB or GiB"
            ));
        }
    };
    number
        .checked_mul(factor)
        .ok_or_else(|| format!("`{text}` is too large"))
}

/// Parses a duration such as `30s`, `500ms`, `2m` or `10` (seconds).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = number_and_unit(text)
        .ok_or_else(|| format!("`{text}` is not a duration; write it like 30s or 500ms"))?;
    match unit {
        "" | "s" => Ok(Duration::from_secs(number)),
        "ms" => Ok(Duration::from_millis(number)),
        "m" | "min" => Ok(Duration::from_secs(number.saturating_mul(60))),
        other => Err(format!(
            "unknown time unit `{other}` in `{text}`; use ms, s or m"
        )),
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
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("256MiB").unwrap(), 256 << 20);
        assert_eq!(parse_size("64m").unwrap(), 64 << 20);
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("12 parsecs").is_err());
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("7").unwrap(), Duration::from_secs(7));
        assert!(parse_duration("soon").is_err());
    }

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
