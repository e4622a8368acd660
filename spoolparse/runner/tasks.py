"""What the runner is given (:class:`Task`) and what it gives back (:class:`Outcome`)."""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Union, cast

from .._decode import jsonout as _json
from ..errors import UsageError
from ..options import ChildOptions
from ..providers.base import clip
from ..types import OUTCOME_FIELDS, OutcomeDict, Summary

__all__ = ["Task", "Outcome", "VERDICTS", "TaskLike", "as_task", "TASK_KEYS", "TASK_KEY_HELP", "unknown_keys"]

#: Every verdict an :class:`Outcome` can carry.
VERDICTS = ("ok", "failed", "timeout", "killed_memory", "spawn_error", "cancelled", "skipped")


@dataclass
class Task:
    """One command for the runner.

    ``memory`` is the estimate admission reserves for it (default: the
    runner's ``memory_per_task``); ``memory_limit`` is the hard cap enforced
    on its process tree (default: the runner's ``memory_limit``, often none).
    The other fields, when set, override the batch's of the same name for this
    task's child (:meth:`child_options`): ``timeout``, ``soft_timeout``,
    ``provider``, ``allow_empty_answer``, ``max_line``, ``max_retained``,
    ``max_spool_bytes``, ``cwd``; ``env`` adds variables to the environment;
    ``input`` is given to the child as with :func:`spoolparse.run` (it is never
    logged).

    .. seealso:: :func:`spoolparse.run_many`
    """

    argv: Sequence[str]
    id: str | None = None
    input: bytes | str | None = None
    cwd: str | None = None
    env: Mapping[str, str] | None = None
    timeout: float | None = None
    soft_timeout: float | None = None
    memory: int | None = None
    memory_limit: int | None = None
    provider: str | None = None
    allow_empty_answer: bool | None = None
    max_line: int | None = None
    max_retained: int | None = None
    max_spool_bytes: int | None = None

    def child_options(self, default: ChildOptions) -> ChildOptions:
        """The options of this task's child: ``default`` (the batch's, :attr:`BatchOptions.child
        <spoolparse.BatchOptions.child>`) with the fields this task sets; checked as when made."""
        changes: dict[str, Any] = {name: v for name in _OVERRIDES if (v := getattr(self, name)) is not None}
        if self.env is not None:  # variables added to the environment the task would have had
            changes["env"] = {**(os.environ if default.env is None else default.env), **self.env}
        return default.replace(**changes)

    @classmethod
    def from_json(cls, obj: Any, *, default_id: str) -> Task:
        """A task from one line of a batch file: ``{"id", "cmd", "input", "cwd", "env", "timeout", ...}``."""
        if isinstance(obj, list):
            obj = {"cmd": obj}
        if not isinstance(obj, dict):
            raise UsageError("a task must be a JSON object with a \"cmd\" list (or a bare argv list)")
        unknown = unknown_keys(obj)
        if unknown is not None:
            raise UsageError(unknown)
        if "cmd" in obj and "argv" in obj:  # which one it means, the line does not say
            raise UsageError('a task line holds both "cmd" and "argv", two names of its command: keep one')
        cmd = obj.get("cmd", obj.get("argv"))
        if not isinstance(cmd, list) or not cmd or not all(isinstance(a, str) for a in cmd):
            raise UsageError("a task's \"cmd\" must be a non-empty list of strings")
        env = obj.get("env")
        if env is not None and not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
            raise UsageError("a task's \"env\" must map names to strings")
        tid = obj.get("id")
        return cls(
            argv=cmd,
            id=default_id if tid is None else id_text(tid),
            input=_opt(obj, "input", (str,)),
            cwd=_opt(obj, "cwd", (str,)),
            env=env,
            timeout=_opt_num(obj, "timeout"),
            soft_timeout=_opt_num(obj, "soft_timeout"),
            memory=_opt_int(obj, "memory"),
            memory_limit=_opt_int(obj, "memory_limit"),
            provider=_opt(obj, "provider", (str,)),
            allow_empty_answer=_opt(obj, "allow_empty_answer", (bool,)),
            max_line=_opt_int(obj, "max_line"),
            max_retained=_opt_int(obj, "max_retained"),
            max_spool_bytes=_opt_int(obj, "max_spool_bytes"),
        )


