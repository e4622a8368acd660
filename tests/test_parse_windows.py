"""``parse`` on a regular file (mapped window by window) gives what the plain read path gives."""

from __future__ import annotations

import io
import json
import mmap
from pathlib import Path
from typing import Any

import pytest

import spoolparse
from spoolparse.lines import SKIP, Event, LineScanner
from spoolparse.providers.codex import CodexProvider

from .helpers import jl

MiB = 1 << 20
PAD = 1700  # tool items in the big transcript


def _transcript(answer_bytes: int, pad_lines: int) -> bytes:
    """Codex lines around the 1 MiB and 9 MiB window edges, a long kept answer across one of them."""
    out = [{"type": "thread.started", "thread_id": "t-1"}, {"type": "turn.started"}]
    for i in range(pad_lines):
        item = {"id": f"item_{i}", "type": "command_execution", "command": "ls", "aggregated_output": "o" * 4000}
        out.append({"type": "item.started", "item": {**item, "aggregated_output": ""}})
        out.append({"type": "item.completed", "item": item})
        if i % 97 == 0:
            out.append({"type": "item.completed", "item": {"id": f"r{i}", "type": "reasoning", "text": "hm"}})
    out.append({"type": "item.completed", "item": {"id": "a", "type": "agent_message", "text": "A" * answer_bytes}})
    out.append({"type": "turn.completed", "usage": {"input_tokens": 5, "output_tokens": 7}})
    return jl(*out) + b"not json at all\n" + b'{"type":"item.completed", "item": {"id":"x","type":"reasoning"}}'


def _summary(r: spoolparse.Result) -> dict[str, Any]:
    s = r.summary()
    s.pop("duration_s")
    return s


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    data = _transcript(answer_bytes=3 * MiB, pad_lines=PAD)  # ~10 MiB: the first two windows and a tail
    assert len(data) > 9 * MiB
    path = tmp_path_factory.mktemp("parse") / "codex.jsonl"
    path.write_bytes(data)
    return path, data


def test_mapped_file_matches_plain_reads(big: tuple[Path, bytes]) -> None:
    path, data = big
    mapped, read = spoolparse.parse(path), spoolparse.parse(io.BytesIO(data))
    assert mapped.text == "A" * 3 * MiB
    assert mapped.usage == {"input_tokens": 5, "output_tokens": 7}
    assert mapped.lines == data.count(b"\n") + 1
    assert mapped.invalid_lines == 1
    assert mapped.stdout_bytes == len(data)
    assert _summary(mapped) == _summary(read)


def test_events_are_the_same_with_on_event(big: tuple[Path, bytes]) -> None:
    path, data = big
    mapped: list[dict[str, Any]] = []
    read: list[dict[str, Any]] = []
    r1 = spoolparse.parse(path, on_event=lambda ev: mapped.append({**ev.as_dict(), "time": 0}))
    r2 = spoolparse.parse(io.BytesIO(data), on_event=lambda ev: read.append({**ev.as_dict(), "time": 0}))
    assert mapped == read
    assert sum(e["kind"] == "tool_end" for e in mapped) == PAD
    # skipping the tool lines unread (no on_event) changes nothing in the answer
    assert _summary(r1) == _summary(r2) == _summary(spoolparse.parse(path))


def test_file_object_is_read_from_its_position(tmp_path: Path) -> None:
    head = b"[banner] not json\n" * 1000
    body = _transcript(answer_bytes=10, pad_lines=300)
    path = tmp_path / "t.jsonl"
    path.write_bytes(head + body)
    with open(path, "rb") as f:
        f.seek(len(head) + 5)  # mid-line, off the mapping granularity
        r = spoolparse.parse(f)
        assert f.tell() == len(head) + len(body)
    ref = spoolparse.parse(io.BytesIO(body[5:]))
    assert r.stdout_bytes == len(body) - 5
    assert _summary(r) == _summary(ref)


