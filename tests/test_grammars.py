"""The grammars as declared: each provider has one, its examples are its own events, what it says it shares it
shares, and the engine applies what it declares (traps included)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spoolparse import PROVIDERS
from spoolparse._decode.probe import key_of
from spoolparse.lines import KEEP
from spoolparse.providers import grammars
from spoolparse.providers.engine import AutoProvider
from spoolparse.providers.grammar import Cond, Grammar, any_of, empty, has, is_, is_not, kind, lacks, prefix, shape

DETECTED = [g for g in grammars() if g.detected]
INDEX = AutoProvider().index()  # the registered providers' evidence, each grammar loaded as it is asked


def _examples() -> list[tuple[Grammar, Any]]:
    return [(g, s) for g in grammars() for s in (*g.vocabulary, *([g.document] if g.document else ()))
            if s.example is not None]


def test_every_provider_declares_a_grammar_and_its_name_and_types_come_from_it() -> None:
    for name, cls in PROVIDERS.items():
        g = cls.grammar
        assert g is not None and g.name == name, name
        assert cls.name == name and cls().trap_clis == (name,), name
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



_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.floats(allow_nan=False, width=16),
                    st.sampled_from(["", "x", "tool-calls", "T-1"]))
_JSON = st.recursive(_VALUES, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "b", "x"]), inner, max_size=3)), max_leaves=8)
_PATHS = st.sampled_from(["a", "x", "a.b", "a.x", "x.b", "a.b.c"])
_CONDS = st.one_of(
    st.builds(is_, _PATHS, _VALUES), st.builds(is_not, _PATHS, _VALUES),
    st.builds(lambda p, vs: is_(p, *vs), _PATHS, st.lists(_VALUES, min_size=1, max_size=3)),
    st.builds(lambda p, vs: is_not(p, *vs), _PATHS, st.lists(_VALUES, min_size=1, max_size=3)),
    st.builds(has, _PATHS), st.builds(lacks, _PATHS), st.builds(any_of, _PATHS, _PATHS),
    st.builds(prefix, _PATHS, st.sampled_from(["", "T", "T-"])),
)


@given(cond=_CONDS, data=st.dictionaries(st.sampled_from(["a", "b", "x"]), _JSON, max_size=3))
def test_a_condition_made_once_tests_what_the_walk_of_its_paths_tests(cond: Cond, data: dict[str, Any]) -> None:
    """A condition's test is made when it is (a dict lookup for a top-level key or one level down); the general
    walk of its paths is the reference."""
    assert cond.test(data) is cond._test(data), (cond, data)


def test_every_grammars_conditions_test_their_examples_as_the_walk_does() -> None:
    conds = {c for g in grammars() for s in (*g.vocabulary, *g.terminal, *g.starts, *g.turns) for c in s.when}
    examples = [dict(s.example) for _, s in _examples()]
    for c in conds:
        for example in examples:
            assert c.test(example) is c._test(example), (c, example)