#: The fields of a task that, when set, replace the batch's of the same name for its child (``env`` adds).
_OVERRIDES = ("input", "cwd", "timeout", "soft_timeout", "provider", "allow_empty_answer", "max_line", "max_retained",
              "max_spool_bytes")


#: The keys a task line may hold: a field of :class:`Task` each (``argv`` also as ``cmd``, its usual name), so
#: that a field added to the task is a key at once. Any other key is that line's error: a misspelt
#: ``"tiemout"`` would run with no timeout at all.
TASK_KEYS: tuple[str, ...] = ("cmd", *(f.name for f in fields(Task)))

#: What each key of a task line is, for the documentation (its table is generated from this and checked).
TASK_KEY_HELP: dict[str, str] = {
    "cmd": "the command, a non-empty list of strings (a bare list as the whole line is a `cmd` too)",
    "argv": "the same as `cmd` (a line holds one of the two)",
    "id": "the task's name in its outcome, the job log and `--results`; unique in the batch (default: the line "
    "number); anything but a string is its JSON text, a number as the line spells it",
    "input": "text given to the command on its stdin (never logged)",
    "cwd": "the command's working directory (it must exist)",
    "env": "variables added to the environment, names to strings",
    "timeout": "seconds (or `90`, `1.5s`, `10m`, `2h`) before SIGTERM, then SIGKILL after `--grace`",
    "soft_timeout": "seconds (or a duration) before `--soft-signal` is sent once",
    "memory": "bytes (or `2G`) reserved for the task before it starts (default: `--memory-per-task`)",
    "memory_limit": "bytes (or `3G`) the task's process tree may use (default: `--memory-limit`)",
    "provider": "the stdout format: `auto` or a provider's name (default: `--provider`, else `auto`)",
    "allow_empty_answer": "`true`: the task is ok when its agent finished without an answer (default: "
    "`--allow-empty-answer`)",
    "max_line": "bytes (or `32M`): the longest line read whole (default: `--max-line`, 16M)",
    "max_retained": "bytes (or `128M`): the longest retained event kept (default: `--max-retained`, 64M)",
    "max_spool_bytes": "bytes (or `1G`): kill the task once its output passes this (default: `--max-spool-bytes`)",
}


def unknown_keys(obj: Mapping[str, Any]) -> str | None:
    """The error of a task line holding keys not in :data:`TASK_KEYS` (each named, with the nearest known one
    when there is one: ``unknown key "tiemout" (did you mean "timeout"?)``), or ``None``."""
    unknown = [k for k in obj if k not in TASK_KEYS]
    if not unknown:
        return None
    named = []
    unmatched = len(unknown) > 3
    for key in unknown[:3]:
        text = _json.dumps(clip(str(key), 40)).decode()  # as the line spells it, control characters escaped
        near = difflib.get_close_matches(str(key).lower(), TASK_KEYS, n=1, cutoff=0.6)  # "Id" is "id" too
        named.append(f'{text} (did you mean "{near[0]}"?)' if near else text)
        unmatched = unmatched or not near
    more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
    known = f"; a task's keys are {', '.join(TASK_KEYS)}" if unmatched else ""
    return f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(named)}{more}{known}"


def id_text(tid: Any) -> str:
    """A task's ``id`` as the string it is known by: a string as it is, anything else as its JSON text
    (``true``, ``123456789012345678901234567890``; not Python's ``True`` or a float's rounding)."""
    return tid if isinstance(tid, str) else _json.dumps(tid).decode()


