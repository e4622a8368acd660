"""One child's options in one typed value: :class:`ChildOptions`, which run, arun, open_run, parse, Child and a
batch's options all build or hold, instead of each a copy of the keyword list."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import sys
from pathlib import Path
from typing import Any

import pytest

import spoolparse
from spoolparse import BatchOptions, ChildOptions, UsageError
from spoolparse.child import Child
from spoolparse.options import ChildKeywords

ANSWER = [sys.executable, "-c", "print('{\"type\": \"result\", \"result\": \"hi\"}')"]
NAMES = {f.name for f in dataclasses.fields(ChildOptions)}


def test_the_child_option_list_is_written_once() -> None:
    assert set(ChildKeywords.__annotations__) == NAMES  # the keyword form: the same names, nothing more or less
    for fn in (spoolparse.run, spoolparse.arun, spoolparse.open_run, Child.__init__):
        params = inspect.signature(fn).parameters
        assert not set(params) & NAMES, fn
        assert "options" in params and any(p.kind is p.VAR_KEYWORD for p in params.values()), fn
    assert {f.name for f in dataclasses.fields(BatchOptions)} >= NAMES  # the per-task default of a batch


def test_child_options_are_one_frozen_validated_value() -> None:
    o = ChildOptions()
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.timeout = 3  # type: ignore[misc]
    assert o.replace() is o and o.replace(timeout=2.0).timeout == 2.0
    d = ChildOptions(timeout=9.0, grace=1.0, soft_timeout=3.0, soft_signal=10).deadlines
    assert (d.timeout, d.grace, d.soft_timeout, d.soft_signal) == (9.0, 1.0, 3.0, 10)
    with pytest.raises(TypeError, match="tiemout"):
        ChildOptions.of(None, {"tiemout": 1}, caller="run")


BAD: list[dict[str, Any]] = [
    {"provider": "nope"}, {"provider": 3}, {"max_line": 0}, {"max_line": 2.5}, {"max_line": True},
    {"max_retained": 10, "max_line": 20}, {"max_spool_bytes": 0}, {"max_spool_bytes": -1}, {"tool_output": -1},
    {"timeout": float("nan")}, {"timeout": -1.0}, {"soft_timeout": -2.0}, {"grace": float("inf")}, {"grace": -1.0},
    {"allow_empty_answer": "yes"}, {"shell": 1}, {"containment": "always"},
]


@pytest.mark.parametrize("kwargs", BAD, ids=[",".join(k) for k in BAD])
def test_bad_values_are_refused_when_made_by_every_caller(kwargs: dict[str, Any], tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    touch = ["touch", str(marker)]
    with pytest.raises(UsageError):
        ChildOptions(**kwargs)
    with pytest.raises(UsageError):
        BatchOptions(**kwargs)
    with pytest.raises(UsageError):
        spoolparse.run(touch, **kwargs)
    with pytest.raises(UsageError):
        asyncio.run(spoolparse.arun(touch, **kwargs))
    with pytest.raises(UsageError):
        spoolparse.open_run(touch, **kwargs)
    with pytest.raises(UsageError):
        Child(touch, **kwargs)
    assert not marker.exists()


def test_keywords_override_a_given_options_value() -> None:
    base = ChildOptions(provider="codex", timeout=30.0)
    with spoolparse.run(ANSWER, base, provider="claude") as r:
        assert r.provider == "claude" and r.detected_by == "--provider"
    with spoolparse.run(ANSWER, base.replace(provider="auto")) as r:
        assert r.ok and r.text == "hi"
    with pytest.raises(TypeError, match="options must be a ChildOptions"):
        spoolparse.run(ANSWER, {"timeout": 1})  # type: ignore[arg-type]


def test_parse_checks_its_bounds_as_every_caller_does(tmp_path: Path) -> None:
    t = tmp_path / "t.jsonl"
    t.write_text('{"type": "result", "result": "hi"}\n')
    assert spoolparse.parse(t).text == "hi"
    with pytest.raises(UsageError, match=r"max_retained \(10\) must be at least max_line \(20\)"):
        spoolparse.parse(t, max_line=20, max_retained=10)
