"""A provider's run state is declared once: a fresh instance and a restarted one are the same, for every provider."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from spoolparse import StreamParser
from spoolparse.providers import PROVIDERS
from spoolparse.providers._text import BoundedText
from spoolparse.providers.base import Provider, fresh

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def snapshot(value: Any) -> Any:
    """A value's state as plain data, objects by their attributes (slotted or not)."""
    if value is None or isinstance(value, (str, int, float, bytes)):
        return value
    if isinstance(value, dict):
        return {k: snapshot(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [snapshot(v) for v in value]
    names = [n for c in type(value).__mro__ for n in getattr(c, "__slots__", ())]
    fields = dict(getattr(value, "__dict__", {}))
    fields.update({n: getattr(value, n) for n in names if hasattr(value, n)})
    return type(value).__name__, {k: snapshot(v) for k, v in sorted(fields.items())}


def streams(name: str) -> list[Path]:
    return sorted((FIXTURES / name).glob("*.jsonl")) if (FIXTURES / name).is_dir() else []


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_a_restarted_provider_is_a_fresh_one(name: str) -> None:
    paths = streams(name)
    assert paths, f"every provider has fixture streams: fixtures/{name}/*.jsonl"
    folded = 0
    for path in paths:
        prov = PROVIDERS[name]()
        StreamParser(prov, max_line=1 << 20, max_retained=1 << 20, tool_output=80).feed(path.read_bytes())
        before = snapshot(vars(prov))
        prov.restart()
        after = snapshot(vars(prov))
        blank = PROVIDERS[name]()
        blank.max_text, blank.tool_output, blank.live, blank.trap_clis = (
            prov.max_text, prov.tool_output, prov.live, prov.trap_clis)
        assert after == snapshot(vars(blank)), path.name
        folded += before != after
    assert folded, f"no fixture of {name} changed its provider's state: the test would prove nothing"


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_every_field_a_provider_sets_is_declared(name: str) -> None:
    """A field set while folding but never declared would survive a restart (and be shared by no instance)."""
    fresh_names = set(vars(PROVIDERS[name]()))
    for path in streams(name):
        prov = PROVIDERS[name]()
        StreamParser(prov, tool_output=80).feed(path.read_bytes())
        assert set(vars(prov)) <= fresh_names, (path.name, set(vars(prov)) - fresh_names)


def test_a_mutable_start_value_must_be_fresh() -> None:
    with pytest.raises(TypeError, match=r"Mine\.seen: a start value that can change must be made anew"):
        class Mine(Provider):
            seen: list[str] = []  # noqa: RUF012  # the mistake under test
    with pytest.raises(TypeError, match=r"Other\.text: a start value that can change"):
        class Other(Provider):
            text: BoundedText = BoundedText()  # hashable, and one buffer for every run all the same


def test_fresh_values_are_each_instance_own_and_class_vars_are_not_state() -> None:
    class Mine(Provider):
        limit: ClassVar[int] = 3
        seen: list[str] = fresh(list)
        count: int = 0

    a, b = Mine(), Mine()
    a.seen.append("x")
    a.count = 2
    assert (b.seen, b.count) == ([], 0)
    assert "limit" not in vars(a) and "seen" not in vars(Mine)
    a.restart()
    assert (a.seen, a.count) == ([], 0)


def test_state_declared_by_every_base_and_mixin_is_each_instances() -> None:
    from spoolparse.providers.codex import CodexProvider
    from spoolparse.providers.droid import DroidProvider

    class Mixin:
        seen: list[str] = fresh(list)

    class Both(Mixin, CodexProvider, DroidProvider):
        pass

    a, b = Both(), Both()
    a.seen.append("x")
    assert b.seen == [] and "completed" in vars(a) and "plan_text" in vars(a)  # Droid's, Codex's, the mixin's
    a.completed = True
    a.restart()
    assert (a.completed, a.seen) == (False, [])
