"""``run_many(tasks, backend="ray")``: the same batch, spread over the nodes of a Ray cluster.

The driver (this module) keeps the ledger (:mod:`.ray_ledger`) and the one job
log; each node runs a :class:`~.ray_node.NodeRunner` actor that runs the
local runner for its share. The driver pulls tasks from the input only when
some node has room (by the memory its admission reports free, never more than
a window ahead), sends their descriptions, and receives outcomes. A node that
dies, or stays unreachable for :data:`NODE_GRACE` seconds, loses its tasks to
the others (each loss is a job-log attempt, up to ``requeues`` of them); a
late outcome from it is dropped. Interrupting the driver cancels every node
and ends every agent.

Ray is imported only when this backend is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Generator, Iterable
from typing import Any

from .._signals import deferred, handlers_kept
from ..errors import UsageError
from .driver import relay
from .emission import Emission, HandsOut
from .halt import Halt, Tally
from .intake import AsyncSource, Intake, InvalidTask
from .joblog import DoneIds, JobLog
from .options import BatchOptions
from .policy import BatchPolicy
from .ray_ledger import Ledger, Record
from .ray_node import NodeRunner
from .ray_wire import dumps, loads
from .tasks import Outcome, Task, TaskLike
from .verdicts import cancelled_error

__all__ = ["RayBatch", "arun_ray", "NODE_GRACE", "RAY_MISSING"]

log = logging.getLogger("spoolparse.runner")

RAY_MISSING = "backend='ray' needs Ray: pip install 'spoolparse[ray]'"
#: Seconds a node may stay unreachable (``ActorUnavailableError``) before its tasks go elsewhere.
NODE_GRACE = 10.0
#: Longest wait of the driver for replies before it looks at its input and nodes again.
TICK = 0.1
#: Seconds a node runner may hold an exchange open while it has nothing to report.
POLL = 0.5
#: Most task descriptions in one exchange.
MAX_SEND = 256
#: Seconds between looks for nodes that joined the cluster.
NODE_REFRESH = 5.0
#: Seconds given to the node runners to cancel their agents before their actors are killed.
CANCEL_WAIT = 10.0
#: Custom resource that marks agent nodes; when no node has it, every live node runs agents.
AGENT_RESOURCE = "spoolparse"


class _Stop(Exception):
    """Raised inside the loop when another thread asked the batch to stop."""


def _import_ray() -> Any:
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise UsageError(RAY_MISSING) from None


def _connect(ray: Any, address: str | None) -> bool:
    """Join (or start) Ray; ``True`` when this call did, so that closing the batch undoes it."""
    if ray.is_initialized():
        return False
    # nothing leaves the machine on our account, and Ray's memory monitor must not kill the
    # actor that supervises agents (their admission is spoolparse's): see the docs' Ray guide
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    with handlers_kept():  # ours again after it (it sets SIGTERM to sys.exit): a signal cancels the batch
        if address is None and not os.environ.get("RAY_ADDRESS"):
            os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")
            ray.init(include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
    return True


class RayBatch(HandsOut):
    """A batch running on a Ray cluster: iterate it for outcomes; :meth:`close` cancels every node.

    Made by ``run_many(..., backend="ray")``. As with :class:`Batch`, after an
    interrupt (or :meth:`close`) :attr:`cancelled` holds every final outcome
    not yet handed out. :attr:`nodes` counts tasks per node for progress
    displays; :attr:`wire_bytes` counts the task descriptions sent and the
    replies received.

    .. seealso:: :func:`spoolparse.run_many`
    """

    def __init__(
        self,
        tasks: Iterable[TaskLike | InvalidTask] | Callable[[], Any],
        *,
        address: str | None,
        options: BatchOptions,
    ) -> None:
        self.options = options  # checked when made: a node finds no option error of its own
        self.ordered: bool = options.ordered
        self.halt: Halt | None = options.halt_condition
        joblog = options.joblog
        self._ray = _import_ray()
        self._own_ray = _connect(self._ray, address)
        self.joblog = JobLog(joblog) if joblog is not None else None
        self.ledger = Ledger(retries=options.requeues, memory_per_task=options.default_estimate)
        spill_dir = None if options.spool_dir is None else os.fspath(options.spool_dir)
        # the ids a resumed job log has done, and those read, in spill files: memory flat in their number
        self._done = DoneIds(joblog, options.resume, spill_dir) if options.resume and joblog is not None else None
        self.intake = Intake(  # read off the driver's thread (see intake)
            tasks, self._done if self._done is not None else set(), depth=MAX_SEND, spill_dir=spill_dir,
        )
        #: The halt (and the counts of final outcomes): the local batch's policy (retries and requeues are each
        #: node's).
        self.policy = BatchPolicy.of(options)
        self._emission = Emission(ordered=self.ordered)
        self._out = self._emission.ready  # ended outcomes for the loop to hand over
        self._actors: dict[str, Any] = {}
        self._addresses: dict[str, str] = {}
        self._calls: dict[Any, str] = {}  # outstanding exchange -> node
        self._unreachable: dict[str, float] = {}
        self._retry_at: dict[str, float] = {}
        self._next_refresh = 0.0
        self._stop = threading.Event()
        self._closed = False
        self._nodes_stopped = False
        self.cancelled: list[Outcome] = []
        self.wire_bytes = [0, 0]  # sent, received
        self.on_tick: Callable[[RayBatch], None] | None = None
        try:
            self._refresh_nodes()
            if not self._actors:
                raise UsageError("the Ray cluster has no live node to run agents on")
        except BaseException:
            self._finish_cleanup()
            raise
        self._gen = self._loop()

    # -- the public face ---------------------------------------------------------

    @property
    def running(self) -> int:
        return self.ledger.in_flight()

    @property
    def tally(self) -> Tally:
        """Counters for progress displays (the final outcomes so far)."""
        return self.policy.tally

    @property
    def queued(self) -> int:
        return len(self.ledger.requeue) + (self.intake.held is not None)

    @property
    def nodes(self) -> list[dict[str, Any]]:
        """Per node: ``name``, ``address``, ``running`` (sent, not settled), ``done``, ``lost`` (reason or None)."""
        return [
            {"name": n.name, "address": self._addresses.get(n.name), "running": len(n.inflight), "done": n.done,
             "lost": n.lost, "used": n.used, "total": n.total}
            for n in self.ledger.nodes.values()
        ]

    def status(self) -> str:
        """A status line: ``done 120 | running 24 | queued 0 | failed 1 | 3f2a91c0 12/40 | 9bd04e11 lost``
        (each node: running/done)."""
        t = self.tally
        parts = [f"done {t.done}", f"running {self.running}", f"queued {self.queued}", f"failed {t.failed}"]
        for n in self.nodes:
            name = n["name"][:8]
            parts.append(f"{name} lost" if n["lost"] else f"{name} {n['running']}/{n['done']}")
        return " | ".join(parts)

    def _take(self) -> Outcome:
        return next(self._gen)

    def request_stop(self) -> None:
        """Thread-safe: cancel the batch at the loop's next tick (iteration then ends)."""
        self._stop.set()

    def _stop_running(self) -> None:
        """Cancel every node's agents (their outcomes are ``cancelled``); :meth:`_finish_cleanup` then kills the
        node runners and leaves Ray if we joined it."""
        self._gen.close()

    # -- nodes ---------------------------------------------------------------------

    def _refresh_nodes(self) -> None:
        """Place a node runner on every live node that has none (agent nodes only, when any is marked)."""
        self._next_refresh = time.monotonic() + NODE_REFRESH
        ray = self._ray
        alive = [n for n in ray.nodes() if n.get("Alive")]
        marked = [n for n in alive if n.get("Resources", {}).get(AGENT_RESOURCE)]
        affinity = importlib.import_module("ray.util.scheduling_strategies").NodeAffinitySchedulingStrategy
        remote = ray.remote(NodeRunner)
        for n in marked or alive:
            name = str(n["NodeID"])[:12]
            if name in self.ledger.nodes:
                continue
            actor = remote.options(
                num_cpus=0,
                max_restarts=0,
                max_task_retries=0,
                scheduling_strategy=affinity(node_id=n["NodeID"], soft=False),
            ).remote(self.options)
            self._actors[name] = actor
            self._addresses[name] = str(n.get("NodeManagerAddress", ""))
            self.ledger.add_node(name)
            self._call(name, b"", 0.0)  # the first reply reports its memory and concurrency

    def _call(self, name: str, payload: bytes, wait: float) -> None:
        self.wire_bytes[0] += len(payload)
        self._calls[self._actors[name].exchange.remote(payload, wait)] = name

    def _lose(self, name: str, reason: str) -> None:
        for rec in self.ledger.lose(name, reason):
            self._record(rec)
        self._unreachable.pop(name, None)
        actor = self._actors.pop(name, None)
        if actor is not None:
            with contextlib.suppress(Exception):
                self._ray.kill(actor, no_restart=True)  # its watcher then kills whatever it left

    # -- the input -------------------------------------------------------------------

    def _candidate(self) -> tuple[int, Task | InvalidTask, int] | None:
        """(seq, task, attempts so far) of what to send next, without consuming it."""
        if self.ledger.requeue:
            r = self.ledger.requeue[0]
            return r.seq, r.task, r.before
        intake = self.intake
        if self.policy.halted:  # a halt sends nothing new: what was read and not sent is skipped (_skip_rest)
            return None
        window = sum(n.window for n in self.ledger.live())
        if intake.held is None and self.ordered and self._emission.ahead(intake.seq) >= window:
            return None
        task = intake.hold_next()
        return None if task is None else (intake.held_seq, task, 0)

    def _consume(self, seq: int) -> None:
        if self.ledger.requeue and self.ledger.requeue[0].seq == seq:
            self.ledger.requeue.popleft()
        else:
            self.intake.release()

    # -- the loop -----------------------------------------------------------------------

    def _loop(self) -> Generator[Outcome, None, None]:
        try:
            while True:
                if self._stop.is_set():
                    raise _Stop
                while self._out:
                    yield self._hand_next()
                self._send()
                while self._out:
                    yield self._hand_next()
                if self.policy.halted and not self.ledger.in_flight() and not self.ledger.requeue:
                    self._skip_rest()
                    while self._out:
                        yield self._hand_next()
                    break
                if self._finished():
                    break
                self._receive()
                if self.on_tick is not None:
                    self.on_tick(self)
            while self._out:
                yield self._hand_next()
        except _Stop:
            self._cancel_all()
        except BaseException as e:  # a signal (the CLI's, or Ray's bare KeyboardInterrupt), a failure, a close
            if not isinstance(e, GeneratorExit):
                self.interrupted_by(e)
            self._cancel_all()
            raise
        finally:
            self._finish_cleanup()

    def _hand_next(self) -> Outcome:
        """The oldest outcome waiting, handed out under held signals as it leaves the queue (see ``_hand``)."""
        with deferred():
            out = self._out.popleft()
            self._hand(out)
        return out

    def _finished(self) -> bool:
        return (
            (self.intake.exhausted or self.policy.halted)
            and self.intake.held is None
            and not self.ledger.requeue
            and not self.ledger.in_flight()
        )

    def _send(self) -> None:
        if self._nodes_stopped:
            return
        if time.monotonic() >= self._next_refresh or not self.ledger.live():
            self._refresh_nodes()
        busy = set(self._calls.values())
        now = time.monotonic()
        for node in self.ledger.live():
            name = node.name
            if name in busy or self._retry_at.get(name, 0.0) > now:
                continue
            batch: list[dict[str, Any]] = []
            while len(batch) < MAX_SEND:
                cand = self._candidate()
                if cand is None:
                    break
                seq, task, before = cand
                if isinstance(task, InvalidTask):
                    self._consume(seq)
                    out = Outcome(id=task.id, verdict="spawn_error", attempts=0, error=task.error)
                    self._record(Record(out, Task(argv=[], id=task.id), True, time.time(), seq), argv=False)
                    continue
                if not self.ledger.fits(name, self.ledger.estimate(task)):
                    break
                self._consume(seq)
                batch.append(self.ledger.dispatch(name, seq, task, before))
            more = not self.intake.exhausted or bool(self.ledger.requeue) or self.intake.held is not None
            if batch or node.inflight or more:
                self._call(name, dumps(batch) if batch else b"", POLL)
        if not self.ledger.live():
            self._no_nodes()

    def _no_nodes(self) -> None:
        """Every node is lost and none joined: what is left fails, each with its own outcome (a bounded
        number per turn of the loop, so that the outcomes are handed out as they are made)."""
        for _ in range(MAX_SEND):
            cand = self._candidate()
            if cand is None:
                return
            seq, task, before = cand
            self._consume(seq)
            out = Outcome(id=str(task.id), verdict="failed", attempts=before, error="no live Ray node left to run it")
            is_task = isinstance(task, Task)
            record_task = task if isinstance(task, Task) else Task(argv=[], id=task.id)
            self._record(Record(out, record_task, True, time.time(), seq), argv=is_task)

    def _receive(self) -> None:
        ray = self._ray
        if not self._calls:
            time.sleep(TICK)
            return
        refs = list(self._calls)
        ready, rest = ray.wait(refs, num_returns=1, timeout=TICK)
        if ready and rest:
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        for ref in ready:
            name = self._calls.pop(ref)
            try:
                data = ray.get(ref)
            except ray.exceptions.ActorUnavailableError as e:
                first = self._unreachable.setdefault(name, time.monotonic())
                if time.monotonic() - first > NODE_GRACE:
                    self._lose(name, f"unreachable for {NODE_GRACE:g} s: {_first_line(e)}")
                else:
                    self._retry_at[name] = time.monotonic() + POLL
                continue
            except ray.exceptions.RayActorError as e:
                self._lose(name, _first_line(e))
                continue
            except Exception as e:
                self._lose(name, f"{type(e).__name__}: {_first_line(e)}")
                continue
            self._unreachable.pop(name, None)
            if name not in self._actors:
                self.ledger.dropped += len(loads(data)["out"])  # from a node already given up
                continue
            self.wire_bytes[1] += len(data)
            reply = loads(data)
            if reply.get("uncontained"):  # in a node's first reply only
                log.warning("node %s (%s): %s", name, self._addresses.get(name, "?"), reply["uncontained"])
            self.ledger.report(name, reply)
            for wire in reply["log"]:
                rec = self.ledger.attempt(name, wire)
                if rec is not None:
                    self._record(rec)
            for wire in reply["out"]:
                rec = self.ledger.settle(name, wire)
                if rec is not None:
                    self._record(rec)

    def _record(self, rec: Record, *, argv: bool = True) -> None:
        if self.joblog is not None:
            # a final line waits until its outcome is printed (HandsOut), so --resume after a crash reruns it
            self.joblog.write(rec.outcome, argv=list(rec.task.argv) if argv else None, final=rec.final,
                              started=rec.started, hold=rec.final)
        if rec.final:
            self._final(rec.outcome, rec.seq)

    def _final(self, out: Outcome, seq: int) -> None:
        if self.policy.final(out.verdict) == "now":
            self._stop_nodes()
            for rec in self.ledger.cancel_all(self.policy.cancelled_error(None)):
                self._record(rec)
        self._emission.add(seq, out)
        if self._finished() or (self.policy.halted and not self.ledger.in_flight()):
            self._emission.past_holes()

    def _skip_rest(self) -> None:
        """After a halt: a ``skipped`` outcome for every task read and not sent, and every one still to read.

        As for a local batch: not written to the job log, so ``resume`` runs them.
        """
        for seq, out in self.intake.skip_rest():
            self._final(out, seq)

    # -- cancelling --------------------------------------------------------------------------

    def _stop_nodes(self) -> None:
        """Every node runner cancels its agents (bounded wait), then its actor is killed."""
        ray = self._ray
        refs = []
        for actor in self._actors.values():
            with contextlib.suppress(Exception):
                refs.append(actor.cancel.remote())
        if refs:
            with contextlib.suppress(Exception):
                ray.wait(refs, num_returns=len(refs), timeout=CANCEL_WAIT)
        for actor in self._actors.values():
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
        self._nodes_stopped = True
        self._actors.clear()
        self._calls.clear()
        for node in self.ledger.live():
            node.lost = "stopped"

    def _cancel_all(self) -> None:
        with deferred():
            self._stop_nodes()
            undelivered = self._emission.take_undelivered()
            for out in undelivered:  # close() returns them: final in the job log before the loop's end closes it
                self.emitted(out)
            # why spoolparse cancelled them (``cancelled (SIGTERM to spoolparse)``), as for a local batch's tasks
            records = self.ledger.cancel_all(self._cancel_cause or cancelled_error(None))
            for rec in records:
                if self.joblog is not None:
                    self.joblog.write(rec.outcome, argv=list(rec.task.argv), final=True, started=rec.started)
            self.cancelled[:0] = undelivered + [r.outcome for r in records]

    def _finish_cleanup(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.intake.close()
        if self._done is not None:
            self._done.close()
        for actor in self._actors.values():
            with contextlib.suppress(Exception):
                self._ray.kill(actor, no_restart=True)
        self._actors.clear()
        if self.joblog is not None:
            self.joblog.close()
        if self._own_ray:
            with contextlib.suppress(Exception):
                self._ray.shutdown()


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


async def arun_ray(
    tasks: Iterable[TaskLike | InvalidTask] | AsyncIterable[TaskLike | InvalidTask],
    *,
    address: str | None,
    options: BatchOptions,
) -> AsyncGenerator[Outcome, None]:
    """:func:`~spoolparse.arun_many` on Ray: the driver loop runs in a thread, outcomes come to the event loop."""
    loop = asyncio.get_running_loop()
    source: Any = tasks
    if isinstance(tasks, AsyncIterable):
        source = AsyncSource(tasks, MAX_SEND)
    batch = await asyncio.to_thread(RayBatch, source, address=address, options=options)
    feeder = loop.create_task(source.feed()) if isinstance(source, AsyncSource) else None
    try:
        # closed as we leave, not whenever it is collected: leaving early stops the batch at once
        async with contextlib.aclosing(relay(batch, MAX_SEND, "spoolparse-ray-driver")) as outcomes:
            async for out in outcomes:
                yield out
    finally:
        await asyncio.to_thread(batch.close)
        if feeder is not None:
            feeder.cancel()
