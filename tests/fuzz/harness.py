"""Streams to throw at the parser, a reference parser to judge it by, and the invariants it must keep.

Used by the property tests (``tests/test_properties.py``), the CI fuzz budget
(``tests/fuzz/test_fuzz.py``) and the long-run fuzzer (``tests/fuzz/fuzz_parser.py``).

Small caps (``MAX_LINE`` = 256 bytes) make lines near and over the cap cheap.
The providers are read from :data:`spoolparse.providers.PROVIDERS` when a test
runs, so every registered provider is covered without naming it here.
"""

from __future__ import annotations

import contextlib
import decimal
import io
import json
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from unittest import mock

import orjson
from hypothesis import strategies as st

from spoolparse._decode.jsonout import dumps
from spoolparse._limits import READ_CHUNK
from spoolparse.lines import KEEP, Dropped, Event, LineScanner, Noted, Record, iter_lines
from spoolparse.parser import StreamParser, parse
from spoolparse.providers import FALLBACK, PROVIDERS, make_provider
from spoolparse.providers.base import KINDS, LiveEvent

MAX_LINE = 256
MAX_RETAINED = 512

_LEAD = b" \t\r\n\x1e"
_BOM = b"\xef\xbb\xbf"


def provider_names() -> list[str]:
    """Every provider a caller can name (registered ones, then the fallback), read at call time."""
    return [*PROVIDERS, FALLBACK.name]


def type_keys() -> list[str]:
    """Every type key some registered provider knows."""
    keys: set[str] = set()
    for cls in PROVIDERS.values():
        keys |= cls.keep | cls.note | cls.known
    return sorted(keys)


def provider_keys(name: str) -> list[str]:
    """The type keys a provider keeps (twice, to draw them more often) or notes; every known key for one that
    keeps everything."""
    cls = PROVIDERS.get(name)
    if cls is None or not (cls.keep or cls.note):
        return type_keys()
    return [*sorted(cls.keep), *sorted(cls.keep), *sorted(cls.note - cls.keep)]


# -- the reference parser ------------------------------------------------------


def ref_lines(data: bytes) -> list[bytes]:
    """Split on b"\\n"; a last piece without a newline is a line when it is not empty."""
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    return parts


