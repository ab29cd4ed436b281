//! Exec grants: the native programs a plugin may run, each with the
//! argument lists it may pass — never a shell string.
//!
//! ```toml
//! [capabilities]
//! exec = [
//!     { program = "git", args = ["status **", "diff **", "log **"] },
//!     { program = "git", args = ["add -- **", "commit -F - **"], writes = [".git"] },
//! ]
//! ```
//!
//! **Patterns.** Each string of `args` is one pattern for the arguments
//! after the program, as words separated by spaces:
//!
//! - a literal word matches exactly that argument (no quoting: a literal
//!   cannot hold a space or a `*`);
//! - `*` matches exactly one argument that does not begin with `-` — an
//!   operand such as a path or a revision, never an option;
//! - `**`, only as the last word, matches any number of arguments (none
//!   included), options too;
//! - `**` alone is refused (it would allow anything), and the empty
//!   pattern `""` matches the program with no arguments.
//!
//! So `config *` matches `git config core.editor` but not
//! `git config --global user.name x`, and `log **` matches `git log` and
//! `git log --oneline -5`. For `git` the first word must be a literal
//! subcommand, never `*` nor a word beginning with `-`:
//! git reads its global options (`-c`, `-C`, `--exec-path`, `--git-dir`,
//! `--work-tree`, `--config-env`, `--namespace`, ...) only before the
//! subcommand, so with a literal subcommand first every later argument is
//! the subcommand's, and none of them can change where git looks for its
//! configuration, hooks or helpers.
//!
//! **Where it runs.** The program is resolved on the host when the grant is
//! made ([`Capabilities::resolve_for_grant`](super::Capabilities)): `git`
//! becomes `/usr/bin/git` through `PATH`, the consent text shows it and the
//! lockfile records it; a call runs exactly that file. It runs in the same
//! OS sandbox as the model's commands ([`crate::exec`]), restricted to the
//! plugin's own grants: its folders (read-only ones read-only), its origins
//! (through the proxy), its environment variables beside the sandbox's
//! `PATH`, `LANG`, `TERM` and `TMPDIR`. Under a writable folder the paths
//! that make code run later ([`super::fs::PROTECTED`]: `.git`, `.vscode`,
//! ...) stay read-only, unless the entry names them in `writes` — the
//! consented exception that lets `git commit` write `.git`, for the program
//! only: the plugin's component still cannot write there. A call's request
//! is checked against these grants and run by `sandbox/exec_api.rs`.
//!
//! **Audit.** Every run is a `command_run` record; every refusal (an argv
//! no pattern matches, a program not granted, a folder outside the grants)
//! a `command_refused` record naming the grant.

use std::path::{Path, PathBuf};

use super::capability::{Capability, EntryError};
use super::fs::PROTECTED;

/// One granted program and the argument lists it may be run with.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table such as { program = \"git\", args = [\"status **\"] }"
)]
pub struct ExecGrant {
    /// The program as the manifest names it: a bare name looked up in
    /// `PATH` (`git`), or an absolute path.
    pub program: String,
    /// Where the program was found when the grant was made; filled in by
    /// capstan, never written in a manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The argument patterns (see the [module documentation](self)).
    pub args: Vec<String>,
    /// Paths kept read-only under a writable folder
    /// ([`PROTECTED`]) that this program may write all the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writes: Vec<String>,
}

/// One word of a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Word {
    /// Exactly this argument.
    Literal(String),
    /// One argument not beginning with `-`.
    Operand,
    /// Any rest, options included.
    Rest,
}

/// A pattern that is not valid, and why.
fn parse_pattern(pattern: &str, program: &str) -> Result<Vec<Word>, String> {
    let mut words = Vec::new();
    let parts: Vec<&str> = pattern.split_whitespace().collect();
    for (i, part) in parts.iter().enumerate() {
        let word = match *part {
            "*" => Word::Operand,
            "**" if i + 1 == parts.len() => Word::Rest,
            "**" => {
                return Err(format!(
                    "in `{pattern}`: `**` (any rest) may only be the last word"
                ));
            }
            literal if literal.contains('*') => {
                return Err(format!(
                    "in `{pattern}`: `{literal}` mixes `*` with other characters; a `*` or `**` must be a word of its own"
                ));
            }
            literal => Word::Literal(literal.to_string()),
        };
        words.push(word);
    }
    if words.first() == Some(&Word::Rest) {
        return Err(format!(
            "in `{pattern}`: a pattern of `**` alone allows any arguments at all; begin it with what the program is asked to do (such as `status **`)"
        ));
    }
    if is_git(program) {
        match words.first() {
            Some(Word::Literal(first)) if first.starts_with('-') => {
                return Err(format!(
                    "in `{pattern}`: `{first}` is one of git's global options, which change where git reads its configuration, hooks and helpers (`-c`, `-C`, `--exec-path`, `--git-dir`, ...); start the pattern with a subcommand such as `status`"
                ));
            }
            Some(Word::Operand) => {
                return Err(format!(
                    "in `{pattern}`: for git the first word must be the subcommand itself (such as `status`), not `*`"
                ));
            }
            _ => {}
        }
    }
    Ok(words)
}

