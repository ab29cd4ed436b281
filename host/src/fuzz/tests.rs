//! The bounded run of the fuzz targets in `cargo test`: each target over
//! its seeds (`fuzz/seeds/<target>/`) and the inputs that once broke it
//! (`fuzz/regressions/<target>/`), then over random mutations of them.
//!
//! The mutations are reproducible: `CAPSTAN_FUZZ_SEED` picks them (a fixed
//! seed by default) and `CAPSTAN_FUZZ_ITERATIONS` says how many each target
//! runs. A failure prints the seed and the input, escaped.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use super::TARGETS;

/// Mutated inputs per target by default: a few seconds for all of them.
const ITERATIONS: usize = 400;

/// The random seed by default.
const SEED: u64 = 0x00ca_9574_f022;

/// The largest mutated input; the seeds are far smaller.
const MAX_INPUT: usize = 64 << 10;

/// Byte strings that mean something to one of the parsers, for mutations
/// to insert whole.
const TOKENS: &[&[u8]] = &[
    b"\n---\n",
    b"---\n",
    b"[[",
    b"]]",
    b"[",
    b"]",
    b"=",
    b"\"\"\"",
    b"'''",
    b"\\u{0}",
    b"\\",
    b"\"",
    b"{",
    b"}",
    b":",
    b",",
    b"\n",
    b"\r\n",
    b"\n\n",
    b"data: ",
    b"event: ",
    b"$ARGUMENTS",
    b"$ARGUMENTS[",
    b"$1",
    b"${CLAUDE_SKILL_DIR}",
    b"!`",
    b"```!",
    b"*",
    b"&a ",
    b"*a",
    b"..",
    b"/",
    b"\0",
    b"-1",
    b"18446744073709551616",
    b"1e999",
    b"\xf0\x9f\xa6\x80",
    b"\xff",
];

fn repo_dir(kind: &str, target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz")
        .join(kind)
        .join(target)
}

/// The files of `dir`, sorted by name; none if it does not exist.
fn inputs(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<(String, Vec<u8>)> = entries
        .flatten()
        .filter(|entry| entry.path().is_file())
        .map(|entry| {
            let bytes = std::fs::read(entry.path()).unwrap();
            (entry.file_name().to_string_lossy().into_owned(), bytes)
        })
        .collect();
    files.sort();
    files
}

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(text) => {
            let text = text.trim();
            let parsed = match text.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => text.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("{name} must be a number, not {text:?}"))
        }
        Err(_) => default,
    }
}

/// A random range within `len`.
fn range(rng: &mut fastrand::Rng, len: usize) -> std::ops::Range<usize> {
    let start = rng.usize(..=len);
    let end = start + rng.usize(..=(len - start).min(64));
    start..end
}

/// `input` with one to four random changes, some borrowing from `corpus`.
fn mutate(rng: &mut fastrand::Rng, input: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..rng.usize(1..=4) {
        let at = rng.usize(..=out.len());
        match rng.u8(..9) {
            0 if !out.is_empty() => {
                let at = rng.usize(..out.len());
                out[at] ^= 1 << rng.u8(..8);
            }
            1 if !out.is_empty() => {
                let at = rng.usize(..out.len());
                out[at] = rng.u8(..);
            }
            2 => {
                let token = TOKENS[rng.usize(..TOKENS.len())];
                out.splice(at..at, token.iter().copied());
            }
            3 => {
                let span = range(rng, out.len());
                out.drain(span);
            }
            4 => {
                let span = range(rng, out.len());
                let copy = out[span].to_vec();
                out.splice(at..at, copy);
            }
            5 if !corpus.is_empty() => {
                let other = &corpus[rng.usize(..corpus.len())];
                let span = range(rng, other.len());
                out.splice(at..at, other[span].iter().copied());
            }
            6 => out.truncate(at),
            7 => {
                let bytes: Vec<u8> = (0..rng.usize(1..8)).map(|_| rng.u8(..)).collect();
                out.splice(at..at, bytes);
            }
            _ => {
                // A number made extreme: digits repeated.
                let span = range(rng, out.len());
                if out[span.clone()].iter().all(u8::is_ascii_digit) && !span.is_empty() {
                    let digits = out[span.clone()].repeat(8);
                    out.splice(span, digits);
                } else {
                    out.insert(at, b'9');
                }
            }
        }
    }
    out.truncate(MAX_INPUT);
    out
}

