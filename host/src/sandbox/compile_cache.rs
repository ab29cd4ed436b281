//! Compiled components on disk, so Cranelift runs once per component.
//!
//! An entry is keyed by the component's SHA-256, the engine fingerprint and
//! the cache key's id: `<sha256>-<engine>-<key id>.cwasm` holds the artifact
//! as wasmtime serialized it, followed by a 32-byte keyed BLAKE3 MAC of the
//! component's hash, the engine fingerprint and the artifact. The key
//! ([`CacheKey`]) is kept in capstan's data folder, beside the lockfile,
//! where no grant reaches ([`crate::grants::fs::OwnFolders`]); so a process
//! that can write the cache folder but not the data folder still cannot
//! make capstan run an artifact of its own: without the key it cannot
//! compute the MAC, and an artifact moved under another component's name
//! fails the MAC, which binds the name's hash.
//!
//! A load reads the whole file into memory (at most [`MAX_ARTIFACT`]), checks
//! the MAC over exactly those bytes, and hands wasmtime the bytes it checked.
//! Nothing is mapped from the file, so a file truncated or rewritten by
//! anyone — before, during or after the check — can neither crash capstan
//! (a mapped file cut short faults with SIGBUS) nor slip in unchecked bytes:
//! a damaged entry is compiled again. Entries are written to a temporary
//! file and renamed into place, so readers never see half a file and
//! concurrent processes can share one cache.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

use super::engine::fingerprint;
use super::error::LoadError;
use crate::untrusted_folder::UntrustedFolder;

/// The largest artifact read back (a Python component's is tens of MiB).
pub const MAX_ARTIFACT: usize = 1 << 30;

/// The length of the MAC after the artifact.
const MAC_LEN: usize = 32;

/// Where a component came from when loading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded from a compiled artifact on disk.
    Hit,
    /// Compiled now (and stored for next time).
    Compiled,
}

/// The secret key that signs compiled components, and its public id.
#[derive(Clone)]
pub struct CacheKey {
    key: [u8; 32],
    id: String,
}

impl std::fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheKey")
            .field("id", &self.id)
            .field("key", &"<secret>")
            .finish()
    }
}

impl CacheKey {
    /// The key kept in the file at `path`, made (from the system's random
    /// source, readable by the user alone) if there is none yet.
    pub fn load_or_create(path: &Path) -> Result<Self, LoadError> {
        match Self::read(path)? {
            Some(key) => Ok(key),
            None => {
                Self::create(path)?;
                Self::read(path)?.ok_or_else(|| LoadError::Io {
                    action: "cannot read the compile cache key",
                    path: path.to_path_buf(),
                    source: std::io::ErrorKind::NotFound.into(),
                })
            }
        }
    }

    /// The key kept in the file at `path`, if there is one; never makes
    /// one (`capstan doctor` looks without changing anything).
    pub fn existing(path: &Path) -> Result<Option<Self>, LoadError> {
        Self::read(path)
    }

    /// The key's public id (never the key).
    pub fn id(&self) -> &str {
        &self.id
    }

    fn from_bytes(key: [u8; 32]) -> Self {
        let id = blake3::derive_key("capstan compile cache key id v1", &key);
        Self {
            key,
            id: blake3::Hash::from(id).to_hex()[..16].to_string(),
        }
    }

    fn read(path: &Path) -> Result<Option<Self>, LoadError> {
        let text = match fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(LoadError::Io {
                    action: "cannot read the compile cache key",
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let key = blake3::Hash::from_hex(text.trim()).map_err(|_| LoadError::Io {
            action: "the compile cache key is damaged (delete it: capstan makes a new one and compiles components again)",
            path: path.to_path_buf(),
            source: std::io::ErrorKind::InvalidData.into(),
        })?;
        Ok(Some(Self::from_bytes(*key.as_bytes())))
    }

    /// Writes a fresh key, unless another process got there first.
    fn create(path: &Path) -> Result<(), LoadError> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| LoadError::Io {
            action: "cannot make a compile cache key",
            path: path.to_path_buf(),
            source: std::io::Error::other(e.to_string()),
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let io = |action| {
            move |source| LoadError::Io {
                action,
                path: path.to_path_buf(),
                source,
            }
        };
        fs::create_dir_all(dir).map_err(io("cannot create the folder of"))?;
        // A temporary file is made readable by its owner alone.
        let mut temp = tempfile::Builder::new()
            .tempfile_in(dir)
            .map_err(io("cannot write"))?;
        writeln!(temp, "{}", blake3::Hash::from(key).to_hex()).map_err(io("cannot write"))?;
        match temp.persist_noclobber(path) {
            Ok(_) => Ok(()),
            // Another process made it first: use theirs.
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(io("cannot store")(e.error)),
        }
    }
}

/// A folder of compiled components for one engine, signed with one key.
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: PathBuf,
    engine_key: String,
    key: CacheKey,
}

impl CompileCache {
    /// A cache in `dir` for artifacts of `engine`, signed with `key`. The
    /// folder is created on first write.
    pub fn new(dir: PathBuf, engine: &Engine, key: CacheKey) -> Self {
        Self {
            dir,
            engine_key: fingerprint(engine),
            key,
        }
    }

