"""The node runner: one long-lived Ray actor per node, running :func:`arun_many` for that node's share of tasks.

Everything that touches an agent happens here, on the agent's node: spools on
its disk, process groups and cgroups, memory admission with ``stop_at`` and
``kill_at`` against its own memory. The driver talks to it with one call,
:meth:`NodeRunner.exchange`: task descriptions in, outcomes (summaries) and
a status report out. The actor is asynchronous, so an exchange waiting for
outcomes never holds up the next one.

Every task runs in a cgroup of its own where the node lets one be made (as
on a local batch: :func:`~spoolparse.runner.cgroup.wants_cgroup`), which is
what ends a process that left its task's session and cleared its
environment; the first reply says when none can be made there, and the
driver warns once for that node. When the actor process dies —
``ray.kill``, its node removed, Ray's memory monitor — its guardian
(:mod:`spoolparse._guardian`, the one every run has, started detached and
given the runner's environment mark) kills its agents and whatever they
started (the cgroups it holds, and every process carrying the mark), and
deletes the node's job log.

This module does not import Ray: the driver wraps the class with
``ray.remote`` when it places the actors.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

import orjson

from .._dirfd import NotOurs, make_unique_file, open_path, refusal
from .._guardian import MARK_VAR, SWEEP_FOR, guardian, marked
from ..spool import temp_dir
from .admission import Admission, auto_concurrency, default_reserve
from .arun import arun_many
from .cgroup import Placement, uncontained_note, wants_cgroup
from .memory import HostMemory, MemoryProbe
from .options import BatchOptions
from .ray_wire import decode_task, dumps, encode_outcome, loads
from .tasks import Task

__all__ = ["NodeRunner"]

#: Seconds an exchange that found outcomes waits for more, so that a burst travels in one reply.
LINGER = 0.01


def _node_log() -> str:
    """A new, empty job log for the node, in the temp dir (made through its descriptor, mode 0600). The batch the
    node runs, the node's reader and the guardian that deletes it open it again by its name: so the temp dir must
    be one where nobody else can rename what is ours (ours or root's, and not writable by others unless sticky, as
    ``/tmp`` is), or the node does not start."""
    where = temp_dir()
    try:
        dir_fd = open_path(where)
    except NotOurs as e:
        raise OSError(e.errno, f"cannot make the node's job log in {where!r}: it {refusal(where, e)}") from None
    try:
        name, fd = make_unique_file(dir_fd, "spoolparse-node-", ".ndjson")
    finally:
        os.close(dir_fd)
    os.close(fd)
    return os.path.join(where, name)


class NodeRunner:
    """The per-node half of a Ray batch (see the module docstring)."""

    def __init__(self, options: BatchOptions) -> None:
        probe: MemoryProbe = options.memory_probe if options.memory_probe is not None else HostMemory()
        self.stop_at = options.stop_at
        self.admission = Admission(probe, stop_at=self.stop_at, kill_at=options.kill_at)
        capacity = options.max_concurrent
        if capacity is None:
            total = probe.total()
            reserve = default_reserve(total) if options.reserve is None else options.reserve
            capacity = auto_concurrency(total, options.default_estimate, reserve=reserve)
        self.capacity: int = capacity
        self.memory_per_task: int = options.default_estimate
        # attempts that end in a local requeue (memory pressure) are read back from a node-local job log
        self.log_path = _node_log()
        self._log_offset = 0
        self._log_tail = b""
        # the driver keeps the job log, resume, order and halt; a node runs what it is sent
        self.opts = options.replace(
            max_concurrent=capacity, memory_probe=probe, joblog=self.log_path, resume=False, ordered=False,
            window=None, halt=None,
        )
        self.token = uuid.uuid4().hex
        # nobody's child before any agent runs (Ray kills a dying worker's children), and told to sweep
        # the mark every agent inherits (their children may have left every group, with no cgroup)
        if not guardian.start(detach=True):
            raise OSError("cannot start the guardian that kills this node's agents if the node runner dies")
        guardian.mark(self.token)
        guardian.leave(self.log_path)
        os.environ[MARK_VAR] = self.token  # every agent started from here inherits it
        # said once to the driver: what escapes a task on this node, where no cgroup can be made (the batch
        # the runner runs detects the same placement and makes the cgroups)
        where = Placement.detect() if wants_cgroup(options.enforce) else None
        self._uncontained = uncontained_note(where) if where is not None and where.kind is None else None
        self.inbox: deque[Task] = deque()
        self.waiting_est = 0
        self.outbox: list[dict[str, Any]] = []
        self.handed = 0
        self.ended = 0
        self.failure: str | None = None
        self._runner: asyncio.Task[None] | None = None
        self._out_ready: asyncio.Event | None = None
        self._feed_ready: asyncio.Event | None = None

    # -- the driver's calls ----------------------------------------------------

    async def exchange(self, payload: bytes, wait: float) -> bytes:
        """Take these tasks; return, within ``wait`` seconds, the outcomes so far and a status report."""
        out_ready, feed_ready = self._start()
        if payload:
            for d in loads(payload):
                task = decode_task(d)
                self.inbox.append(task)
                self.waiting_est += task.memory or self.memory_per_task
            feed_ready.set()
        if not self.outbox and self.failure is None and wait > 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(out_ready.wait(), wait)
            if self.outbox:
                await asyncio.sleep(LINGER)
        out_ready.clear()
        if self.failure is not None:
            raise RuntimeError(f"the node runner failed: {self.failure}")
        outcomes, self.outbox = self.outbox, []
        used, total = self.admission.sample(fresh=True)
        uncontained, self._uncontained = self._uncontained, None
        return dumps({
            "uncontained": uncontained,
            "out": outcomes,
            "log": self._attempts(),
            "used": used,
            "total": total,
            "stop_at": self.stop_at,
            "capacity": self.capacity,
            "waiting": len(self.inbox),
            "waiting_est": self.waiting_est,
            "running": self.handed - self.ended,
        })

    async def cancel(self) -> int:
        """Kill every agent (TERM, short grace, KILL), set the guardian off; how many marked processes remain."""
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._runner
        left = len(marked(self.token, exclude=frozenset({os.getpid()})))
        await asyncio.to_thread(guardian.finish, SWEEP_FOR + 3)  # it sweeps once more
        with contextlib.suppress(OSError):
            os.unlink(self.log_path)
        return left

    def pid(self) -> int:
        return os.getpid()

    # -- inside ------------------------------------------------------------------

    def _start(self) -> tuple[asyncio.Event, asyncio.Event]:
        if self._out_ready is None or self._feed_ready is None:
            self._out_ready, self._feed_ready = asyncio.Event(), asyncio.Event()
            self._runner = asyncio.get_running_loop().create_task(self._run())
        return self._out_ready, self._feed_ready

    async def _run(self) -> None:
        out_ready, feed_ready = self._start()
        try:
            async for out in arun_many(self._feed(), self.opts):
                self.ended += 1
                self.outbox.append(encode_outcome(out))
                out_ready.set()
                feed_ready.set()
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            self.failure = f"{type(e).__name__}: {e}"
            out_ready.set()

    async def _feed(self) -> AsyncIterator[Task]:
        """Tasks for the runner, handed over only while it has a free slot (the rest wait in the inbox)."""
        _, feed_ready = self._start()
        while True:
            while not self.inbox or self.handed - self.ended >= self.capacity:
                feed_ready.clear()
                await feed_ready.wait()
            task = self.inbox.popleft()
            self.waiting_est -= task.memory or self.memory_per_task
            self.handed += 1
            yield task

    def _attempts(self) -> list[dict[str, Any]]:
        """Non-final attempts the local runner logged since the last call, in the outcome's wire shape."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                data = f.read()
        except OSError:
            return []
        self._log_offset += len(data)
        data = self._log_tail + data
        lines = data.split(b"\n")
        self._log_tail = lines.pop()
        found: list[dict[str, Any]] = []
        for line in lines:
            if b'"final":false' not in line:
                continue
            with contextlib.suppress(orjson.JSONDecodeError, KeyError, ValueError):
                rec = orjson.loads(line)
                found.append({
                    "id": int(rec["id"]), "verdict": rec["verdict"], "attempts": rec["attempt"],
                    "wall_s": rec["wall_s"], "cpu_s": rec["cpu_s"], "peak_memory": rec["peak_memory"],
                    "peak_source": None, "returncode": rec["returncode"], "signal": rec["signal"],
                    "enforcement": rec["enforcement"], "error": rec["error"], "summary": None,
                })
        return found
