//! The bodies of the fuzz targets: one function per parser of bytes that
//! someone else controls, each driving the parser through the public entry
//! point capstan itself uses.
//!
//! A body takes arbitrary bytes and returns `Err` with the promise the
//! parser broke when its answers disagree with each other (a lockfile that
//! does not read back as written, a transcript that a resume made
//! unreadable); a panic, a hang or running out of memory is the other kind
//! of finding. Two harnesses call the same bodies: the `fuzz/` crate's
//! `cargo fuzz` targets for long runs, and this module's tests, a bounded
//! run of seeded mutations in `cargo test` that keeps every target alive
//! (docs/testing.md says how to run both).
//!
//! Inputs that name several things hold them in one byte string, split at
//! NUL bytes ([`parts`]), which no TOML, YAML front matter or JSON line
//! contains; the seeds in `fuzz/seeds/` are written that way.

use std::path::{Path, PathBuf};

use crate::config;
use crate::front_matter;
use crate::home::Home;
use crate::model::sse::{SseEvent, SseParser};
use crate::model::transport::{ErrorContext, ReadEvents};
use crate::model::{StreamEvent, anthropic, openai};
use crate::plugin::lock::Lockfile;
use crate::plugin::manifest::Manifest;
use crate::plugin::{install, package, store};
use crate::policy::{Layer, Rule, RuleKind};
use crate::session::Sessions;
use crate::skills::text::{self, Substitutions};

#[cfg(test)]
mod tests;

/// What a body reports when the parser broke a promise: which one, with
/// the details that show it.
pub type Finding = String;

/// A target's body: the input in, a broken promise out.
pub type Body = fn(&[u8]) -> Result<(), Finding>;

/// The names of the targets, as the `fuzz/` crate and `fuzz/seeds/` name
/// them, with their bodies.
pub const TARGETS: [(&str, Body); 7] = [
    ("manifest", manifest),
    ("skill", skill),
    ("lockfile", lockfile),
    ("config", config),
    ("transcript", transcript),
    ("model_stream", model_stream),
    ("package", package),
];

/// Splits `data` into `N` parts at its first `N - 1` NUL bytes; parts past
/// the last NUL are empty.
pub fn parts<const N: usize>(data: &[u8]) -> [&[u8]; N] {
    let mut out = [&data[..0]; N];
    let mut rest = data;
    for (index, part) in out.iter_mut().enumerate() {
        if index + 1 == N {
            *part = rest;
            break;
        }
        match rest.iter().position(|&byte| byte == 0) {
            Some(at) => {
                *part = &rest[..at];
                rest = &rest[at + 1..];
            }
            None => {
                *part = rest;
                rest = &rest[rest.len()..];
            }
        }
    }
    out
}

/// A temporary folder for a body that reads files; failing to make one is
/// the machine's problem, not the parser's, and is reported as such.
fn scratch() -> Result<tempfile::TempDir, Finding> {
    tempfile::tempdir().map_err(|e| format!("cannot create a temporary folder: {e}"))
}

/// Writes `bytes` to `path`, creating its folder.
fn write(path: &Path, bytes: &[u8]) -> Result<(), Finding> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// `plugin.toml`, as an install reads it, then described for consent.
pub fn manifest(data: &[u8]) -> Result<(), Finding> {
    let text = String::from_utf8_lossy(data);
    if let Ok(manifest) = Manifest::parse(&text, Path::new("plugin.toml")) {
        install::describe_request(&manifest, &[]);
    }
    Ok(())
}

/// `SKILL.md` front matter, then its body with arguments substituted and
/// inline shell commands found. Parts: the arguments, the file.
pub fn skill(data: &[u8]) -> Result<(), Finding> {
    let [arguments, file] = parts::<2>(data);
    let arguments = String::from_utf8_lossy(arguments);
    let file = String::from_utf8_lossy(file);
    // The body as parsed, and the whole file too, so the substitution is
    // exercised whether or not the front matter is valid.
    let mut bodies = vec![file.to_string()];
    let mut names = Vec::new();
    if let Ok(parsed) = front_matter::parse(&file, "skill") {
        bodies.push(parsed.body);
        names = parsed.meta.arguments;
    }
    let subs = Substitutions {
        arguments: &arguments,
        names: &names,
        skill_dir: Some("/skills/s"),
        plugin_root: Some("/plugins/p"),
        session_id: Some("0123"),
    };
    for body in bodies {
        let substituted = text::substitute(&body, &subs);
        // Without arguments, only `$ARGUMENTS` (which becomes empty) and
        // the folder and session variables can change a text: `$2.5M` and
        // a missing `$0` stay as written.
        let bare = text::substitute(
            &body,
            &Substitutions {
                names: &names,
                ..Substitutions::default()
            },
        );
        if bare != body && !body.contains("$ARGUMENTS") {
            return Err(format!(
                "a text changed with no arguments and no variables: {body:?} became {bare:?}"
            ));
        }
        // Text that substitutes nothing gets the arguments added at its end.
        let trimmed = arguments.trim();
        if !body.contains('$') && !trimmed.is_empty() {
            let added = format!("ARGUMENTS: {trimmed}\n");
            if !substituted.starts_with(body.as_str()) || !substituted.ends_with(&added) {
                return Err(format!(
                    "arguments {arguments:?} were not added to a text without substitutions: {substituted:?}"
                ));
            }
        }
        let commands = text::inline_shell(&body);
        if !commands.is_empty() {
            text::inline_shell_note(&commands, "fs.read");
        }
    }
    Ok(())
}