/// Whether `program` is git (by its file name).
fn is_git(program: &str) -> bool {
    Path::new(program).file_name().and_then(|n| n.to_str()) == Some("git")
}

/// Whether `args` match the pattern `words`.
fn matches(words: &[Word], args: &[String]) -> bool {
    match (words.split_first(), args.split_first()) {
        (None, None) => true,
        (Some((Word::Rest, _)), _) => true,
        (Some((Word::Literal(word), more)), Some((arg, rest))) => {
            word == arg && matches(more, rest)
        }
        (Some((Word::Operand, more)), Some((arg, rest))) => {
            !arg.starts_with('-') && matches(more, rest)
        }
        _ => false,
    }
}

/// Whether every argument list `narrower` matches is matched by `wider`.
fn pattern_within(narrower: &[Word], wider: &[Word]) -> bool {
    match (narrower.split_first(), wider.split_first()) {
        (None, None) => true,
        (_, Some((Word::Rest, _))) => true,
        (Some((Word::Literal(a), more)), Some((Word::Literal(b), rest))) => {
            a == b && pattern_within(more, rest)
        }
        (Some((Word::Literal(a), more)), Some((Word::Operand, rest))) => {
            !a.starts_with('-') && pattern_within(more, rest)
        }
        (Some((Word::Operand, more)), Some((Word::Operand, rest))) => pattern_within(more, rest),
        _ => false,
    }
}

impl ExecGrant {
    /// The parsed patterns; an invalid one is left out (a manifest's are
    /// checked by [`Capability::validate`]; a lockfile's were).
    fn patterns(&self) -> Vec<Vec<Word>> {
        self.args
            .iter()
            .filter_map(|p| parse_pattern(p, &self.program).ok())
            .collect()
    }

    /// Whether `args` match one of the entry's patterns.
    pub fn allows(&self, args: &[String]) -> bool {
        self.patterns().iter().any(|words| matches(words, args))
    }

    /// The program's file as the grant was made: its recorded path, or the
    /// program itself when it is absolute.
    pub fn resolved(&self) -> Option<&str> {
        self.path.as_deref().or_else(|| {
            Path::new(&self.program)
                .is_absolute()
                .then_some(&*self.program)
        })
    }
}

