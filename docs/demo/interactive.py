#!/usr/bin/env python3
"""Runs an interactive capstan session in a pseudo-terminal and answers its
permission questions as a person at the keyboard would.

    interactive.py ANSWER CAPSTAN [ARGS...]

The session sees a real terminal, so it asks before an edit (print mode
never asks). Everything it prints is shown as it comes. Each time it asks
("allow? [y/s/a/n]") the driver types ANSWER and Enter; once the session has
been quiet for a while after an answer, it types /exit. The `demo` recipe in
the justfile uses it to show a permission question without a person there.
"""

import fcntl
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import time

QUESTION = b"allow? [y/s/a/n]"
QUIET_SECONDS = 2.0
TIMEOUT_SECONDS = 120.0


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    answer = sys.argv[1].encode()
    command = sys.argv[2:]

    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 110, 0, 0))
    child = subprocess.Popen(
        command,
        stdin=follower,
        stdout=follower,
        stderr=follower,
        start_new_session=True,
        preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
    )
    os.close(follower)

    seen = b""
    answered = 0
    exited = False
    last_output = time.monotonic()
    started = last_output
    while True:
        if time.monotonic() - started > TIMEOUT_SECONDS:
            os.killpg(child.pid, signal.SIGKILL)
            print(f"\ninteractive.py: the session did not finish within {TIMEOUT_SECONDS:.0f} s; stopped it", file=sys.stderr)
            return 1
        ready, _, _ = select.select([leader], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the session closed the terminal
                chunk = b""
            if not chunk:
                break
            sys.stdout.buffer.write(chunk)
            sys.stdout.buffer.flush()
            seen += chunk
            last_output = time.monotonic()
            if seen.count(QUESTION) > answered:
                answered += 1
                os.write(leader, answer + b"\r")
        elif answered and not exited and time.monotonic() - last_output > QUIET_SECONDS:
            exited = True
            # One key at a time, as a person types: the line editor takes
            # a burst of bytes for a paste.
            for key in b"/exit\r":
                os.write(leader, bytes([key]))
                time.sleep(0.02)
    os.close(leader)
    code = child.wait()
    if not answered:
        print("\ninteractive.py: the session asked nothing", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
