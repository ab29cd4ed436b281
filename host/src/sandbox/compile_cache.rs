//! Compiled components on disk, so Cranelift runs once per component.
//!
//! An entry is keyed by the component's SHA-256, the engine fingerprint and
//! the cache key's id: `<sha256>-<engine>-<key id>.cwasm` holds the artifact
//! exactly as wasmtime serialized it, and `<same name>.seal` beside it a
//! *seal*: a keyed BLAKE3 MAC of the component's hash, the engine
//! fingerprint and the identity of the entry file as written — device,
//! inode, size, modification and change times to the nanosecond, as
//! `fstat` gave them just after the file was renamed into place. The key
//! ([`CacheKey`]) is kept in capstan's data folder, beside the lockfile.
//!
//! A load opens the entry beneath the cache folder without following
//! links, `fstat`s the open file and checks the seal against that identity:
//! an entry swapped for another file (another component's entry renamed
//! over it, a copy), rewritten in place (which moves its change time, which
//! no one can set back), truncated or extended (its size), or a seal made
//! with another key or for another engine, is *not cached*: the component
//! is compiled again and sealed anew. The checked file is then mapped as
//! it is — wasmtime opens `/proc/self/fd/N`, the very inode checked, so
//! nothing is read or copied ahead of use and the code pages are shared
//! with the page cache. Where `/proc` is missing the open file is read into
//! memory and `fstat`ed again after the read: an unchanged identity means
//! the bytes read are the sealed ones.
//!
//! Entries and seals are written to a temporary file and renamed into
//! place; capstan never changes an entry in place, so readers never see
//! half a file, a mapped entry is never cut short by capstan, and
//! concurrent processes can share one cache.
//!
//! What this guards against, plainly: capstan's folders are out of every
//! grant's reach (no plugin, command or MCP server capstan runs can write
//! them, [`crate::grants::fs::OwnFolders`]), so only the user's own
//! unsandboxed processes can. Such a process cannot make capstan run code
//! of its choosing through the cache without the key: it cannot forge a
//! seal, and a sealed entry changed in any way no longer matches it. It can
//! read the key (it is the user's file) and forge seals — but a process
//! able to do that can as well replace the `capstan` binary or attach to
//! it with a debugger, so the cache gives it nothing more. It can also
//! truncate an entry *while* a capstan process has it mapped, which kills
//! that process with SIGBUS; capstan's own actions never do that. One
//! residual gap: before Linux 6.13 the kernel's timestamps are coarse (a
//! few milliseconds), so there a rewrite keeping the size within that tick
//! of the sealing is not seen by the change time (since 6.13 a timestamp
//! read by `fstat` makes the next change's finer); again, only an
//! unsandboxed process of the user can attempt it.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use cap_primitives::fs::{FollowSymlinks, OpenOptions};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::engine::fingerprint;
use super::error::LoadError;

/// The largest artifact loaded (a Python component's is tens of MiB).
pub const MAX_ARTIFACT: u64 = 1 << 30;

/// The largest seal file read (a seal is 64 hexadecimal digits).
const MAX_SEAL: u64 = 256;

