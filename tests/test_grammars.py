"""The grammars as declared: each provider has one, its examples are its own events, what it says it shares it
shares, and the engine applies what it declares (traps included)."""

from __future__ import annotations

from typing import Any

import pytest

from spoolparse import PROVIDERS
from spoolparse._decode.probe import key_of
from spoolparse.lines import KEEP
from spoolparse.providers import grammars
from spoolparse.providers.engine import AutoProvider
from spoolparse.providers.grammar import Grammar, empty, has, is_, kind, lacks, prefix, shape

DETECTED = [g for g in grammars() if g.detected]
INDEX = AutoProvider().index()  # the registered providers' evidence, each grammar loaded as it is asked


def _examples() -> list[tuple[Grammar, Any]]:
    return [(g, s) for g in grammars() for s in (*g.vocabulary, *([g.document] if g.document else ()))
            if s.example is not None]


def test_every_provider_declares_a_grammar_and_its_types_come_from_it() -> None:
    for name, cls in PROVIDERS.items():
        g = cls.grammar
        assert g is not None and g.name == name, name
        assert cls.keep == g.types(KEEP) and cls.known == g.types(), name
        assert g.terminal, f"{name}: no terminal event"
        assert all(s.example is not None for s in g.vocabulary if s.read != 0 and s.when), name


@pytest.mark.parametrize(("g", "s"), _examples(), ids=lambda x: getattr(x, "name", ""))
def test_each_example_is_its_grammars_event_and_the_sharing_declared_holds(g: Grammar, s: Any) -> None:
    assert s.example is not None
    key = key_of(dict(s.example))  # its type key, as the scanner gives it
    assert key == s.key, (s.name, key)
    assert s.fits(key, s.example), s.name
    if not g.detected:
        return
    claims, owned = INDEX.claims(key, s.example)
    assert g.name in claims, (s.name, claims)
    if s is g.document:
        return
    want = set(s.shared) if s.shared else {g.name}
    assert set(claims) == want, f"{g.name}'s {s.name}: printed by {sorted(claims)}, declared {sorted(want)}"
    if s.own:
        assert owned, f"{g.name}'s {s.name} is declared its own mark, yet another grammar claims it"


def test_a_look_alike_is_told_only_by_its_own_marks() -> None:
    heads = {g.name: g.family for g in DETECTED if g.family}
    assert heads == {"qwen": "claude", "amp": "claude", "cursor": "claude"}
    for name in heads:
        g = INDEX.grammar(name)
        own = [s for s in g.vocabulary if s.own]
        assert own, name  # without a mark of its own it could never be chosen
        shared = [s for s in g.vocabulary if not s.own]
        assert all(name in s.shared for s in shared), name


@pytest.mark.parametrize("bad", [
    {"vocabulary": (shape("x"), shape("x", read=0))},
    {"vocabulary": (shape("x", read=1),), "terminal": (shape("x"),)},
    {"vocabulary": (shape("x"),), "terminal": (shape("x"),), "final": (shape("x"),)},
    {"vocabulary": (shape("x"),), "document": shape("y")},
])
def test_a_grammar_that_contradicts_itself_is_refused_when_made(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Grammar(name="bad", **bad)


def test_conditions() -> None:
    d = {"a": {"b": "T-1"}, "n": 1, "t": True, "l": [], "s": ""}
    assert has("a.b").test(d) and not has("a.c").test(d) and lacks("z").test(d)
    assert is_("n", 1).test(d) and not is_("t", 1).test(d)  # true is no 1
    assert kind("n", "number").test(d) and not kind("t", "number").test(d) and kind("t", "boolean").test(d)
    assert prefix("a.b", "T-").test(d) and empty("l").test(d) and empty("s").test(d) and empty("zz").test(d)
    assert str(prefix("a.b", "T-")) == "`a.b`: `T-…`"