def _fix_surrogates(value: Any) -> Any:
    """Lone surrogates (legal ``\\udXXX`` escapes, not text) read as U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_fix_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_fix_surrogates(k): _fix_surrogates(v) for k, v in value.items()}
    return value


def _exact_int(text: str) -> int:
    return int(decimal.Decimal(text))


class _Dupes:
    """An ``object_pairs_hook`` that notes whether any object repeats a key."""

    def __init__(self) -> None:
        self.seen = False

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        self.seen = self.seen or len(obj) != len(pairs)
        return obj


def ref_loads(line: bytes) -> tuple[dict[str, Any] | None, bool]:
    """The object on a line (or ``None``) and whether it repeats a key.

    JSON whitespace, RS and a BOM around the object are allowed; bad UTF-8
    reads as U+FFFD. A repeated key makes the line ambiguous: the scanner's
    type probe takes the first ``"type"``, a decoder the last.
    """
    data = line.strip(_LEAD)
    if data.startswith(_BOM):
        data = data[3:].strip(_LEAD)
    dupes = _Dupes()
    try:
        # NaN and the infinities are read as floats, integers exactly whatever their size
        obj = json.loads(data.decode("utf-8", "replace"), parse_int=_exact_int, object_pairs_hook=dupes)
    except (ValueError, RecursionError):
        return None, False
    return (_fix_surrogates(obj), dupes.seen) if isinstance(obj, dict) else (None, False)


def ref_key(obj: dict[str, Any]) -> str:
    """The type key as ``spoolparse/lines.py`` documents it."""
    t = obj.get("type")
    if isinstance(t, str):
        if t.startswith("item."):
            item = obj.get("item")
            if isinstance(item, dict):
                sub = item.get("type")
                if not isinstance(sub, str):
                    sub = item.get("item_type")
                if isinstance(sub, str):
                    return f"{t}/{sub}"
        return t
    msg = obj.get("msg")
    if isinstance(msg, dict) and isinstance(msg.get("type"), str):
        return "msg/" + msg["type"]
    return ""


@dataclass(frozen=True)
class RefLine:
    lineno: int
    size: int
    key: str | None  # None: not a JSON object
    data: dict[str, Any] | None
    ambiguous: bool = False  # an object repeats a key: any reading of its type is acceptable


def reference(data: bytes) -> list[RefLine]:
    out = []
    for i, line in enumerate(ref_lines(data), 1):
        obj, ambiguous = ref_loads(line)
        out.append(RefLine(i, len(line), None if obj is None else ref_key(obj), obj, ambiguous))
    return out


def retained_events(ref: Sequence[RefLine], retain: Callable[[str], int]) -> list[tuple[int, str, Any, int]]:
    return [(r.lineno, r.key, r.data, r.size) for r in ref
            if r.key is not None and not r.ambiguous and retain(r.key) == KEEP]


# -- strategies ------------------------------------------------------------------

_surrogate = st.integers(0xD800, 0xDFFF).map(chr)
texts = st.one_of(
    st.text(max_size=16),
    st.lists(st.one_of(st.characters(), _surrogate), max_size=6).map("".join),
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)
json_values = st.recursive(
    _scalars, lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(texts, c, max_size=3)), max_leaves=4
)
_FIELDS = (
    "text", "result", "message", "content", "response", "usage", "model", "session_id", "sessionID",
    "thread_id", "error", "is_error", "subtype", "delta", "part", "role", "status", "stats", "timestamp",
    "msg.type", "item.type", "item.item_type",  # dotted keys: ijson's paths join keys with dots
)
_STRUCTURAL = {"type", "item", "msg", "id", "item_type"}
usage_values = st.dictionaries(
    st.sampled_from(["input_tokens", "output_tokens", "cached_input_tokens", "total_tokens", "prompt", "x"]),
    st.one_of(st.integers(0, 2**40), st.floats(allow_nan=False, allow_infinity=False), texts),
    max_size=4,
)
fields = st.dictionaries(
    st.one_of(st.sampled_from(_FIELDS), texts).filter(lambda k: k not in _STRUCTURAL),
    st.one_of(json_values, usage_values),
    max_size=3,
)


@st.composite
def event_objects(draw: st.DrawFn, keys: Sequence[str] | None = None) -> dict[str, Any]:
    """A JSON object whose type key is one a provider knows (or a random one, or none)."""
    known = list(keys if keys is not None else type_keys())
    key = draw(st.sampled_from([*known, "", None, None]))  # None: a type no provider knows
    if key is None:
        key = draw(st.text(max_size=12))
    extra = draw(fields)
    inner = draw(fields)
    obj: dict[str, Any]
    if key == "":
        obj = dict(extra)
        if draw(st.booleans()):
            obj["type"] = draw(_scalars.filter(lambda v: not isinstance(v, str)))
    elif key.startswith("msg/"):
        obj = {"id": draw(st.text(max_size=4)), "msg": {"type": key[4:], **inner}, **extra}
    elif "/" in key and key.startswith("item."):
        top, sub = key.split("/", 1)
        sub_key = draw(st.sampled_from(["type", "item_type"]))
        item = {"id": "item_" + draw(st.text("0123456789", max_size=3)), sub_key: sub}
        obj = {"type": top, "item": {**item, **inner}, **extra}
    else:
        obj = {"type": key, **extra}
    if draw(st.integers(0, 3)) == 0:  # most real CLIs write "type" first; some do not
        order = draw(st.permutations(list(obj)))
        obj = {k: obj[k] for k in order}
    return obj


@st.composite
def event_lines(draw: st.DrawFn, keys: Sequence[str] | None = None) -> bytes:
    """One event serialized some way a JSON printer might, with the framing the scanner tolerates."""
    obj = draw(event_objects(keys))
    sep = draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    body = json.dumps(obj, separators=sep, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    lead = draw(st.sampled_from([b"", b"", b"", b" ", b"\t", _BOM, b"\x1e", b" " + _BOM, b"\r"]))
    trail = draw(st.sampled_from([b"", b"", b"", b"\r", b" ", b"\t\r", b"\x1e"]))
    return lead + body + trail


@st.composite
def sized_lines(draw: st.DrawFn, target: int, keys: Sequence[str] | None = None) -> bytes:
    """An event line padded to about ``target`` bytes (the type stays at the front)."""
    obj = draw(event_objects(keys))
    head = {k: obj[k] for k in ("type", "id", "item", "msg") if k in obj}
    body = json.dumps({**head, "pad": ""}, separators=(",", ":"), ensure_ascii=True).encode()
    fill = max(0, target - len(body))
    return json.dumps({**head, "pad": "y" * fill}, separators=(",", ":"), ensure_ascii=True).encode()


def near_cap_lines(keys: Sequence[str] | None = None) -> st.SearchStrategy[bytes]:
    return st.integers(MAX_LINE - 6, MAX_LINE + 6).flatmap(lambda n: sized_lines(n, keys))


def over_cap_lines(keys: Sequence[str] | None = None) -> st.SearchStrategy[bytes]:
    sizes = st.one_of(
        st.integers(MAX_LINE + 1, MAX_RETAINED + 8),
        st.integers(MAX_RETAINED - 4, MAX_RETAINED + 4),
        st.integers(2 * MAX_RETAINED, 4 * MAX_RETAINED),
    )
    return sizes.flatmap(lambda n: sized_lines(n, keys))


noise_lines = st.one_of(
    st.binary(max_size=48),
    st.binary(max_size=16).map(lambda b: b"\xff\xfe" + b + b"\x80"),
    st.binary(max_size=8).map(lambda b: b"{\x00" + b),
    st.just(b""),
    st.sampled_from([b"[SandboxDebug] not json", b"[1,2]", b'"str"', b"42", b"null", b"{", b"}", b'{"type":']),
    json_values.map(lambda v: json.dumps(v).encode("utf-8", "surrogatepass")),
)


def _truncated(line: bytes, cut: int) -> bytes:
    return line[: max(0, min(cut, len(line) - 1))]


@st.composite
def streams(draw: st.DrawFn, *, oversize: bool = True, keys: Sequence[str] | None = None) -> bytes:
    """A stdout stream: events, noise, near-cap lines (and, if ``oversize``, over-cap ones), any line endings."""
    events = event_lines(keys)
    kinds = [events, events, events, noise_lines, near_cap_lines(keys)]
    kinds.append(st.tuples(event_lines(keys), st.integers(0, 64)).map(lambda t: _truncated(*t)))
    if oversize:
        kinds.append(over_cap_lines(keys))
    lines = draw(st.lists(st.one_of(*kinds), max_size=12))
    if not oversize:
        lines = [ln.replace(b"\n", b" ") for ln in lines if len(ln) <= MAX_LINE]
    endings = st.sampled_from([b"\n", b"\n", b"\n", b"\r\n", b"\r", b"\n\n"])
    ends = draw(st.lists(endings, min_size=len(lines), max_size=len(lines)))
    data = b"".join(ln + end for ln, end in zip(lines, ends, strict=True))
    if draw(st.booleans()) and data.endswith(b"\n"):
        data = data.rstrip(b"\r\n")  # no final newline
    if not oversize:  # a bare CR or a CRLF ending may have made a line long: leave such lines out
        tail = b"" if data.endswith(b"\n") else None
        kept = [ln for ln in ref_lines(data) if len(ln) <= MAX_LINE]
        data = b"\n".join(kept) + (b"\n" if kept and tail is not None else b"")
    return data


def chunkings(data: bytes) -> st.SearchStrategy[list[int]]:
    """Cut points splitting ``data`` into write chunks (sorted, inside the stream)."""
    n = len(data)
    if n < 2:
        return st.just([])
    return st.one_of(
        st.lists(st.integers(1, n - 1), max_size=12).map(lambda c: sorted(set(c))),
        st.integers(1, 64).map(lambda k: list(range(k, n, k))),
    )


def split(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    out, prev = [], 0
    for c in cuts:
        out.append(data[prev:c])
        prev = c
    out.append(data[prev:])
    return out


# -- the invariants --------------------------------------------------------------


class RecordingFile:
    """A binary file-like object (no ``fileno``) that records how much each read asks for."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0
        self.sizes: list[int] = []

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        raise io.UnsupportedOperation("fileno")  # as io.BytesIO: no mmap, reads only

    def read(self, n: int = -1) -> bytes:
        self.sizes.append(n)
        end = len(self._data) if n is None or n < 0 else self._pos + n
        out = self._data[self._pos : end]
        self._pos += len(out)
        return out

    def readinto(self, buf: Any) -> int:
        view = memoryview(buf).cast("B")
        self.sizes.append(len(view))
        out = self._data[self._pos : self._pos + len(view)]
        view[: len(out)] = out
        self._pos += len(out)
        return len(out)

    def close(self) -> None:
        pass


