"""The bounded line scanner: classification, bounds, drops, odd input."""

from __future__ import annotations

import io
import json

import pytest

from spoolparse import Dropped, Event, LineScanner, Noted, UsageError, iter_lines, probe_type
from spoolparse.lines import KEEP, NOTE, SKIP

from .helpers import jl


def scan(data: bytes, retain, chunk: int | None = None, **kw):  # type: ignore[no-untyped-def]
    sc = LineScanner(retain, **kw)
    out = []
    step = chunk or len(data) or 1
    for i in range(0, len(data), step):
        out += sc.feed(data[i : i + step])
    out += sc.end()
    return sc, out


def keep(*keys: str):  # type: ignore[no-untyped-def]
    wanted = set(keys)
    return lambda k: KEEP if k in wanted else SKIP


@pytest.mark.parametrize(
    ("line", "key"),
    [
        (b'{"type":"turn.completed","usage":{}}', "turn.completed"),
        (b'{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"x"}}',
         "item.completed/agent_message"),
        (b'{ "type" : "item.started" , "item" : { "id" : "i" , "type" : "command_execution" } }',
         "item.started/command_execution"),
        (b'{"type":"item.completed","item":{"id":"item_0","item_type":"assistant_message"}}',
         "item.completed/assistant_message"),
        (b'{"id":"0","msg":{"type":"agent_message","message":"hi"}}', "msg/agent_message"),
        (b'{"timestamp":"t","type":"init"}', "init"),
        (b'{"item":{"type":"agent_message"},"type":"item.completed"}', "item.completed/agent_message"),
        (b'{"approval":"never","sandbox":"read-only"}', ""),
        (b'\xef\xbb\xbf{"type":"x"}', "x"),
        (b'\x1e{"type":"x"}', "x"),
        (b'{"type":"esc\\"aped"}', 'esc"aped'),
        (b"[SandboxDebug] hello", None),
        (b"[1,2,3]", None),
        (b"", None),
    ],
)
def test_probe_type(line: bytes, key: str | None) -> None:
    assert probe_type(line) == key


def test_probe_works_on_a_cut_prefix() -> None:
    line = b'{"id":"x","payload":"' + b"a" * 1000 + b'","type":"late"}'
    assert probe_type(line[:100]) == ""
    assert probe_type(b'{"type":"item.completed","item":{"id":"' + b"i" * 300) == "item.completed"


STREAM = (
    jl({"type": "thread.started", "thread_id": "t"})
    + b"\n"
    + b"[SandboxDebug] noise\n"
    + b"42\n"
    + jl({"type": "item.completed",
          "item": {"id": "item_1", "type": "command_execution", "aggregated_output": "o" * 500}})
    + b'{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"caf\xc3\xa9 \xff"}}\r\n'
    + b'{"type":"broken",\n'
    + jl({"type": "turn.completed", "usage": {"input_tokens": 3}})
)


@pytest.mark.parametrize("chunk", [1, 2, 7, 64, 1000, None])
def test_every_chunking_gives_the_same_records(chunk: int | None) -> None:
    retain = keep("thread.started", "item.completed/agent_message", "turn.completed", "broken")
    sc, out = scan(STREAM, retain, chunk, max_line=1024, max_retained=2048, probe_bytes=256)
    assert [(type(r).__name__, getattr(r, "lineno", None), r.type) for r in out] == [
        ("Event", 1, "thread.started"),
        ("Event", 6, "item.completed/agent_message"),
        ("Dropped", None, "broken"),
        ("Event", 8, "turn.completed"),
    ]
    assert out[2] == Dropped(7, len(b'{"type":"broken",'), "broken", "invalid")  # kept by its type: reported
    assert sc.lines == 8
    # non-JSON line, JSON that is not an object, a kept line that does not decode; the blank line apart
    assert sc.invalid_lines == 3 and sc.blank_lines == 1
    text = out[1].data["item"]["text"]  # type: ignore[union-attr]
    assert text == "café \ufffd"


def test_skipped_lines_are_never_decoded() -> None:
    calls: list[bytes | str] = []

    def loads(data):  # type: ignore[no-untyped-def]
        calls.append(data)
        import orjson

        return orjson.loads(data)

    data = jl(*[{"type": "noise", "v": i} for i in range(100)], {"type": "answer", "text": "a"})
    sc = LineScanner(keep("answer"), loads=loads)
    sc.feed(data)
    sc.end()
    assert len(calls) == 1
    assert sc.lines == 101


def test_oversize_skipped_line_is_reported_and_not_buffered() -> None:
    big = (b'{"type":"item.completed","item":{"id":"item_9","type":"command_execution","aggregated_output":"'
           + b"x" * 5000 + b'"}}')
    data = jl({"type": "a"}) + big + b"\n" + jl({"type": "a"})
    for chunk in (13, 100, 4096, None):
        sc = LineScanner(keep("a"), max_line=1000, max_retained=2000, probe_bytes=200)
        out = []
        step = chunk or len(data)
        peak = 0
        for i in range(0, len(data), step):
            out += sc.feed(data[i : i + step])
            peak = max(peak, sc.held)
        out += sc.end()
        assert peak <= 200  # never more than the probe window of a line it skips
        drops = [r for r in out if isinstance(r, Dropped)]
        assert drops == [Dropped(2, len(big), "item.completed/command_execution", "oversize")]
        assert [r.lineno for r in out if isinstance(r, Event)] == [1, 3]


