"""Whole-document JSON (a pretty-printed object or a top-level array) and split feeds."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spoolparse import Dropped, Event, LineScanner, StreamParser, parse
from spoolparse._decode.document import DOCUMENT, LINES, DocumentScanner, sniff
from spoolparse.lines import Record

from .helpers import FIXTURES

FIXTURE_FILES = sorted(p for p in FIXTURES.glob("*/*") if p.suffix in (".json", ".jsonl"))


def records(data: bytes, *, max_retained: int, chunk: int = 1 << 20) -> tuple[list[Record], LineScanner]:
    sc = LineScanner(max_line=max_retained, max_retained=max_retained)
    doc = DocumentScanner(sc)
    out: list[Record] = []
    for i in range(0, len(data), chunk):
        out += doc.feed(data[i : i + chunk])
    out += doc.end()
    return out, sc


def array(items: list[Any], *, indent: int | None = None) -> tuple[bytes, list[int]]:
    """A top-level array and the byte size of each item in it."""
    parts = [json.dumps(it, indent=indent).encode() for it in items]
    return b"[\n" + b",\n".join(parts) + b"\n]\n", [len(p) for p in parts]


def summary_of(data: bytes, cuts: list[int], **kw: Any) -> dict[str, Any]:
    sp = StreamParser(**kw)
    last = 0
    for cut in [*cuts, len(data)]:
        sp.feed(data, last, cut)
        last = cut
    s = sp.finish(args=None).summary()
    s.pop("duration_s")
    return s


@pytest.mark.parametrize(
    ("head", "final", "mode"),
    [
        (b"[", False, None),
        (b"[", True, DOCUMENT),
        (b"\xef\xbb\xbf \n [{", False, DOCUMENT),
        (b"{\n  \"response\"", False, DOCUMENT),
        (b"{  \r\n", False, DOCUMENT),
        (b'{"type":"init"}\n', False, LINES),
        (b"{", False, None),
        (b"{ ", True, DOCUMENT),
        (b"\n\n", False, None),
        (b"\n\n", True, LINES),
        (b"[SandboxDebug] hi\n", False, LINES),  # a bracketed banner, not an array
        (b"[\n  ", False, None),
        (b"[\n  {", False, DOCUMENT),
        (b"[]", False, DOCUMENT),
        (b"[1, 2]", False, LINES),
        (b"Loaded cached credentials.\n{", False, LINES),
    ],
)
def test_sniff(head: bytes, final: bool, mode: str | None) -> None:
    assert sniff(head, final=final) == mode


def test_bracketed_banner_then_lines() -> None:
    data = b'[SandboxDebug] ready\n{"type":"result","subtype":"success","result":"ok"}\n'
    r = parse(io.BytesIO(data))
    assert r.provider == "claude" and r.text == "ok"
    assert r.invalid_lines == 1 and r.lines == 2


def test_array_that_is_not_json_is_counted_not_raised() -> None:
    r = parse(io.BytesIO(b'[{"type": "result", "result": "ok"},\n oops\n'))
    assert r.invalid_lines == 1 and r.text is None and r.error is not None and "cut off" in r.error


def test_pretty_object_and_array_fed_byte_by_byte() -> None:
    for name in ("gemini/output_json.json", "claude/stream_array.json"):
        data = (FIXTURES / name).read_bytes()
        whole = summary_of(data, [])
        assert summary_of(data, list(range(1, len(data)))) == whole
        assert whole["text"] and whole["error"] is None


def test_streamed_array_matches_whole_decoding() -> None:
    items = [{"type": "assistant", "n": i, "message": {"content": [{"type": "text", "text": f"t{i} \"q\" \\ é"}]}}
             for i in range(50)]
    data, sizes = array(items, indent=2)
    small, _ = records(data, max_retained=max(sizes) + 1, chunk=97)  # far past the ceiling: streamed
    whole, _ = records(data, max_retained=len(data) + 1)
    assert [r.data for r in small if isinstance(r, Event)] == items
    assert [r.data for r in whole if isinstance(r, Event)] == items
    assert [r.size for r in small if isinstance(r, Event)] == sizes


def test_item_over_the_ceiling_is_dropped_by_type() -> None:
    items: list[Any] = [{"type": "a", "i": 0},
                        {"type": "big", "parts": [{"s": "y" * 100} for _ in range(50)]},  # many small strings
                        {"type": "a", "i": 2},
                        {"type": "long", "s": "z" * 5000},  # one long string
                        {"type": "a", "i": 4}]
    data, sizes = array(items)
    out, sc = records(data, max_retained=1000, chunk=64)
    assert [(r.lineno, r.type) for r in out if isinstance(r, Event)] == [(1, "a"), (3, "a"), (5, "a")]
    drops = [r for r in out if isinstance(r, Dropped)]
    assert [(d.line, d.type, d.bytes, d.reason) for d in drops] == [
        (2, "big", sizes[1], "over_ceiling"), (4, "long", sizes[3], "over_ceiling")]
    assert sc.lines == 5 and sc.invalid_lines == 0


def test_object_over_the_ceiling_is_drained_and_reported() -> None:
    data = json.dumps({"type": "result", "result": "x" * 5000}, indent=2).encode()
    out, sc = records(data, max_retained=1000, chunk=100)
    assert out == [Dropped(1, len(data), "result", "over_ceiling")]
    assert sc.lines == 1 and sc.bytes == len(data)


def test_invalid_documents_are_counted() -> None:
    good = {"type": "a"}
    data, _ = array([good] * 30)
    out, sc = records(data[:-20], max_retained=64, chunk=50)  # streamed, then cut short
    assert sc.invalid_lines == 1
    assert all(isinstance(r, Event) for r in out) and len(out) >= 20
    out, sc = records(b'[{"type": "a"}, {"type": ', max_retained=1000)  # held whole, cut short: read as streamed
    assert [r.type for r in out] == ["a"] and sc.invalid_lines == 1 and sc.lines == 2
    out, sc = records(b'[1, "two", {"type": "a"}, [3]]', max_retained=1000)
    assert [r.type for r in out] == ["a"] and sc.invalid_lines == 3 and sc.lines == 4
    out, sc = records(b'[1, "two", {"type": "a"}, [3], {"type": "b"}]' + b" " * 50, max_retained=20, chunk=7)
    assert [r.type for r in out] == ["a", "b"] and sc.invalid_lines == 3


# Any text, and text made of the bytes a string scanner can trip on.
def test_broken_streamed_array_keeps_the_items_before_the_break() -> None:
    out, sc = records(b'[{"type": "a"}] [1]' + b" " * 40, max_retained=16, chunk=7)
    assert [r.type for r in out] == ["a"] and sc.invalid_lines == 1
    cut_short = b'[{"type": "a"}, {"type": "big", "x": [' + b"1, " * 100
    out, sc = records(cut_short, max_retained=24, chunk=7)  # ends while the cut item is being skipped
    assert [(type(r).__name__, r.type) for r in out] == [("Event", "a"), ("Dropped", "big")]
    assert sc.invalid_lines == 1


_text = st.text(st.characters(codec="utf-8"), max_size=30) | st.text(st.sampled_from('\\"{}[],:é \n'), max_size=30)
_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), _text)
_value = st.recursive(_leaf, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(_text, kids, max_size=4),
                      max_leaves=12)
_item = st.fixed_dictionaries({"type": st.sampled_from(["assistant", "result", "x"])}, optional={"v": _value})


# 1.5x the profile's examples (150 by default; the quick "dev" profile runs fewer, "ci" more)
@settings(max_examples=settings().max_examples * 3 // 2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=st.lists(_item, min_size=1, max_size=12), indent=st.sampled_from([None, 1, 2]),
       chunk=st.integers(1, 64), data=st.data())
def test_streaming_path_equals_whole_decoding(items: list[Any], indent: int | None, chunk: int,
                                              data: st.DataObject) -> None:
    doc, sizes = array(items, indent=indent)
    ceiling = data.draw(st.integers(max(16, min(sizes)), max(16, max(sizes) + 8)))
    out, sc = records(doc, max_retained=ceiling, chunk=chunk)
    if len(doc) <= ceiling:
        return
    kept = [(r.lineno, r.data) for r in out if isinstance(r, Event)]
    dropped = [(r.line, r.bytes) for r in out if isinstance(r, Dropped)]
    assert kept == [(i + 1, it) for i, it in enumerate(items) if sizes[i] <= ceiling]
    assert dropped == [(i + 1, sizes[i]) for i in range(len(items)) if sizes[i] > ceiling]
    assert sc.invalid_lines == 0 and sc.lines == len(items)


@settings(max_examples=settings().max_examples * 3 // 5, deadline=None)  # 60 by default, scaled by the profile
@given(path=st.sampled_from(FIXTURE_FILES), where=st.floats(0, 1))
def test_split_at_any_byte_gives_the_same_summary(path: Path, where: float) -> None:
    data = path.read_bytes()
    cut = int(where * len(data))
    assert summary_of(data, [cut]) == summary_of(data, [])


def test_every_split_of_each_fixture() -> None:
    for path in FIXTURE_FILES:
        data = path.read_bytes()
        whole = summary_of(data, [])
        for cut in range(0, len(data) + 1, max(1, len(data) // 97)):
            assert summary_of(data, [cut]) == whole, (path.name, cut)


def _giant(string_mib: int, pad_mib: int) -> bytes:
    init = {"type": "system", "subtype": "init", "session_id": "s-big", "model": "m"}
    result = {"type": "result", "subtype": "success", "is_error": False, "result": "ANSWER", "session_id": "s-big"}
    head = json.dumps([init]).encode()[:-1]
    tail = json.dumps([result]).encode()[1:]
    giant = b'{"type":"user","message":{"content":[{"type":"tool_result","content":"' + b"x" * (string_mib << 20)
    giant += b'"}]}}'
    pad = b'{"type":"user","pad":"' + b"p" * (pad_mib << 20) + b'"}'
    return head + b",\n" + giant + b",\n" + pad + b",\n" + tail


def test_a_40_mib_string_in_a_streamed_array_is_fast() -> None:
    data = _giant(40, 1)
    for max_retained in (16 << 20, 32 << 20):  # the string is past the ceiling: its item is dropped
        t = time.perf_counter()
        r = parse(io.BytesIO(data), max_line=max_retained, max_retained=max_retained)
        took = time.perf_counter() - t
        print(f"40 MiB string, ceiling {max_retained >> 20} MiB: {took:.2f} s")
        assert r.provider == "claude" and r.text == "ANSWER"
        assert [d["type"] for d in r.dropped] == ["user"] and r.dropped[0]["bytes"] > 40 << 20


def test_a_40_mib_answer_survives_a_streamed_array() -> None:
    # Past the 64 MiB ceiling the array is streamed; a 40 MiB item under it is decoded, not dropped.
    data = _giant(40, 30).replace(b'"type":"user","message"', b'"type":"assistant","message"', 1)
    t = time.perf_counter()
    r = parse(io.BytesIO(data))
    print(f"71 MiB streamed array with a 40 MiB string: {time.perf_counter() - t:.2f} s")
    assert r.text == "ANSWER"
    assert r.dropped == [{"line": 3, "bytes": (30 << 20) + 24, "type": "user", "reason": "oversize"}]


def test_whole_document_with_a_lone_surrogate_escape_keeps_its_answer() -> None:
    """JavaScript's JSON.stringify writes half an emoji as a lone \\udXXX escape; orjson refuses it."""
    import io

    import spoolparse

    doc = (b'{\n  "type": "result",\n  "subtype": "success",\n  "is_error": false,\n'
           b'  "result": "done \\ud83d",\n  "session_id": "s-1"\n}\n')
    r = spoolparse.parse(io.BytesIO(doc))
    assert r.text == "done \ufffd"
    assert r.session_id == "s-1"
    assert r.invalid_lines == 0