def _opt(obj: dict[str, Any], key: str, types: tuple[type, ...]) -> Any:
    v = obj.get(key)
    if v is not None and not isinstance(v, types):
        raise UsageError(f"a task's {key!r} has the wrong type ({type(v).__name__})")
    return v


def _opt_num(obj: dict[str, Any], key: str) -> float | None:
    v = obj.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
        raise UsageError(f"a task's {key!r} must be a non-negative number of seconds")
    return float(v)


#: A task's keys that are byte counts (a task line may write them with a unit: ``"2G"``).
SIZE_KEYS = ("memory", "memory_limit", "max_line", "max_retained", "max_spool_bytes")


def _opt_int(obj: dict[str, Any], key: str) -> int | None:
    return _bytes(key, obj.get(key))


def _bytes(key: str, v: Any) -> int | None:
    """A task's byte count (``memory``, ``memory_limit``, the bounds): ``None`` or a positive integer. Anything
    else would reserve nothing (a negative estimate admits more than memory allows), cap nothing, or stop the
    batch."""
    if v is None:
        return None
    if isinstance(v, float) and math.isfinite(v) and v >= 1:
        return int(v)  # 1.5 * 2**30
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise UsageError(f"a task's {key!r} must be a positive number of bytes, not {clip(repr(v), 60)}")
    return v


TaskLike = Union[Task, Sequence[str]]  # noqa: UP007 - a runtime alias on Python 3.10


def as_task(item: TaskLike, index: int) -> Task:
    """A :class:`Task` with an id, from a task or a bare argv list (its id is its input index)."""
    if isinstance(item, Task):
        if item.id is None:
            item.id = str(index)
        elif not isinstance(item.id, str):
            item.id = id_text(item.id)  # compared, logged and resumed by as a string, as a task line's is
        if isinstance(item.argv, (str, bytes)):
            raise UsageError("a task's argv is a list of strings, not a string (it would run its first letter)")
        for name in SIZE_KEYS:
            setattr(item, name, _bytes(name, getattr(item, name)))
        return item
    if isinstance(item, (str, bytes)):
        raise UsageError("a task is an argv list or a Task, not a string")
    if isinstance(item, Mapping) or not isinstance(item, Iterable):
        # a mapping iterates over its keys: {"cmd": [...]} would run "cmd"
        raise UsageError(f"a task is an argv list or a Task, not {type(item).__name__}")
    argv: list[Any] = []
    for a in item:
        if not isinstance(a, (str, bytes, os.PathLike)):
            raise UsageError(f"an argv item is a string or a path, not {type(a).__name__}")
        argv.append(os.fspath(a))
    return Task(argv=argv, id=str(index))


@dataclass
class Outcome:
    """The final word on one task.

    ``verdict`` is one of :data:`VERDICTS`. ``summary`` is the run's
    :meth:`Result.summary` (``None`` when it never started or was cancelled
    before it could be read). ``peak_memory`` is the process tree's peak in
    bytes (from the cgroup's peak counter or from RSS sampling, see
    ``peak_source``; ``None`` when the task ended before it was sampled).
    ``enforcement`` names what capped its memory: ``cgroup2``,
    ``cgroup1``, ``watchdog`` or ``none`` (:data:`spoolparse._os.cgroup.ENFORCEMENTS`).

    .. seealso:: :class:`spoolparse.Result`
    """

    id: str
    verdict: str
    attempts: int = 1
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_memory: int | None = None
    peak_source: str | None = None
    returncode: int | None = None
    signal: int | None = None
    enforcement: str = "none"
    error: str | None = None
    summary: Summary | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"

    def to_dict(self) -> OutcomeDict:
        """JSON-ready: the keys of :class:`~spoolparse.types.OutcomeDict` in order, ``summary`` last."""
        out: dict[str, Any] = {key: getattr(self, key) for key in OUTCOME_FIELDS}
        out["wall_s"] = round(self.wall_s, 3)
        out["cpu_s"] = round(self.cpu_s, 3)
        return cast(OutcomeDict, out)
