#!/usr/bin/env python3
"""One way of getting the answer out of a Codex ``exec --json`` transcript, timed in this process.

    python benchmarks/peers.py APPROACH FILE

Prints one JSON object: the answer (last ``agent_message`` text and last
``turn.completed`` usage), the seconds spent after imports, and this
process's peak RSS. ``run.py`` starts one fresh process per measurement, so
one approach never inflates another's peak RSS or warms its allocator.
"""

from __future__ import annotations

import importlib
import json
import resource
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

Answer = tuple[Any, Any]
READ = 1 << 20  # the peers get 1 MiB buffers too: the default 8 KiB one roughly halves readline throughput


def fold(events: Iterable[Any]) -> Answer:
    """The Codex answer as a user would fold it from decoded events."""
    text = usage = None
    for ev in events:
        t = ev.get("type")
        if t == "item.completed":
            item = ev.get("item") or {}
            if item.get("type") == "agent_message":
                text = item.get("text")
        elif t == "turn.completed":
            usage = ev.get("usage")
    return text, usage


def naive(path: str) -> Answer:
    """What ``subprocess.run(capture_output=True, text=True)`` users do with the output."""
    with open(path, encoding="utf-8") as f:
        out = f.read()
    events = [json.loads(line) for line in out.strip().splitlines() if line.strip()]
    return fold(events)


def readline_json(path: str) -> Answer:
    with open(path, "rb", buffering=READ) as f:
        return fold(json.loads(line) for line in iter(f.readline, b"") if line.strip())


def readline_orjson(path: str) -> Answer:
    import orjson

    with open(path, "rb", buffering=READ) as f:
        return fold(orjson.loads(line) for line in iter(f.readline, b"") if line.strip())


def jsonlines_reader(path: str) -> Answer:
    import jsonlines

    with jsonlines.open(path) as reader:
        return fold(reader)


def ijson_items(path: str) -> Answer:
    import ijson

    with open(path, "rb", buffering=READ) as f:
        return fold(ijson.items(f, "", multiple_values=True))


def spoolparse_parse(path: str) -> Answer:
    import spoolparse

    r = spoolparse.parse(path)
    return r.text, r.usage


def spoolparse_live(path: str) -> Answer:
    """``parse`` with an ``on_event`` callback: every tool start/end is reported too."""
    import spoolparse

    seen = [0]

    def on_event(ev: Any) -> None:
        seen[0] += 1

    r = spoolparse.parse(path, on_event=on_event)
    assert seen[0] > 0
    return r.text, r.usage


def read_count(path: str) -> Answer:
    """A floor for Python: 1 MiB ``readinto`` and ``bytearray.count`` (no answer)."""
    buf = bytearray(READ)
    n = 0
    with open(path, "rb", buffering=0) as f:
        while k := f.readinto(buf):
            n += buf.count(b"\n", 0, k)
    return None, {"lines": n}


APPROACHES: dict[str, Callable[[str], Answer]] = {
    "naive": naive,
    "readline+json": readline_json,
    "readline+orjson": readline_orjson,
    "jsonlines": jsonlines_reader,
    "ijson": ijson_items,
    "spoolparse.parse": spoolparse_parse,
    "spoolparse.parse+on_event": spoolparse_live,
    "python read+count": read_count,
}


#: What each approach imports, loaded before the clock starts (and only for it, so RSS stays its own).
IMPORTS = {
    "readline+orjson": "orjson",
    "jsonlines": "jsonlines",
    "ijson": "ijson",
    "spoolparse.parse": "spoolparse",
    "spoolparse.parse+on_event": "spoolparse",
}


def main() -> int:
    name, path = sys.argv[1], sys.argv[2]
    fn = APPROACHES[name]
    if name in IMPORTS:
        importlib.import_module(IMPORTS[name])
    t = time.perf_counter()
    text, usage = fn(path)
    seconds = time.perf_counter() - t
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tail = text[-200:] if isinstance(text, str) else None
    if isinstance(text, str) and len(text) > 1 << 20:
        # a long answer is reported by its digest, hashed in pieces: printing it would raise the peak GNU time
        # reports (hashlib only here: it loads OpenSSL, megabytes of RSS in every row otherwise)
        import hashlib

        h = hashlib.sha256()
        for at in range(0, len(text), 1 << 20):
            h.update(text[at : at + (1 << 20)].encode())
        text = f"{len(text)} characters, sha256 {h.hexdigest()}"
    print(json.dumps({"approach": name, "seconds": seconds, "rss_kib": rss_kib, "text": text, "tail": tail,
                      "usage": usage}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