def check_scanner_state(scanner: LineScanner) -> None:
    """Between feeds the scanner holds at most a probe window or one retained line under the ceiling."""
    pend = scanner.held
    assert pend <= max(scanner.max_retained, scanner.probe_bytes), (pend, scanner.max_retained)


def check_records(recs: Sequence[Record], ref: Sequence[RefLine], retain: Callable[[str], int], max_line: int,
                  max_retained: int, fed: Callable[[RefLine], bool] | None = None) -> None:
    """Each line up to ``max_line`` gives exactly the reference's retained event; none exceeds the ceiling.

    ``fed``: which of the retained reference lines the records are expected to hold (default: all).
    """
    by_line = {r.lineno: r for r in ref}
    events = [r for r in recs if isinstance(r, Event)]
    for ev in events:
        assert ev.size <= max_retained, ev
        line = by_line[ev.lineno]
        if line.ambiguous:
            assert ev.data == line.data and ev.size == line.size
            continue
        assert (ev.lineno, ev.type, ev.data, ev.size) == (line.lineno, line.key, line.data, line.size)
    for d in recs:
        if isinstance(d, Dropped) and d.reason == "invalid":
            # a line whose type is retained (the untyped "" too) but that is no JSON object: reported, so that an
            # answer it was is known lost
            assert retain(d.type) == KEEP and by_line[d.line].key is None, d
            assert by_line[d.line].size == d.bytes
        elif isinstance(d, Dropped):
            assert d.bytes > max_line and d.reason in ("oversize", "over_ceiling"), d
            assert by_line[d.line].size == d.bytes
        elif isinstance(d, Noted):
            assert d.size <= max_line and by_line[d.lineno].size == d.size
    short = [r for r in ref if r.size <= max_line and (fed is None or fed(r))]
    got = [(e.lineno, e.type, e.data, e.size) for e in events
           if by_line[e.lineno].size <= max_line and not by_line[e.lineno].ambiguous]
    assert got == retained_events(short, retain)
    linenos = [getattr(r, "lineno", None) or getattr(r, "line", 0) for r in recs]
    assert linenos == sorted(linenos)