/// Where a component came from when loading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// A built-in plugin loaded from the code precompiled into the binary.
    Precompiled,
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

    /// The file holding the seal of the entry of component `sha256`.
    fn seal_path(&self, component_sha256: &str) -> PathBuf {
        self.entry_path(component_sha256).with_extension("seal")
    }

    /// The seal of an entry for component `sha256` whose file has
    /// `identity`.
    fn seal(&self, sha256: &str, identity: &Identity) -> blake3::Hash {
        let mut hasher = blake3::Hasher::new_keyed(&self.key.key);
        hasher.update(b"capstan compile cache seal v2\0");
        hasher.update(sha256.as_bytes());
        hasher.update(b"\0");
        hasher.update(self.engine_key.as_bytes());
        hasher.update(b"\0");
        hasher.update(&identity.to_bytes());
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

    /// Opens and checks the entry of component `sha256` and loads it.
    /// Anything wrong with it (missing, not a regular file, a link, too
    /// large, no seal, a seal that does not match the open file, made with
    /// another key or for another engine) means "not cached".
    fn read_entry(&self, engine: &Engine, sha256: &str) -> Option<Component> {
        let dir =
            cap_primitives::fs::open_ambient_dir(&self.dir, cap_primitives::ambient_authority())
                .ok()?;
        let entry_path = self.entry_path(sha256);
        let seal_path = self.seal_path(sha256);
        let mut seal_text = String::new();
        open_beneath(&dir, Path::new(seal_path.file_name()?))?
            .take(MAX_SEAL)
            .read_to_string(&mut seal_text)
            .ok()?;
        let sealed = blake3::Hash::from_hex(seal_text.trim()).ok()?;
        let file = open_beneath(&dir, Path::new(entry_path.file_name()?))?;
        let identity = Identity::of(&file)?;
        if identity.size > MAX_ARTIFACT {
            return None;
        }
        // `Hash` compares in constant time.
        if self.seal(sha256, &identity) != sealed {
            return None;
        }
        map_sealed(engine, file, &identity)
    }

    fn write_entry(&self, sha256: &str, component: &Component) -> Result<(), LoadError> {
        let artifact = component.serialize().map_err(|e| {
            LoadError::Engine(format!("cannot serialize a compiled component: {e:#}"))
        })?;
        fs::create_dir_all(&self.dir).map_err(|source| LoadError::Io {
            action: "cannot create the compile cache",
            path: self.dir.clone(),
            source,
        })?;
        let entry = self.entry_path(sha256);
        let file = write_atomically(&self.dir, &entry, &artifact)?;
        // The identity after the rename (which moves the change time), of
        // the very file written: what a load will find, unless someone
        // changed it since.
        let identity = Identity::of(&file).ok_or_else(|| LoadError::Io {
            action: "cannot read back the metadata of",
            path: entry.clone(),
            source: std::io::ErrorKind::Other.into(),
        })?;
        let seal = self.seal(sha256, &identity);
        write_atomically(
            &self.dir,
            &self.seal_path(sha256),
            format!("{}\n", seal.to_hex()).as_bytes(),
        )?;
        Ok(())
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

/// Writes `bytes` to `path` through a temporary file in `dir`, renamed
/// into place; returns the file written.
fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> Result<fs::File, LoadError> {
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
    })
}

/// The regular file `name` directly in `dir`, opened for reading without
/// following a link (nor blocking on a FIFO); `None` when there is none or
/// it is anything else.
fn open_beneath(dir: &fs::File, name: &Path) -> Option<fs::File> {
    let mut options = OpenOptions::new();
    options.read(true);
    options._cap_fs_ext_follow(FollowSymlinks::No);
    options._cap_fs_ext_nonblock(true);
    let file = cap_primitives::fs::open(dir, name, &options).ok()?;
    file.metadata().ok()?.is_file().then_some(file)
}

/// What identifies an entry file as written: a file swapped in, or this
/// one changed in place, has another.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Identity {
    /// The identity of the open `file` (`fstat`).
    #[cfg(unix)]
    fn of(file: &fs::File) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let meta = file.metadata().ok()?;
        meta.is_file().then(|| Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        })
    }

    /// The identity of the open `file`: its size and modification time
    /// (the systems capstan runs on are Unix; this keeps it building
    /// elsewhere).
    #[cfg(not(unix))]
    fn of(file: &fs::File) -> Option<Self> {
        let meta = file.metadata().ok()?;
        let modified = meta
            .modified()
            .ok()?
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?;
        meta.is_file().then(|| Self {
            dev: 0,
            ino: 0,
            size: meta.len(),
            mtime: (
                i64::try_from(modified.as_secs()).ok()?,
                i64::from(modified.subsec_nanos()),
            ),
            ctime: (0, 0),
        })
    }

    fn to_bytes(&self) -> [u8; 56] {
        let mut bytes = [0u8; 56];
        let fields = [
            self.dev.to_le_bytes(),
            self.ino.to_le_bytes(),
            self.size.to_le_bytes(),
            self.mtime.0.to_le_bytes(),
            self.mtime.1.to_le_bytes(),
            self.ctime.0.to_le_bytes(),
            self.ctime.1.to_le_bytes(),
        ];
        for (chunk, field) in bytes.chunks_exact_mut(8).zip(fields) {
            chunk.copy_from_slice(&field);
        }
        bytes
    }
}

