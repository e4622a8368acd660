"""Whole-window scanning against the line-by-line path: the same records and counters on any stream.

The window path passes over the lines a provider's grammar skips with C-level
calls over the whole window, and reads the others (candidates) line by line;
the line-by-line path reads every line. Random streams of every provider's
events, noise, lines near and over the caps and lines built to look like a
candidate from inside (a marker in a string, after junk, escaped, past ASCII,
past the probe) are fed in random chunks to both.
"""

from __future__ import annotations

import io
import json
import re
from typing import Any
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

import spoolparse
from spoolparse._decode import scanner as _scanner
from spoolparse._decode import window as _window
from spoolparse._decode.window import _alternatives, candidates
from spoolparse.lines import KEEP, NOTE, SKIP, LineScanner

from .fuzz import harness as h

ALL = h.provider_names()
KEYS = h.type_keys()

# -- lines that look like a candidate, or like a skipped line, from inside -----------------------------------


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")


def tricky(kind: int, top: str, sub: str, other: str) -> list[bytes]:
    """Lines of one kind that look like a candidate, or like a skipped line, from inside."""
    marker = _json({"type": other})
    long = ["i" * n for n in (60, 64, 65, 300)]
    if kind == 0:  # a marker inside a string (escaped, as JSON must)
        return [_json({"type": top, "text": "\n" + marker.decode() + "\n"})]
    if kind == 1:  # a marker after junk on the line
        return [b"noise " + marker]
    if kind == 2:  # the type spelled with an escape
        return [b'{"type":"' + top.encode().replace(b"e", b"\\u0065", 1) + b'"}']
    if kind == 3:  # a type past ASCII, or with invalid UTF-8
        return [_json({"type": top + "\u00e9"}), b'{"type":"' + top.encode() + b'\xff"}']
    if kind == 4:  # a long type, item id or item type
        return [line for n in long for line in (
            _json({"type": top + n}),
            _json({"type": top, "item": {"id": n, "type": sub or "agent_message"}}),
            _json({"type": top, "item": {"id": "i", "type": (sub or "x") + n}}),
        )]
    if kind == 5:  # the nested type as item_type, or after other keys
        return [_json({"type": top, "item": {"id": "i", "item_type": sub or "x"}}),
                _json({"type": top, "item": {"id": "i", "text": "t", "type": sub or "x"}})]
    if kind == 6:  # cut short inside the type or the item
        line = _json({"type": top, "item": {"id": "i", "type": sub or "x"}})
        return [line[:n] for n in sorted({1, 9, 10, 12, len(top) + 9, len(top) + 11, len(line) // 2, len(line) - 1})]
    if kind == 7:  # blank, blanks around, a byte-order mark, a record separator
        return [b"", b"  ", b"\t\r", b" " + marker, b"\xef\xbb\xbf" + marker, b"\x1e" + marker]
    if kind == 8:  # a second type key, a top type with a slash in it
        return [_json({"type": top, "x": 1})[:-1] + b',"type":"' + other.encode() + b'"}',
                _json({"type": top + "/" + (sub or "y"), "item": {"id": "i", "type": "z"}})]
    if kind == 9:  # blanks inside the compact form
        return [b'{ "type" : "' + top.encode() + b'" }', b'{"type": "' + top.encode() + b'"}']
    if kind == 10:  # valid compact JSON, then junk
        return [_json({"type": top, "item": {"id": "i", "type": sub or "x"}}) + b"junk"]
    return [_json({"type": top, "item": {"id": "i", "type": sub}} if sub else {"type": top, "n": 1})]


@st.composite
def tricky_lines(draw: st.DrawFn) -> bytes:
    key = draw(st.sampled_from([*KEYS, "x", "item.completed/x", ""]))
    top, _, sub = key.partition("/")
    return draw(st.sampled_from(tricky(draw(st.integers(0, 11)), top, sub, draw(st.sampled_from(KEYS)))))


@st.composite
def window_streams(draw: st.DrawFn) -> bytes:
    """A stream of the harness's lines and tricky ones, any line endings, maybe no final newline."""
    lines = draw(st.lists(st.one_of(tricky_lines(), tricky_lines(), h.event_lines(), h.noise_lines,
                                    h.over_cap_lines(), h.near_cap_lines()), max_size=16))
    ends = draw(st.lists(st.sampled_from([b"\n", b"\n", b"\r\n", b"\n\n"]), min_size=len(lines),
                         max_size=len(lines)))
    data = b"".join(ln + end for ln, end in zip(lines, ends, strict=True))
    return data.rstrip(b"\n") if draw(st.booleans()) else data


@given(data=st.data())
def test_the_window_path_gives_what_the_line_by_line_path_gives(data: st.DataObject) -> None:
    stream = data.draw(st.one_of(window_streams(), h.streams(oversize=True)), label="stream")
    cuts = data.draw(h.chunkings(stream), label="cuts")
    name = data.draw(st.sampled_from(ALL), label="provider")
    listening = data.draw(st.booleans(), label="listening")
    max_retained = data.draw(st.sampled_from([h.MAX_LINE, h.MAX_RETAINED]), label="max_retained")
    h.check_window(stream, cuts, name, listening=listening, max_retained=max_retained,
                   offset=data.draw(st.booleans(), label="offset"))


@given(data=st.data())
def test_any_set_of_kept_and_noted_keys_reads_alike(data: st.DataObject) -> None:
    """Keys no grammar has, too: those of the stream's own lines (a top type with a "/" in it, an untyped line)."""
    stream = data.draw(window_streams(), label="stream")
    cuts = data.draw(h.chunkings(stream), label="cuts")
    seen = sorted({r.key for r in h.reference(stream) if r.key is not None})
    chosen = data.draw(st.lists(st.sampled_from([*seen, *KEYS, "item.x/y/z"]), unique=True), label="keys")
    decisions = {k: data.draw(st.sampled_from([KEEP, NOTE]), label=k) for k in chosen}

    def retain(key: str) -> int:
        return decisions.get(key, SKIP)

    h.compare_paths(stream, cuts, retain, frozenset(decisions))


def test_a_top_type_with_a_slash_is_read_whatever_follows() -> None:
    line = b'{"type":"item.x/y","item":{"id":"i","type":"z"}}'
    assert candidates(frozenset({"item.x/y/z"})).skipped.match(line) is None
    h.compare_paths(line + b"\n" + line, [], lambda k: KEEP if k == "item.x/y/z" else SKIP,
                    frozenset({"item.x/y/z"}))


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("listening", [False, True])
def test_each_tricky_line_is_read_alike_by_both_paths(name: str, listening: bool) -> None:
    keys = sorted({*h.provider_keys(name), "x", "", "item.completed/x"})
    lines = [line for key in keys for kind in range(12) for other in ("turn.completed", "item.started/x")
             for line in tricky(kind, *key.partition("/")[::2], other)]
    stream = b"\n".join(lines) + b"\n"
    h.check_window(stream, [], name, listening=listening)
    h.check_window(stream, list(range(61, len(stream), 61)), name, listening=listening)


@pytest.mark.parametrize("listening", [False, True])
@given(data=st.data())
def test_parse_gives_the_same_summary_whichever_path_reads_the_windows(listening: bool, data: st.DataObject) -> None:
    stream = data.draw(st.one_of(window_streams(), h.streams(oversize=True)), label="stream")
    name = data.draw(st.sampled_from([*ALL, "auto"]), label="provider")
    got = {}
    for whole in (False, True):  # every window line by line; every window (once decided) whole
        seen: list[dict[str, Any]] = []

        def on_event(ev: Any, seen: list[dict[str, Any]] = seen) -> None:
            seen.append({**ev.as_dict(), "time": 0})

        with h.whole_windows(whole):
            r = spoolparse.parse(io.BytesIO(stream), provider=name, max_line=h.MAX_LINE, max_retained=h.MAX_RETAINED,
                                 on_event=on_event if listening else None)
        got[whole] = ({**r.summary(), "duration_s": 0}, seen)
    assert repr(got[False]) == repr(got[True])


# -- short kept lines, decoded in the feed loop ---------------------------------------------------------------


def _complete_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The line numbers the scanner hands to ``complete`` (its general path) from now on."""
    looked: list[int] = []
    real = LineScanner.complete

    def spy(self: LineScanner, head: bytes, buf: Any, a: int, b: int, out: list[Any]) -> None:
        looked.append(self.lines)
        real(self, head, buf, a, b, out)

    monkeypatch.setattr(LineScanner, "complete", spy)
    return looked


@given(data=st.data())
def test_a_short_kept_line_reads_the_same_in_the_feed_loop_as_through_complete(data: st.DataObject) -> None:
    """The line-by-line path decodes a short kept line itself once its type's decision is cached; with that turned
    off every kept line goes through ``complete``: the same records and counters."""
    stream = data.draw(st.one_of(window_streams(), h.streams(oversize=True)), label="stream")
    chunks = h.split(stream, data.draw(h.chunkings(stream), label="cuts"))
    name = data.draw(st.sampled_from(ALL), label="provider")
    retain, _ = h.read_keys(name, data.draw(st.booleans(), label="listening"))
    max_retained = data.draw(st.sampled_from([h.MAX_LINE, h.MAX_RETAINED]), label="max_retained")
    offset = data.draw(st.booleans(), label="offset")
    with h.whole_windows(False):
        got, fast = h.scan(chunks, retain, max_retained=max_retained, offset=offset)
        with mock.patch.object(_scanner, "SHORT_KEPT", -1):
            want, ref = h.scan(chunks, retain, max_retained=max_retained, offset=offset)
    assert repr(got) == repr(want)  # repr: a NaN is not equal to itself
    for counter in ("lines", "blank_lines", "invalid_lines", "too_deep", "bytes"):
        assert getattr(fast, counter) == getattr(ref, counter), counter


def test_short_kept_lines_are_decoded_in_the_feed_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the first line of each kept type (whose decision is not cached yet) and the lines that are not plain
    compact objects (a blank after the brace, a carriage return) go through ``complete``."""
    looked = _complete_calls(monkeypatch)
    lines = [b'{"type":"assistant","message":{"content":[]},"n":%d}' % i for i in range(500)]
    lines[300] += b"\r"
    lines[400] += b" "
    sc = LineScanner(lambda k: KEEP if k == "assistant" else SKIP)
    with h.whole_windows(False):
        recs = sc.feed(b"\n".join(lines) + b"\n")
    assert [r.data["n"] for r in recs] == list(range(500)) and sc.invalid_lines == 0  # type: ignore[union-attr]
    assert looked == [1, 301, 401], looked


@pytest.mark.parametrize("untyped", [SKIP, NOTE, KEEP])
def test_untyped_lines_are_classified_in_the_feed_loop(monkeypatch: pytest.MonkeyPatch, untyped: int) -> None:
    """A logger's lines (no type key, no escape) are neither probed nor handed to ``complete``: only the one that
    names a type in a nested object, or has an escape, is (as the first line of a kept type is)."""
    looked = _complete_calls(monkeypatch)
    lines = [b'{"level":"info","msg":"step %d","n":%d}' % (i, i) for i in range(300)]
    lines[100] = b'{"level":"info","data":{"type":"x"},"n":100}'
    lines[200] = b'{"level":"info","msg":"\\u0074","n":200}'
    lines.insert(0, b'{"type":"turn.started"}')
    sc = LineScanner({"": untyped, "turn.started": KEEP}.get)  # type: ignore[arg-type]
    with h.whole_windows(False):
        recs = sc.feed(b"\n".join(lines) + b"\n")
    assert looked == [1, 102, 202], looked
    assert len(recs) == {SKIP: 1, NOTE: 301, KEEP: 301}[untyped] and sc.invalid_lines == 0
    assert all(r.type == "" for r in recs[1:])


# -- the pattern --------------------------------------------------------------------------------------------


@given(words=st.lists(st.text(max_size=6).map(lambda t: t.encode("utf-8", "surrogatepass")), max_size=12),
       probe=st.text(max_size=7).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_the_trie_matches_exactly_its_words(words: list[bytes], probe: bytes) -> None:
    pattern = re.compile(_alternatives(words), re.S)
    for w in [*words, probe]:
        assert (pattern.fullmatch(w) is not None) == (w in words), (words, w)


@pytest.mark.parametrize(("line", "skipped"), [
    (b'{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"ls"}}', True),
    (b'{"type":"item.completed","item":{"id":"item_1","type":"command_execution"}}', True),
    (b'{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"x"}}', False),
    (b'{"type":"item.completed","item":{"id":"item_1","item_type":"agent_message"}}', False),
    (b'{"type":"item.completed","item":{"id":"' + b"i" * 65 + b'","type":"command_execution"}}', False),
    (b'{"type":"item.completed","item":{"text":"t","type":"command_execution"}}', False),  # not the compact form
    (b'{"type":"turn.completed","usage":{}}', False),
    (b'{"type":"turn.completedX"}', True),
    (b'{"type":"turn.complete"}', True),
    (b'{"type":"t\\u0075rn.completed"}', False),  # an escape in the type
    (b'{"type":"\xc3\xa9"}', False),  # past ASCII
    (b'{ "type":"x"}', False),
    (b' {"type":"x"}', False),
    (b'{"id":"0","msg":{"type":"agent_message"}}', False),
    (b'{"type":"' + b"x" * 65 + b'"}', False),
    (b'{"type":"' + b"x" * 64 + b'"}', True),
    (b"", False),
    (b"[1]", False),
])
def test_what_the_codex_pattern_passes_over(line: bytes, skipped: bool) -> None:
    retain, keys = h.read_keys("codex", listening=False)
    assert keys is not None
    assert (candidates(keys).skipped.match(line) is not None) is skipped
    if skipped:  # the line-by-line path skips it without a trace too
        sc = LineScanner(retain)
        assert sc.feed(line + b"\n") == [] and (sc.invalid_lines, sc.blank_lines) == (0, 0)


def test_every_skipped_match_fits_in_the_first_bytes_the_line_by_line_path_looks_at() -> None:
    from spoolparse import _limits

    keys = frozenset(["item.completed/agent_message", "turn.completed"])
    part = 64
    longest = (b'{"type":"item.' + b"x" * (part - 5) + b'","item":{"id":"' + b"i" * part
               + b'","item_type":"' + b"s" * part + b'"')
    m = candidates(keys).skipped.match(longest)
    assert m is not None and m.end() == len(longest) <= _limits.FAST_PROBE_BYTES


# -- the work per line ---------------------------------------------------------------------------------------


def test_only_the_candidates_are_read_line_by_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nobody listening, a Codex stream of tool items: the lines the fold keeps are the only ones looked at."""
    tool = {"type": "item.completed", "item": {"id": "i", "type": "command_execution", "aggregated_output": "o" * 99}}
    start = {"type": "item.started", "item": {"id": "i", "type": "command_execution"}}
    answer = {"type": "item.completed", "item": {"id": "a", "type": "agent_message", "text": "the answer"}}
    body = h.dumps(tool) + b"\n" + h.dumps(start) + b"\n"
    data = (b'{"type":"thread.started","thread_id":"t"}\n{"type":"turn.started"}\n' + body * 5000
            + h.dumps(answer) + b'\n{"type":"turn.completed","usage":{"input_tokens":1}}\n')
    looked = _complete_calls(monkeypatch)
    monkeypatch.setattr(_window, "LINE_BYTES", float("inf"))
    monkeypatch.setattr(_window, "MIN_WINDOW", 0)
    sp = spoolparse.StreamParser("codex", live=False)
    sp.feed(data)
    r = sp.finish(args=None)
    assert r.ok and r.text == "the answer" and r.lines == 10_004
    # and the lines the two windows (the stream's first bytes, and the rest) cut
    assert {1, 2, 10_003, 10_004} <= set(looked) and len(looked) <= 5, looked


@pytest.mark.parametrize(("pad", "whole"), [(0, True), (2000, False)])
def test_each_window_goes_the_cheaper_way_for_the_length_of_the_last_ones_lines(monkeypatch: pytest.MonkeyPatch,
                                                                                pad: int, whole: bool) -> None:
    """Windows of short lines are scanned whole, of long lines (Codex's tool items) line by line; a small window
    (a live child's last lines) line by line too."""
    scanned: list[int] = []
    real = _window.scan

    def spy(sc: Any, buf: Any, pos: int, end: int, *rest: Any) -> int:
        scanned.append(end - pos)
        return real(sc, buf, pos, end, *rest)

    monkeypatch.setattr(_window, "scan", spy)
    skip = b'{"type":"stream_event","event":{"type":"content_block_delta","text":"' + b"w" * pad + b'"}}\n'
    window = skip * (_window.MIN_WINDOW * 4 // len(skip))
    sp = spoolparse.StreamParser("claude", live=False)
    for _ in range(4):
        sp.feed(window)
    sp.feed(skip * 3)
    assert sp.finish(args=None).lines == 4 * window.count(b"\n") + 3
    # the stream's first bytes (read apart, before its format is known) are scanned whole: no line is known yet;
    # after them, windows of short lines whole again, of long ones line by line; the last small one line by line
    assert len(scanned) == (5 if whole else 1), scanned