def scan(chunks: Sequence[bytes], retain: Callable[[str], int] | None, *, max_line: int = MAX_LINE,
         max_retained: int = MAX_RETAINED, offset: bool = False,
         retained: frozenset[str] | None = None) -> tuple[list[Record], LineScanner]:
    scanner = LineScanner(retain, max_line=max_line, max_retained=max_retained)
    scanner.retained = retained
    recs: list[Record] = []
    for chunk in chunks:
        if offset:  # the window API: feed(buf, start, end) must not look outside it
            buf = bytearray(b"\n{x" + chunk + b'"\n')
            recs.extend(scanner.feed(buf, 3, 3 + len(chunk)))
        else:
            recs.extend(scanner.feed(chunk))
        check_scanner_state(scanner)
    recs.extend(scanner.end())
    check_scanner_state(scanner)
    assert scanner.bytes == sum(len(c) for c in chunks)
    return recs, scanner


def check_scanner(data: bytes, cuts: Sequence[int], name: str, *, max_line: int = MAX_LINE,
                  max_retained: int = MAX_RETAINED, offset: bool = False) -> None:
    retain = make_provider(name).retain
    recs, scanner = scan(split(data, cuts), retain, max_line=max_line, max_retained=max_retained, offset=offset)
    ref = reference(data)
    assert scanner.lines == len(ref)
    check_records(recs, ref, retain, max_line, max_retained)


