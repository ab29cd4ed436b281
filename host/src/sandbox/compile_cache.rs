//! Compiled components on disk, so Cranelift runs once per component.
//!
//! An entry is keyed by the component's SHA-256 and the engine fingerprint.
//! Its file starts with a magic line and the SHA-256 of the artifact that
//! follows; the hash is checked on every load, so a truncated or altered file
//! is recompiled rather than handed to wasmtime. Entries are written to a
//! temporary file and renamed into place, so readers never see half a file
//! and concurrent processes can share one cache.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::engine::fingerprint;
use super::error::LoadError;

const MAGIC: &[u8; 16] = b"capstan-cwasm-1\n";
const HEADER_LEN: usize = MAGIC.len() + 32;

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
        if let Some(component) = self.read_entry(engine, &path) {
            return Ok((component, CacheOutcome::Hit));
        }
        let component = compile(engine, wasm, origin)?;
        // A cache that cannot be written only costs time; say so once and go on.
        if let Err(err) = self.write_entry(&path, &component) {
            eprintln!("capstan: warning: {err}; the component will be compiled again next time");
        }
        Ok((component, CacheOutcome::Compiled))
    }

    /// Reads and checks an entry. Anything wrong with it (missing, damaged,
    /// built by another engine) means "not cached".
    fn read_entry(&self, engine: &Engine, path: &Path) -> Option<Component> {
        let bytes = fs::read(path).ok()?;
        let artifact = checked_artifact(&bytes)?;
        // SAFETY: wasmtime requires that deserialized bytes were produced by
        // `Component::serialize` of a compatible engine. This file is written
        // only by `write_entry` below from `Component::serialize`, its name
        // carries the engine fingerprint, and `checked_artifact` verified the
        // SHA-256 recorded when it was written, so the bytes are the ones we
        // produced. wasmtime additionally checks the engine compatibility
        // header and returns an error (not UB) on a mismatch.
        #[allow(unsafe_code)]
        let component = unsafe { Component::deserialize(engine, artifact) };
        component.ok()
    }

    fn write_entry(&self, path: &Path, component: &Component) -> Result<(), LoadError> {
        let io = |action, path: &Path| {
            let path = path.to_path_buf();
            move |source| LoadError::Io {
                action,
                path,
                source,
            }
        };
        let artifact = component.serialize().map_err(|e| {
            LoadError::Engine(format!("cannot serialize a compiled component: {e:#}"))
        })?;
        fs::create_dir_all(&self.dir).map_err(io("cannot create the compile cache", &self.dir))?;
        let mut temp = tempfile::NamedTempFile::new_in(&self.dir)
            .map_err(io("cannot create a file in", &self.dir))?;
        let digest = Sha256::digest(&artifact);
        temp.write_all(MAGIC)
            .and_then(|()| temp.write_all(&digest))
            .and_then(|()| temp.write_all(&artifact))
            .and_then(|()| temp.flush())
            .map_err(io("cannot write", temp.path()))?;
        temp.persist(path).map_err(|e| LoadError::Io {
            action: "cannot store",
            path: path.to_path_buf(),
            source: e.error,
        })?;
        Ok(())
    }

    /// Removes the entry for a component, if there is one.
    pub fn remove(&self, component_sha256: &str) -> std::io::Result<()> {
        match fs::remove_file(self.entry_path(component_sha256)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

/// The artifact inside an entry, if the magic and the hash check out.
fn checked_artifact(bytes: &[u8]) -> Option<&[u8]> {
    if bytes.len() < HEADER_LEN || &bytes[..MAGIC.len()] != MAGIC {
        return None;
    }
    let (header, artifact) = bytes.split_at(HEADER_LEN);
    let recorded = &header[MAGIC.len()..];
    (Sha256::digest(artifact).as_slice() == recorded).then_some(artifact)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damaged_entries_are_rejected() {
        let artifact = b"compiled code";
        let mut entry = MAGIC.to_vec();
        entry.extend_from_slice(&Sha256::digest(artifact));
        entry.extend_from_slice(artifact);
        assert_eq!(checked_artifact(&entry), Some(&artifact[..]));

        let mut flipped = entry.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert_eq!(checked_artifact(&flipped), None);
        assert_eq!(checked_artifact(&entry[..entry.len() - 1]), None);
        assert_eq!(checked_artifact(&entry[..10]), None);
        assert_eq!(checked_artifact(b""), None);
    }
}