/// `capstan.lock`: a lockfile that loads is saved and must load back
/// equal.
pub fn lockfile(data: &[u8]) -> Result<(), Finding> {
    let dir = scratch()?;
    let path = dir.path().join("capstan.lock");
    write(&path, data)?;
    let Ok(lock) = Lockfile::load(&path) else {
        return Ok(());
    };
    let again = dir.path().join("again.lock");
    lock.save(&again)
        .map_err(|e| format!("a lockfile that loaded cannot be saved: {e}"))?;
    let reloaded =
        Lockfile::load(&again).map_err(|e| format!("a saved lockfile does not load: {e}"))?;
    if reloaded != lock {
        return Err(format!(
            "a saved lockfile loads back different:\n{lock:?}\n{reloaded:?}"
        ));
    }
    Ok(())
}

/// The layered config: the user's, the project's (the one a repository
/// controls) and the project local one. When they load, an "always allow"
/// is saved to the local one, which must then load with the rule, and
/// removed again. Parts: user, project, local.
pub fn config(data: &[u8]) -> Result<(), Finding> {
    let [user, project, local] = parts::<3>(data);
    let dir = scratch()?;
    let home = Home::at(dir.path().join("home"), dir.path().join("cache"));
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).map_err(|e| format!("cannot create a workspace: {e}"))?;
    let canonical = workspace
        .canonicalize()
        .map_err(|e| format!("cannot resolve the workspace: {e}"))?;
    let local_path = config::local_config_file(&home, &canonical);
    for (path, bytes) in [
        (home.config_file(), user),
        (config::project_config_file(&workspace), project),
        (local_path.clone(), local),
    ] {
        if !bytes.is_empty() {
            write(&path, bytes)?;
        }
    }
    if config::load(&home, &workspace).is_err() {
        return Ok(());
    }
    let rule: Rule = "fs.read(fuzz/**)"
        .parse()
        .map_err(|e| format!("the probe rule does not parse: {e}"))?;
    if config::save_local_allow(&home, &workspace, &rule).is_err() {
        return Ok(());
    }
    let settings = config::load(&home, &workspace)
        .map_err(|e| format!("settings that loaded no longer load after an allow: {e}"))?;
    let saved = settings.rules.iter().any(|(kind, saved, layer)| {
        *kind == RuleKind::Allow && *saved == rule && *layer == Layer::ProjectLocal
    });
    if !saved {
        return Err(format!(
            "the saved allow rule is not in the local config; it reads:\n{}",
            std::fs::read_to_string(&local_path).unwrap_or_default()
        ));
    }
    config::remove_rule(&local_path, RuleKind::Allow, &rule)
        .map_err(|e| format!("the saved allow rule cannot be removed: {e}"))?;
    config::load(&home, &workspace)
        .map_err(|e| format!("settings no longer load after removing a rule: {e}"))?;
    Ok(())
}

/// A session transcript, loaded and then resumed: a resume must leave the
/// file readable with the same conversation.
pub fn transcript(data: &[u8]) -> Result<(), Finding> {
    let dir = scratch()?;
    let home = Home::at(dir.path().join("home"), dir.path().join("cache"));
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).map_err(|e| format!("cannot create a workspace: {e}"))?;
    let sessions = Sessions::for_workspace(&home, &workspace)
        .map_err(|e| format!("cannot open the session folder: {e}"))?;
    let id = "20260101-000000-fuzz";
    write(&sessions.transcript_path(id), data)?;
    let Ok((writer, loaded)) = sessions.resume(id, "model", "provider") else {
        return Ok(());
    };
    drop(writer);
    let reloaded = crate::session::load::load(&sessions.transcript_path(id))
        .map_err(|e| format!("a resumed transcript no longer loads: {e}"))?;
    if reloaded.messages != loaded.messages {
        return Err(format!(
            "a resume changed the conversation:\n{:?}\n{:?}",
            loaded.messages, reloaded.messages
        ));
    }
    Ok(())
}