def check_reader(data: bytes, read_size: int, name: str, *, max_line: int = MAX_LINE,
                 max_retained: int = MAX_RETAINED) -> None:
    f = RecordingFile(data)
    retain = make_provider(name).retain
    reader = iter_lines(f, max_line=max_line, max_retained=max_retained, read_size=read_size)  # type: ignore[arg-type]
    reader.scanner.retain = retain
    recs = list(reader)
    assert f.sizes and all(0 < s <= max_line for s in f.sizes), f.sizes
    check_records(recs, reference(data), retain, max_line, max_retained)


def _json_safe(obj: Any) -> None:
    orjson.loads(dumps(obj))


def check_parser(data: bytes, cuts: Sequence[int], name: str, *, max_line: int = MAX_LINE,
                 max_retained: int = MAX_RETAINED) -> None:
    """A provider (or ``auto``) over the stream: no exception, every live event and the summary print as JSON,
    and a named provider is handed exactly the reference's retained events."""
    sp = StreamParser(name, max_line=max_line, max_retained=max_retained)
    seen: list[Event] = []
    provider = sp.provider
    if name != "auto":
        fold = provider.event

        def record(ev: Event) -> list[LiveEvent]:
            seen.append(ev)
            return fold(ev)

        provider.event = record  # type: ignore[method-assign]
    live: list[LiveEvent] = []
    for chunk in split(data, cuts):
        live.extend(sp.feed(chunk))
        check_scanner_state(sp.scanner)
    live.extend(sp.close())
    res = sp.finish(args=None)
    for ev in live:
        assert isinstance(ev, LiveEvent) and ev.kind in KINDS, ev
        _json_safe(ev.as_dict())
    _json_safe(res.summary())
    if sp.document is not None:
        return  # one JSON document, not lines: the document scanner's own tests judge its records
    assert res.lines == len(ref_lines(data))
    if name != "auto":
        ref = reference(data)
        check_records(seen, ref, make_provider(name).retain, max_line, max_retained, fed=_fed(ref, name))


def _fed(ref: Sequence[RefLine], name: str) -> Callable[[RefLine], bool]:
    """Which retained lines the engine hands a named provider: all its typed ones, and the untyped ones its grammar
    explains — its whole-document form only when it is the input's one JSON object."""
    cls = PROVIDERS.get(name)
    g = cls.grammar if cls is not None else None
    objects = sum(1 for r in ref if r.key is not None)

    def fed(r: RefLine) -> bool:
        if g is None or r.key != "" or r.data is None:
            return True
        if g.document is not None:
            return objects == 1 and g.document.fits("", r.data)
        return g.explains("", r.data) is not None

    return fed


