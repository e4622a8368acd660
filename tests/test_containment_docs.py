"""The containment guide names every enforcement the code reports (its warning block: docs/generate.py)."""

from __future__ import annotations

from .helpers import ROOT

GUIDE = ROOT / "docs" / "guides" / "containment.md"


def test_the_guide_names_every_enforcement() -> None:
    from spoolparse._os.cgroup import ENFORCEMENTS

    text = GUIDE.read_text()
    assert all(f"| `{name}` |" in text for name in ENFORCEMENTS)