/// Loads the sealed, open entry `file` (whose identity is `identity`):
/// mapped through `/proc/self/fd`, which reopens this very file; where
/// there is no `/proc`, read into memory and used only if its identity did
/// not change during the read.
fn map_sealed(engine: &Engine, file: fs::File, identity: &Identity) -> Option<Component> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let by_fd = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        if by_fd.exists() {
            // SAFETY: wasmtime requires that the file holds the output of
            // `Component::serialize` of a compatible engine and that it is
            // not changed while mapped. The path names the file opened and
            // checked above (the descriptor's magic link reopens that
            // inode, not whatever is now at the entry's name); its identity
            // matches a seal made with a key only capstan holds, which
            // `write_entry` makes over a file it wrote from
            // `Component::serialize` for this component and engine
            // fingerprint, so it is that file, unchanged since. capstan
            // never writes an entry in place (only a new file renamed over
            // it), and only the user's own unsandboxed processes can write
            // the cache folder (see the module's documentation for what they
            // could do). wasmtime checks the engine compatibility header and
            // returns an error (not UB) on a mismatch.
            #[allow(unsafe_code)]
            let component = unsafe { Component::deserialize_file(engine, &by_fd) };
            return component.ok();
        }
    }
    read_sealed(engine, &file, identity)
}

