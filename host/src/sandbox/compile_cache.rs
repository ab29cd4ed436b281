//! Compiled components on disk, so Cranelift runs once per component.
//!
//! An entry is keyed by the component's SHA-256 and the engine fingerprint:
//! `<sha256>-<engine>.cwasm` holds the artifact exactly as wasmtime wrote
//! it, so it can be mapped into memory rather than copied, and
//! `<sha256>-<engine>.cwasm.b3` holds its BLAKE3 digest. The digest is
//! checked on every load, so a truncated or altered artifact is recompiled
//! rather than handed to wasmtime. Both files are written to temporary files
//! and renamed into place, so readers never see half a file and concurrent
//! processes can share one cache.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

use super::engine::fingerprint;
use super::error::LoadError;

/// Where a component came from when loading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded from a compiled artifact on disk.
    Hit,
    /// Compiled now (and stored for next time).
    Compiled,
}

/// A folder of compiled components for one engine.
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: PathBuf,
    engine_key: String,
}

impl CompileCache {
    /// A cache in `dir` for artifacts of `engine`. The folder is created on
    /// first write.
    pub fn new(dir: PathBuf, engine: &Engine) -> Self {
        Self {
            dir,
            engine_key: fingerprint(engine),
        }
    }

    /// The file holding the artifact of the component with this hash.
    pub fn entry_path(&self, component_sha256: &str) -> PathBuf {
        self.dir
            .join(format!("{component_sha256}-{}.cwasm", self.engine_key))
    }

    /// Loads the compiled form of `wasm` (whose SHA-256 is `sha256`),
    /// compiling and storing it first if needed. `origin` names the component
    /// in errors.
    pub fn load(
        &self,
        engine: &Engine,
        wasm: &[u8],
        sha256: &str,
        origin: &str,
    ) -> Result<(Component, CacheOutcome), LoadError> {
        let path = self.entry_path(sha256);
        if let Some(component) = read_entry(engine, &path) {
            return Ok((component, CacheOutcome::Hit));
        }
        let component = compile(engine, wasm, origin)?;
        // A cache that cannot be written only costs time; say so and go on.
        if let Err(err) = self.write_entry(&path, &component) {
            eprintln!("capstan: warning: {err}; the component will be compiled again next time");
        }
        Ok((component, CacheOutcome::Compiled))
    }

    fn write_entry(&self, path: &Path, component: &Component) -> Result<(), LoadError> {
        let artifact = component.serialize().map_err(|e| {
            LoadError::Engine(format!("cannot serialize a compiled component: {e:#}"))
        })?;
        fs::create_dir_all(&self.dir).map_err(|source| LoadError::Io {
            action: "cannot create the compile cache",
            path: self.dir.clone(),
            source,
        })?;
        let digest = blake3::hash(&artifact).to_hex();
        // The artifact first: a digest never names an artifact not yet there.
        write_atomically(&self.dir, path, &artifact)?;
        write_atomically(&self.dir, &digest_path(path), digest.as_bytes())
    }

    /// Removes the entry for a component, if there is one.
    pub fn remove(&self, component_sha256: &str) -> std::io::Result<()> {
        let path = self.entry_path(component_sha256);
        for file in [digest_path(&path), path] {
            match fs::remove_file(file) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
}

/// The file holding an artifact's digest.
fn digest_path(artifact: &Path) -> PathBuf {
    let mut name = artifact.as_os_str().to_owned();
    name.push(".b3");
    PathBuf::from(name)
}

/// Reads and checks an entry. Anything wrong with it (missing, damaged,
/// built by another engine) means "not cached".
fn read_entry(engine: &Engine, path: &Path) -> Option<Component> {
    let recorded = fs::read_to_string(digest_path(path)).ok()?;
    // Hashed from a mapping of the file, in parallel: no copy of an
    // artifact that can be tens of megabytes.
    let mut hasher = blake3::Hasher::new();
    hasher.update_mmap_rayon(path).ok()?;
    if hasher.finalize().to_hex().as_str() != recorded.trim() {
        return None;
    }
    // SAFETY: wasmtime requires that a deserialized file was produced by
    // `Component::serialize` of a compatible engine. Only `write_entry`
    // writes these files, from `Component::serialize`; the name carries the
    // engine fingerprint; and the BLAKE3 digest recorded when it was written
    // was checked just above, so the file holds the bytes we produced.
    // Replacing it between the check and the mapping takes write access to
    // the user's own cache folder. wasmtime also checks the engine
    // compatibility header and returns an error (not UB) on a mismatch.
    #[allow(unsafe_code)]
    let component = unsafe { Component::deserialize_file(engine, path) };
    component.ok()
}

/// Writes `bytes` to `path` through a temporary file in `dir`.
fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> Result<(), LoadError> {
    let io = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| LoadError::Io {
            action,
            path,
            source,
        }
    };
    let mut temp =
        tempfile::NamedTempFile::new_in(dir).map_err(io("cannot create a file in", dir))?;
    temp.write_all(bytes)
        .and_then(|()| temp.flush())
        .map_err(io("cannot write", temp.path()))?;
    temp.persist(path).map_err(|e| LoadError::Io {
        action: "cannot store",
        path: path.to_path_buf(),
        source: e.error,
    })?;
    Ok(())
}

/// Validates and compiles a component, telling apart the ways it can fail.
pub fn compile(engine: &Engine, wasm: &[u8], origin: &str) -> Result<Component, LoadError> {
    const COMPONENT_VERSION: [u8; 4] = [0x0d, 0x00, 0x01, 0x00];
    if wasm.len() < 8 || &wasm[..4] != b"\0asm" {
        return Err(LoadError::NotWasm {
            origin: origin.to_string(),
        });
    }
    if wasm[4..8] != COMPONENT_VERSION {
        if wasm[4..8] == [1, 0, 0, 0] {
            return Err(LoadError::CoreModule {
                origin: origin.to_string(),
            });
        }
        return Err(LoadError::Invalid {
            origin: origin.to_string(),
            reason: "unsupported WebAssembly version in the header".to_string(),
        });
    }
    Component::new(engine, wasm).map_err(|e| LoadError::Invalid {
        origin: origin.to_string(),
        reason: format!("{e:#}"),
    })
}
