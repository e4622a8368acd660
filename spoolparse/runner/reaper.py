"""Kill a runner's agents when the runner dies, however it dies.

A Ray node runner (an actor process) can be killed with SIGKILL — by
``ray.kill``, by Ray's memory monitor or with its node — and Ray does not
touch the process groups its children lead. So each runner marks its
environment with a token that every agent inherits, and starts this small
watcher in a session of its own, holding the read end of a pipe. When the
pipe reports end of file (the runner exited, or closed it on purpose), the
watcher kills every process carrying the token, sweeping until none is left.

Run as ``python -I reaper.py TOKEN PARENT_PID [FILE ...]``: the standard library only, so that it is on
its own within milliseconds (Ray kills a dying worker's children: the watcher must not be one of them by
then, and the runner starts no agent before it is).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time

__all__ = ["MARK_VAR", "marked", "sweep", "start", "finished"]

#: The environment variable carrying the token.
MARK_VAR = "SPOOLPARSE_RUNNER_MARK"
#: Seconds the watcher keeps sweeping after the runner is gone (a process may be mid-fork).
SWEEP_FOR = 2.0
#: Seconds the watcher may take to start.
READY_WITHIN = 30.0


def marked(token: str, *, exclude: frozenset[int] = frozenset()) -> list[int]:
    """Live processes whose environment carries ``token`` (zombies excluded)."""
    needle = f"{MARK_VAR}={token}".encode()
    found: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in exclude:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read()
            if needle not in env.split(b"\0"):
                continue
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        if stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X"):
            found.append(int(name))
    return found


def sweep(token: str, *, exclude: frozenset[int] = frozenset(), duration: float = SWEEP_FOR) -> int:
    """SIGKILL every marked process (and its group) until none is seen; returns how many were killed."""
    killed = 0
    deadline = time.monotonic() + duration
    while True:
        pids = marked(token, exclude=exclude)
        for pid in pids:
            with contextlib.suppress(OSError):
                pgid = os.getpgid(pid)
                if pgid == pid:  # an agent leads its own group: take the group with it
                    os.killpg(pgid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        if not pids or time.monotonic() >= deadline:
            return killed
        time.sleep(0.05)


def start(token: str, *leftovers: str) -> subprocess.Popen[bytes]:
    """The watcher for this process's agents; closing its ``stdin`` (or dying) sets it off.

    ``leftovers`` are files it deletes once the agents are gone (the runner may not live to).
    Returns once the watcher is on its own: the process started here forks it and exits (Ray
    kills a dying worker's direct children, which must not include the watcher), and the watcher
    says so on ``stdout``; it closes ``stdout`` when its sweep is over (see :func:`finished`).
    """
    env = {k: v for k, v in os.environ.items() if k != MARK_VAR}
    proc = subprocess.Popen(
        [sys.executable, "-I", os.path.abspath(__file__), token, str(os.getpid()), *leftovers],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        start_new_session=True,  # out of reach of whatever kills the runner's group
        close_fds=True,
    )
    assert proc.stdout is not None
    waiter = select.poll()  # poll, not select: a busy parent's descriptor numbers may pass 1,024
    waiter.register(proc.stdout, select.POLLIN)
    ready = waiter.poll(READY_WITHIN * 1000)
    if not ready or proc.stdout.read(1) != b"r":
        proc.kill()
        proc.wait()
        raise OSError(f"the runner's watcher did not start within {READY_WITHIN:g} s")
    proc.wait()  # the intermediate process, gone already
    return proc


def finished(watcher: subprocess.Popen[bytes], timeout: float) -> bool:
    """Set the watcher off and wait (at most ``timeout`` seconds) until its sweep is over."""
    if watcher.stdin is not None:
        watcher.stdin.close()
    out = watcher.stdout
    if out is None:
        return True
    done = threading.Event()

    def drain() -> None:
        with contextlib.suppress(OSError, ValueError):
            out.read()
        done.set()

    threading.Thread(target=drain, daemon=True).start()
    return done.wait(timeout)


def main(argv: list[str]) -> int:
    token, parent = argv[0], int(argv[1])
    if os.fork():
        os._exit(0)  # the watcher lives on as the grandchild, no longer the runner's child
    os.write(1, b"r")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C must not end the watch early
    with contextlib.suppress(OSError):
        while os.read(0, 4096):
            pass
    sweep(token, exclude=frozenset({os.getpid(), parent}))
    for path in argv[2:]:
        with contextlib.suppress(OSError):
            os.unlink(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