/// Loads the sealed, open entry `file` by reading it into memory, if its
/// identity is still `identity` after the read.
fn read_sealed(engine: &Engine, file: &fs::File, identity: &Identity) -> Option<Component> {
    let mut bytes = Vec::with_capacity(usize::try_from(identity.size).ok()?);
    let mut reader = file;
    std::io::Seek::seek(&mut reader, std::io::SeekFrom::Start(0)).ok()?;
    reader.take(MAX_ARTIFACT).read_to_end(&mut bytes).ok()?;
    if Identity::of(file).as_ref() != Some(identity) || bytes.len() as u64 != identity.size {
        return None;
    }
    // SAFETY: wasmtime requires bytes made by `Component::serialize` of a
    // compatible engine. These were read from the file whose identity,
    // before and after the read, matches a seal made with a key only
    // capstan holds over a file it wrote from `Component::serialize` for
    // this component and engine fingerprint, so they are that file's
    // bytes; they are in capstan's memory, beyond reach of later changes to
    // the file. wasmtime checks the compatibility header and returns an
    // error on a mismatch.
    #[allow(unsafe_code)]
    let component = unsafe { Component::deserialize(engine, &bytes) };
    component.ok()
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
        let fs_plugin = crate::sandbox::builtin::find("fs").unwrap();
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
    fn entries_are_sealed_and_read_back() {
        let f = fixture();
        let fs_plugin = crate::sandbox::builtin::find("fs").unwrap();
        assert_eq!(load(&f), CacheOutcome::Compiled);
        assert!(f.cache.seal_path(fs_plugin.sha256).is_file());
        assert_eq!(load(&f), CacheOutcome::Hit);
        let loaded = f
            .cache
            .load_compiled(&f.engine, fs_plugin.sha256, "fs")
            .unwrap();
        assert!(is_fs(&f.engine, &loaded));
    }

    /// Whether `component` is the built-in fs plugin's (a tool plugin
    /// importing no HTTP), not the web plugin's.
    fn is_fs(engine: &Engine, component: &Component) -> bool {
        let ty = component.component_type();
        let exports_tools = ty
            .exports(engine)
            .any(|(name, _)| name == "capstan:plugin/tool@0.1.0");
        let imports_http = ty
            .imports(engine)
            .any(|(name, _)| name.starts_with("wasi:http/"));
        exports_tools && !imports_http
    }

    /// A sandbox over `dir`'s home with the web plugin's entry in its
    /// cache and the fs plugin's: fs compiled, then read back.
    fn sandbox_with_fs_and_web(dir: &Path) -> (super::super::Sandbox, PathBuf, PathBuf) {
        let sandbox =
            super::super::Sandbox::new(&crate::home::Home::at(dir.join("home"), dir.join("cache")))
                .unwrap();
        let (fs_plugin, web) = (
            crate::sandbox::builtin::find("fs").unwrap(),
            crate::sandbox::builtin::find("web").unwrap(),
        );
        sandbox
            .load("web", web.wasm, Some(web.sha256), "web")
            .unwrap();
        let cache = sandbox.compile_cache();
        let entries = (
            cache.entry_path(fs_plugin.sha256),
            cache.entry_path(web.sha256),
        );
        (sandbox, entries.0, entries.1)
    }

    /// Loads fs through `sandbox` and runs its `read` on `x.txt` in `dir`:
    /// the outcome and what it read.
    async fn load_and_read(sandbox: &super::super::Sandbox, dir: &Path) -> (CacheOutcome, String) {
        use crate::grants::{Grants, OwnFolders};
        let fs_plugin = crate::sandbox::builtin::find("fs").unwrap();
        let component = sandbox
            .load("fs", fs_plugin.wasm, Some(fs_plugin.sha256), "fs")
            .unwrap();
        let options = super::super::CallOptions {
            grants: Grants::workspace(dir, false, &OwnFolders::default()).unwrap(),
            ..super::super::CallOptions::default()
        };
        let output = sandbox
            .call_tool(&component, "read", r#"{"path":"x.txt"}"#, &options)
            .await
            .unwrap();
        (component.cache_outcome(), format!("{output:?}"))
    }

    /// Every way of changing a sealed entry — rewritten in place with
    /// other bytes of the same size, truncated, a seal made with another
    /// key, no seal, another component's entry renamed over it (with or
    /// without its seal), a link — is not loaded: the component is compiled
    /// again, runs as itself, and is sealed anew. (Each attack is made on an
    /// entry just written, which no loaded component maps: a component
    /// compiled now runs from memory of its own.)
    #[tokio::test]
    async fn a_changed_entry_is_compiled_again_and_the_component_runs() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x.txt"), "the original fs read this\n").unwrap();
        let (sandbox, entry, web_entry) = sandbox_with_fs_and_web(dir.path());
        let seal = entry.with_extension("seal");
        let fs_plugin = crate::sandbox::builtin::find("fs").unwrap();
        let read = async |outcome| {
            let (got, output) = load_and_read(&sandbox, dir.path()).await;
            assert_eq!(got, outcome);
            assert!(output.contains("the original fs read this"), "{output}");
        };
        read(CacheOutcome::Compiled).await;

        // Rewritten in place, same size, other bytes (the web plugin's
        // artifact, cut or padded to fit), its modification time set back.
        // The change time moves on any write and cannot be set back; a
        // pause first steps past the clock tick of kernels before 6.13.
        std::thread::sleep(std::time::Duration::from_millis(30));
        let size = fs::metadata(&entry).unwrap().len() as usize;
        let mtime = fs::metadata(&entry).unwrap().modified().unwrap();
        let mut other = fs::read(&web_entry).unwrap();
        other.resize(size, 0);
        {
            let mut file = fs::OpenOptions::new().write(true).open(&entry).unwrap();
            file.write_all(&other).unwrap();
            file.set_modified(mtime).unwrap();
        }
        assert_eq!(fs::metadata(&entry).unwrap().len() as usize, size);
        read(CacheOutcome::Compiled).await;

        // Truncated.
        let file = fs::OpenOptions::new().write(true).open(&entry).unwrap();
        file.set_len(size as u64 / 2).unwrap();
        drop(file);
        read(CacheOutcome::Compiled).await;

        // A seal over the entry as it is, made with another key.
        let cache = sandbox.compile_cache();
        let other = CompileCache::new(
            cache.dir.clone(),
            sandbox.engine(),
            CacheKey::from_bytes([7; 32]),
        );
        let identity = Identity::of(&fs::File::open(&entry).unwrap()).unwrap();
        let forged = other.seal(fs_plugin.sha256, &identity);
        // (made with this key, it would be accepted)
        assert_ne!(forged, cache.seal(fs_plugin.sha256, &identity));
        fs::write(&seal, forged.to_hex().as_bytes()).unwrap();
        read(CacheOutcome::Compiled).await;

        // No seal.
        fs::remove_file(&seal).unwrap();
        read(CacheOutcome::Compiled).await;

        // Another component's genuine entry renamed over it; then with its
        // seal too.
        let web_seal = web_entry.with_extension("seal");
        let spare = dir.path().join("web.cwasm");
        fs::copy(&web_entry, &spare).unwrap();
        fs::rename(&spare, &entry).unwrap();
        read(CacheOutcome::Compiled).await;
        fs::copy(&web_entry, &spare).unwrap();
        fs::rename(&spare, &entry).unwrap();
        fs::copy(&web_seal, &seal).unwrap();
        read(CacheOutcome::Compiled).await;

        // A link to a genuine entry elsewhere is not followed.
        #[cfg(unix)]
        {
            let elsewhere = dir.path().join("elsewhere.cwasm");
            fs::rename(&entry, &elsewhere).unwrap();
            std::os::unix::fs::symlink(&elsewhere, &entry).unwrap();
            read(CacheOutcome::Compiled).await;
            assert!(!entry.is_symlink(), "replaced by a sealed file of its own");
        }

        // Sealed anew each time: the entry as last written loads.
        read(CacheOutcome::Hit).await;
    }

    /// The entry capstan loaded is mapped; one renamed over it later (as
    /// another capstan process writes) or removed leaves the component
    /// loaded before working.
    #[tokio::test]
    async fn a_mapped_entry_replaced_by_a_writer_keeps_running() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x.txt"), "the original fs read this\n").unwrap();
        let (sandbox, entry, _) = sandbox_with_fs_and_web(dir.path());
        let fs_plugin = crate::sandbox::builtin::find("fs").unwrap();
        load_and_read(&sandbox, dir.path()).await;
        let component = sandbox
            .load("fs", fs_plugin.wasm, Some(fs_plugin.sha256), "fs")
            .unwrap();
        assert_eq!(component.cache_outcome(), CacheOutcome::Hit);
        let spare = dir.path().join("spare");
        fs::copy(&entry, &spare).unwrap();
        fs::rename(&spare, &entry).unwrap();
        sandbox.compile_cache().remove(fs_plugin.sha256).unwrap();
        let options = super::super::CallOptions {
            grants: crate::grants::Grants::workspace(
                dir.path(),
                false,
                &crate::grants::OwnFolders::default(),
            )
            .unwrap(),
            ..super::super::CallOptions::default()
        };
        let output = sandbox
            .call_tool(&component, "read", r#"{"path":"x.txt"}"#, &options)
            .await
            .unwrap();
        assert!(format!("{output:?}").contains("the original fs read this"));
    }

    #[test]
    fn an_entry_without_proc_is_read_and_checked_again() {
        // The fallback used where /proc is missing: the bytes read back
        // from a sealed, unchanged file load; a file changed in between
        // (its identity moved) does not.
        let f = fixture();
        let fs_plugin = crate::sandbox::builtin::find("fs").unwrap();
        assert_eq!(load(&f), CacheOutcome::Compiled);
        let entry = f.cache.entry_path(fs_plugin.sha256);
        let file = fs::File::open(&entry).unwrap();
        let identity = Identity::of(&file).unwrap();
        let read = read_sealed(&f.engine, &file, &identity).unwrap();
        assert!(is_fs(&f.engine, &read));
        let stale = Identity {
            size: identity.size + 1,
            ..identity.clone()
        };
        assert!(read_sealed(&f.engine, &file, &stale).is_none());
    }

    #[test]
    fn remove_takes_every_entry_of_a_component() {
        let f = fixture();
        let fs_plugin = crate::sandbox::builtin::find("fs").unwrap();
        assert_eq!(load(&f), CacheOutcome::Compiled);
        let stale = f.cache.dir.join(format!("{}-old.cwasm", fs_plugin.sha256));
        fs::write(&stale, "x").unwrap();
        f.cache.remove(fs_plugin.sha256).unwrap();
        assert!(!stale.exists());
        assert!(!f.cache.entry_path(fs_plugin.sha256).exists());
        f.cache.remove(fs_plugin.sha256).unwrap();
    }
}
