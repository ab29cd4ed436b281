#!/usr/bin/env python3
"""Makes host/hot-text.txt again: the functions capstan runs at start-up,
which the build gathers at the front of the binary's text (host/build.rs).

`just hot-text` (Linux x86_64, with `perf`). It links the release binary
with the current list, runs what a user runs (`-p` with the scripted model
and against a mock Anthropic server on 127.0.0.1, `tool call fs.read`, a
first run with an empty CAPSTAN_HOME, the interactive session idle in a
pseudo-terminal) under `perf record` of page faults and CPU samples, and
adds every function of capstan's text a run touched outside the list; then
links again, so functions hidden behind one fault show up, until a round
finds no more than a handful. Relinking reuses the objects of one
`cargo rustc` build (`--print link-args`), so a round takes seconds.
"""

import bisect
import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIST = os.path.join(ROOT, "host", "hot-text.txt")
ROUNDS = int(os.environ.get("HOT_TEXT_ROUNDS", "8"))


def link_command(work):
    """The release binary's link command, its inputs copied into `work`."""
    out = subprocess.run(
        ["cargo", "rustc", "--release", "-p", "capstan", "--bin", "capstan", "--",
         "-C", "save-temps", "--print", "link-args"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout
    line = next(l for l in out.splitlines() if l.startswith("LC_ALL="))
    # Copy what a later build may replace or delete: the temporary folder
    # with symbols.o, the binary's own objects and capstan's library.
    for path in set(re.findall(r'"(/[^"]+\.(?:o|rlib))"', line)):
        if "/rustc" in path or "/capstan-" in path or "libcapstan-" in path:
            copy = os.path.join(work, path.strip("/").replace("/", "_"))
            shutil.copy(path, copy)
            line = line.replace(f'"{path}"', f'"{copy}"')
    line = re.sub(r'"-Wl,--symbol-ordering-file=[^"]*"', "", line)
    return re.sub(r'"-o" "[^"]+"', '"-o" "$OUTBIN" $EXTRA', line)


def text_symbols(binary):
    """(start, name) of every function, sorted; and the text's range."""
    seg = next(l.split() for l in subprocess.run(
        ["readelf", "-lW", binary], capture_output=True, text=True).stdout.splitlines()
        if l.strip().startswith("LOAD") and "R E" in l)
    lo = int(seg[2], 16)
    syms = []
    for l in subprocess.run(["nm", binary], capture_output=True, text=True).stdout.splitlines():
        p = l.split(None, 2)
        if len(p) == 3 and p[1] in "tTwW":
            syms.append((int(p[0], 16), p[2]))
    syms.sort()
    return syms, lo, lo + int(seg[5], 16)


def touched(binary, data_files):
    """Functions of `binary` at the faulting addresses and samples."""
    syms, lo, hi = text_symbols(binary)
    starts = [s for s, _ in syms]
    found = set()
    for data in data_files:
        out = subprocess.run(["perf", "script", "-i", data, "-F", "ip,addr",
                              "--show-mmap-events"], capture_output=True, text=True).stdout
        base = None
        for line in out.splitlines():
            if "PERF_RECORD_MMAP2" in line:
                if base is None and line.rstrip().endswith(binary) and " @ 0 " in line:
                    base = int(re.search(r"\[0x([0-9a-f]+)\(", line).group(1), 16)
                continue
            for token in line.split() if base is not None else []:
                try:
                    offset = int(token, 16) - base
                except ValueError:
                    continue
                if lo <= offset < hi:
                    i = bisect.bisect_right(starts, offset) - 1
                    if i >= 0 and "PRECOMPILED" not in syms[i][1]:
                        found.add(syms[i][1])
    return found


def small_folios(path):
    """Drops `path` from the page cache and reads it back a page at a time,
    so the kernel maps only 64 KB around each touched page."""
    subprocess.run(["sync", path], check=True)
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    for offset in range(0, os.fstat(fd).st_size, 4096):
        os.pread(fd, 4096, offset)
    os.close(fd)


class Mock(BaseHTTPRequestHandler):
    """An Anthropic Messages server: a tool_use of fs.read, then text."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        last = (body.get("messages") or [{}])[-1].get("content")
        answered = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
        ev = lambda name, data: f"event: {name}\ndata: {json.dumps(data)}\n\n"
        out = ev("message_start", {"type": "message_start", "message": {
            "id": "m", "type": "message", "role": "assistant", "content": [],
            "model": body.get("model"), "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1}}})
        if answered:
            start, delta, stop = {"type": "text", "text": ""}, {"type": "text_delta", "text": "done"}, "end_turn"
        else:
            start = {"type": "tool_use", "id": "toolu_1", "name": "fs__read", "input": {}}
            delta = {"type": "input_json_delta", "partial_json": '{"path":"small.txt"}'}
            stop = "tool_use"
        out += ev("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start})
        out += ev("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
        out += ev("content_block_stop", {"type": "content_block_stop", "index": 0})
        out += ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 5}})
        out += ev("message_stop", {"type": "message_stop"})
        data = out.encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def profile(binary, work, url, round_):
    """Runs the workloads under perf; the perf.data files."""
    ws, home, script = (os.path.join(work, n) for n in ("ws", "home", "script.json"))
    perf = ["perf", "record", "-q", "-e", "page-faults/period=1/", "-e", "cpu-clock/freq=20000/", "-d"]
    env = {"PATH": os.environ["PATH"], "HOME": home, "CAPSTAN_HOME": home, "LANG": "C.UTF-8"}
    runs = [
        ({}, ["-p", "Read small.txt", "--model", f"scripted:{script}"]),
        ({}, ["tool", "call", "fs.read", '{"path":"small.txt"}']),
        ({"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "test"}, ["-p", "Read small.txt"]),
        ("fresh", ["-p", "Read small.txt", "--model", f"scripted:{script}"]),
    ]
    files = []
    for n, (extra, args) in enumerate(runs):
        data = os.path.join(work, f"r{round_}-{n}.data")
        run_env = dict(env)
        if extra == "fresh":
            fresh = tempfile.mkdtemp(dir=work)
            run_env.update(HOME=fresh, CAPSTAN_HOME=fresh)
        else:
            run_env.update(extra)
        subprocess.run(perf + ["-o", data, binary] + args, cwd=ws, env=run_env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        files.append(data)
    # The interactive session, idle a moment in a pseudo-terminal.
    data = os.path.join(work, f"r{round_}-tty.data")
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(ws)
        os.execvpe("perf", perf + ["-o", data, binary, "--model", f"scripted:{script}"],
                   dict(env, TERM="xterm-256color"))
    deadline = time.time() + 2
    while time.time() < deadline:
        if select.select([fd], [], [], 0.1)[0]:
            try:
                os.read(fd, 65536)
            except OSError:
                break
    os.write(fd, b"\x04")
    time.sleep(0.5)
    try:
        os.kill(pid, signal.SIGINT)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
    files.append(data)
    return files


def main():
    work = tempfile.mkdtemp(prefix="hot-text-")
    for folder in ("ws", "home"):
        os.makedirs(os.path.join(work, folder))
    with open(os.path.join(work, "ws", "small.txt"), "w") as f:
        f.writelines(f"line {n} of a small file\n" for n in range(1, 21))
    with open(os.path.join(work, "script.json"), "w") as f:
        json.dump({"turns": [{"tool_calls": [{"tool": "fs.read", "input": {"path": "small.txt"}}]},
                             {"text": "done"}]}, f)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Mock)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    command = link_command(work)
    names = [l.strip() for l in open(LIST)] if os.path.exists(LIST) else []
    binary = os.path.join(work, "capstan")
    for round_ in range(ROUNDS):
        listed = os.path.join(work, "list.txt")
        with open(listed, "w") as f:
            f.write("".join(n + "\n" for n in names))
        extra = f"-Wl,--symbol-ordering-file={listed} -Wl,--no-warn-symbol-ordering"
        subprocess.run(["bash", "-c", command], check=True,
                       env=dict(os.environ, OUTBIN=binary, EXTRA=extra))
        small_folios(binary)
        new = sorted(touched(binary, profile(binary, work, url, round_)) - set(names))
        names += new
        print(f"round {round_ + 1}: {len(new)} more functions, {len(names)} in all", file=sys.stderr)
        if len(new) <= 5:
            break
    with open(LIST, "w") as f:
        f.write("".join(n + "\n" for n in names))
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
