//! The FastMCP fixture server (`tests/fixtures/mcp/fastmcp_server.py`) of
//! the official MCP Python SDK, and the virtualenvs holding that SDK: what
//! the MCP client and session tests set up before each run.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::Duration;

use super::mock_model::MockModel;
use super::{Env, repo_root, stderr, stdout, target_dir};

/// The API key the sessions give the mock model.
pub const API_KEY: &str = "test-key";

/// The Python of a virtualenv holding `mcp` of `spec` (`>=1,<2`), made
/// once under `target/mcp-venvs/NAME` (tests making it at once wait for
/// each other).
pub fn sdk_python(name: &str, spec: &str) -> PathBuf {
    static INSTALLING: Mutex<()> = Mutex::new(());
    let _guard = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    let dir = target_dir().join("mcp-venvs").join(name);
    let python = dir.join("bin/python");
    let marker = dir.join(".capstan-installed");
    if marker.is_file() {
        return python;
    }
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&dir)
        .status()
        .expect("python3 is needed for the MCP client tests (apt-get install python3-venv)");
    assert!(made.success(), "python3 -m venv {} failed", dir.display());
    let out = Command::new(dir.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", spec])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pip install '{spec}' into {} failed (the MCP client tests need PyPI once; `just setup` installs them):\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&marker, spec).unwrap();
    python
}

/// The Python of the virtualenv with the MCP Python SDK 1.x, which runs
/// the fixture.
pub fn sdk1_python() -> PathBuf {
    sdk_python("mcp1", "mcp>=1,<2")
}

/// That virtualenv's folder, which a sandboxed server must be able to read.
pub fn venv() -> PathBuf {
    let python = sdk1_python();
    python
        .parent()
        .and_then(|bin| bin.parent())
        .unwrap()
        .to_path_buf()
}

/// The Python installation the virtualenv's interpreter links to, which
/// a sandboxed server must be able to read too.
pub fn python_prefix() -> PathBuf {
    let out = Command::new(sdk1_python())
        .args(["-c", "import sys; print(sys.base_prefix)"])
        .output()
        .unwrap();
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// The fixture server's script.
pub fn script() -> PathBuf {
    repo_root().join("tests/fixtures/mcp/fastmcp_server.py")
}

/// The fixture, copied into the workspace as `fastmcp_server.py`.
pub fn put_server(env: &Env) {
    std::fs::copy(script(), env.ws.path().join("fastmcp_server.py")).unwrap();
}

/// `capstan mcp add NAME [FLAGS] -- PYTHON fastmcp_server.py stdio
/// [EXTRA]`, the fixture put in the workspace and the virtualenv and its
/// Python readable.
pub fn add_stdio(env: &Env, name: &str, flags: &[&str], extra: &[&str]) -> Output {
    put_server(env);
    let mut cmd = env.capstan();
    cmd.args(["mcp", "add", name, "--yes", "--read"])
        .arg(venv())
        .arg("--read")
        .arg(python_prefix())
        .args(flags)
        .arg("--")
        .arg(sdk1_python())
        .args(["fastmcp_server.py", "stdio"])
        .args(extra);
    cmd.timeout(Duration::from_secs(60)).output().unwrap()
}

/// Fails with both outputs unless `output` says success.
pub fn assert_ok(output: &Output) {
    assert!(
        output.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        stdout(output),
        stderr(output)
    );
}

/// `capstan -p go` against `mock` (Anthropic), with `args`.
pub fn session(env: &Env, mock: &MockModel, args: &[&str]) -> Output {
    let mut cmd = env.anthropic_session(&mock.url(), API_KEY, "mock-model", "go");
    cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .args(args)
        .timeout(Duration::from_secs(180));
    cmd.output().unwrap()
}
