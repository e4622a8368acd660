"""The ``batch`` and ``calibrate`` subcommands.

``batch`` prints one NDJSON outcome per task on stdout; its exit status
follows the one table (:data:`spoolparse._cli_common.EXIT_STATUSES`): 0 when
every task is ``ok``, 1 when one is not (timeouts included), 2 on a usage
error, 125 on a failure of spoolparse itself (a job log or events file that
cannot be written), 128+N when signal N stopped it (running tasks are ended
and reported ``cancelled``). Its options become one
:class:`~spoolparse.runner.options.BatchOptions`. ``calibrate`` prints one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterator
from typing import IO, TYPE_CHECKING, Any

from .. import _limits
from .._cli_common import (
    EXIT_INTERRUPTED,
    EXIT_NOT_OK,
    EXIT_OK,
    EXIT_SIGNAL_BASE,
    add_command,
    add_output_options,
    emit_json,
    fail,
    log_messages,
    parse_duration,
    parse_size,
    positive_size,
    warn,
)
from .._regex import regex
from .._signals import Interrupted, as_interrupted, deferred, helper_thread
from .._terminal import printable
from ..errors import UsageError
from .admission import cpu_cap
from .backend import run_many
from .calibrate import calibrate
from .calibrations import calibrations_path, listing, record
from .halt import Halt, parse_halt
from .ids import SeenIds, duplicate_error
from .options import ENFORCE_MODES, BatchOptions
from .scheduler import Batch, InvalidTask
from .taskfile import TaskLines
from .tasks import Outcome, Task
from .verdicts import RETRY_VERDICTS

if TYPE_CHECKING:
    from ..providers.base import LiveEvent
    from .ray_backend import RayBatch

__all__ = ["register", "parse_fraction"]

BATCH_EXAMPLES = """\
examples:
  spoolparse batch tasks.jsonl -j 8 --joblog jobs.ndjson > outcomes.ndjson
  spoolparse batch tasks.jsonl --memory-per-task 2G --memory-limit 3G --timeout 1800 --soft-timeout 1500
  spoolparse batch tasks.jsonl --joblog jobs.ndjson --resume       # run what has no outcome yet
  spoolparse batch tasks.jsonl --joblog jobs.ndjson --resume-failed --retries 2   # and what was not ok
  python make_tasks.py | spoolparse batch - -j 4
  spoolparse batch tasks.jsonl --ray auto -j 16 --joblog jobs.ndjson   # on every node of a Ray cluster

each input line: {"id": "t1", "cmd": ["codex", "exec", "--json", "..."], "input": "...", "timeout": 600,
                  "cwd": "...", "env": {"K": "V"}, "memory": "2G", "memory_limit": "3G"}
"""

CALIBRATE_EXAMPLES = """\
examples:
  spoolparse calibrate -- codex exec --json "summarise README.md"     # recorded for "codex exec"
  spoolparse calibrate --max-concurrency 8 -- python fixtures/fake_codex.py --size 64M
  spoolparse calibrate --list                                          # what batch will reserve, by command