/// The events of `body` fed to the SSE parser in two chunks split at
/// `split`, or the parser's error.
fn sse_events(body: &[u8], split: usize) -> Result<Vec<SseEvent>, String> {
    let mut parser = SseParser::new();
    let (first, second) = body.split_at(split.min(body.len()));
    let mut events = parser.feed(first).map_err(|e| e.to_string())?;
    events.extend(parser.feed(second).map_err(|e| e.to_string())?);
    Ok(events)
}

/// A model's streamed answer: the SSE stream, then the Anthropic or the
/// OpenAI-compatible reader over its events, tool-call JSON included. The
/// first byte picks the provider (its low bit) and where the stream is cut
/// in two chunks; the events must not depend on the cut.
pub fn model_stream(data: &[u8]) -> Result<(), Finding> {
    let Some((&choice, body)) = data.split_first() else {
        return Ok(());
    };
    let split = body.len() * usize::from(choice >> 1) / 128;
    let whole = sse_events(body, body.len());
    let cut = sse_events(body, split);
    if whole != cut {
        return Err(format!(
            "the events depend on where the stream is cut (at {split}):\n{whole:?}\n{cut:?}"
        ));
    }
    let Ok(events) = whole else {
        return Ok(());
    };
    let context = ErrorContext {
        provider: "fuzz".to_string(),
        url: "http://127.0.0.1:1/".to_string(),
        key_var: "FUZZ_KEY".to_string(),
        model: "fuzz-model".to_string(),
    };
    let mut sink = |_: StreamEvent| {};
    // The first complete answer or error ends the stream, as in the providers.
    let mut reader: Box<dyn ReadEvents> = if choice & 1 == 0 {
        Box::new(anthropic::StreamReader::new(context))
    } else {
        Box::new(openai::StreamReader::new(context))
    };
    let _ = reader.read_all(&events, &mut sink);
    Ok(())
}

/// A `.tar.gz` plugin package, unpacked as an install does, then its
/// manifest read, its files selected and hashed. Nothing may land outside
/// the folder it is unpacked into, and nothing unpacked may be a link. An
/// input that is not gzip (no `1f 8b` magic) is taken as the tar inside
/// and compressed first, so mutations reach the tar reader.
pub fn package(data: &[u8]) -> Result<(), Finding> {
    let dir = scratch()?;
    let archive = dir.path().join("package.tar.gz");
    if data.starts_with(&[0x1f, 0x8b]) {
        write(&archive, data)?;
    } else {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, data)
            .and_then(|()| gz.finish())
            .and_then(|bytes| std::fs::write(&archive, bytes))
            .map_err(|e| format!("cannot compress the input: {e}"))?;
    }
    let outside = dir.path().join("outside");
    let into = outside.join("into");
    std::fs::create_dir_all(&into).map_err(|e| format!("cannot create {}: {e}", into.display()))?;
    let unpacked = install::unpack(&archive, &into);
    let stray: Vec<PathBuf> = std::fs::read_dir(&outside)
        .map_err(|e| format!("cannot list {}: {e}", outside.display()))?
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| *path != into)
        .collect();
    if !stray.is_empty() {
        return Err(format!("unpacking wrote outside its folder: {stray:?}"));
    }
    if let Some(link) = first_link(&into) {
        return Err(format!("unpacking made a link: {}", link.display()));
    }
    if unpacked.is_err() {
        return Ok(());
    }
    let Some(root) = install::package_root(&into) else {
        return Ok(());
    };
    let Ok(manifest) = Manifest::load(&root) else {
        return Ok(());
    };
    let Ok(files) = package::select(&root, &manifest) else {
        return Ok(());
    };
    if let Some(bad) = files
        .iter()
        .find(|rel| rel.starts_with('/') || rel.split('/').any(|part| part == ".."))
    {
        return Err(format!("a selected package file lies outside it: {bad}"));
    }
    let _ = store::hash_files(&root, &files);
    Ok(())
}

/// The first symbolic link under `dir`, if there is one.
fn first_link(dir: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            return Some(path);
        }
        if kind.is_dir()
            && let Some(link) = first_link(&path)
        {
            return Some(link);
        }
    }
    None
}