def test_retained_line_between_cap_and_ceiling_is_kept() -> None:
    text = "y" * 3000
    data = jl({"type": "answer", "text": text})
    for chunk in (50, 999, None):
        _, out = scan(data, keep("answer"), chunk, max_line=1000, max_retained=4000, probe_bytes=100)
        assert len(out) == 1 and isinstance(out[0], Event) and out[0].data["text"] == text


def test_retained_line_over_ceiling_is_dropped_and_reported() -> None:
    data = jl({"type": "answer", "text": "y" * 5000}, {"type": "answer", "text": "small"})
    for chunk in (50, 999, None):
        sc, out = scan(data, keep("answer"), chunk, max_line=1000, max_retained=4000, probe_bytes=100)
        assert isinstance(out[0], Dropped) and out[0].reason == "over_ceiling" and out[0].line == 1
        assert out[0].bytes == len(data.split(b"\n")[0])
        assert isinstance(out[1], Event) and out[1].data["text"] == "small"
        assert sc.held == 0


def test_noted_lines_carry_type_and_size_only() -> None:
    data = jl({"type": "tool", "output": "z" * 100}, {"type": "tool", "output": "z" * 3000})
    retain = lambda k: NOTE if k == "tool" else SKIP  # noqa: E731
    for chunk in (7, None):
        _, out = scan(data, retain, chunk, max_line=1000, max_retained=4000, probe_bytes=100)
        assert isinstance(out[0], Noted) and out[0].size == len(data.split(b"\n")[0])
        assert isinstance(out[1], Dropped) and out[1].reason == "oversize"


def test_last_line_without_newline() -> None:
    sc, out = scan(b'{"type":"a"}\n{"type":"a","n":2}', keep("a"), 5)
    assert [r.data.get("n") for r in out if isinstance(r, Event)] == [None, 2]
    assert sc.lines == 2
    sc, out = scan(b'{"type":"a"}\n{"type":"a","n":', keep("a"), 5)
    assert [type(r) for r in out] == [Event, Dropped] and sc.invalid_lines == 1 and sc.lines == 2
    # a kept line cut short is known lost, not only counted
    assert out[1] == Dropped(2, len(b'{"type":"a","n":'), "a", "invalid")


def test_retain_can_change_between_feeds() -> None:
    sc = LineScanner(keep())
    assert sc.feed(jl({"type": "a"})) == []
    sc.retain = keep("a")
    assert len(sc.feed(jl({"type": "a"}))) == 1


def test_bounds_are_checked() -> None:
    with pytest.raises(UsageError):
        LineScanner(max_line=0)
    with pytest.raises(UsageError):
        LineScanner(max_line=100, max_retained=10)


def test_iter_lines_reads_in_bounded_calls() -> None:
    sizes: list[int] = []

    class Recording(io.BytesIO):
        def readinto(self, b):  # type: ignore[no-untyped-def]
            sizes.append(len(b))
            return super().readinto(b)

    data = jl(*[{"type": "t", "i": i} for i in range(1000)])
    with iter_lines(Recording(data), max_line=4096, max_retained=8192) as reader:
        events = list(reader)
    assert [e.data["i"] for e in events if isinstance(e, Event)] == list(range(1000))
    assert max(sizes) <= 4096
    assert reader.lines == 1000


