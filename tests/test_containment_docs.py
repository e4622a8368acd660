"""The containment guide and the lifecycle page say what the code does: their generated blocks follow it."""

from __future__ import annotations

import re

from spoolparse.runner.cgroup import WHY_V1, Placement, uncontained_note

from .helpers import ROOT

GUIDE = ROOT / "docs" / "guides" / "containment.md"


def uncontained_warning() -> str:
    """The ``uncontained-warning`` block: what ``batch`` prints as a user with no cgroup v1 of her own."""
    where = Placement(None, why=WHY_V1.format("/sys/fs/cgroup/memory/user.slice"))
    return f"```text\nspoolparse: warning: {uncontained_note(where)}\n```"


def _block(text: str, name: str) -> str:
    m = re.search(rf"<!-- generated: {name} -->\n(.*?)\n<!-- end: {name} -->", text, re.S)
    assert m is not None, f"no generated block {name!r}"
    return m.group(1)


def test_the_guides_warning_is_the_one_batch_prints() -> None:
    want = uncontained_warning()
    got = _block(GUIDE.read_text(), "uncontained-warning")
    assert got == want, f"docs/guides/containment.md is stale: put this between the markers:\n{want}"


def test_the_guide_names_every_enforcement() -> None:
    from spoolparse.runner.cgroup import ENFORCEMENTS

    text = GUIDE.read_text()
    assert all(f"| `{name}` |" in text for name in ENFORCEMENTS)
