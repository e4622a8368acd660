"""A kept line past SPILL_BYTES is held in a file and decoded in pieces: the same object, less memory."""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

import spoolparse.lines
from spoolparse import _limits
from spoolparse._decode import longline as _longline
from spoolparse.errors import SpoolFullError
from spoolparse.lines import Dropped, Event, LineScanner, read_json, spill_beside_spools
from spoolparse.spool import wait_closed

from .helpers import open_fds


def _made(made: list[_longline.Spill], directory: str | None) -> _longline.Spill:
    """A spill file where spools go, noted in ``made``."""
    spill = spill_beside_spools(directory)
    made.append(spill)
    return spill


def whole(line: bytes) -> Any:
    """What the scanner makes of the line decoded whole (the reference)."""
    return LineScanner()._decode(line)


def in_pieces(line: bytes, long_string: int) -> Any:
    scanner = LineScanner()
    return _longline.decode(lambda at, n: line[at : at + n], len(line), scanner._decode, read_json,
                            long_string_bytes=long_string)


@pytest.fixture
def small_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_longline, "_WINDOW", 13)


# Text that puts escapes, surrogate pairs, multi-byte UTF-8 and backslash runs at every offset.
texts = st.text(alphabet=st.sampled_from(['a', '"', '\\', '\n', '\t', '\x01', '\xe9', '\u20ac', '\U0001f600',
                                          '\u2028', '/', ' ']), max_size=200)
values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)


@given(obj=st.dictionaries(texts, values, max_size=5), ascii_only=st.booleans(),
       long_string=st.integers(0, 40), window=st.integers(13, 64))
def test_decoding_in_pieces_gives_what_decoding_whole_gives(obj: dict[str, Any], ascii_only: bool,
                                                            long_string: int, window: int) -> None:
    line = json.dumps(obj, ensure_ascii=ascii_only).encode()
    saved = _longline._WINDOW
    _longline._WINDOW = window
    try:
        got = in_pieces(line, long_string)
    finally:
        _longline._WINDOW = saved
    assert got == obj == whole(line)


@pytest.mark.parametrize("body", [
    rb"\\" * 40,                      # a run of escaped backslashes across every cut
    rb"\\\"" * 30,                    # escaped backslash then escaped quote
    rb"\ud83d\ude00" * 20,            # surrogate pairs: never cut between the halves
    rb"\u00e9\u20ac" * 20,
    "\U0001f600\u20ac\xe9".encode() * 20,
    rb'x\\\\\"y' * 20,
])
def test_escape_dense_strings_cut_anywhere(small_window: None, body: bytes) -> None:
    line = b'{"type":"t","s":"' + body + b'","n":1}'
    assert in_pieces(line, 0) == whole(line)


def test_a_lone_surrogate_or_bad_utf8_in_a_long_string_reads_as_a_whole_line_does(small_window: None) -> None:
    for body in (b"abc\\ud800def" * 5, b"ok\xff\xfebad" * 5, b"x" * 30 + b"\\udc00" + b"y" * 30):
        line = b'{"type":"t","s":"' + body + b'"}'
        got = in_pieces(line, 0)
        assert got == whole(line)
        assert "\ufffd" in got["s"]


def test_a_long_key_an_array_of_long_strings_and_nan(small_window: None) -> None:
    obj = {"a" * 50: ["b" * 40, {"c": "d" * 60}, "e"], "n": 12345678901234567890123}
    line = json.dumps(obj).encode()[:-1] + b',"f":NaN}'
    got = in_pieces(line, 8)
    assert got["a" * 50] == obj["a" * 50] and got["n"] == obj["n"] and got["f"] != got["f"]


def test_a_broken_line_stays_broken(small_window: None) -> None:
    for line in (b'{"type":"t","s":"' + b"x" * 50, b'{"type":"t","s":"' + b"x" * 50 + b'"', b'"' + b"x" * 50 + b'"',
                 b'{"type":"t","s":"a\x01' + b"x" * 50 + b'"}'):
        assert whole(line) is None
        try:
            got = in_pieces(line, 0)
        except _longline.LongStringError:
            got = None
        assert got is None


