//! Compiled components on disk, so Cranelift runs once per component.
//!
//! An entry is keyed by the component's SHA-256 and the engine fingerprint:
//! `<sha256>-<engine>.cwasm` holds the artifact exactly as wasmtime wrote
//! it, so it can be mapped into memory rather than copied, and
//! `<sha256>-<engine>.cwasm.b3` holds its BLAKE3 digest and the identity of
//! the file the digest was checked against (device, inode, size and change
//! time, which every write to the file moves on). A load whose artifact
//! still has that identity maps it straight away; any other is hashed
//! first, so a truncated, altered or replaced artifact is recompiled rather
//! than handed to wasmtime. Both files are written to temporary files and
//! renamed into place, so readers never see half a file and concurrent
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
        // Just written: too new to be trusted by identity (see `SETTLED`);
        // the first load after it has settled hashes it and records it.
        let record = Record {
            digest: digest.to_string(),
            identity: None,
        };
        write_atomically(&self.dir, &digest_path(path), record.to_text().as_bytes())
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

/// What the `.b3` file beside an artifact says of it.
#[derive(Debug, PartialEq, Eq)]
struct Record {
    /// The artifact's BLAKE3 digest, in hexadecimal.
    digest: String,
    /// The identity of the file the digest was last checked against.
    identity: Option<String>,
}

impl Record {
    /// Parses `DIGEST` or `DIGEST\nIDENTITY`.
    fn parse(text: &str) -> Option<Self> {
        let mut lines = text.lines();
        let digest = lines.next()?.trim();
        if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let identity = lines.next().map(str::trim).filter(|s| !s.is_empty());
        Some(Self {
            digest: digest.to_string(),
            identity: identity.map(str::to_string),
        })
    }

    fn to_text(&self) -> String {
        match &self.identity {
            Some(identity) => format!("{}\n{identity}\n", self.digest),
            None => format!("{}\n", self.digest),
        }
    }
}

/// How old a file's last change must be before its identity is recorded as
/// checked. File times come from a coarse clock (a few milliseconds, a
/// second on some file systems), so a write landing in the same tick as the
/// check could leave every field as it was; only an identity older than
/// that is trusted.
const SETTLED: std::time::Duration = std::time::Duration::from_secs(2);

/// The file's identity — its device, inode, size and change time: any write
/// to it, a truncation, or another file renamed into its place changes one
/// of them — and how long ago it last changed. None where the platform does
/// not say.
fn identity_and_age(path: &Path) -> Option<(String, std::time::Duration)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = fs::metadata(path).ok()?;
        let changed = std::time::UNIX_EPOCH
            + std::time::Duration::new(
                u64::try_from(meta.ctime()).ok()?,
                u32::try_from(meta.ctime_nsec()).ok()?,
            );
        let age = std::time::SystemTime::now()
            .duration_since(changed)
            .unwrap_or_default();
        let identity = format!(
            "{} {} {} {}.{:09}",
            meta.dev(),
            meta.ino(),
            meta.size(),
            meta.ctime(),
            meta.ctime_nsec()
        );
        Some((identity, age))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// Reads and checks an entry. Anything wrong with it (missing, damaged,
/// built by another engine) means "not cached".
fn read_entry(engine: &Engine, path: &Path) -> Option<Component> {
    let record = Record::parse(&fs::read_to_string(digest_path(path)).ok()?)?;
    let now = identity_and_age(path);
    let unchanged =
        matches!((&now, &record.identity), (Some((now, _)), Some(checked)) if now == checked);
    if !unchanged {
        // Recorded only if it has settled (see `SETTLED`).
        let now = now
            .filter(|(_, age)| *age >= SETTLED)
            .map(|(identity, _)| identity);
        // Hashed from a mapping of the file, in parallel: no copy of an
        // artifact that can be tens of megabytes.
        let mut hasher = blake3::Hasher::new();
        hasher.update_mmap_rayon(path).ok()?;
        if hasher.finalize().to_hex().as_str() != record.digest {
            return None;
        }
        // Checked: remember against which file, so the next load need not
        // hash it again. A cache that cannot be written only costs time.
        if let (Some(dir), Some(_)) = (path.parent(), &now) {
            let checked = Record {
                digest: record.digest,
                identity: now,
            };
            let _ = write_atomically(dir, &digest_path(path), checked.to_text().as_bytes());
        }
    }
    // SAFETY: wasmtime requires that a deserialized file was produced by
    // `Component::serialize` of a compatible engine. Only `write_entry`
    // writes these files, from `Component::serialize`; the name carries the
    // engine fingerprint; and the file holds the bytes whose BLAKE3 digest
    // was recorded when they were written: either it was hashed just above,
    // or it is the very file that was last hashed, unwritten since (its
    // change time moves on with any write). Replacing it between the check
    // and the mapping takes write access to the user's own cache folder.
    // wasmtime also checks the engine compatibility header and returns an
    // error (not UB) on a mismatch.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(path: &Path) -> Option<String> {
        identity_and_age(path).map(|(identity, _)| identity)
    }

    #[test]
    fn records_read_back_what_they_wrote() {
        let digest = "ab".repeat(32);
        for identity in [None, Some("1 2 3 4.000000005".to_string())] {
            let record = Record {
                digest: digest.clone(),
                identity,
            };
            assert_eq!(Record::parse(&record.to_text()), Some(record));
        }
        // The format before identities: a digest alone.
        assert_eq!(
            Record::parse(&format!("{digest}\n")).map(|r| r.identity),
            Some(None)
        );
        assert_eq!(Record::parse("not a digest"), None);
        assert_eq!(Record::parse(""), None);
    }

    #[test]
    fn an_artifact_is_hashed_until_its_identity_has_settled_and_again_once_changed() {
        let dir = tempfile::tempdir().unwrap();
        let engine = super::super::engine::build_engine().unwrap();
        let cache = CompileCache::new(dir.path().to_path_buf(), &engine);
        let fs_plugin = crate::plugin::builtin::find("fs").unwrap();
        let load = || {
            cache
                .load(&engine, fs_plugin.wasm, fs_plugin.sha256, "fs")
                .unwrap()
                .1
        };
        let entry = cache.entry_path(fs_plugin.sha256);
        let recorded = || Record::parse(&fs::read_to_string(digest_path(&entry)).unwrap()).unwrap();
        assert_eq!(load(), CacheOutcome::Compiled);
        assert_eq!(
            recorded().identity,
            None,
            "just written: not trusted by identity"
        );
        assert_eq!(load(), CacheOutcome::Hit);
        if identity(&entry).is_none() {
            return; // no file identities here: every load hashes
        }
        std::thread::sleep(SETTLED + std::time::Duration::from_millis(100));
        assert_eq!(load(), CacheOutcome::Hit);
        assert_eq!(
            recorded().identity,
            identity(&entry),
            "hashed once settled, and recorded"
        );
        assert_eq!(load(), CacheOutcome::Hit);

        // Any write moves the change time on: hashed again, and refused.
        let mut bytes = fs::read(&entry).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xff;
        fs::write(&entry, &bytes).unwrap();
        assert_ne!(recorded().identity, identity(&entry));
        assert_eq!(load(), CacheOutcome::Compiled);
    }
}
