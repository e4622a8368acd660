"""The report on a terminal: rich's tables where rich is installed (``spoolparse[cli]``), plain text otherwise."""

from __future__ import annotations

from typing import IO

from ..types import ReportDict
from .layout import Table, tables

__all__ = ["write", "plain"]

#: Widest a cell is drawn (characters): rich wraps a longer one, plain text ends it in "…".
MAX_CELL = 60
MAX_PLAIN_CELL = 100
#: Tables whose rows are tasks: their error column is cut to one line (the HTML page has it whole).
_TASKS = ("slowest", "highest", "killed")


def write(report: ReportDict, out: IO[str], *, rich: bool | None = None) -> None:
    """Draw ``report`` on ``out``: with rich's tables on a terminal when rich is installed (``rich=None``),
    else as :func:`plain` text (``rich=True``/``False`` chooses)."""
    if rich is None:
        rich = out.isatty()
    if rich:
        try:
            from rich.console import Console
        except ImportError:
            pass
        else:
            _rich(report, Console(file=out, highlight=False))
            return
    out.write(plain(report))


def _rich(report: ReportDict, console: object) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table as RichTable

    assert isinstance(console, Console)
    for t in tables(report):
        if not t.rows and t.note is None:
            continue
        table = RichTable(title=escape(t.title), title_justify="left", show_header=any(t.columns),
                          header_style="bold", expand=False)
        last = len(t.columns) - 1
        for i, name in enumerate(t.columns):
            one_line = i in t.numeric or (t.key in _TASKS and i == last)
            table.add_column(escape(name), justify="right" if i in t.numeric else "left", no_wrap=one_line,
                             overflow="ellipsis" if one_line else "fold", max_width=None if i in t.numeric else
                             MAX_CELL)
        for i, row in enumerate(t.rows):
            link = t.links[i] if i < len(t.links) and t.key == "failures" else None
            cells = [escape(c) for c in row]
            if link:
                cells[-1] = f"{cells[-1]}\n[dim]{escape(link)}[/dim]"
            table.add_row(*cells, style="bold" if t.key == "spend" and i == len(t.rows) - 1 else None)
        console.print(table)
        if t.note:
            console.print(f"[dim]{escape(t.note)}[/dim]")
        console.print()


def _cell(text: str) -> str:
    text = " ".join(text.split())  # one line: a cause or an id never breaks the columns
    return text if len(text) <= MAX_PLAIN_CELL else text[: MAX_PLAIN_CELL - 1] + "…"


def _plain_table(t: Table) -> list[str]:
    rows = [[_cell(c) for c in row] for row in t.rows]
    header = [_cell(c) for c in t.columns]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(t.columns))]

    def line(cells: list[str]) -> str:
        pairs = enumerate(zip(cells, widths, strict=True))
        return "  ".join(c.rjust(w) if i in t.numeric else c.ljust(w) for i, (c, w) in pairs)

    out = [t.title, "-" * len(t.title)]
    if any(t.columns):
        out.append(line(header).rstrip())
    for i, row in enumerate(rows):
        out.append(line(row).rstrip())
        link = t.links[i] if i < len(t.links) and t.key == "failures" else None
        if link:
            out.append(f"    transcript: {link}")
    if t.note:
        out.append(f"({t.note})")
    return out


def plain(report: ReportDict) -> str:
    """The report as plain text: one titled, aligned table after another."""
    blocks = ["\n".join(_plain_table(t)) for t in tables(report) if t.rows or t.note is not None]
    return "\n\n".join(blocks) + "\n"
