//! The one wasmtime `Engine` of the process, and its fingerprint.

use std::hash::{Hash, Hasher};

use sha2::{Digest, Sha256};
use wasmtime::Engine;

use super::engine_config;
use super::error::LoadError;

pub use engine_config::{MAX_CONCURRENT_INSTANCES, MemoryReuse, UNUSED_WARM_SLOTS};

/// Builds the engine from [`engine_config::config`] (the configuration the
/// built-in plugins were precompiled with), with the code memory that
/// runs them in place on x86_64 Linux ([`super::precompiled`]).
pub fn build_engine() -> Result<Engine, LoadError> {
    build_engine_with(MemoryReuse::KeepResident)
}

/// [`build_engine`], with finished instances' memory treated as `reuse`
/// says.
pub fn build_engine_with(reuse: MemoryReuse) -> Result<Engine, LoadError> {
    let mut config = engine_config::config(reuse);
    // `CAPSTAN_PERFMAP=1` names plugins' compiled functions for `perf`
    // (in /tmp/perf-PID.map), to profile a plugin.
    if std::env::var_os("CAPSTAN_PERFMAP").is_some() {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    config.with_custom_code_memory(Some(super::precompiled::TextCodeMemory::shared()));
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