@pytest.mark.parametrize("sample", ["plain", "caf\xe9", "\u20ac\u0100", "\U0001f600 \u20ac \xe9"])
def test_a_string_filled_in_place_is_an_ordinary_str(sample: str) -> None:
    assert _longline.filler() is not None  # CPython: the in-place path is the one taken
    raw = json.dumps(sample * 1000).encode()[1:-1]
    made = _longline.long_string(lambda at, n: raw[at : at + n], 0, len(raw), read_json)
    normal = sample * 1000
    assert made == normal and hash(made) == hash(normal) and {made: 1}[normal] == 1
    assert sys.getsizeof(made) == sys.getsizeof(normal)
    assert sys.getrefcount(made) == sys.getrefcount(normal)
    assert made.encode() == normal.encode() and orjson.dumps(made) == orjson.dumps(normal)


def _kept_line(text_bytes: int, seed: int = 1) -> tuple[bytes, str]:
    rnd = random.Random(seed)
    rows = ["".join(rnd.choice("abc \u20ac\xe9\"\\\t") for _ in range(rnd.randint(1, 120))) + "\n" for _ in range(97)]
    block = "".join(rows)
    text = block * (text_bytes // len(block.encode()) + 1)
    line = orjson.dumps({"type": "item.completed", "item": {"id": "i", "type": "agent_message", "text": text}})
    return line, text


@pytest.mark.parametrize("chunk", [1 << 20, 65_537, 4_000_000])
def test_the_scanner_spills_a_long_kept_line_and_closes_the_file(chunk: int) -> None:
    line, text = _kept_line(_limits.SPILL_BYTES + 3_000_000)
    data = b'{"type":"thread.started"}\n' + line + b"\n" + line  # the last one ends without a newline
    before = open_fds()
    made: list[_longline.Spill] = []
    scanner = LineScanner(open_spill=lambda d: _made(made, d))
    records = []
    for i in range(0, len(data), chunk):
        records += scanner.feed(data[i : i + chunk])
        assert scanner.held <= _limits.SPILL_BYTES + chunk  # the bound on what is held in memory
    records += scanner.end()
    assert made
    events = [r for r in records if isinstance(r, Event)]
    kept = "item.completed/agent_message"
    assert [e.type for e in events] == ["thread.started", kept, kept]
    assert events[1].data["item"]["text"] == text == events[2].data["item"]["text"]
    assert events[1].size == len(line) and scanner.invalid_lines == 0
    wait_closed()  # a large spill file is closed in the background, as a spool is
    assert open_fds() == before


def test_a_spilled_line_past_max_retained_is_dropped_and_its_file_closed() -> None:
    line, _ = _kept_line(_limits.SPILL_BYTES + 2_000_000)
    before = open_fds()
    scanner = LineScanner(max_line=1 << 20, max_retained=_limits.SPILL_BYTES + 1_000_000)
    records = []
    for i in range(0, len(line), 1 << 20):
        records += scanner.feed(line[i : i + (1 << 20)])
    records += scanner.feed(b"\n")
    assert [type(r) for r in records] == [Dropped] and records[0].reason == "over_ceiling"  # type: ignore[union-attr]
    wait_closed()  # a large spill file is closed in the background, as a spool is
    assert open_fds() == before


@pytest.mark.parametrize("error", [OSError(13, "Permission denied"), SpoolFullError("/x", 0, "no space")])
def test_with_no_room_for_a_spill_file_the_line_is_kept_in_memory(monkeypatch: pytest.MonkeyPatch,
                                                                   error: Exception) -> None:
    line, text = _kept_line(_limits.SPILL_BYTES + 2_000_000)

    def no_room(directory: str | None) -> _longline.Spill:
        raise error

    monkeypatch.setattr(spoolparse.lines, "spill_beside_spools", no_room)
    scanner = LineScanner()
    records = []
    for i in range(0, len(line), 1 << 20):
        records += scanner.feed(line[i : i + (1 << 20)])
    records += scanner.feed(b"\n")
    assert [r.data["item"]["text"] for r in records if isinstance(r, Event)] == [text]


@pytest.mark.parametrize("taken", [0, 2])  # of the failing write: nothing, or half (1/2)
def test_a_spill_file_that_stops_taking_writes_goes_back_to_memory(monkeypatch: pytest.MonkeyPatch,
                                                                   taken: int) -> None:
    """The rest of the line is held in memory; what the file took is read back from it once, never also kept in
    memory (the disk took half of a write, then no more: that half was held twice and the line decoded wrong)."""
    line, text = _kept_line(_limits.SPILL_BYTES + 4_000_000)
    writes = 0
    real = _longline.Spill.write

    def failing(self: _longline.Spill, data: bytes) -> None:
        nonlocal writes
        writes += 1
        if writes > 2:
            if taken:
                real(self, memoryview(data)[: len(data) // taken])
            raise OSError(28, "No space left on device")
        real(self, data)

    monkeypatch.setattr(_longline.Spill, "write", failing)
    before = open_fds()
    scanner = LineScanner()
    records = []
    for i in range(0, len(line), 1 << 20):
        records += scanner.feed(line[i : i + (1 << 20)])
    records += scanner.feed(b"\n")
    assert writes > 2
    assert [r.data["item"]["text"] for r in records if isinstance(r, Event)] == [text]
    wait_closed()  # a large spill file is closed in the background, as a spool is
    assert open_fds() == before


@pytest.mark.parametrize("type_last", [False, True])
def test_a_long_line_whole_in_one_buffer_is_decoded_in_pieces_from_it(monkeypatch: pytest.MonkeyPatch,
                                                                      type_last: bool) -> None:
    line, text = _kept_line(_limits.SPILL_BYTES + 1_000_000)
    if type_last:
        line = _type_last(text)
    calls = []
    real = _longline.decode

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(_longline, "decode", spy)
    records = LineScanner().feed(line + b"\n")
    assert calls == [len(line)]
    assert [r.data["item"]["text"] for r in records if isinstance(r, Event)] == [text]


def test_the_spill_file_goes_where_spools_go_and_has_no_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Default: where a spool without spool_dir goes ($PDD_AGENT_SPOOL_DIR, else the temp dir); under a run,
    beside its spools (its spool_dir): a disk chosen for transcripts, never a tmpfs by accident."""
    import tempfile

    import spoolparse

    from .helpers import FAKE_CODEX, named_files

    temp, chosen, run_dir = (tmp_path / n for n in ("temp", "chosen", "run"))
    for d in (temp, chosen, run_dir):
        d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.delenv("PDD_AGENT_SPOOL_DIR", raising=False)
    seen = []
    for env in (None, str(chosen)):
        if env is not None:
            monkeypatch.setenv("PDD_AGENT_SPOOL_DIR", env)
        spill = spill_beside_spools(None)
        try:
            spill.write(b"abc" * 1000)
            assert spill.read(3, 6) == b"abcabc"
            target = os.readlink(f"/proc/self/fd/{spill._fd}")
            seen.append(target)
            assert target.endswith("(deleted)") or "#" in target  # O_TMPFILE: nameless from the start
        finally:
            spill.close()
    assert seen[0].startswith(str(temp)) and seen[1].startswith(str(chosen))
    assert named_files(temp) == named_files(chosen) == []

    made: list[str | None] = []

    def counted(directory: str | None) -> _longline.Spill:
        made.append(directory)
        return spill_beside_spools(directory)

    monkeypatch.setattr(spoolparse.lines, "spill_beside_spools", counted)
    with spoolparse.run([*FAKE_CODEX, "--size", "8K", "--prose", "--answer-size", "6M"], spool_dir=run_dir) as r:
        assert r.ok and len(r.text or "") == 6 << 20
    assert made == [str(run_dir)]


@pytest.mark.parametrize("pretty", [False, True])
def test_a_long_answer_is_written_in_pieces_byte_for_byte_as_whole(monkeypatch: pytest.MonkeyPatch,
                                                                   pretty: bool) -> None:
    import io

    from spoolparse._decode import jsonout as _json

    monkeypatch.setattr(_json, "_PIECE", 7)
    obj = {"provider": "codex", "ok": True, "text": 'a "b"\\ \u20ac\U0001f600\n\x01' * 9, "usage": {"n": 1 << 70},
           "stderr_tail": "short", "error": "x" * 30}
    out = io.BytesIO()
    _json.write(out, obj, pretty=pretty)
    assert out.getvalue() == _json.dumps(obj, pretty=pretty)
    assert json.loads(out.getvalue()) == obj


def _type_last(text: str) -> bytes:
    """An answer line with its keys in reverse: the type is the last thing on it."""
    return orjson.dumps({"item": {"text": text, "type": "agent_message", "id": "i"}, "type": "item.completed"})


@pytest.mark.parametrize("max_line", [64 << 20, 6 << 20])  # decoded once held whole / classified by a key scan
@pytest.mark.parametrize("decision", ["keep", "note", "skip"])
def test_a_long_line_with_its_type_last_is_spilled_too(monkeypatch: pytest.MonkeyPatch, max_line: int,
                                                       decision: str) -> None:
    from spoolparse.lines import KEEP, NOTE, SKIP, Noted

    _, text = _kept_line(_limits.SPILL_BYTES + 3_000_000)
    line = _type_last(text)
    made: list[_longline.Spill] = []
    monkeypatch.setattr(spoolparse.lines, "spill_beside_spools", lambda d: _made(made, d))
    retain = {"keep": KEEP, "note": NOTE, "skip": SKIP}[decision]
    before = open_fds()
    scanner = LineScanner(lambda key: retain if key.startswith("item.completed") else KEEP,
                          max_line=max_line, max_retained=64 << 20)
    records = []
    for i in range(0, len(line), 1 << 20):
        records += scanner.feed(line[i : i + (1 << 20)])
    records += scanner.feed(b"\n")
    assert len(made) == 1  # held in a file past SPILL_BYTES, not in memory
    if decision == "keep":
        assert [(type(r), r.type) for r in records] == [(Event, "item.completed/agent_message")]
        assert records[0].data == orjson.loads(line)  # type: ignore[union-attr]
    elif decision == "note" and len(line) <= max_line:
        assert [(type(r), r.type) for r in records] == [(Noted, "item.completed/agent_message")]
        assert records[0].head == line[: _limits.NOTE_HEAD] and records[0].tail == line[-_limits.NOTE_TAIL :]  # type: ignore[union-attr]
    else:  # skipped, or noted but past max_line: a noted line that long is reported as dropped
        assert [type(r) for r in records] == ([Dropped] if len(line) > max_line else [])
    assert scanner.invalid_lines == 0
    wait_closed()
    assert open_fds() == before


def test_a_kept_answer_whose_spill_file_cannot_be_read_back_is_a_lost_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not an invalid line that an earlier message could stand in for: ``ok`` is false and says why."""
    import io

    import spoolparse

    _, text = _kept_line(_limits.SPILL_BYTES + 2_000_000)
    earlier = orjson.dumps({"type": "item.completed", "item": {"id": "a", "type": "agent_message", "text": "draft"}})
    last = orjson.dumps({"type": "item.completed", "item": {"id": "b", "type": "agent_message", "text": text}})
    done = b'{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":2}}'
    data = b'{"type":"thread.started","thread_id":"t"}\n' + earlier + b"\n" + last + b"\n" + done + b"\n"

    def unreadable(self: _longline.Spill, offset: int, size: int) -> bytes:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(_longline.Spill, "read", unreadable)
    r = spoolparse.parse(io.BytesIO(data), provider="codex")
    assert not r.ok and r.text is None
    assert r.error is not None and "spill file" in r.error, r.error
    assert [d["reason"] for d in r.dropped] == ["unreadable"]
    wait_closed()
