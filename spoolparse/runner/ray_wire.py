"""What crosses the network between the Ray driver and its node runners: task descriptions out, outcomes back.

Both directions are compact JSON objects (bytes, via orjson), so their size
is what the wire carries and can be measured. A task goes out as its argv,
input and options, keyed by the driver's sequence number (its id stays with
the driver); an outcome comes back as :meth:`Outcome.to_dict` with that
number in place of the id. Transcripts never leave the node: an outcome holds
the run's bounded :meth:`Result.summary`, nothing more.
"""

from __future__ import annotations

import base64
from typing import Any

from .._decode import jsonout as _json
from .._decode.reading import TOO_DEEP, read_json
from .tasks import Outcome, Task

__all__ = ["encode_task", "decode_task", "encode_outcome", "decode_outcome", "dumps", "loads"]


def dumps(obj: Any) -> bytes:
    return _json.dumps(obj)  # orjson, but integers past 64 bits (a usage count) written exactly, never a refusal


def loads(data: bytes) -> Any:
    obj = read_json(data)  # orjson, but those integers read back exactly (orjson alone makes them floats)
    if obj is None or obj is TOO_DEEP:
        raise ValueError("not JSON on the wire")
    return obj


def _pack(s: str) -> str | dict[str, str]:
    """A string for JSON: as it is, or (lone surrogates: undecodable bytes of a file name, as Python hands them)
    its code units in base64, which :func:`_unpack` turns back into the very same string."""
    if _json.encodable(s):
        return s
    return {"sp": base64.b64encode(s.encode("utf-8", "surrogatepass")).decode("ascii")}


def _unpack(v: Any) -> Any:
    if isinstance(v, dict) and "sp" in v:
        return base64.b64decode(v["sp"]).decode("utf-8", "surrogatepass")
    return v


def encode_task(seq: int, task: Task) -> dict[str, Any]:
    """A task as the node needs it: only the fields that are set."""
    d: dict[str, Any] = {"s": seq, "a": [_pack(a) for a in task.argv]}
    if isinstance(task.input, bytes):
        d["ib"] = base64.b64encode(task.input).decode("ascii")
    elif task.input is not None:
        d["i"] = _pack(task.input)
    for key, value in (
        ("c", None if task.cwd is None else _pack(task.cwd)),
        # pairs, not an object: a name may need packing too, and an object's keys are plain strings
        ("e", None if task.env is None else [[_pack(k), _pack(v)] for k, v in task.env.items()]),
        ("t", task.timeout),
        ("st", task.soft_timeout),
        ("m", task.memory),
        ("ml", task.memory_limit),
        ("p", task.provider),
        ("ae", task.allow_empty_answer),
        ("xl", task.max_line),
        ("xr", task.max_retained),
        ("xs", task.max_spool_bytes),
    ):
        if value is not None:
            d[key] = value
    return d


def decode_task(d: dict[str, Any]) -> Task:
    """The node's copy of a task; its id is the driver's sequence number."""
    data: bytes | str | None = _unpack(d.get("i"))
    if "ib" in d:
        data = base64.b64decode(d["ib"])
    env = d.get("e")
    return Task(
        argv=[_unpack(a) for a in d["a"]],
        id=str(d["s"]),
        input=data,
        cwd=_unpack(d.get("c")),
        env=None if env is None else {_unpack(k): _unpack(v) for k, v in env},
        timeout=d.get("t"),
        soft_timeout=d.get("st"),
        memory=d.get("m"),
        memory_limit=d.get("ml"),
        provider=d.get("p"),
        allow_empty_answer=d.get("ae"),
        max_line=d.get("xl"),
        max_retained=d.get("xr"),
        max_spool_bytes=d.get("xs"),
    )


def encode_outcome(out: Outcome) -> dict[str, Any]:
    """An outcome for the wire: the id (the driver's sequence number) as an int."""
    d: dict[str, Any] = dict(out.to_dict())
    d["id"] = int(out.id)
    return d


def decode_outcome(d: dict[str, Any], *, task_id: str, attempts_before: int) -> Outcome:
    """The driver's outcome: its own id back, attempts counted across nodes."""
    return Outcome(
        id=task_id,
        verdict=d["verdict"],
        attempts=attempts_before + int(d["attempts"]),
        wall_s=float(d["wall_s"]),
        cpu_s=float(d["cpu_s"]),
        peak_memory=d["peak_memory"],
        peak_source=d["peak_source"],
        returncode=d["returncode"],
        signal=d["signal"],
        enforcement=d["enforcement"],
        error=d["error"],
        summary=d["summary"],
    )