"""


def parse_fraction(text: str) -> float:
    """``"85%"`` or ``"0.85"`` → 0.85."""
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a fraction: {text!r} (try 85% or 0.85)") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 100%: {text!r}")
    return value



def _whole(least: int, short: str) -> Callable[[str], int]:
    """An argument type: a whole number of at least ``least`` (``short``: what a smaller one is told)."""
    def whole(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{short}: {text!r}")
        return value
    return whole


_positive = _whole(1, "must be at least 1")
_count = _whole(0, "must not be negative")


def _grace(text: str) -> float:
    return parse_duration(text, zero=True)


def _signal(text: str) -> int:
    name = text.upper()
    if not name.startswith("SIG"):
        name = "SIG" + name
    sig = getattr(signal, name, None)
    if not isinstance(sig, int):
        raise argparse.ArgumentTypeError(f"not a signal: {text!r}")
    return int(sig)


def _pct(fraction: float) -> str:
    return f"{fraction:.0%}%"  # "85%%": argparse %-formats its help


def _stop_at(p: argparse.ArgumentParser, help: str, **kw: Any) -> None:
    p.add_argument("--stop-at", type=parse_fraction, metavar="PCT", help=f"{help} (default: {_pct(_limits.STOP_AT)})",
                   **kw)


def register(sub: Any) -> None:
    """Add ``batch`` and ``calibrate`` to the ``spoolparse`` command."""
    b = add_command(
        sub,
        "batch",
        "Run the tasks of TASKS.jsonl (or - for stdin), at most -j at once, starting each only when "
        "memory allows; print one NDJSON outcome per task as it ends. Exit 0 when every task is ok, 1 when one "
        "is not, 2 on a usage error, 125 on a failure of spoolparse itself, 128+N on signal N.",
        BATCH_EXAMPLES,
        # an option not given is left out: BatchOptions holds every default (one place)
        argument_default=argparse.SUPPRESS,
    )
    b.add_argument("tasks", metavar="TASKS.jsonl|-", help="one JSON task per line, or - for stdin")
    b.add_argument("--check", action="store_true", default=False,
                   help="run nothing: read every line and print one NDJSON line per bad one (line, id, error); "
                   "exit 0 when every line is a task, 1 when one is not, 2 when the file cannot be read")
    b.add_argument("-j", "--jobs", dest="max_concurrent", type=_positive, metavar="N",
                   help=f"most tasks at once (default: from memory, at most {cpu_cap()} here)")
    b.add_argument("--memory-per-task", type=positive_size, metavar="SIZE",
                   help="memory reserved for a task that names none (default: what calibrate recorded for the task's "
                   "command, see calibrate --list, else 1G)")
    b.add_argument("--memory-limit", type=positive_size, metavar="SIZE",
                   help="cap each task's process tree (cgroup if possible, else an RSS watchdog)")
    b.add_argument("--reserve", type=parse_size, metavar="SIZE",
                   help="memory kept for everything else when choosing -j (default: max(2G, 10%%))")
    _stop_at(b, "start nothing while used memory is above this")
    b.add_argument("--kill-at", type=parse_fraction, metavar="PCT",
                   help=f"above this kill the youngest task and requeue it (default: {_pct(_limits.KILL_AT)})")
    b.add_argument("--timeout", type=parse_duration, metavar="T",
                   help="SIGTERM, then SIGKILL after --grace (per task; 90, 1.5s, 10m, 2h)")
    b.add_argument("--soft-timeout", type=parse_duration, metavar="T",
                   help="send --soft-signal once after T")
    b.add_argument("--soft-signal", type=_signal, metavar="SIG", help="(default: USR1)")
    b.add_argument("--grace", type=_grace, metavar="T",
                   help=f"SIGTERM to SIGKILL (default: {_limits.DEFAULT_GRACE:g}s)")
    b.add_argument("--max-spool-bytes", type=positive_size, metavar="SIZE",
                   help="kill a task whose stdout passes SIZE (its verdict: failed, spool full); a task line's "
                   "\"max_spool_bytes\" overrides it")
    b.add_argument("--retries", type=_count, metavar="N",
                   help=f"run a task again when its verdict is {', '.join(RETRY_VERDICTS)} (exit not 0 or not "
                   "ok, timed out, over its own --memory-limit), up to N times; never a spawn_error (a bad task "
                   "line, a duplicate id, a missing command) (default: 0)")
    b.add_argument("--retry-backoff", type=_grace, metavar="T",
                   help=f"wait before a retry or requeue, doubled each time (default: {_limits.RETRY_BACKOFF:g}s)")
    b.add_argument("--requeues", type=_count, metavar="N",
                   help=f"start a task again after a host memory-pressure kill, up to N times "
                   f"(default: {_limits.REQUEUES})")
    b.add_argument("--joblog", metavar="FILE", help="append one NDJSON line per attempt")
    again = b.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_const", const=True,
                       help="skip task ids with a final outcome in --joblog, ok or not (cancelled ones run again)")
    again.add_argument("--resume-failed", dest="resume", action="store_const", const="failed",
                       help="skip task ids whose final outcome in --joblog is ok; run the others again")
    b.add_argument("--ordered", action="store_const", const=True, help="print outcomes in input order")
    add_output_options(b, batch=True)
    b.add_argument("--results", metavar="DIR",
                   help="keep the stdout and stderr of each task that is not ok as DIR/<id>/stdout, stderr "
                   "(hard links to the spools, no copies; <id> %%-quoted)")
    b.add_argument("--results-all", dest="keep_transcript", action="store_const", const="all",
                   help="with --results: keep every task's, ok or not")
    b.add_argument("--max-task-line", type=positive_size, default=_limits.MAX_TASK_LINE, metavar="SIZE",
                   help="longest task line read; a longer one is that task's error (default: 8M)")
    b.add_argument("--halt", type=_halt, metavar="WHEN[,WHY=N]",
                   help="stop starting tasks: soon or now (now also cancels the running ones), after fail=N "
                   "or fail=X%% tasks not ok, or success=N ok (soon or now alone: fail=1); the tasks never "
                   "started get skipped outcomes")
    b.add_argument("--enforce", choices=ENFORCE_MODES,
                   help="auto (and cgroup): every task in a cgroup of its own where one can be made, --memory-limit "
                   "enforced there, else by RSS sampling; watchdog: never a cgroup (default: auto)")
    b.add_argument("--pids-max", type=_positive, metavar="N",
                   help=f"processes one task's cgroup may hold, pids.max (default: {_limits.PIDS_MAX})")
    b.add_argument("--spool-dir", metavar="DIR", help="where spools go (default: $PDD_AGENT_SPOOL_DIR or temp)")
    b.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="run on a Ray cluster: ADDRESS (auto, ray://host:10001), $RAY_ADDRESS, or a new local one; "
                   "every option applies per node (needs spoolparse[ray])")
    b.add_argument("--events", action="store_true", default=False,
                   help="write each task's live events as NDJSON lines on stderr (with a \"task\" field); "
                   "messages of spoolparse then go as events too")
    b.add_argument("--events-file", metavar="FILE", default=None,
                   help="write the NDJSON events to FILE instead (implies --events)")
    b.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="a status line on stderr: done/total, running, queued, failed, memory, ETA (default: when "
                   "stderr is a terminal and carries no events)")
    b.set_defaults(func=_cmd_batch)

    c = add_command(
        sub,
        "calibrate",
        "Run CMD at concurrency 1, 2, 4, ... sampling each run's process-tree peak memory and wall "
        "time; stop before memory pressure; print the per-task peak and the recommended -j and "
        "--memory-per-task for this host as one JSON object.",
        CALIBRATE_EXAMPLES,
    )
    c.add_argument("--max-concurrency", type=_positive, default=8, metavar="N", help="highest level (default: 8)")
    c.add_argument("--timeout", type=parse_duration, metavar="DURATION", help="per run")
    _stop_at(c, "never go where the next level could pass this", default=_limits.STOP_AT)
    c.add_argument("--pretty", action="store_true", help="indent the JSON")
    c.add_argument("--record", action=argparse.BooleanOptionalAction, default=True,
                   help="record the recommended --memory-per-task for this command (its program and the argument "
                   "that picks its mode: codex exec, claude -p), which batch then uses for its tasks with that "
                   "command when --memory-per-task is not given (default: yes; the file: $SPOOLPARSE_CALIBRATIONS, "
                   "else ~/.cache/spoolparse/calibrations.json)")
    c.add_argument("--list", action="store_true",
                   help="measure nothing: print the recorded calibrations, by command, as one JSON object")
    c.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD [ARG ...]", help="the command to measure")
    c.set_defaults(func=_cmd_calibrate)


# -- batch -------------------------------------------------------------------


def _read_tasks(stream: IO[bytes], max_line: int = _limits.MAX_TASK_LINE) -> Generator[Task | InvalidTask, None, None]:
    """Tasks from NDJSON lines; a bad line becomes an :class:`InvalidTask` (its id: the line number).

    Closes ``stream`` when it ends."""
    with stream:
        yield from TaskLines(stream, max_line)


def _close_unread(tasks: Generator[Any, None, None], stream: IO[bytes]) -> None:
    """Close the input when no task was read from it (a usage error came first): then no thread is reading it."""
    if inspect.getgeneratorstate(tasks) == inspect.GEN_CREATED:
        stream.close()


def _check(stream: IO[bytes], max_line: int, spool_dir: str | None) -> int:
    """``batch --check``: every bad line of the input as one NDJSON object on stdout (``line``, ``id``,
    ``error``: what its outcome would say), the counts on stderr; nothing runs. 0 when every line is a task,
    1 when one is not."""
    lines = TaskLines(stream, max_line)
    tasks = bad = 0
    with stream, SeenIds(spool_dir) as seen:
        for item in lines:
            tasks += 1
            tid = str(item.id)
            if not seen.add(tid):  # as the batch would find it
                item = InvalidTask(tid, f"line {lines.lines}: {duplicate_error(tid)}", line=lines.lines)
            if isinstance(item, InvalidTask):
                bad += 1
                emit_json({"line": item.line, "id": item.id, "error": item.error})
    blank = f", {lines.blank} blank line{'s' if lines.blank != 1 else ''}" if lines.blank else ""
    sys.stderr.write(f"spoolparse: check: {tasks} task line{'s' if tasks != 1 else ''}, {bad} bad{blank}\n")
    return EXIT_NOT_OK if bad else EXIT_OK


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f}"


class _Progress:
    """The running tasks' current tools (one line each, bounded), then the totals line."""

    def __init__(self, out: IO[str], total: int | None = None) -> None:
        self.out = out
        from ..progress import RunningTasks, Spend  # only with --progress: it brings in rich

        self.total = total  # task lines in the input, when it is a file
        self.started = time.monotonic()
        self.next = 0.0
        self.tasks = RunningTasks()
        self.spend = Spend()  # tokens and cost of the tasks ended so far
        self.drawn = 0  # lines of the block on screen
        # drawn from the batch's loop thread, cleared from the thread that prints outcomes
        self.lock = threading.RLock()

    def on_event(self, task: Task, ev: LiveEvent) -> None:
        with self.lock:
            self.tasks.on_event(str(task.id), ev)

    def __call__(self, batch: Batch | RayBatch, *, force: bool = False) -> None:
        with self.lock:
            self._draw(batch, force=force)

    def _draw(self, batch: Batch | RayBatch, *, force: bool) -> None:
        now = time.monotonic()
        if not force and now < self.next:
            return
        self.next = now + 0.2
        if not isinstance(batch, Batch):
            # node names: the cluster's to choose
            self.out.write(f"\r\x1b[K{printable(batch.status())}{self.spend.text()}")
            self.out.flush()
            return
        a = batch.admission
        t = batch.tally
        done = f"done {t.done}/{self.total}" if self.total is not None else f"done {t.done}"
        totals = (
            f"{done} | running {batch.running} | queued {batch.queued} | failed {t.failed}"
            f" | memory {_gib(a.last_used)}/{_gib(a.last_total)} GiB{self.spend.text()}"
            f"{self._eta(t.done + batch.skipped, now)}"
        )
        width = shutil.get_terminal_size().columns
        lines = [*self.tasks.lines(width), totals]
        self.out.write(self._home() + "\n".join(lines))
        self.drawn = len(lines)
        self.out.flush()

    def _eta(self, done: int, now: float) -> str:
        """`` | ETA 3m20s`` from the pace so far, once the total is known and a task has ended."""
        if self.total is None or done <= 0 or done >= self.total:
            return ""
        left = (now - self.started) / done * (self.total - done)
        m, sec = divmod(int(left), 60)
        h, m = divmod(m, 60)
        return f" | ETA {h}h{m:02d}m" if h else f" | ETA {m}m{sec:02d}s" if m else f" | ETA {sec}s"

    def _home(self) -> str:
        """Back to the block's first line, and clear to the end of the screen."""
        return (f"\x1b[{self.drawn - 1}F" if self.drawn > 1 else "\r") + "\x1b[J"

    def finished(self, outcome: Outcome) -> None:
        with self.lock:
            self.tasks.finished(outcome.id)
            self.spend.add(outcome.summary)

    def clear(self) -> None:
        with self.lock:
            self.out.write(self._home())
            self.drawn = 0
            self.out.flush()


