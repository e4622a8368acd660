"""The seam matrix: every fixture of every provider, varied where streams meet, read as its grammar says.

For each fixture (``fixtures/<cli>/`` and the published samples) and each variation — as is; without its
first line; with its init cut to the fields its look-alikes share; with a look-alike's init in front; with a
non-JSON banner, a byte order mark, stray untyped lines; after another complete run of the same CLI; cut at
every event boundary; each line's keys reversed, and each line made undecodable — the verdict is its own
CLI's (or its family's head's, with the same ``ok`` and answer), or ``generic`` with a warning, never another
provider's; a cut run is not ok, and a lost answer is not ok. Then a property: a random valid sequence of one
grammar's events reads the same auto-detected as named.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spoolparse import PROVIDERS, Result, StreamParser
from spoolparse._decode.probe import key_of
from spoolparse.providers import grammars
from spoolparse.providers.claude import FAMILY
from spoolparse.providers.grammar import Grammar, first_fit

from .helpers import FIXTURES, jl

SAMPLES = FIXTURES / "published" / "samples"
GRAMMARS = {g.name: g for g in grammars()}
#: The provider auto-detection reads a CLI's stream as: its own, or the one whose stream it prints unchanged.
READ_AS = {"kilo": "opencode"}
#: The fields a Claude-shaped init shares with its look-alikes' (and Droid's).
SHARED_INIT = frozenset(FAMILY[0].example or ()) | {"event", "init", "data", "thread_id"}


@dataclass(frozen=True)
class Fixture:
    path: Path
    cli: str

    @property
    def id(self) -> str:
        return str(self.path.relative_to(FIXTURES))

    @property
    def data(self) -> bytes:
        return self.path.read_bytes()

    @property
    def document(self) -> bool:
        """A pretty-printed document (an array or an object spread over lines), not JSON lines."""
        head = self.data.lstrip()
        return head.startswith(b"[") or head.startswith(b"{\n")


def _fixtures() -> list[Fixture]:
    out = [Fixture(p, p.parent.name) for p in sorted(FIXTURES.glob("*/*")) if p.suffix in (".json", ".jsonl")]
    out += [Fixture(p, p.parent.name) for p in sorted(SAMPLES.glob("*/*"))
            if p.name != "stream_stats_multi_model_example.json"]  # a stats value, no stream
    assert {f.cli for f in out} >= set(PROVIDERS) - {"codex"}
    return out


FIXTURE_LIST = _fixtures()
LINE_FIXTURES = [f for f in FIXTURE_LIST if not f.document]


def read(data: bytes, provider: str = "auto") -> Result:
    sp = StreamParser(provider)
    sp.feed(data)
    return sp.finish(args=None)


def family(name: str) -> set[str]:
    head = GRAMMARS[name].family or name
    return {g.name for g in GRAMMARS.values() if g.detected and (g.family or g.name) == head}


def objects(data: bytes) -> Iterator[tuple[int, dict[str, Any] | None, bytes]]:
    """Each line: its index, its object (``None``: not a JSON object), its bytes."""
    for i, line in enumerate(data.splitlines(keepends=True)):
        try:
            obj = json.loads(line)
        except ValueError:
            obj = None
        yield i, obj if isinstance(obj, dict) else None, line


def check(data: bytes, cli: str, *, unfinished: bool = False, lost: bool = False) -> Result:
    """The seam's verdict: the CLI's own (or its family head's, agreeing on ok and answer), or generic said so."""
    auto, named = read(data), read(data, cli)
    expected = READ_AS.get(cli, cli)
    if auto.provider == "generic":
        warned = any(w.startswith("auto-detection") for w in auto.warnings)
        assert warned or not auto.ok, f"generic, ok, without a word: {auto.summary()}"
    else:
        assert auto.provider in family(expected), f"another provider's verdict: {auto.provider} for {cli}"
        assert (auto.ok, auto.text) == (named.ok, named.text), (auto.summary(), named.summary())
        if auto.provider == expected:
            assert auto.error == named.error, (auto.error, named.error)
    if unfinished or lost:
        assert not auto.ok and not named.ok, (auto.summary(), named.summary())
    return auto


def same(variant: bytes, base: bytes, cli: str) -> None:
    """The variation changes nothing the verdict rests on (lines moved by it are named by their new numbers)."""
    got, want = check(variant, cli), read(base)
    lines = re.compile(r"line \d+")
    assert (got.provider, got.ok, got.text) == (want.provider, want.ok, want.text)
    assert lines.sub("line N", got.error or "") == lines.sub("line N", want.error or ""), (got.error, want.error)


# -- as is, and its first line ---------------------------------------------------------------------------


@pytest.mark.parametrize("f", FIXTURE_LIST, ids=lambda f: f.id)
def test_as_is(f: Fixture) -> None:
    auto = check(f.data, f.cli)
    assert auto.provider == READ_AS.get(f.cli, f.cli), auto.summary()
    assert auto.detected_by and auto.detected_by.startswith("line "), auto.detected_by


@pytest.mark.parametrize("f", LINE_FIXTURES, ids=lambda f: f.id)
def test_without_its_first_line(f: Fixture) -> None:
    rest = b"".join(ln for i, obj, ln in objects(f.data) if i > _first_json(f.data))
    check(rest, f.cli)


def _first_json(data: bytes) -> int:
    return next((i for i, obj, _ in objects(data) if obj is not None), -1)


# -- its init: cut down to what look-alikes share, and a look-alike's in front ------------------------------


def _run_start(f: Fixture) -> tuple[int, dict[str, Any]] | None:
    g = GRAMMARS[f.cli]
    for i, obj, _ in objects(f.data):
        if obj is not None:
            return (i, obj) if first_fit(g.starts, key_of(obj), obj) is not None else None
    return None


@pytest.mark.parametrize("f", [f for f in LINE_FIXTURES if _run_start(f)], ids=lambda f: f.id)
def test_with_its_init_reduced_to_the_shared_fields(f: Fixture) -> None:
    found = _run_start(f)
    assert found is not None
    at, init = found
    reduced = {k: v for k, v in init.items() if k in SHARED_INIT}
    lines = [jl(reduced) if i == at else ln for i, _, ln in objects(f.data)]
    check(b"".join(lines), f.cli)


def _look_alikes(cli: str) -> list[str]:
    g = GRAMMARS[cli]
    names = {n for s in g.vocabulary for n in s.shared} - {cli, READ_AS.get(cli, cli)}
    return sorted(n for n in names if GRAMMARS[n].detected)


def _success(name: str) -> Path:
    """A CLI's complete, successful run."""
    path = FIXTURES / name / "success.jsonl"
    return path if path.exists() else FIXTURES / "codex" / "realcli_A.jsonl"


def _their_init(name: str) -> bytes:
    """A look-alike's first event: its init, as its own fixture prints it."""
    return next(ln for _, obj, ln in objects(_success(name).read_bytes()) if obj is not None)


LOOK_ALIKE_CASES = [(f, other) for f in LINE_FIXTURES for other in _look_alikes(f.cli)]


@pytest.mark.parametrize(("f", "other"), LOOK_ALIKE_CASES, ids=lambda x: getattr(x, "id", x))
def test_with_a_look_alikes_init_in_front(f: Fixture, other: str) -> None:
    check(_their_init(other) + f.data, f.cli)


# -- what else a stdout may hold ---------------------------------------------------------------------------


@pytest.mark.parametrize("f", FIXTURE_LIST, ids=lambda f: f.id)
def test_with_a_banner_a_bom_and_stray_untyped_lines(f: Fixture) -> None:
    data = f.data
    same(b"\xef\xbb\xbf" + data, data, f.cli)
    if f.document:
        return  # a document is whole or nothing: lines around it make it none
    same(b"[SandboxDebug] sandbox ready\nLoaded cached credentials.\n" + data, data, f.cli)
    lines = data.splitlines(keepends=True)
    if lines and not lines[-1].endswith(b"\n"):
        lines[-1] += b"\n"
    for stray in (jl({}), jl({"level": "warn", "msg": "slow"})):
        for at in (0, 1, len(lines) // 2, len(lines)):
            same(b"".join([*lines[:at], stray, *lines[at:]]), data, f.cli)


@pytest.mark.parametrize("f", LINE_FIXTURES, ids=lambda f: f.id)
def test_after_another_complete_run_of_the_same_cli(f: Fixture) -> None:
    first = _success(f.cli)
    alone = read(f.data)
    both = check(first.read_bytes() + f.data, f.cli)
    assert (both.ok, both.text) == (alone.ok, alone.text), (both.summary(), alone.summary())


# -- cut at every event boundary, and undecodable lines ---------------------------------------------------------


def _explained(g: Grammar, key: str, obj: dict[str, Any]) -> bool:
    return bool(key) or g.explains(key, obj) is not None


def finished(data: bytes, g: Grammar) -> bool:
    """Whether the stream's last run reached its terminal event, as the grammar declares its runs (a model of
    the engine's reading, from the declarations alone)."""
    ended = final = False
    objs = [(key_of(o), o) for _, o, _ in objects(data) if o is not None]
    objs = [(k, o) for k, o in objs if _explained(g, k, o) and g.read(k) == 2]
    if g.document is not None and len(objs) == 1 and g.document.fits(*objs[0]):
        return True
    for key, obj in objs:
        if key == "" and g.document is not None:
            continue
        if ended and (final or first_fit(g.starts, key, obj) or first_fit(g.turns, key, obj)):
            ended = final = False
        end = first_fit(g.terminal, key, obj)
        if end is not None:
            ended, final = True, end in g.final
    return ended


@pytest.mark.parametrize("f", LINE_FIXTURES, ids=lambda f: f.id)
def test_cut_at_every_event_boundary(f: Fixture) -> None:
    g = GRAMMARS[f.cli]
    lines = f.data.splitlines(keepends=True)
    for k in range(len(lines)):
        prefix = b"".join(lines[:k])
        check(prefix, f.cli, unfinished=not finished(prefix, g))


@pytest.mark.parametrize("f", [f for f in FIXTURE_LIST if f.document], ids=lambda f: f.id)
def test_a_document_cut_short(f: Fixture) -> None:
    check(f.data[: len(f.data) // 2], f.cli, unfinished=True)


def _reversed_line(obj: dict[str, Any], *, bad: bool = False) -> bytes:
    """The object with its keys in reverse order (its type last); ``bad``: a bad escape before them all."""
    body = json.dumps(dict(reversed(list(obj.items()))), separators=(",", ":"), ensure_ascii=False).encode()
    return (b'{"bad":"\\q",' + body[1:] if bad and len(body) > 2 else body) + b"\n"


@pytest.mark.parametrize("f", LINE_FIXTURES, ids=lambda f: f.id)
def test_keys_reversed(f: Fixture) -> None:
    lines = [_reversed_line(obj) if obj is not None else ln for _, obj, ln in objects(f.data)]
    same(b"".join(lines), f.data, f.cli)


@pytest.mark.parametrize("f", LINE_FIXTURES, ids=lambda f: f.id)
def test_each_line_made_undecodable(f: Fixture) -> None:
    """Keys reversed and a bad escape before them: an answer line is lost whatever its key order, so the run is
    not ok; any other line may change the verdict, but never to ok with another answer."""
    g = GRAMMARS[f.cli]
    rows = list(objects(f.data))
    answers = [i for i, obj, _ in rows if obj is not None and key_of(obj) in g.answer_keys
               and key_of(obj)]  # an untyped line made undecodable has no type left to lose by
    last_answer = answers[-1] if answers else -1
    want = read(f.data)
    for i, obj, _ in rows:
        if obj is None:
            continue
        data = b"".join(_reversed_line(o, bad=j == i) if o is not None else ln for j, o, ln in rows)
        got = check(data, f.cli, lost=i == last_answer)
        if got.ok:
            assert got.text == want.text, (i, got.summary(), want.summary())


# -- a grammar's random valid streams: auto-detected as named ------------------------------------------------


def _runs(g: Grammar) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Runs of ``g``'s events: its first start event (its own init where it has one), any of its vocabulary's
    examples, and a terminal event whose example it has; one to three runs."""
    examples = [s.example for s in g.vocabulary if s.example is not None]
    starts = [s.example for s in g.vocabulary if s.example is not None and first_fit(g.starts, s.key, s.example)
              and (s.own or not any(x.own for x in g.vocabulary if x.key == s.key))]
    ends = [s.example for s in g.vocabulary if s.example is not None and first_fit(g.terminal, s.key, s.example)]
    one = st.tuples(st.sampled_from(starts) if starts else st.just(None), st.lists(st.sampled_from(examples),
                    max_size=6), st.sampled_from(ends))
    return st.lists(one, min_size=1, max_size=3).map(
        lambda runs: [e for start, middle, end in runs for e in ([start] if start else []) + middle + [end]])


@pytest.mark.parametrize("name", [n for n, g in GRAMMARS.items()])
@given(data=st.data())
def test_a_random_valid_stream_reads_the_same_auto_detected_as_named(name: str, data: st.DataObject) -> None:
    g = GRAMMARS[name]
    stream = jl(*data.draw(_runs(g), label="events"))
    auto, named = read(stream).summary(), read(stream, name).summary()
    for s in (auto, named):
        s.pop("detected_by")
        s.pop("duration_s")
    assert named.pop("provider") == name
    assert auto.pop("provider") == READ_AS.get(name, name)
    assert auto == named