# -- a document cut short -----------------------------------------------------------------------------------------

DOCUMENTS = ["gemini/output_json.json", "claude/stream_array.json", "claude/output_json.json",
             "cursor/output_json.json"]


def _cuts(data: bytes) -> list[int]:
    """Where a document is cut: 24 offsets spread over it, and just before its last closing bracket."""
    end = len(data.rstrip())
    return sorted({*(1 + i * (end - 2) // 23 for i in range(24)), end - 1})


@pytest.mark.parametrize("name", DOCUMENTS)
def test_a_document_cut_short_says_so(name: str) -> None:
    """A ``-o json`` document (an array of events, or one object) cut short read as "the transcript is empty":
    the error names what happened, and the events before the cut are read, whichever path the document took."""
    data = (FIXTURES / name).read_bytes()
    biggest = max(len(json.dumps(it)) for it in json.loads(data)) if data.lstrip()[:1] == b"[" else len(data)
    for max_retained in sorted({1 << 20, biggest + 64}):  # held whole, then streamed item by item (an array)
        for cut in _cuts(data):
            s = summary_of(data[:cut], [], max_retained=max_retained, max_line=max_retained)
            assert s["ok"] is False and "transcript is empty" not in s["error"], (cut, s["error"])
            if sniff(data[:cut], final=True) == DOCUMENT:  # (an object on one line is a JSON line cut short)
                assert s["error"].startswith("the JSON document is cut off"), (cut, s["error"])


def test_the_events_before_a_cut_are_read_held_whole_or_streamed() -> None:
    items = [{"type": "system", "subtype": "init", "session_id": "s", "model": "m", "tools": [], "cwd": "/"},
             {"type": "assistant", "message": {"content": [{"type": "text", "text": "hi"}]}},
             {"type": "result", "subtype": "success", "result": "the answer", "is_error": False}]
    data, sizes = array(items)
    cut = data.rindex(b"]")
    for max_retained in (1 << 20, max(sizes) + 1):
        s = summary_of(data[:cut], [], max_retained=max_retained, max_line=max_retained)
        assert s["ok"] is False and s["error"] == (
            f"the JSON document is cut off: the array ends after {cut} bytes, before its closing ]"), s
        assert s["partial_text"] == "the answer" and s["lines"] == 3 and s["invalid_lines"] == 0, s
    s = summary_of(data, [])
    assert s["ok"] is True and s["text"] == "the answer", s


def test_a_cut_items_levels_are_not_kept_while_its_rest_is_skipped() -> None:
    """An array item past max_retained is closed for the decoder where it is cut; the levels that open after the
    cut are counted, not kept (the stack grew a byte for every '[' of an oversized, deeply nested item)."""
    from spoolparse._decode.document import _ArrayStream

    a = _ArrayStream(64)
    a.feed(b'[{"type": "x", "v": ' + b"[" * 100_000)
    assert len(a.stack) <= 64