#: The end of a line with something on it (a blank line gets no outcome, so it does not count).
_LINE_END = regex(rb"[^\n]\n")


def _count_lines(path: str) -> int | None:
    """Task lines of a regular file, or ``None`` (stdin, a FIFO, unreadable).

    Read once, 1 MiB at a time: memory is bounded whatever the file's size.
    """
    if path == "-":
        return None
    try:
        with open(path, "rb") as f:
            if not os.path.isfile(path):
                return None
            count, last = 0, b"\n"
            while chunk := f.read(1 << 20):
                count += sum(1 for _ in _LINE_END.finditer(chunk)) + (last != b"\n" and chunk[:1] == b"\n")
                last = chunk[-1:]
            return count + (last != b"\n")
    except OSError:
        return None


def _count_in_background(progress: _Progress, path: str) -> None:
    """Fill in the progress line's total without delaying the first task (a large file takes a moment)."""

    def count() -> None:
        helper_thread()
        progress.total = _count_lines(path)

    threading.Thread(target=count, name="spoolparse-count-tasks", daemon=True).start()


def _halt(text: str) -> Halt:
    try:
        halt = parse_halt(text)
    except UsageError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    assert halt is not None
    return halt


def _batch_options(args: argparse.Namespace) -> BatchOptions:
    """The options given on the command line (argparse leaves out the others): the rest are BatchOptions'."""
    return BatchOptions.given(vars(args))  # a bad combination is a UsageError: exit 2


