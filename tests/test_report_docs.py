"""The report guide's generated blocks follow the code: the JSON shape, the bounds, the CLIs' price lists.

Regenerate a block that differs: ``python -m tests.test_report_docs`` rewrites them in place.
"""

from __future__ import annotations

import re
import sys
import typing
from pathlib import Path

from spoolparse import cost, types
from spoolparse.report import fold

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guides" / "report.md"

SHAPES = [types.ReportDict, types.ReportSpend, types.ReportFailureGroup, types.ReportTask, types.ReportDistribution,
          types.ReportBin, types.ReportAttempts, types.ReportMemory, types.ReportNote]


def _type_name(t: object) -> str:
    if isinstance(t, type) and not typing.get_args(t):
        return t.__name__
    return re.sub(r"\b(?:spoolparse\.types|builtins)\.", "", str(t)).replace("<class '", "").replace("'>", "")


def json_shape() -> str:
    lines = []
    for shape in SHAPES:
        hints = typing.get_type_hints(shape)
        fields = ", ".join(f"`{k}`: {_type_name(v)}" for k, v in hints.items())
        lines.append(f"- **{shape.__name__}**: {fields}")
    return "\n".join(lines)


_BOUND_TEXT = {
    "groups": "distinct failure causes (later new causes are counted in `other_failures`)",
    "examples": "example tasks per cause",
    "slowest": "slowest tasks listed",
    "highest": "tasks with the largest memory peaks listed",
    "killed_listed": "tasks killed for memory listed (all are counted)",
    "models": "CLI-and-model rows (later new models go to one `(other models)` row of their CLI)",
    "notes": "distinct reasons for an unknown cost (later ones: `(other reasons)`)",
    "table_rows": "rows of the HTML page's task table (every task not ok first, then ok ones)",
}


def bounds() -> str:
    rows = ["| bound | value | what it bounds |", "| --- | ---: | --- |"]
    rows += [f"| `{k}` | {v:,} | {_BOUND_TEXT[k]} |" for k, v in fold.BOUNDS.items()]
    return "\n".join(rows)


def price_lists() -> str:
    rows = ["| CLI | price list tried first |", "| --- | --- |"]
    rows += [f"| {cli} | `{pid}` |" for cli, pid in cost.PROVIDER_IDS.items()]
    return "\n".join(rows)


BLOCKS = {"report-json": json_shape, "report-bounds": bounds, "cost-price-lists": price_lists}


def _block(text: str, name: str) -> re.Match[str] | None:
    return re.search(rf"<!-- generated: {name} -->\n(.*?)<!-- end: {name} -->", text, re.S)


def test_the_generated_blocks_follow_the_code() -> None:
    text = GUIDE.read_text()
    assert set(fold.BOUNDS) == set(_BOUND_TEXT)
    for name, make in BLOCKS.items():
        m = _block(text, name)
        assert m is not None, f"no generated block {name!r} in {GUIDE}"
        assert m.group(1) == make() + "\n", f"{name} differs from the code: run python -m tests.test_report_docs"


def main() -> int:
    text = GUIDE.read_text()
    for name, make in BLOCKS.items():
        m = _block(text, name)
        if m is None:
            print(f"no block {name}", file=sys.stderr)
            return 1
        text = text[: m.start(1)] + make() + "\n" + text[m.end(1):]
    GUIDE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