/// Runs `body` on `input`, failing the test with the input when the body
/// reports a finding or panics.
fn check(target: &str, body: super::Body, input: &[u8], origin: &str) {
    let outcome = catch_unwind(AssertUnwindSafe(|| body(input)));
    let problem = match outcome {
        Ok(Ok(())) => return,
        Ok(Err(finding)) => finding,
        Err(_) => "it panicked (see the message above)".to_string(),
    };
    panic!(
        "fuzz target `{target}` failed on {origin}: {problem}\n\
         input ({} bytes): b\"{}\"\n\
         save the input under fuzz/regressions/{target}/ once it is fixed",
        input.len(),
        input.escape_ascii()
    );
}

/// Every seed and regression of `target`, then mutations of them.
fn run(target: &str) {
    let (_, body) = TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .copied()
        .unwrap();
    let seeds = inputs(&repo_dir("seeds", target));
    assert!(
        !seeds.is_empty(),
        "fuzz target `{target}` has no seeds in fuzz/seeds/{target}/"
    );
    let regressions = inputs(&repo_dir("regressions", target));
    for (name, input) in seeds.iter().chain(&regressions) {
        check(target, body, input, &format!("the file {name}"));
    }
    let corpus: Vec<Vec<u8>> = seeds
        .into_iter()
        .chain(regressions)
        .map(|(_, bytes)| bytes)
        .collect();
    let seed = env_number("CAPSTAN_FUZZ_SEED", SEED);
    let iterations = env_number("CAPSTAN_FUZZ_ITERATIONS", ITERATIONS as u64);
    let mut rng = fastrand::Rng::with_seed(seed);
    // Mutations pile up: half the time a mutant is mutated further.
    let mut current = corpus[0].clone();
    for round in 0..iterations {
        let base = if rng.bool() {
            current.clone()
        } else {
            corpus[rng.usize(..corpus.len())].clone()
        };
        current = mutate(&mut rng, &base, &corpus);
        check(
            target,
            body,
            &current,
            &format!("mutation {round} (CAPSTAN_FUZZ_SEED={seed:#x})"),
        );
    }
}

#[test]
fn manifest() {
    run("manifest");
}

#[test]
fn skill() {
    run("skill");
}

#[test]
fn lockfile() {
    run("lockfile");
}

#[test]
fn config() {
    run("config");
}

#[test]
fn transcript() {
    run("transcript");
}

#[test]
fn model_stream() {
    run("model_stream");
}

#[test]
fn package() {
    run("package");
}

#[test]
fn parts_split_at_nul_bytes() {
    assert_eq!(super::parts::<3>(b"a\0b\0c\0d"), [&b"a"[..], b"b", b"c\0d"]);
    assert_eq!(super::parts::<3>(b"a"), [&b"a"[..], b"", b""]);
    assert_eq!(super::parts::<2>(b""), [&b""[..], b""]);
}

