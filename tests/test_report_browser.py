"""The HTML report in a real browser: headless Chromium loads the page of a real batch, and its DOM shows
the counts of the outcomes file; hostile ids and errors stay text; the task filter works."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

from .helpers import ROOT
from .report_support import HOSTILE_ID, browse, chromium, sample_batch

CHROMIUM = chromium()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium on PATH (apt-get install chromium)"),
]


class _Dom(HTMLParser):
    """The text of the cells and cards the test reads, and each task row's verdict and visibility."""

    def __init__(self) -> None:
        super().__init__()
        self.title = ""
        self.cards: dict[str, str] = {}
        self.verdicts: dict[str, list[str]] = {}
        self.rows: list[tuple[str, bool]] = []
        self.scripts = 0
        self._stack: list[tuple[str, dict[str, str | None]]] = []
        self._text: list[str] = []
        self._where: tuple[str, str] | None = None
        self._in_tasks = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "script":
            self.scripts += 1
        if tag == "table" and a.get("id") == "task-table":
            self._in_tasks = True
        if tag == "tr" and self._in_tasks and a.get("data-verdict") is not None:
            self.rows.append((str(a["data-verdict"]), "hidden" in a))
        if tag == "tr" and not self._in_tasks and a.get("data-verdict") is not None:
            self._where = ("verdict", str(a["data-verdict"]))
            self.verdicts[str(a["data-verdict"])] = []
        if tag == "div" and a.get("data-card"):
            self._where = ("card", str(a["data-card"]))
            self._text = []
        if tag == "title" and not self.title:  # the page's; an SVG shape's own titles come later
            self._where = ("title", "")
        self._stack.append((tag, a))

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_tasks = False
        if self._where is not None and self._where[0] == "card" and tag == "div" and self._is_value():
            self.cards[self._where[1]] = "".join(self._text)
        if tag in ("tr", "title") or (tag == "div" and self._where is not None and self._where[0] == "card"
                                      and self._stack and self._stack[-1][1].get("data-card")):
            self._where = None
        if self._stack:
            self._stack.pop()

    def _is_value(self) -> bool:
        return bool(self._stack) and self._stack[-1][1].get("class") == "value"

    def handle_data(self, data: str) -> None:
        if self._where is None:
            return
        kind, key = self._where
        if kind == "title":
            self.title += data
        elif kind == "verdict" and self._stack and self._stack[-1][0] == "td":
            self.verdicts[key].append(data.strip())
        elif kind == "card" and self._is_value():
            self._text.append(data)


def _number(text: str) -> int:
    return int(text.replace(",", "").strip())


def _dom(url: str) -> _Dom:
    assert CHROMIUM is not None
    d = _Dom()
    d.feed(browse(CHROMIUM, url))
    return d


def test_the_page_shows_the_counts_of_the_outcomes_file(tmp_path: Path) -> None:
    outcomes, joblog, results = sample_batch(tmp_path)
    want = Counter(json.loads(line)["verdict"] for line in outcomes.read_text().splitlines())
    assert want["ok"] and want["failed"] and want["timeout"] and want["killed_memory"], want
    page = tmp_path / "report.html"
    subprocess.run([sys.executable, "-m", "spoolparse", "report", str(outcomes), "--joblog", str(joblog),
                    "--results", str(results), "--html", str(page)], check=True, cwd=ROOT, capture_output=True)

    dom = _dom(page.as_uri())
    total = sum(want.values())
    assert dom.title == f"spoolparse report: {total:,} tasks, {want['ok']:,} ok"  # no script retitled it
    assert dom.scripts == 1  # the page's own: the hostile id and error are text
    assert _number(dom.cards["outcomes"]) == total
    assert _number(dom.cards["ok"]) == want["ok"] and _number(dom.cards["not_ok"]) == total - want["ok"]
    shown = {v: _number(cells[0]) for v, cells in dom.verdicts.items()}
    assert shown == {v: n for v, n in want.items()}
    assert Counter(v for v, _ in dom.rows) == want and not any(hidden for _, hidden in dom.rows)
    assert HOSTILE_ID in page.read_text().replace("&lt;", "<").replace("&gt;", ">").replace("&#x27;", "'")

    filtered = _dom(page.as_uri() + "#verdict=failed")
    visible = Counter(v for v, hidden in filtered.rows if not hidden)
    assert visible == Counter({"failed": want["failed"]})
    one = _dom(page.as_uri() + "#q=" + "exits-3")
    assert [v for v, hidden in one.rows if not hidden] == ["failed"]

    png = tmp_path / "report.png"
    assert CHROMIUM is not None
    browse(CHROMIUM, page.as_uri(), screenshot=png, width=1280, height=1800)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000  # a blank page is a few KiB