    /// The file holding the artifact of the component with this hash.
    pub fn entry_path(&self, component_sha256: &str) -> PathBuf {
        self.dir.join(format!(
            "{component_sha256}-{}-{}.cwasm",
            self.engine_key, self.key.id
        ))
    }

    /// The MAC of `artifact` as the compiled form of component `sha256`.
    fn mac(&self, sha256: &str, artifact: &[u8]) -> blake3::Hash {
        let mut hasher = blake3::Hasher::new_keyed(&self.key.key);
        hasher.update(b"capstan compile cache v1\0");
        hasher.update(sha256.as_bytes());
        hasher.update(b"\0");
        hasher.update(self.engine_key.as_bytes());
        hasher.update(b"\0");
        // Large (Python, JavaScript) artifacts are hashed on every core.
        hasher.update_rayon(artifact);
        hasher.finalize()
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
        if let Some(component) = self.read_entry(engine, sha256) {
            return Ok((component, CacheOutcome::Hit));
        }
        let component = compile(engine, wasm, origin)?;
        // A cache that cannot be written only costs time; say so and go on.
        if let Err(err) = self.write_entry(sha256, &component) {
            eprintln!("capstan: warning: {err}; the component will be compiled again next time");
        }
        Ok((component, CacheOutcome::Compiled))
    }

    /// Loads the compiled form of component `sha256` from its entry, which
    /// must be there: a plugin parked while the session idled is linked
    /// again this way ([`super::rest`]). `origin` names it in errors.
    pub fn load_compiled(
        &self,
        engine: &Engine,
        sha256: &str,
        origin: &str,
    ) -> Result<Component, LoadError> {
        self.read_entry(engine, sha256)
            .ok_or_else(|| LoadError::NotCached {
                origin: origin.to_string(),
                path: self.entry_path(sha256),
            })
    }

    /// Reads and checks the entry of component `sha256`. Anything wrong
    /// with it (missing, not a regular file, too large, truncated, altered,
    /// signed with another key, built by another engine) means "not
    /// cached".
    fn read_entry(&self, engine: &Engine, sha256: &str) -> Option<Component> {
        let path = self.entry_path(sha256);
        let folder = UntrustedFolder::open(&self.dir).ok()??;
        let read = folder
            .read(Path::new(path.file_name()?), MAX_ARTIFACT + MAC_LEN)
            .ok()??;
        if read.more || read.bytes.len() < MAC_LEN {
            return None;
        }
        let (artifact, mac) = read.bytes.split_at(read.bytes.len() - MAC_LEN);
        let mac: [u8; MAC_LEN] = mac.try_into().ok()?;
        // `Hash` compares in constant time.
        if self.mac(sha256, artifact) != blake3::Hash::from(mac) {
            return None;
        }
        // SAFETY: wasmtime requires that deserialized bytes were produced by
        // `Component::serialize` of a compatible engine. These bytes carry a
        // MAC made with a key only capstan holds (in its data folder, which
        // no grant reaches) and only `write_entry` uses, over the output of
        // `Component::serialize` for this component hash and this engine
        // fingerprint; and they are the very bytes checked just above, in
        // capstan's memory, so no change to the file after the check can
        // reach wasmtime. wasmtime also checks the engine compatibility
        // header and returns an error (not UB) on a mismatch.
        #[allow(unsafe_code)]
        let component = unsafe { Component::deserialize(engine, artifact) };
        component.ok()
    }

    fn write_entry(&self, sha256: &str, component: &Component) -> Result<(), LoadError> {
        let mut artifact = component.serialize().map_err(|e| {
            LoadError::Engine(format!("cannot serialize a compiled component: {e:#}"))
        })?;
        fs::create_dir_all(&self.dir).map_err(|source| LoadError::Io {
            action: "cannot create the compile cache",
            path: self.dir.clone(),
            source,
        })?;
        let mac = self.mac(sha256, &artifact);
        artifact.extend_from_slice(mac.as_bytes());
        write_atomically(&self.dir, &self.entry_path(sha256), &artifact)
    }