class _TaskEvents:
    """``--events``: each task's live events as NDJSON lines, each with the task's id."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out

    def __call__(self, task: Task, ev: LiveEvent) -> None:
        emit_json({"task": str(task.id), **ev.as_dict()}, out=self.out)


def _cmd_batch(args: argparse.Namespace) -> int:
    resume = getattr(args, "resume", False)
    if resume and not getattr(args, "joblog", None):
        raise UsageError(f"--resume{'-failed' if resume == 'failed' else ''} needs --joblog FILE")
    options = _batch_options(args)
    # The input's own thread reads this stream and closes it at its end (_read_tasks); nothing else touches it.
    # That thread may still be in a read of a pipe or FIFO when the batch ends: closing the stream here would
    # wait for that read, and sys.stdin's buffer, were it the one read, would abort the interpreter's exit.
    try:
        stream: IO[bytes] = os.fdopen(os.dup(0), "rb") if args.tasks == "-" else open(args.tasks, "rb")  # noqa: SIM115
    except OSError as e:
        raise UsageError(f"cannot read {args.tasks!r}: {e.strerror}") from None
    if args.check:
        return _check(stream, args.max_task_line, getattr(args, "spool_dir", None))
    tasks = _read_tasks(stream, args.max_task_line)
    with contextlib.ExitStack() as stack:
        stack.callback(_close_unread, tasks, stream)
        events: _TaskEvents | None = None
        # opened before anything starts: a bad path fails first (exit 125; a link of another user's on the way, 2)
        if args.events_file is not None:
            from ..progress import open_events_file

            events = _TaskEvents(stack.enter_context(open_events_file(args.events_file)))
        elif args.events:
            events = _TaskEvents(sys.stderr.buffer)
        on_stderr = events is not None and args.events_file is None
        # stderr carrying NDJSON events has no room for a drawn status line
        show = args.progress if args.progress is not None else sys.stderr.isatty() and not on_stderr
        if show and on_stderr:
            raise UsageError("--progress and --events share stderr: use --events-file FILE with --progress")
        progress = _Progress(sys.stderr) if show else None
        if progress is not None and args.tasks != "-":
            _count_in_background(progress, args.tasks)
        stack.enter_context(log_messages())
        status = _run_batch(args, options, tasks, progress, events)
    return status


def _run_batch(
    args: argparse.Namespace,
    options: BatchOptions,
    tasks: Iterator[Task | InvalidTask],
    progress: _Progress | None,
    events: _TaskEvents | None,
) -> int:
    # SIGINT/TERM/HUP/QUIT (raised as Interrupted by the command's interrupts(), the first alone): every agent
    # ended, every task's outcome printed once, exit 128+N of the first
    out, saved_stdout = sys.stdout.buffer, sys.stdout
    if args.ray is not None:
        sys.stdout = sys.stderr  # Ray prints cluster errors (a node died) on sys.stdout: it carries outcomes only
    batch: Batch | RayBatch | None = None
    status = EXIT_OK
    try:
        batch = run_many(
            tasks,
            options,
            backend="local" if args.ray is None else "ray",
            address=args.ray or None,
        )
        if events is not None and isinstance(batch, Batch):
            batch.on_event = events
        elif events is not None:
            warn("--events: the live events of tasks on Ray nodes are not sent back; outcomes only")
        if progress is not None and not isinstance(batch, Batch):
            sys.stderr.write(f"spoolparse: batch on Ray: {len(batch.nodes)} nodes\n")
            batch.on_tick = progress
        elif progress is not None and isinstance(batch, Batch):
            a = batch.admission
            sys.stderr.write(
                f"spoolparse: batch: -j {batch.max_concurrent} ({batch.sizing.bound}), "
                f"memory {_gib(a.probe.total())} GiB, "
                f"stop at {a.stop_at:.0%}, kill at {a.kill_at:.0%}, "
                f"cgroups: {batch.placement.enforcement or 'none'}\n"
            )
            batch.on_tick = progress
            on_event = batch.on_event
            batch.on_event = progress.on_event if on_event is None else _both(on_event, progress.on_event)
        for outcome in batch:  # final in the job log as it is handed out: before anyone sees it
            # the line whole, and known printed, before a signal takes effect
            with deferred(), progress.lock if progress is not None else contextlib.nullcontext():
                if progress is not None:  # no redraw between clearing the block and the outcome
                    progress.clear()
                    progress.finished(outcome)
                emit_json(outcome.to_dict(), out=out)
                batch.printed(outcome)
            if not outcome.ok:
                status = EXIT_NOT_OK
        if progress is not None:
            progress(batch, force=True)
            skipped = f"\nspoolparse: batch: skipped {batch.skipped} already ok\n" if batch.skipped else "\n"
            sys.stderr.write(skipped)
    except KeyboardInterrupt as caught:
        e = as_interrupted(caught)  # Ray's waits make ours a bare KeyboardInterrupt, whatever the signal
        if batch is not None:
            batch.interrupted_by(e)  # the cancelled tasks' error names the signal we got
            # the one in hand when the signal came (its final job-log line was written as it was handed out),
            # then every ended task's: its final job-log line, then it
            for outcome in batch.unprinted():
                with contextlib.suppress(OSError):
                    emit_json(outcome.to_dict(), out=out)
            for outcome in batch.close():  # each final in the job log as close() returns it
                with contextlib.suppress(OSError):
                    emit_json(outcome.to_dict(), out=out)
        if progress is not None:
            progress.clear()
        fail(str(e) if isinstance(e, Interrupted) else "interrupted")
        return EXIT_SIGNAL_BASE + e.signum if isinstance(e, Interrupted) else EXIT_INTERRUPTED
    finally:
        if batch is not None:
            batch.close()
        sys.stdout = saved_stdout
    return status


def _both(
    first: Callable[[Task, LiveEvent], None], second: Callable[[Task, LiveEvent], None]
) -> Callable[[Task, LiveEvent], None]:
    def each(task: Task, ev: LiveEvent) -> None:
        first(task, ev)
        second(task, ev)

    return each


# -- calibrate ---------------------------------------------------------------


def _cmd_calibrate(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if args.list:
        if command:
            raise UsageError("calibrate --list takes no command")
        with log_messages():  # a file that cannot be used is a warning
            emit_json({"path": calibrations_path(), "calibrations": listing()}, pretty=args.pretty)
        return 0
    if not command:
        raise UsageError("calibrate needs a command: spoolparse calibrate [options] -- CMD [ARG ...]")
    report = calibrate(
        command, max_concurrency=args.max_concurrency, timeout=args.timeout, stop_at=args.stop_at,
        log=sys.stderr if sys.stderr.isatty() else None,
    )
    if args.record:
        try:
            report["recorded"] = record(report)  # batch reserves this for the program's tasks from now on
        except OSError as e:
            report["recorded"] = None
            warn(f"cannot record the calibration in {calibrations_path()}: {e.strerror or e}")
    emit_json(report, pretty=args.pretty)
    return 0 if report["per_task_peak"] is not None and not report["failures"] else 1