def test_iter_lines_types_filter_and_path(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "t.jsonl"
    p.write_bytes(jl({"type": "a"}, {"type": "b"}, {"no": "type"}))
    assert [e.type for e in iter_lines(p, types={"b", ""})] == ["b", ""]
    assert len(list(iter_lines(str(p)))) == 3


def test_untyped_objects_skip_the_incremental_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """A line with no "type" key anywhere in its head is untyped without running ijson."""
    import spoolparse._decode.probe as probe_mod

    calls: list[bytes] = []
    real = probe_mod._probe_json
    monkeypatch.setattr(probe_mod, "_probe_json", lambda parse, data: calls.append(data) or real(parse, data))
    assert probe_type(b'{"a":1,"b":"x"}') == ""
    assert calls == []
    assert probe_type(b'{"id":"0","payload":{"k":1},"type":"late"}') == "late"  # still found by the probe
    assert probe_type(b'{"\\u0074ype":"escaped"}') == "escaped"
    assert len(calls) == 2


@pytest.mark.parametrize("chunk", [700, 4096, 1 << 20])
def test_a_retained_line_found_by_its_key_scan_that_cannot_be_decoded_is_a_dropped_record(chunk: int) -> None:
    """Its type lies past the probe window and its item has no type of its own (the key scan never
    settles): the key it is kept by is the one the scan found, and its loss is recorded under it."""
    scanner = LineScanner(retain=lambda k: KEEP if k.startswith("item.completed") else SKIP,
                          max_line=1000, max_retained=100_000, probe_bytes=100)
    good = b'{"item":{"id":"x","text":"' + b"a" * 5000 + b'"},"type":"item.completed"}'
    bad = good + b"junk"
    data = good + b"\n" + bad + b"\n"
    out = []
    for i in range(0, len(data), chunk):
        out += scanner.feed(data[i : i + chunk])
    out += scanner.end()
    assert [type(r) for r in out] == [Event, Dropped]
    assert out[0].type == "item.completed"
    assert (out[1].type, out[1].reason, out[1].line, out[1].bytes) == ("item.completed", "invalid", 2, len(bad))
    assert scanner.invalid_lines == 1


def test_blank_lines_are_counted_apart_not_as_invalid() -> None:
    """A million blank lines were "1000000 not JSON objects"."""
    import spoolparse

    r = spoolparse.parse(io.BytesIO(b"\n" * 1_000_000))
    assert r.error == "no JSON event: the transcript holds only blank lines (1000000)"
    assert r.invalid_lines == 0 and r.lines == 1_000_000
    r = spoolparse.parse(io.BytesIO(b"\n \t\r\nnoise\n\n"))
    assert r.error == "no JSON event: not a recognised format (4 lines, 1 not JSON objects, 3 blank)"
    for chunk in (1, 3, None):
        sc, _ = scan(b"\r\n\n  \n" + jl({"type": "x"}) + b" ", keep("x"), chunk)
        assert (sc.lines, sc.blank_lines, sc.invalid_lines) == (5, 4, 0), chunk  # the last line has no newline


@pytest.mark.parametrize("bad", [b"\\q", b"\x01", b"\\ud83d\\x"])
@pytest.mark.parametrize("size", [0, 200, 5000])  # within the probe window, past it, past max_line
@pytest.mark.parametrize("chunk", [None, 64])
def test_an_undecodable_line_with_its_type_after_the_bad_bytes_is_a_dropped_record(bad: bytes, size: int,
                                                                                   chunk: int | None) -> None:
    """A bad escape or a raw control character before ``"type"``: the type probe gave up there, so a retained
    line was counted invalid and nothing else — its answer silently not lost, an earlier message in its place.
    With the type first it was reported as a dropped record; now it is whatever the key order."""
    pad = b"p" * size
    lines = [
        b'{"text":"' + pad + b"bad " + bad + b'","type":"agent_message"}',
        b'{"type":"item.completed","item":{"id":"i","text":"' + pad + bad + b'","type":"agent_message"}}',
        b'{"item":{"id":"i","text":"' + pad + bad + b'","type":"agent_message"},"type":"item.completed"}',
    ]
    want = ["agent_message", "item.completed/agent_message", "item.completed/agent_message"]
    for line, key in zip(lines, want, strict=True):
        sc, out = scan(line + b"\n", keep(key), chunk=chunk, max_line=1000, max_retained=100_000, probe_bytes=100)
        assert [(type(r), r.type, r.reason) for r in out] == [(Dropped, key, "invalid")], (line, out)  # type: ignore[union-attr]
        assert sc.invalid_lines == 1
        _, none = scan(line + b"\n", keep("other"), chunk=chunk, max_line=1000, max_retained=100_000,
                             probe_bytes=100)
        assert [r.reason for r in none] == (["oversize"] if len(line) > 1000 else [])  # not retained: skipped


def test_an_undecodable_untyped_object_is_a_dropped_record_when_untyped_lines_are_retained() -> None:
    """Kimi's and Antigravity's lines have no type: one that could not be decoded may have been the answer, and
    was only counted invalid. A line that is no object at all (a plain-text error) is still only counted."""
    data = b'{"role":"assistant","content":"the answer \\q"}\n' + b"Error code: 500\n"
    sc, out = scan(data, keep(""))
    assert out == [Dropped(1, len(data.splitlines()[0]), "", "invalid")] and sc.invalid_lines == 2
    sc, out = scan(data, keep("other"))
    assert out == [] and sc.invalid_lines == 1  # untyped lines not retained: the bad one skipped unread


@pytest.mark.parametrize("pad", [0, 5000])  # a short line is searched for a long digit run first, a long one walked
def test_integers_past_64_bits_are_exact_on_short_and_long_lines(pad: int) -> None:
    big = 2**64 + 7
    line = b'{"type":"x","n":%d,"f":1.5,"t":"%s","m":[%d]}' % (big, b"p" * pad, -big)
    (ev,) = LineScanner().feed(line + b"\n")
    assert isinstance(ev, Event) and ev.data["n"] == big and ev.data["m"] == [-big] and ev.data["f"] == 1.5
    # a run of 19 digits in a string, and a float: read again, and the same object
    line = b'{"type":"x","f":0.5,"t":"%s 1234567890123456789"}' % (b"p" * pad)
    (ev,) = LineScanner().feed(line + b"\n")
    assert isinstance(ev, Event) and ev.data == json.loads(line)