/// The seeds are what their names say, so mutations start from inputs that
/// get deep into each parser: the valid ones parse, the broken ones fail
/// where they should.
#[test]
fn seeds_reach_deep() {
    use std::path::Path;

    use crate::front_matter;
    use crate::model::sse::SseParser;
    use crate::model::transport::{ErrorContext, ReadEvents};
    use crate::model::{anthropic, openai};
    use crate::plugin::lock::Lockfile;
    use crate::plugin::manifest::Manifest;

    let seed =
        |target: &str, name: &str| std::fs::read(repo_dir("seeds", target).join(name)).unwrap();
    let text = |target: &str, name: &str| String::from_utf8(seed(target, name)).unwrap();

    for name in [
        "weather.toml",
        "guard-secrets.toml",
        "everything.toml",
        "skills-only.toml",
    ] {
        Manifest::parse(&text("manifest", name), Path::new("plugin.toml")).unwrap();
    }
    for name in [
        "code-review.md",
        "changelog.md",
        "positional.md",
        "no-front-matter.md",
        "bom-crlf.md",
    ] {
        let input = seed("skill", name);
        let [_, file] = super::parts::<2>(&input);
        front_matter::parse(std::str::from_utf8(file).unwrap(), "skill").unwrap();
    }
    for name in ["two-plugins.lock", "empty.lock"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("capstan.lock");
        std::fs::write(&path, seed("lockfile", name)).unwrap();
        Lockfile::load(&path).unwrap();
    }

    for name in ["three-layers.toml", "user-only.toml", "local-only.toml"] {
        let input = seed("config", name);
        let [user, project, local] = super::parts::<3>(&input);
        let dir = tempfile::tempdir().unwrap();
        let home = crate::home::Home::at(dir.path().join("home"), dir.path().join("cache"));
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(workspace.join(".capstan")).unwrap();
        let local_path =
            crate::config::local_config_file(&home, &workspace.canonicalize().unwrap());
        std::fs::create_dir_all(local_path.parent().unwrap()).unwrap();
        std::fs::create_dir_all(home.config_dir()).unwrap();
        std::fs::write(home.config_file(), user).unwrap();
        std::fs::write(workspace.join(".capstan/config.toml"), project).unwrap();
        std::fs::write(&local_path, local).unwrap();
        let settings = crate::config::load(&home, &workspace).unwrap();
        assert!(
            !settings.rules.is_empty() || name == "user-only.toml",
            "{name}: {settings:?}"
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let transcript = dir.path().join("s.jsonl");
    std::fs::write(&transcript, seed("transcript", "session.jsonl")).unwrap();
    let loaded = crate::session::load::load(&transcript).unwrap();
    assert!(loaded.ended && !loaded.messages.is_empty(), "{loaded:?}");

    let context = ErrorContext {
        provider: "seed".into(),
        url: "http://127.0.0.1:1/".into(),
        key_var: "KEY".into(),
        model: "m".into(),
    };
    let answer = |name: &str| {
        let input = seed("model_stream", name);
        let events = SseParser::new().feed(&input[1..]).unwrap();
        let mut sink = |_: crate::model::StreamEvent| {};
        let mut reader: Box<dyn ReadEvents> = if input[0] & 1 == 0 {
            Box::new(anthropic::StreamReader::new(context.clone()))
        } else {
            Box::new(openai::StreamReader::new(context.clone()))
        };
        reader.read_all(&events, &mut sink).unwrap()
    };
    assert_eq!(answer("anthropic-tool-call.sse").unwrap().content.len(), 2);
    assert_eq!(answer("openai-tool-calls.sse").unwrap().content.len(), 3);
    assert!(answer("anthropic-error.sse").unwrap_err().is_retryable());
    assert!(answer("openai-error.sse").unwrap_err().is_retryable());

    for name in [
        "plain.tar",
        "top-folder-long-name.tar",
        "pax.tar",
        "plain.tar.gz",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("p.tar.gz");
        let input = seed("package", name);
        let bytes = if input.starts_with(&[0x1f, 0x8b]) {
            input
        } else {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            std::io::Write::write_all(&mut gz, &input).unwrap();
            gz.finish().unwrap()
        };
        std::fs::write(&archive, bytes).unwrap();
        let into = dir.path().join("into");
        std::fs::create_dir(&into).unwrap();
        crate::plugin::install::unpack(&archive, &into).unwrap();
        let root = crate::plugin::install::package_root(&into).unwrap();
        let manifest = Manifest::load(&root).unwrap();
        let files = crate::plugin::package::select(&root, &manifest).unwrap();
        assert!(
            files.contains(&"data/a.txt".to_string()) || name != "plain.tar",
            "{files:?}"
        );
    }
}