    /// Removes every entry for a component (whatever the engine or key that
    /// made it), if there is one.
    pub fn remove(&self, component_sha256: &str) -> std::io::Result<()> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let prefix = format!("{component_sha256}-");
        for entry in entries.flatten() {
            if !entry.file_name().to_string_lossy().starts_with(&prefix) {
                continue;
            }
            match fs::remove_file(entry.path()) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixture {
        _dir: tempfile::TempDir,
        engine: Engine,
        cache: CompileCache,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let engine = super::super::engine::build_engine().unwrap();
        let key = CacheKey::load_or_create(&dir.path().join("data/key")).unwrap();
        let cache = CompileCache::new(dir.path().join("compiled"), &engine, key);
        Fixture {
            _dir: dir,
            engine,
            cache,
        }
    }

    fn load(f: &Fixture) -> CacheOutcome {
        let fs_plugin = crate::plugin::builtin::find("fs").unwrap();
        f.cache
            .load(&f.engine, fs_plugin.wasm, fs_plugin.sha256, "fs")
            .unwrap()
            .1
    }

    #[test]
    fn keys_are_made_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        let first = CacheKey::load_or_create(&path).unwrap();
        let again = CacheKey::load_or_create(&path).unwrap();
        assert_eq!(first.key, again.key);
        assert_eq!(first.id, again.id);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "readable by its owner alone");
        }
        let other = CacheKey::load_or_create(&dir.path().join("other")).unwrap();
        assert_ne!(first.key, other.key);
        assert!(
            !format!("{first:?}").contains(&blake3::Hash::from(first.key).to_hex().to_string())
        );
        fs::write(&path, "not a key").unwrap();
        let err = CacheKey::load_or_create(&path).unwrap_err();
        assert!(err.to_string().contains("damaged"), "{err}");
    }

    #[test]
    fn entries_are_read_back_and_any_change_is_compiled_again() {
        let f = fixture();
        let fs_plugin = crate::plugin::builtin::find("fs").unwrap();
        let entry = f.cache.entry_path(fs_plugin.sha256);
        assert_eq!(load(&f), CacheOutcome::Compiled);
        assert_eq!(load(&f), CacheOutcome::Hit);

        // Cut short while a component loaded from it is in use: the
        // component holds its own copy of the checked bytes, so touching all
        // of its code (which faulted with SIGBUS when it was mapped from the
        // file) is fine.
        let good = fs::read(&entry).unwrap();
        let (loaded, outcome) = f
            .cache
            .load(&f.engine, fs_plugin.wasm, fs_plugin.sha256, "fs")
            .unwrap();
        assert_eq!(outcome, CacheOutcome::Hit);
        fs::write(&entry, b"").unwrap();
        assert!(loaded.serialize().unwrap().len() > good.len() / 2);
        assert_eq!(load(&f), CacheOutcome::Compiled);

        // A flipped byte, a truncation, a lost MAC: compiled again.
        let mut flipped = good.clone();
        flipped[good.len() / 2] ^= 0xff;
        for bad in [
            flipped,
            good[..good.len() / 2].to_vec(),
            good[..10].to_vec(),
        ] {
            fs::write(&entry, &bad).unwrap();
            assert_eq!(load(&f), CacheOutcome::Compiled);
            assert_eq!(load(&f), CacheOutcome::Hit);
        }
    }

    #[test]
    fn an_artifact_signed_without_the_key_is_never_loaded() {
        let f = fixture();
        let fs_plugin = crate::plugin::builtin::find("fs").unwrap();
        assert_eq!(load(&f), CacheOutcome::Compiled);
        let entry = f.cache.entry_path(fs_plugin.sha256);
        let good = fs::read(&entry).unwrap();
        let artifact = &good[..good.len() - MAC_LEN];
        // Signed with another key: refused.
        let other = CompileCache::new(
            f.cache.dir.clone(),
            &f.engine,
            CacheKey::from_bytes([7; 32]),
        );
        let mut forged = artifact.to_vec();
        forged.extend_from_slice(other.mac(fs_plugin.sha256, artifact).as_bytes());
        fs::write(&entry, &forged).unwrap();
        assert_eq!(load(&f), CacheOutcome::Compiled);
        // An unkeyed digest: refused.
        let mut unkeyed = artifact.to_vec();
        unkeyed.extend_from_slice(blake3::hash(artifact).as_bytes());
        fs::write(&entry, &unkeyed).unwrap();
        assert_eq!(load(&f), CacheOutcome::Compiled);
        // Another component's genuine entry moved under this name: its MAC
        // binds its own hash, so it is refused.
        let elsewhere = f.cache.entry_path(&"0".repeat(64));
        let mut moved = artifact.to_vec();
        moved.extend_from_slice(f.cache.mac(&"0".repeat(64), artifact).as_bytes());
        fs::write(&elsewhere, &moved).unwrap();
        fs::rename(&elsewhere, &entry).unwrap();
        assert_eq!(load(&f), CacheOutcome::Compiled);
    }

    #[test]
    fn remove_takes_every_entry_of_a_component() {
        let f = fixture();
        let fs_plugin = crate::plugin::builtin::find("fs").unwrap();
        assert_eq!(load(&f), CacheOutcome::Compiled);
        let stale = f.cache.dir.join(format!("{}-old.cwasm", fs_plugin.sha256));
        fs::write(&stale, "x").unwrap();
        f.cache.remove(fs_plugin.sha256).unwrap();
        assert!(!stale.exists());
        assert!(!f.cache.entry_path(fs_plugin.sha256).exists());
        f.cache.remove(fs_plugin.sha256).unwrap();
    }
}