def test_oversize_skipped_line_is_still_reported(tmp_path: Path) -> None:
    blob = {"type": "item.completed", "item": {"id": "b", "type": "command_execution", "aggregated_output": "x" * 3000}}
    data = jl({"type": "thread.started", "thread_id": "t"}, blob, blob, {"type": "turn.completed", "usage": {}})
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    r = spoolparse.parse(path, max_line=2048)
    assert r.dropped_count == 2
    assert [d["reason"] for d in r.dropped] == ["oversize", "oversize"]


def test_compact_skip_lines_match_the_general_scan() -> None:
    """Lines settled by the compiled SKIP pattern count exactly as the general path counts them."""
    lines = [
        b'{"type":"item.completed","item":{"id":"1","type":"todo_list","text":"a"}}',
        b'{"type":"item.completed","item":{"id":"2","type":"todo_list_x","text":"a"}}',
        b'{"type":"item.completed","item":{"id":"3","item_type":"todo_list"}}',
        b' {"type":"item.completed","item":{"id":"4","type":"todo_list"}}',
        b'{"type":"item.completed","item":{"id":"5","type":"agent_message","text":"hi"}}',
        b'{"type":"turn.started"}',
        b'{"type":"turn.startedX"}',
    ]
    data = b"\n".join(lines * 3) + b"\n"
    provider = CodexProvider()

    def keys(chunks: list[bytes]) -> list[tuple[str, int, str]]:
        s = LineScanner(provider.retain)
        recs = [r for c in chunks for r in s.feed(c)] + s.end()
        assert s.lines == len(lines) * 3
        return [(type(r).__name__, getattr(r, "lineno", 0), getattr(r, "type", "")) for r in recs]

    whole = keys([data])
    assert whole == keys([data[i : i + 7] for i in range(0, len(data), 7)])
    assert provider.retain("item.completed/todo_list") == SKIP
    assert [k[2] for k in whole].count("item.completed/agent_message") == 3
    assert [k[2] for k in whole].count("item.completed/todo_list_x") == 0  # unknown item kinds are not kept here
    assert json.loads(lines[4])["item"]["text"] == "hi"


def test_long_kept_lines_whole_in_a_mapped_window_are_decoded_where_they_lie(tmp_path: Path) -> None:
    """Past 64 KiB a kept line is decoded from a view of the window, released before the window is unmapped (a
    map with a view alive cannot close): plain, read again by the lenient reader (a lone surrogate, a big integer),
    and not JSON at all."""
    item = {"id": "p", "type": "command_execution", "aggregated_output": "o" * 4000}
    pad = [{"type": "item.completed", "item": item}] * 300  # past the first 1 MiB window
    answers = [{"type": "item.completed", "item": {"id": "a", "type": "agent_message", "text": t}}
               for t in ("A" * 200_000, "B" * 1_500_000)]
    data = jl(*pad, *answers)
    data += b'{"type":"item.completed","item":{"id":"s","type":"agent_message","text":"' + b"C" * 100_000
    data += b'\\ud83d","n":%d}}\n' % (2**64 + 1)
    data += b'{"type":"item.completed","item":{"id":"x","type":"agent_message","text":"' + b"D" * 100_000 + b'"\n'
    data += jl({"type": "turn.completed", "usage": {"input_tokens": 1}})
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    mapped = spoolparse.parse(path, provider="codex")
    assert _summary(mapped) == _summary(spoolparse.parse(io.BytesIO(data), provider="codex"))
    assert [d["reason"] for d in mapped.dropped] == ["invalid"] and mapped.invalid_lines == 1
    assert not mapped.ok  # the last answer line is lost: it is not JSON
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        recs = LineScanner(CodexProvider().retain).feed(m)  # and the map closes: no view of it is left
    kept = [r.data["item"] for r in recs if isinstance(r, Event) and r.type == "item.completed/agent_message"]
    assert [len(k["text"]) for k in kept] == [200_000, 1_500_000, 100_001] and kept[2]["text"].endswith("C\ufffd")
    assert kept[2]["n"] == 2**64 + 1