/// Finds `program` the way a shell would: itself if absolute, else the
/// first executable file of that name in `path` (a `PATH` value).
pub fn find_program(program: &str, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |candidate: &Path| {
        std::fs::metadata(candidate)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if Path::new(program).is_absolute() {
        let found = PathBuf::from(program);
        return executable(&found).then_some(found);
    }
    std::env::split_paths(path?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| executable(candidate))
        .and_then(|found| found.canonicalize().ok())
}

impl Capability for ExecGrant {
    const WORD: &'static str = "exec";
    const ALIASES: &'static [&'static str] = &["program"];
    const LABEL: &'static str = "programs";
    const CONSENT_RANK: u8 = 4;
    const SAY_NONE: bool = false;
    const EXAMPLE: &'static str = "{ program = \"git\", args = [\"status **\"] }";

    fn key(&self) -> String {
        if self.writes.is_empty() {
            self.program.clone()
        } else {
            format!("{} writing {}", self.program, self.writes.join(", "))
        }
    }

    fn words(&self) -> String {
        let program = match self.resolved() {
            Some(path) if path != self.program => format!("{} ({path})", self.program),
            _ => self.program.clone(),
        };
        let patterns: Vec<String> = self
            .args
            .iter()
            .map(|p| {
                if p.is_empty() {
                    "(no arguments)".to_string()
                } else {
                    format!("`{p}`")
                }
            })
            .collect();
        let mut text = format!("run {program} with {}", patterns.join(", "));
        if !self.writes.is_empty() {
            text.push_str(&format!(
                "; it may write {} in writable folders (files there run code later, outside the sandbox)",
                self.writes.join(", ")
            ));
        }
        text
    }

    fn is_within(&self, granted: &Self) -> bool {
        let same_program =
            self.program == granted.program && (self.path.is_none() || self.path == granted.path);
        let writes_within = self.writes.iter().all(|w| granted.writes.contains(w));
        let wider = granted.patterns();
        same_program
            && writes_within
            && self
                .patterns()
                .iter()
                .all(|mine| wider.iter().any(|theirs| pattern_within(mine, theirs)))
    }

    fn check_value(value: &str) -> Result<(), String> {
        let program = value.split_whitespace().next().unwrap_or_default();
        check_program(program).map_err(|e| e.message)
    }

    fn validate(&self) -> Result<(), EntryError> {
        check_program(&self.program)?;
        if self.path.is_some() {
            return Err(EntryError::field(
                "path",
                "`path` is filled in by capstan when the grant is made; name the program with `program` only",
            ));
        }
        if self.args.is_empty() {
            return Err(EntryError::field(
                "args",
                "list the argument patterns the program may be run with, such as [\"status **\"]; `[\"\"]` allows it with no arguments only",
            ));
        }
        for pattern in &self.args {
            parse_pattern(pattern, &self.program).map_err(|e| EntryError::field("args", e))?;
        }
        for write in &self.writes {
            if !PROTECTED.contains(&write.as_str()) {
                return Err(EntryError::field(
                    "writes",
                    format!(
                        "`{write}` is not one of the paths kept read-only under a writable folder ({}); other paths are writable wherever the plugin's folder is",
                        PROTECTED.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    fn resolve_for_grant(&self) -> Result<Self, EntryError> {
        let found = find_program(&self.program, std::env::var_os("PATH").as_deref())
            .ok_or_else(|| {
                EntryError::field(
                    "program",
                    format!(
                        "`{}` is not an executable program on this machine's PATH; install it, or name it by its absolute path",
                        self.program
                    ),
                )
            })?;
        let path = found.to_str().ok_or_else(|| {
            EntryError::field(
                "program",
                format!("`{}` was found at a path that is not UTF-8", self.program),
            )
        })?;
        Ok(Self {
            path: Some(path.to_string()),
            ..self.clone()
        })
    }
}

/// Checks a program name: a bare file name or an absolute path.
fn check_program(program: &str) -> Result<(), EntryError> {
    let error = |message: &str| Err(EntryError::field("program", message.to_string()));
    if program.trim().is_empty() {
        return error("name the program, such as \"git\"");
    }
    if program.contains(char::is_whitespace) || program.contains('\0') {
        return error("a program is one name or path; its arguments go in `args`");
    }
    if program.contains('/') && !Path::new(program).is_absolute() {
        return error(
            "name the program by its file name (looked up in PATH) or by an absolute path",
        );
    }
    if matches!(
        Path::new(program).file_name().and_then(|n| n.to_str()),
        Some(
            "sh" | "bash"
                | "dash"
                | "zsh"
                | "fish"
                | "ksh"
                | "csh"
                | "tcsh"
                | "env"
                | "sudo"
                | "su"
                | "doas"
                | "xargs"
        )
    ) {
        return error(
            "a shell or a program that runs other programs (sh, bash, env, sudo, xargs, ...) cannot be granted: it would run anything; grant the programs themselves",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(program: &str, args: &[&str]) -> ExecGrant {
        ExecGrant {
            program: program.into(),
            path: None,
            args: args.iter().map(|a| a.to_string()).collect(),
            writes: Vec::new(),
        }
    }

    fn argv(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn literal_words_operands_and_a_rest_match_as_documented() {
        let g = grant("git", &["status", "diff **", "config *", "show * --stat"]);
        assert!(g.allows(&argv("status")));
        assert!(!g.allows(&argv("status --short")));
        assert!(g.allows(&argv("diff")));
        assert!(g.allows(&argv("diff --cached -- a.rs")));
        assert!(g.allows(&argv("config core.editor")));
        assert!(!g.allows(&argv("config --global user.name x")));
        assert!(
            !g.allows(&argv("config --global")),
            "`*` is never an option"
        );
        assert!(!g.allows(&argv("config")));
        assert!(g.allows(&argv("show HEAD --stat")));
        assert!(!g.allows(&argv("show --output=x --stat")));
        assert!(!g.allows(&argv("push")));
        assert!(!g.allows(&[]));
        let bare = grant("true", &[""]);
        assert!(bare.allows(&[]));
        assert!(!bare.allows(&argv("x")));
    }

    #[test]
    fn global_options_cannot_come_before_a_git_subcommand() {
        let g = grant("git", &["status **", "log **"]);
        for smuggled in [
            "-c core.hooksPath=/tmp/x status",
            "-C /etc status",
            "--exec-path=/tmp status",
            "--git-dir=/tmp/x log",
            "--work-tree=/ status",
            "--config-env=core.pager=X log",
        ] {
            assert!(!g.allows(&argv(smuggled)), "{smuggled}");
        }
        for pattern in ["-c **", "--exec-path=/x status", "-C * status **"] {
            let error = grant("git", &[pattern]).validate().unwrap_err();
            assert_eq!(error.field, Some("args"));
            assert!(
                error.message.contains("global options"),
                "{}",
                error.message
            );
        }
        // Another program may start with an option.
        assert!(grant("rustc", &["--version"]).validate().is_ok());
    }

    #[test]
    fn malformed_patterns_and_programs_are_refused_with_the_reason() {
        let cases: &[(ExecGrant, &str)] = &[
            (grant("git", &["** status"]), "last word"),
            (grant("git", &["* status"]), "subcommand itself"),
            (grant("cat", &["**"]), "any arguments at all"),
            (grant("git", &["log --format=*"]), "word of its own"),
            (grant("git", &[]), "list the argument patterns"),
            (grant("", &["x"]), "name the program"),
            (grant("git status", &["x"]), "one name or path"),
            (grant("bin/git", &["x"]), "absolute path"),
            (grant("bash", &["-c **"]), "shell"),
            (grant("/usr/bin/env", &["git"]), "shell"),
        ];
        for (entry, expected) in cases {
            let error = entry.validate().unwrap_err();
            assert!(
                error.message.contains(expected),
                "{entry:?}: {}",
                error.message
            );
        }
        let mut writes = grant("git", &["commit **"]);
        writes.writes = vec!["src".into()];
        assert_eq!(writes.validate().unwrap_err().field, Some("writes"));
        writes.writes = vec![".git".into()];
        assert!(writes.validate().is_ok());
        let mut pathed = grant("git", &["status"]);
        pathed.path = Some("/tmp/git".into());
        assert_eq!(pathed.validate().unwrap_err().field, Some("path"));
    }

    #[test]
    fn cover_is_decided_pattern_by_pattern() {
        let wide = grant("git", &["log **", "show *", "status"]);
        assert!(grant("git", &["log --oneline **"]).is_within(&wide));
        assert!(grant("git", &["log"]).is_within(&wide));
        assert!(grant("git", &["show HEAD"]).is_within(&wide));
        assert!(!grant("git", &["show --stat"]).is_within(&wide));
        assert!(!grant("git", &["show * *"]).is_within(&wide));
        assert!(!grant("git", &["status **"]).is_within(&wide));
        assert!(!grant("git", &["commit **"]).is_within(&wide));
        assert!(!grant("hg", &["log **"]).is_within(&wide));
        let mut writing = grant("git", &["log"]);
        writing.writes = vec![".git".into()];
        assert!(!writing.is_within(&wide), "writing .git is more");
        let mut resolved = wide.clone();
        resolved.path = Some("/usr/bin/git".into());
        assert!(grant("git", &["log"]).is_within(&resolved));
        let mut elsewhere = grant("git", &["log"]);
        elsewhere.path = Some("/tmp/git".into());
        assert!(!elsewhere.is_within(&resolved));
    }

    #[test]
    fn consent_words_name_the_resolved_program_patterns_and_writes() {
        let mut entry = grant("git", &["add -- **", "commit -F - **"]);
        entry.path = Some("/usr/bin/git".into());
        entry.writes = vec![".git".into()];
        let words = entry.words();
        assert!(words.starts_with("run git (/usr/bin/git) with `add -- **`, `commit -F - **`"));
        assert!(words.contains("may write .git"));
        assert_eq!(entry.key(), "git writing .git");
    }

    #[test]
    fn programs_are_resolved_through_path() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("mytool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = std::env::join_paths(["relative/dir".as_ref(), dir.path()]).unwrap();
        assert_eq!(
            find_program("mytool", Some(&path)),
            Some(tool.canonicalize().unwrap())
        );
        assert_eq!(find_program("absent-tool", Some(&path)), None);
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(find_program("mytool", Some(&path)), None, "not executable");
    }
}