def check_parse_file(data: bytes, name: str, *, max_line: int = MAX_LINE, max_retained: int = MAX_RETAINED) -> None:
    """``parse`` reads in bounded windows and agrees with a :class:`StreamParser` fed the same bytes."""
    f = RecordingFile(data)
    res = parse(f, provider=name, max_line=max_line, max_retained=max_retained)  # type: ignore[arg-type]
    assert f.sizes and all(0 < s <= READ_CHUNK for s in f.sizes), f.sizes[:5]
    sp = StreamParser(name, max_line=max_line, max_retained=max_retained)
    sp.feed(data)
    want = sp.finish(args=None).summary()
    got = res.summary()
    for key in ("duration_s", "stdout_bytes"):
        got.pop(key)
        want.pop(key)
    assert got == want


@contextlib.contextmanager
def whole_windows(whole: bool) -> Iterator[None]:
    """Every window scanned whole (once the keys read are known), however short its lines or itself; or (``False``)
    every window line by line."""
    from spoolparse._decode import window as _window

    with mock.patch.object(_window, "LINE_BYTES", float("inf") if whole else 0), \
            mock.patch.object(_window, "MIN_WINDOW", 0):
        yield


def read_keys(name: str, listening: bool, max_retained: int = MAX_RETAINED) -> tuple[Callable[[str], int],
                                                                                    frozenset[str] | None]:
    """The retain function a :class:`StreamParser` hands its scanner for ``name`` once the provider is known, and the
    keys it does not skip (``None`` when they are not known: detection, the generic provider)."""
    sp = StreamParser(name, live=listening, max_line=MAX_LINE, max_retained=max_retained)
    return sp.scanner.retain, sp.scanner.retained


def check_window(data: bytes, cuts: Sequence[int], name: str, *, listening: bool = True,
                 max_retained: int = MAX_RETAINED, offset: bool = False) -> None:
    """Whole-window scanning gives exactly what the line-by-line path gives, for the keys ``name``'s grammar reads:
    the same records (line numbers, keys, objects, sizes, noted ends, drop reasons) and the same counters."""
    retain, keys = read_keys(name, listening, max_retained)
    if keys is not None:
        compare_paths(data, cuts, retain, keys, max_retained=max_retained, offset=offset)


def compare_paths(data: bytes, cuts: Sequence[int], retain: Callable[[str], int], keys: frozenset[str], *,
                  max_retained: int = MAX_RETAINED, offset: bool = False) -> None:
    """The window path (``keys``: those ``retain`` does not skip) against the line-by-line path: the same records
    and counters."""
    chunks = split(data, cuts)
    want, ref = scan(chunks, retain, max_retained=max_retained, offset=offset)
    with whole_windows(True):
        got, win = scan(chunks, retain, max_retained=max_retained, offset=offset, retained=keys)
    assert repr(got) == repr(want)  # repr: a NaN is not equal to itself
    for counter in ("lines", "blank_lines", "invalid_lines", "too_deep", "bytes"):
        assert getattr(win, counter) == getattr(ref, counter), counter


# -- the fuzz target ---------------------------------------------------------------


def fuzz_one(blob: bytes) -> None:
    """Every invariant on one input: byte 0 picks the provider and caps, byte 1 the chunking, the rest is the stream."""
    if len(blob) < 2:
        blob = blob + b"\x00\x00"
    names = [*provider_names(), "auto"]
    name = names[blob[0] % len(names)]
    max_retained = MAX_RETAINED if blob[0] & 0x80 else MAX_LINE
    data = blob[2:]
    rng = random.Random(blob[1])
    step = 1 + blob[1] % 97
    cuts = list(range(step, len(data), step)) if blob[1] & 1 else sorted(rng.sample(range(1, max(2, len(data))),
                                                                                    min(8, max(0, len(data) - 1))))
    cuts = [c for c in cuts if 0 < c < len(data)]
    if name != "auto":
        check_scanner(data, cuts, name, max_retained=max_retained, offset=bool(blob[1] & 2))
        check_reader(data, 1 + blob[1] * 3, name, max_retained=max_retained)
        check_window(data, cuts, name, listening=bool(blob[1] & 4), max_retained=max_retained,
                     offset=bool(blob[1] & 2))
    check_parser(data, cuts, name, max_retained=max_retained)
