"""The report as one self-contained HTML page: inline CSS, SVG charts and a small script, nothing fetched.

The page's Content-Security-Policy allows nothing from anywhere (``default-src
'none'``) but its own inline style and script, so it loads the same offline.
Every string a task or an agent wrote (ids, errors, model names, paths) is
escaped with :func:`html.escape`. The summary comes first, then the charts,
then the failure causes and the slowest tasks, then the tables of cost and
memory, then the filterable table of tasks (at most
:data:`~spoolparse.report.fold.MAX_TABLE_ROWS` rows: every task not ok, then
ok ones).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from html import escape
from urllib.parse import quote

from .. import __version__
from ..types import ReportBin, ReportDict, ReportTask
from .fold import MAX_TABLE_ROWS, Row
from .layout import Table, count, headline, memory, seconds, share, tables, usd

__all__ = ["page", "VERDICT_COLORS"]

#: The colour of each verdict, in the charts and the table (others are grey).
VERDICT_COLORS = {
    "ok": "#2e7d32", "failed": "#c62828", "timeout": "#ef6c00", "killed_memory": "#6a1b9a",
    "spawn_error": "#455a64", "cancelled": "#8d6e63", "skipped": "#90a4ae",
}
_GREY = "#78909c"

_CSS = """
:root { --fg: #1c2329; --muted: #5f6b76; --line: #dde3e8; --bg: #fff; --soft: #f5f7f9; --accent: #1565c0; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       background: var(--bg); }
main { max-width: 1200px; margin: 0 auto; padding: 24px 28px 48px; }
h1 { font-size: 22px; margin: 0 0 2px; }
h2 { font-size: 16px; margin: 28px 0 8px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
.sub, .note { color: var(--muted); font-size: 12.5px; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 10px; margin-top: 16px; }
.card { background: var(--soft); border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; }
.card .label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card .value { font-size: 20px; font-weight: 600; font-variant-numeric: tabular-nums; }
.card .detail { color: var(--muted); font-size: 12px; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 16px; }
figure { margin: 0; border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; }
figcaption { font-weight: 600; margin-bottom: 4px; }
svg { width: 100%; height: auto; display: block; }
svg text { font: 11px system-ui, sans-serif; fill: var(--muted); }
svg .label { fill: var(--fg); }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--soft); font-weight: 600; position: sticky; top: 0; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.id, td.cause { word-break: break-word; }
td.id { min-width: 9em; font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: 12px; }
tr.total td { font-weight: 600; }
.verdict { display: inline-block; padding: 0 6px; border-radius: 4px; color: #fff; font-size: 12px; }
a { color: var(--accent); }
.controls { display: flex; gap: 10px; align-items: center; margin: 8px 0; flex-wrap: wrap; }
.controls input { flex: 1 1 260px; padding: 6px 8px; border: 1px solid var(--line); border-radius: 6px; }
.controls select { padding: 6px; border: 1px solid var(--line); border-radius: 6px; }
.scroll { max-height: 640px; overflow: auto; border: 1px solid var(--line); border-radius: 8px; }
@media print {
  main { max-width: none; padding: 0; }
  .controls { display: none; }
  .scroll { max-height: none; overflow: visible; border: 0; }
  section, figure, tr { break-inside: avoid; }
  th { position: static; }
  a { color: inherit; text-decoration: none; }
}
"""

_SCRIPT = """
(function () {
  var q = document.getElementById('q'), v = document.getElementById('v'), shown = document.getElementById('shown');
  var rows = Array.prototype.slice.call(document.querySelectorAll('#task-table tbody tr'));
  function apply() {
    var text = q.value.toLowerCase(), want = v.value, n = 0;
    rows.forEach(function (tr) {
      var verdict = tr.getAttribute('data-verdict');
      var hit = (!want || want === verdict || (want === '!ok' && verdict !== 'ok')) &&
                (!text || tr.textContent.toLowerCase().indexOf(text) >= 0);
      tr.hidden = !hit;
      if (hit) { n++; }
    });
    shown.textContent = n.toLocaleString('en');
    var hash = [];
    if (text) { hash.push('q=' + encodeURIComponent(q.value)); }
    if (want) { hash.push('verdict=' + encodeURIComponent(want)); }
    history.replaceState(null, '', hash.length ? '#' + hash.join('&') : location.pathname + location.search);
  }
  location.hash.replace(/^#/, '').split('&').forEach(function (kv) {
    var i = kv.indexOf('='); if (i < 0) { return; }
    var key = kv.slice(0, i), val = decodeURIComponent(kv.slice(i + 1));
    if (key === 'q') { q.value = val; } else if (key === 'verdict') { v.value = val; }
  });
  q.addEventListener('input', apply);
  v.addEventListener('change', apply);
  apply();
})();
"""


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _color(verdict: str) -> str:
    return VERDICT_COLORS.get(verdict, _GREY)


def _href(path: str, base: str | None) -> str:
    """A link to a kept file: relative to the page's folder where it can be, else a file URL."""
    if base is not None:
        try:
            rel = os.path.relpath(path, base)
        except ValueError:
            rel = None
        if rel is not None and not rel.startswith(".." + os.sep + ".." + os.sep):
            return quote(rel)
    return "file://" + quote(os.path.abspath(path))


def _links(folder: str | None, base: str | None) -> str:
    if not folder:
        return ""
    return " ".join(f'<a href="{_e(_href(os.path.join(folder, name), base))}">{name}</a>'
                    for name in ("stdout", "stderr"))


# -- charts ----------------------------------------------------------------------------------------------


def _bars(items: Sequence[tuple[str, float, str, str]], *, width: int = 560, fmt: str = "") -> str:
    """Horizontal bars: (label, value, colour, value text) each; the longest bar fills the width."""
    if not items:
        return '<p class="note">nothing to show</p>'
    row, label_w, pad = 24, 170, 80
    top = max(v for _, v, _, _ in items) or 1.0
    height = row * len(items) + 6
    parts = [f'<svg viewBox="0 0 {width} {height}" role="img" aria-label="{_e(fmt)}">']
    for i, (label, value, color, text) in enumerate(items):
        y = 3 + i * row
        w = max(1.0, (width - label_w - pad) * value / top) if value > 0 else 0
        short = label if len(label) <= 26 else label[:25] + "…"
        parts.append(f'<text class="label" x="{label_w - 6}" y="{y + 15}" text-anchor="end">'
                     f"<title>{_e(label)}</title>{_e(short)}</text>")
        parts.append(f'<rect x="{label_w}" y="{y + 2}" width="{w:.1f}" height="{row - 8}" rx="3" fill="{color}"/>')
        parts.append(f'<text x="{label_w + w + 6:.1f}" y="{y + 15}">{_e(text)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _histogram(bins: Sequence[ReportBin], label: str, fmt: str, color: str, *, width: int = 560) -> str:
    """Vertical bars of a histogram, its range written under the first, middle and last bars."""
    if not bins:
        return '<p class="note">nothing to show</p>'
    height, base, left = 214, 170, 40
    top = max(b["count"] for b in bins) or 1
    step = (width - left - 10) / len(bins)
    parts = [f'<svg viewBox="0 0 {width} {height}" role="img" aria-label="{_e(label)}">',
             f'<line x1="{left}" y1="{base}" x2="{width - 10}" y2="{base}" stroke="#b0bec5"/>',
             f'<text x="{left - 6}" y="{base - 140 + 4}" text-anchor="end">{top:,}</text>',
             f'<text x="{left - 6}" y="{base + 4}" text-anchor="end">0</text>']
    for i, b in enumerate(bins):
        h = 140 * b["count"] / top
        x = left + i * step
        lo_hi = f"{_fmt(b['lo'], fmt)} – {_fmt(b['hi'], fmt)}: {b['count']:,}"
        parts.append(f'<rect x="{x + 1:.1f}" y="{base - h:.1f}" width="{max(step - 2, 1):.1f}" height="{h:.1f}" '
                     f'fill="{color}"><title>{_e(lo_hi)}</title></rect>')
    mid = len(bins) // 2
    for x, anchor, value in ((left, "start", bins[0]["lo"]), (left + mid * step, "middle", bins[mid]["lo"]),
                             (width - 10, "end", bins[-1]["hi"])):
        parts.append(f'<text x="{x:.1f}" y="{base + 16}" text-anchor="{anchor}">{_e(_fmt(value, fmt))}</text>')
    widths = [b["hi"] - b["lo"] for b in bins[:2]]
    log = len(bins) > 2 and bins[0]["lo"] > 0 and widths[1] > 1.01 * widths[0]
    scale = " (bins on a log scale)" if log else ""
    parts.append(f'<text x="{width - 10}" y="{base + 30}" text-anchor="end">{_e(label + scale)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _fmt(x: float, fmt: str) -> str:
    return seconds(x) if fmt == "s" else memory(x)


def _charts(r: ReportDict) -> str:
    verdicts = [(v, float(n), _color(v), f"{n:,} ({share(n, r['outcomes'])})")
                for v, n in r["verdicts"].items() if n]
    spend = [(s["model"] or f"{s['provider'] or '-'} (no model)", s["reported_usd"] + s["estimated_usd"],
              "#1565c0" if s["estimated_usd"] == 0 else "#64b5f6" if s["reported_usd"] == 0 else "#1e88e5",
              f"{usd(s['reported_usd'] + s['estimated_usd'])}"
              + (" est." if s["estimated_usd"] and not s["reported_usd"] else ""))
             for s in r["spend"][:12] if s["reported_usd"] + s["estimated_usd"] > 0]
    figures = [
        ("Verdicts", _bars(verdicts, fmt="tasks by verdict")),
        ("Durations", _histogram(r["durations"]["histogram"], "wall time per task", "s", "#1565c0")),
        ("Cost per model", _bars(spend, fmt="US dollars per model")
         + '<p class="note">dark: reported by the CLI; light: estimated from token counts</p>'),
        ("Peak memory", _histogram(r["memory"]["peaks"]["histogram"], "peak memory per task", "b", "#6a1b9a")),
    ]
    return "".join(f'<figure id="chart-{_e(title.lower().replace(" ", "-"))}"><figcaption>{_e(title)}</figcaption>'
                   f"{svg}</figure>" for title, svg in figures)


# -- tables ----------------------------------------------------------------------------------------------


def _table(t: Table, base: str | None) -> str:
    head = "".join(f'<th class="{"n" if i in t.numeric else ""}">{_e(c)}</th>' for i, c in enumerate(t.columns))
    body = []
    for i, row in enumerate(t.rows):
        cells = []
        for j, c in enumerate(row):
            cls = "n" if j in t.numeric else "id" if t.columns[j] == "id" else "cause" if j == len(row) - 1 else ""
            text = _e(c)
            if t.columns[j] == "verdict" and c:
                text = f'<span class="verdict" style="background:{_color(c)}">{text}</span>'
            cells.append(f'<td class="{cls}">{text}</td>')
        link = t.links[i] if i < len(t.links) else None
        if t.links:
            cells.append(f"<td>{_links(link, base)}</td>")
        total = ' class="total"' if t.key == "spend" and i == len(t.rows) - 1 else ""
        key = f' data-verdict="{_e(row[0])}"' if t.key == "verdicts" else ""
        body.append(f"<tr{total}{key}>{''.join(cells)}</tr>")
    if t.links:
        head += "<th>transcript</th>"
    note = f'<p class="note">{_e(t.note)}</p>' if t.note else ""
    thead = f"<thead><tr>{head}</tr></thead>" if any(t.columns) else ""
    table = f"<table>{thead}<tbody>{''.join(body)}</tbody></table>" if t.rows else ""
    return f'<section id="{_e(t.key)}"><h2>{_e(t.title)}</h2>{table}{note}</section>'


def _failures(r: ReportDict, base: str | None) -> str:
    rows = []
    for g in r["failures"]:
        verdicts = " ".join(f'<span class="verdict" style="background:{_color(v)}">{_e(v)} {n:,}</span>'
                            for v, n in g["verdicts"].items())
        examples = "<br>".join(_example(t, base) for t in g["examples"])
        rows.append(f'<tr><td class="n">{g["count"]:,}</td><td>{verdicts}</td><td class="cause">{_e(g["cause"])}'
                    f'</td><td class="id">{examples}</td></tr>')
    note = ""
    if r["other_failures"]:
        note = (f'<p class="note">{r["other_failures"]:,} more tasks not ok, past {r["bounds"]["groups"]} distinct '
                "causes, are in no row.</p>")
    if not rows:
        return '<section id="failures"><h2>Failures by cause</h2><p class="note">Every task was ok.</p></section>'
    return ('<section id="failures"><h2>Failures by cause</h2><table><thead><tr><th class="n">tasks</th>'
            "<th>verdicts</th><th>cause (ids, paths and numbers as &lt;id&gt;, &lt;path&gt;, N)</th>"
            f"<th>examples</th></tr></thead><tbody>{''.join(rows)}</tbody></table>{note}</section>")


def _example(t: ReportTask, base: str | None) -> str:
    if t["transcript"]:
        return f'<a href="{_e(_href(os.path.join(t["transcript"], "stdout"), base))}">{_e(t["id"])}</a>'
    return _e(t["id"])


def _task_table(rows: Sequence[Row], total: int, base: str | None) -> str:
    body = []
    for row in rows:
        cost = usd(row.cost_usd) + (" est." if row.cost_source == "estimated" else "")
        body.append(
            f'<tr data-verdict="{_e(row.verdict)}"><td class="id">{_e(row.id)}</td>'
            f'<td><span class="verdict" style="background:{_color(row.verdict)}">{_e(row.verdict)}</span></td>'
            f"<td>{_e(row.provider or '-')}</td><td>{_e(row.model or '-')}</td>"
            f'<td class="n">{seconds(row.wall_s)}</td><td class="n">{count(row.attempts)}</td>'
            f'<td class="n">{memory(row.peak_memory)}</td><td class="n">{count(row.tokens)}</td>'
            f'<td class="n">{_e(cost)}</td><td class="cause">{_e(row.cause or "")}</td>'
            f"<td>{_links(row.transcript, base)}</td></tr>"
        )
    held = len(rows)
    if held < total:
        bound = (f"The table holds {held:,} of the {total:,} tasks (at most {MAX_TABLE_ROWS:,}): every task not ok "
                 "first, in the order of the outcomes, then ok ones; the outcomes file has them all.")
    else:
        bound = f"All {total:,} tasks."
    options = "".join(f'<option value="{_e(v)}">{_e(label)}</option>' for v, label in
                      [("", "every verdict"), ("!ok", "not ok"), *((v, v) for v in VERDICT_COLORS)])
    return (
        '<section id="tasks"><h2>Tasks</h2>'
        '<div class="controls"><input id="q" type="search" placeholder="filter: id, CLI, model, error…" '
        f'aria-label="filter the tasks"><select id="v" aria-label="verdict">{options}</select>'
        f'<span class="note">showing <b id="shown">{held:,}</b> of {held:,} rows</span></div>'
        f'<p class="note" id="bound">{_e(bound)}</p>'
        '<div class="scroll"><table id="task-table"><thead><tr><th>id</th><th>verdict</th><th>CLI</th>'
        '<th>model</th><th class="n">wall</th><th class="n">attempts</th><th class="n">peak</th>'
        '<th class="n">tokens</th><th class="n">cost</th><th>error</th><th>transcript</th></tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div></section>"
    )


def _cards(r: ReportDict) -> str:
    t = r["total"]
    d = r["durations"]
    m = r["memory"]["peaks"]
    spent = t["reported_usd"] + t["estimated_usd"]
    cards = [
        ("tasks", "outcomes", count(r["outcomes"]), f"{count(r['invalid_lines'])} lines not outcomes"
         if r["invalid_lines"] else "outcomes read"),
        ("ok", "ok", count(r["ok"]), share(r["ok"], r["outcomes"])),
        ("not ok", "not_ok", count(r["not_ok"]), f"{len(r['failures']):,} causes"),
        ("cost", "cost", usd(spent) if t["reported_runs"] + t["estimated_runs"] else "-",
         f"{usd(t['reported_usd'])} reported · {usd(t['estimated_usd'])} est."
         + (f" · {t['unpriced_runs']:,} unpriced" if t["unpriced_runs"] else "")),
        ("tokens", "tokens", _short(t["input_tokens"] + t["output_tokens"]),
         f"{_short(t['input_tokens'])} in · {_short(t['output_tokens'])} out"),
        ("duration p50", "p50", seconds(d["p50"]), f"p90 {seconds(d['p90'])} · p99 {seconds(d['p99'])} · "
         f"max {seconds(d['max'])}"),
        ("peak memory p50", "memory", memory(m["p50"]),
         f"max {memory(m['max'])} · {r['memory']['killed']:,} killed for memory"),
    ]
    return '<div class="cards">' + "".join(
        f'<div class="card" data-card="{key}"><div class="label">{_e(label)}</div>'
        f'<div class="value">{_e(value)}</div><div class="detail">{_e(detail)}</div></div>'
        for label, key, value, detail in cards) + "</div>"


def _short(n: float) -> str:
    if n < 1000:
        return f"{int(n)}"
    exp = min(int(math.log10(n)) // 3, 4)
    return f"{n / 10 ** (3 * exp):.1f}{'kMGT'[exp - 1]}"


def page(r: ReportDict, rows: Sequence[Row], *, source: str, path: str | None = None) -> str:
    """The HTML page of report ``r`` with the task table's ``rows``; ``source`` names the outcomes read and
    ``path`` is where the page will be written (links to kept transcripts are relative to its folder)."""
    base = os.path.dirname(os.path.abspath(path)) if path is not None else None
    sections = {t.key: t for t in tables(r)}
    summary_list = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in headline(r))
    rest = "".join(_table(sections[k], base) for k in ("verdicts", "spend", "unpriced", "durations", "attempts",
                                                        "memory", "highest", "killed", "input") if k in sections)
    made = time.strftime("%Y-%m-%d %H:%M", time.localtime())
    title = f"spoolparse report: {r['outcomes']:,} tasks, {r['ok']:,} ok"
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'; '
        "script-src 'unsafe-inline'; img-src data:\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body><main>"
        f"<header><h1>Batch report</h1><p class=\"sub\">{_e(source)} · made {_e(made)} with spoolparse "
        f"{_e(__version__)}</p></header>"
        f'<section id="summary">{_cards(r)}<details><summary class="note">every figure</summary><dl>'
        f"{summary_list}</dl></details></section>"
        f'<section id="charts"><h2>Charts</h2><div class="charts">{_charts(r)}</div></section>'
        f"{_failures(r, base)}{_table(sections['slowest'], base)}{rest}"
        f"{_task_table(rows, r['outcomes'], base)}"
        f"</main><script>{_SCRIPT}</script></body></html>\n"
    )
