"""The Ray driver's ledger: which task is on which node, how many more a node may take, one outcome per task.

Sans-I/O: the driver feeds it node reports, outcomes and node losses, and it
answers with what to send, what to hand out and what to write in the job
log. Nothing here talks to Ray, so every rule (placement by free memory, the
window per node, requeue after a loss, dropping a late duplicate) is tested
without a cluster.

A node may hold at most ``window`` tasks (twice its concurrency) and, beyond
the first, only as many as fit in the memory its admission reports free:
``stop_at × total − used − estimates of the tasks waiting there``. The
driver's memory is therefore O(nodes × window), whatever the number of tasks.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from .ray_wire import decode_outcome, encode_task
from .tasks import Outcome, Task

__all__ = ["Ledger", "NodeState", "Flight", "Requeued", "Record"]


@dataclass(eq=False)
class Flight:
    """A task sent to a node and not yet settled."""

    seq: int
    task: Task
    before: int  # attempts spent on nodes that were lost
    estimate: int
    started: float  # wall clock, for the job log


@dataclass
class Requeued:
    """A task whose node was lost, waiting to be sent again."""

    seq: int
    task: Task
    before: int


@dataclass
class Record:
    """A job-log line to write (and, when ``final``, an outcome to hand out)."""

    outcome: Outcome
    task: Task
    final: bool
    started: float
    seq: int


@dataclass(eq=False)
class NodeState:
    """What the driver knows of one node runner."""

    name: str
    inflight: dict[int, Flight] = field(default_factory=dict)
    window: int = 1
    budget: float = 0.0  # bytes still free for more tasks, from the last report
    reported: bool = False
    used: int = 0
    total: int = 0
    lost: str | None = None
    done: int = 0
    sent: int = 0


class Ledger:
    """The driver's account of every task in flight.

    ``retries``: how many times a task lost with its node is sent again;
    ``memory_per_task``: the estimate of a task that gives none.
    """

    def __init__(self, *, retries: int, memory_per_task: int) -> None:
        self.retries = retries
        self.memory_per_task = memory_per_task
        self.nodes: dict[str, NodeState] = {}
        self.requeue: deque[Requeued] = deque()
        self.dropped = 0  # late duplicates
        self._where: dict[int, str] = {}  # seq -> node holding it now

    # -- nodes ---------------------------------------------------------------

    def add_node(self, name: str) -> NodeState:
        node = self.nodes[name] = NodeState(name)
        return node

    def live(self) -> list[NodeState]:
        return [n for n in self.nodes.values() if n.lost is None]

    def report(self, name: str, status: dict[str, Any]) -> None:
        """A node's status, sent with every reply: its memory, concurrency and waiting queue."""
        node = self.nodes[name]
        if node.lost is not None:
            return
        total, used = int(status["total"]), int(status["used"])
        node.total, node.used = total, used
        node.window = max(1, 2 * int(status["capacity"]))
        node.budget = float(status["stop_at"]) * total - used - int(status["waiting_est"])
        node.reported = True

    def estimate(self, task: Task) -> int:
        return task.memory or self.memory_per_task

    def fits(self, name: str, estimate: int) -> bool:
        """Whether one more task with this estimate may go to the node now."""
        node = self.nodes[name]
        if node.lost is not None or not node.reported or len(node.inflight) >= node.window:
            return False
        if not node.inflight:
            return node.budget > 0  # an idle node takes one whatever its estimate, as local admission does
        return estimate <= node.budget

    def dispatch(self, name: str, seq: int, task: Task, before: int = 0) -> dict[str, Any]:
        """Record the task as on the node; returns its wire form."""
        node = self.nodes[name]
        est = self.estimate(task)
        node.inflight[seq] = Flight(seq, task, before, est, time.time())
        node.budget -= est
        node.sent += 1
        self._where[seq] = name
        return encode_task(seq, task)

    def in_flight(self) -> int:
        return len(self._where)

    # -- settling --------------------------------------------------------------

    def settle(self, name: str, wire: dict[str, Any]) -> Record | None:
        """A node's outcome: the final record, or ``None`` for a late duplicate (dropped)."""
        node = self.nodes[name]
        seq = int(wire["id"])
        flight = node.inflight.get(seq) if node.lost is None else None
        if flight is None or self._where.get(seq) != name:
            self.dropped += 1
            return None
        del node.inflight[seq]
        del self._where[seq]
        node.done += 1
        out = decode_outcome(wire, task_id=str(flight.task.id), attempts_before=flight.before)
        return Record(out, flight.task, True, flight.started, seq)

    def attempt(self, name: str, wire: dict[str, Any]) -> Record | None:
        """A node's non-final attempt (a local requeue after memory pressure), for the job log."""
        node = self.nodes[name]
        flight = node.inflight.get(int(wire["id"])) if node.lost is None else None
        if flight is None:
            return None
        out = decode_outcome(wire, task_id=str(flight.task.id), attempts_before=flight.before)
        return Record(out, flight.task, False, time.time() - out.wall_s, flight.seq)

    def lose(self, name: str, reason: str) -> list[Record]:
        """The node is gone: each task it held is requeued (a non-final record) or, out of attempts, failed."""
        node = self.nodes[name]
        if node.lost is not None:
            return []
        node.lost = reason
        records: list[Record] = []
        now = time.time()
        for flight in node.inflight.values():
            del self._where[flight.seq]
            spent = flight.before + 1
            final = spent > self.retries
            error = f"its Ray node {name} was lost ({reason})" + (
                f" on each of {spent} attempts" if final else "; requeued on another node"
            )
            out = Outcome(id=str(flight.task.id), verdict="failed", attempts=spent, wall_s=now - flight.started,
                          error=error)
            records.append(Record(out, flight.task, final, flight.started, flight.seq))
            if not final:
                self.requeue.append(Requeued(flight.seq, flight.task, spent))
        node.inflight.clear()
        return records

    def cancel_all(self, reason: str) -> list[Record]:
        """Every task in flight or requeued ends ``cancelled`` (the driver was interrupted)."""
        records: list[Record] = []
        now = time.time()
        for node in self.nodes.values():
            for flight in node.inflight.values():
                out = Outcome(id=str(flight.task.id), verdict="cancelled", attempts=flight.before + 1,
                              wall_s=now - flight.started, error=reason)
                records.append(Record(out, flight.task, True, flight.started, flight.seq))
            node.inflight.clear()
        for r in self.requeue:
            out = Outcome(id=str(r.task.id), verdict="cancelled", attempts=r.before, error=f"{reason} before a retry")
            records.append(Record(out, r.task, True, now, r.seq))
        self.requeue.clear()
        self._where.clear()
        return records
