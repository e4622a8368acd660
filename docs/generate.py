#!/usr/bin/env python3
"""Rewrite the generated blocks of the docs and the README from the code.

A generated block sits between ``<!-- generated: NAME -->`` and ``<!-- end: NAME -->``; its text is
``BLOCKS[NAME]()``. ``tests/test_docs.py`` fails when a page's block differs, and prints this command::

    python docs/generate.py            # rewrite every page
    python docs/generate.py --check    # say which pages differ; exit 1 if any

The CLI reference comes from the argument parsers, the JSON shapes from :mod:`spoolparse.types`, the exit
statuses from :data:`spoolparse._cli_common.EXIT_STATUSES`, the performance tables from
``benchmarks/results/``, and the table of agent CLIs from :data:`CLIS` below with the versions the real-CLI
tests pin (``tests/realcli/clis.py``).
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
if str(ROOT) not in sys.path:  # tests.realcli.clis, from any working directory
    sys.path.insert(0, str(ROOT))

#: The pages that hold generated blocks: the README and every page of the site.
def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


# -- the agent CLIs ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Cli:
    """One agent CLI: its docs page, its provider, the command line to use, and where its format is from."""

    name: str  # the provider's name and the page's (docs/clis/<name>.md)
    title: str
    command: str  # the command line, PROMPT standing for the prompt
    fixture: str  # a transcript of it under fixtures/ (the examples and the docs' shell examples read it)
    source: str  # where the format comes from, when no real-CLI test runs it

    @property
    def executable(self) -> str:
        return self.command.split()[0]

    def argv(self, prompt: str) -> list[str]:
        return [prompt if word == "PROMPT" else word for word in self.command.split()]


#: Every agent CLI with a page, in the order of the docs' navigation.
CLIS: tuple[Cli, ...] = (
    Cli("codex", "Codex", "codex exec --json PROMPT", "codex/realcli_A.jsonl", ""),
    Cli("claude", "Claude Code", "claude -p --output-format stream-json --verbose PROMPT",
        "claude/success.jsonl", ""),
    Cli("gemini", "Gemini CLI", "gemini -p PROMPT -o stream-json --yolo", "gemini/realcli_A.jsonl", ""),
    Cli("opencode", "opencode", "opencode run --format json PROMPT", "opencode/realcli_A.jsonl", ""),
    Cli("qwen", "Qwen Code", "qwen -p PROMPT --output-format stream-json --yolo", "qwen/real_A.jsonl", ""),
    Cli("kilo", "Kilo", "kilo run --format json --auto PROMPT", "kilo/success.jsonl", ""),
    Cli("droid", "Droid", "droid exec --output-format stream-json --auto high PROMPT", "droid/real_A.jsonl", ""),
    Cli("kimi", "Kimi Code", "kimi --print -p PROMPT --output-format stream-json", "kimi/success.jsonl",
        "MoonshotAI/kimi-cli, `ui/print`"),
    Cli("copilot", "GitHub Copilot CLI", "copilot -p PROMPT --output-format json --allow-all-tools",
        "copilot/success.jsonl", "published reports of its output (closed source)"),
    Cli("amp", "Amp", "amp --execute PROMPT --stream-json --dangerously-allow-all", "amp/success.jsonl",
        "the types of `@sourcegraph/amp-sdk`"),
    Cli("cursor", "Cursor CLI", "cursor-agent -p PROMPT --output-format stream-json --force",
        "cursor/success.jsonl", "Cursor's CLI reference and vibe-kanban's reader"),
    Cli("antigravity", "Antigravity", "agy -p PROMPT --output-format stream-json", "antigravity/success.jsonl",
        "published integrations (no public source)"),
)


def pinned() -> dict[str, tuple[str, str]]:
    """``{cli: (npm package, version)}`` of the CLIs the real-CLI tests run."""
    from tests.realcli.clis import PINNED

    return {name: (pkg.package, pkg.version) for name, pkg in PINNED.items()}


def checked_against(cli: Cli) -> str:
    real = pinned().get(cli.name)
    if real is not None:
        return f"the real CLI: `{real[0]}` {real[1]}"
    return f"its published format: {cli.source}"


def _command_cell(cli: Cli) -> str:
    return f"`{cli.command}`"


def clis_table(link: Callable[[Cli], str]) -> str:
    rows = ["| CLI | command line | checked against |", "|---|---|---|"]
    rows += [f"| {link(c)} | {_command_cell(c)} | {checked_against(c)} |" for c in CLIS]
    return "\n".join(rows)


def readme_clis() -> str:
    return clis_table(lambda c: f"[{c.title}](docs/clis/{c.name}.md)")


def docs_clis() -> str:
    return clis_table(lambda c: f"[{c.title}]({c.name}.md)")


def cli_card(cli: Cli) -> str:
    detect = ("`--provider kilo` names it (detection reads it as `opencode`, the same stream)" if cli.name == "kilo"
              else "detected from the first events (`--provider " + cli.name + "` names it)")
    return "\n".join([
        "| | |", "|---|---|",
        f"| command line | `{cli.command}` |",
        f"| provider | `{cli.name}`: {detect} |",
        f"| checked against | {checked_against(cli)} |",
        f"| example | `examples/clis/{cli.name}.py` (below), run by the tests against `fixtures/{cli.fixture}` |",
    ])


# -- the command line --------------------------------------------------------------------------


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    from spoolparse import cli
    from spoolparse.runner import cli as runner_cli

    # -j's help names this machine's CPU count: the docs give the rule instead
    with mock.patch.object(runner_cli, "cpu_cap", lambda: "4 per CPU (at least 4)"):
        parser = cli.build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise RuntimeError("spoolparse has no subcommands")


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.choices is not None:
        return "|".join(map(str, action.choices))
    return str(action.metavar or action.dest.upper())


def _code(value: str) -> str:
    """``a|b`` as the code spans `a` | `b`: in a table a | ends the cell, and escaped in a code span it shows
    its backslash."""
    return " \\| ".join(f"`{part}`" for part in value.split("|")) if value else ""


def options_table(command: str) -> str:
    parser = _subparsers()[command]
    rows = ["| option | value | what it does |", "|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        names = ", ".join(f"`{o}`" for o in action.option_strings) or _code(_value(action))
        value = _code(_value(action)) if action.option_strings else ""
        # Python 3.10's BooleanOptionalAction appends this to the help it was given; later ones do not
        text = (action.help or "").removesuffix(" (default: %(default)s)").replace("%%", "%").replace("|", "\\|")
        rows.append(f"| {names} | {value} | {text} |")
    return "\n".join(rows)


def usage_line(command: str) -> str:
    return str(_subparsers()[command].description)


# -- exit statuses, JSON shapes ----------------------------------------------------------------


def exit_statuses() -> str:
    from spoolparse._cli_common import EXIT_STATUSES

    rows = ["| exit status | meaning |", "|---|---|"]
    rows += [f"| {status} | {meaning} |" for status, meaning in EXIT_STATUSES.items()]
    return "\n".join(rows)


def _type_name(tp: object) -> str:
    if tp is typing.Any:
        return "any"
    if tp is type(None):
        return "null"
    if isinstance(tp, type) and not typing.get_args(tp):
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(tp.__name__, tp.__name__)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return " \\| ".join(f'`"{a}"`' for a in args)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " or ".join(_type_name(a) for a in args)
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"object of {_type_name(args[1])}"
    return str(tp)


#: What each key means; a key of spoolparse.types with no entry here fails the docs test.
MEANINGS: dict[str, str] = {
    # the summary
    "provider": "the format the transcript was read as (`codex`, `claude`, …, `generic`)",
    "detected_by": "what chose the provider: the line and event that decided (`line 1: system/init "
                   "(qwen_code_version)`), `ambiguous: …`, or `--provider`",
    "ok": "the agent finished and its answer is in hand",
    "text": "the answer, only when `ok`; `null` otherwise",
    "partial_text": "what a run that is not ok said last (never an answer); `null` when ok",
    "usage": "token counts under normalized names (the usage table below)",
    "usage_by_model": "`{model: usage}` where the CLI reports usage per model, else `null`",
    "raw_usage": "the CLI's own usage object, whole",
    "model": "the model the CLI names, else `null`",
    "session_id": "the CLI's session or thread id, else `null`",
    "error": "a sentence naming every reason `ok` is false; `null` when ok",
    "warnings": "non-fatal reports, at most `MAX_WARNINGS`",
    "returncode": "the child's exit status, −N for signal N; `null` for `parse`",
    "timed_out": "the timeout ended the child",
    "spool_full": "the spool filled up (disk, `RLIMIT_FSIZE` or `--max-spool-bytes`)",
    "duration_s": "seconds from start to the end of parsing",
    "stdout_bytes": "bytes the child wrote to stdout",
    "stderr_bytes": "bytes the child wrote to stderr",
    "lines": "lines read (items of a JSON array)",
    "invalid_lines": "lines that were not JSON objects (blank lines are not counted)",
    "dropped": "lines left out, at most `MAX_DROPPED_RECORDS` (the dropped-line table below)",
    "dropped_count": "how many lines were left out in all",
    "stderr_tail": "the last `STDERR_TAIL` bytes of the child's stderr",
    # a dropped line
    "line": "its line number",
    "bytes": "its size in bytes",
    "type": "its type key, e.g. `item.completed/command_execution`",
    "reason": "`oversize`, `over_ceiling`, `invalid` or `unreadable`",
    # usage
    "input_tokens": "every prompt token, cached ones included",
    "cached_input_tokens": "prompt tokens read from the cache",
    "cache_write_input_tokens": "prompt tokens written to the cache",
    "output_tokens": "every generated token, reasoning included",
    "reasoning_output_tokens": "generated reasoning tokens",
    "total_tokens": "the CLI's own total, where it gives one",
    "cost_usd": "the cost in US dollars",
    "cost_source": "`reported` (the CLI printed the cost) or `estimated` (priced from the token counts)",
    "cost_note": "why `cost_usd` is `null`",
    # an outcome
    "id": "the task's id",
    "verdict": "what happened to the task",
    "attempts": "how many attempts ran (0 for `skipped`)",
    "wall_s": "seconds from start to end",
    "cpu_s": "CPU seconds of the task's processes",
    "peak_memory": "peak memory in bytes; `null` when the task ended before it was measured",
    "peak_source": "`cgroup` (exact) or `sampled`",
    "signal": "the signal that ended the child, else `null`",
    "enforcement": "what capped the task's memory: `cgroup2`, `cgroup1`, `watchdog` or `none`",
    "summary": "the run's summary (the first table), `null` when nothing ran",
    # a job-log line
    "attempt": "the attempt's number, from 1",
    "final": "this attempt is the task's outcome (written once the outcome was printed)",
    "start": "Unix time the attempt started",
    "end": "Unix time it ended",
    "cmd": "the command line (never the environment or the input)",
}


def fields_table(shape: type, skip: tuple[str, ...] = ()) -> str:
    hints = typing.get_type_hints(shape)
    rows = ["| key | type | meaning |", "|---|---|---|"]
    for name in shape.__annotations__:
        if name in skip:
            continue
        if name not in MEANINGS:
            raise SystemExit(f"{shape.__name__}.{name}: say what it means in MEANINGS (docs/generate.py)")
        rows.append(f"| `{name}` | {_type_name(hints[name])} | {MEANINGS[name]} |")
    return "\n".join(rows)


def json_shape(name: str) -> Callable[[], str]:
    def render() -> str:
        from spoolparse import types

        return fields_table(getattr(types, name))

    return render


def event_fields() -> str:
    from spoolparse.types import EVENT_FIELDS

    rows = ["| kind | its own keys, after `seq`, `time`, `kind`, `line`, `type` |", "|---|---|"]
    for kind, fields in EVENT_FIELDS.items():
        own = ", ".join(f"`{f}`" for f in fields[5:]) or "—"
        rows.append(f"| `{kind}` | {own} |")
    return "\n".join(rows)


def verdicts() -> str:
    from spoolparse.types import Verdict

    return ", ".join(f"`{v}`" for v in typing.get_args(Verdict))


def ok_table() -> str:
    """What ``ok`` needs of each provider's run, from its grammar (``concepts/verdict.md``)."""
    from spoolparse.providers import ok_table as table

    return table().rstrip("\n")


# -- performance -------------------------------------------------------------------------------


def _results(name: str) -> str:
    text = (ROOT / "benchmarks" / "results" / name).read_text().strip()
    # their headings sit under the page's own "##" sections
    return re.sub(r"^## ", "#### ", text, flags=re.M)



# -- task lines, known traps, the report guide ------------------------------------------------


def task_keys() -> str:
    """The keys of a task line and what each is (docs/guides/tasks.md)."""
    from spoolparse.runner.tasks import TASK_KEY_HELP, TASK_KEYS

    rows = ["| key | what it is |", "| --- | --- |", *(f"| `{key}` | {TASK_KEY_HELP[key]} |" for key in TASK_KEYS)]
    return "\n".join(rows)


def uncontained_warning() -> str:
    """What ``batch`` prints where no cgroup can be made (here: a user with no cgroup v1 of her own)."""
    from spoolparse._os.cgroup import WHY_V1, Placement, uncontained_note

    where = Placement(None, why=WHY_V1.format("/sys/fs/cgroup/memory/user.slice"))
    return f"```text\nspoolparse: warning: {uncontained_note(where)}\n```"


def known_traps() -> str:
    from spoolparse.providers import traps

    return traps.markdown().rstrip("\n")


_REPORT_BOUND_TEXT = {
    "groups": "distinct failure causes (later new causes are counted in `other_failures`)",
    "examples": "example tasks per cause",
    "slowest": "slowest tasks listed",
    "highest": "tasks with the largest memory peaks listed",
    "killed_listed": "tasks killed for memory listed (all are counted)",
    "models": "CLI-and-model rows (later new models go to one `(other models)` row of their CLI)",
    "notes": "distinct reasons for an unknown cost (later ones: `(other reasons)`)",
    "table_rows": "rows of the HTML page's task table (every task not ok first, then ok ones)",
}


def report_json() -> str:
    from spoolparse import types

    shapes = [types.ReportDict, types.ReportSpend, types.ReportFailureGroup, types.ReportTask,
              types.ReportDistribution, types.ReportBin, types.ReportAttempts, types.ReportMemory, types.ReportNote]
    lines = []
    for shape in shapes:
        hints = typing.get_type_hints(shape)
        fields = ", ".join(f"`{k}`: {_report_type(v)}" for k, v in hints.items())
        lines.append(f"- **{shape.__name__}**: {fields}")
    return "\n".join(lines)


def _report_type(t: object) -> str:
    if isinstance(t, type) and not typing.get_args(t):
        return t.__name__
    return re.sub(r"\b(?:spoolparse\.types|builtins)\.", "", str(t)).replace("<class '", "").replace("'>", "")


def report_bounds() -> str:
    from spoolparse.report import fold

    rows = ["| bound | value | what it bounds |", "| --- | ---: | --- |"]
    rows += [f"| `{k}` | {v:,} | {_REPORT_BOUND_TEXT[k]} |" for k, v in fold.BOUNDS.items()]
    return "\n".join(rows)


def price_lists() -> str:
    from spoolparse import cost

    rows = ["| CLI | price list tried first |", "| --- | --- |"]
    rows += [f"| {cli} | `{pid}` |" for cli, pid in cost.PROVIDER_IDS.items()]
    return "\n".join(rows)


# -- every block -------------------------------------------------------------------------------

COMMANDS = ("run", "parse", "batch", "calibrate", "report")

BLOCKS: dict[str, Callable[[], str]] = {
    "readme-clis": readme_clis,
    "clis": docs_clis,
    **{f"cli-{c.name}": functools.partial(cli_card, c) for c in CLIS},
    **{f"options-{cmd}": functools.partial(options_table, cmd) for cmd in COMMANDS},
    **{f"usage-{cmd}": functools.partial(usage_line, cmd) for cmd in COMMANDS},
    "exit-statuses": exit_statuses,
    "json-summary": json_shape("Summary"),
    "json-dropped": json_shape("DroppedLine"),
    "json-usage": json_shape("Usage"),
    "json-outcome": json_shape("OutcomeDict"),
    "json-joblog": json_shape("JobLogRecord"),
    "json-events": event_fields,
    "verdicts": verdicts,
    "ok-table": ok_table,
    "performance-local": lambda: _results("last.md"),
    "performance-ray": lambda: _results("ray.md"),
    "performance-fleet": lambda: _results("last-fleet-runner.md"),
    "task-keys": task_keys,
    "traps": known_traps,
    "uncontained-warning": uncontained_warning,
    "report-json": report_json,
    "report-bounds": report_bounds,
    "cost-price-lists": price_lists,
}

_BLOCK = re.compile(r"(<!-- generated: ([\w-]+) -->\n)(.*?)(<!-- end: \2 -->)", re.S)


def blocks_of(text: str) -> Iterator[tuple[str, str]]:
    """``(name, content)`` of each generated block of a page."""
    for m in _BLOCK.finditer(text):
        yield m.group(2), m.group(3)


def render(text: str) -> str:
    """The page with every generated block rewritten."""

    def one(m: re.Match[str]) -> str:
        name = m.group(2)
        if name not in BLOCKS:
            raise SystemExit(f"unknown generated block {name!r} (known: {', '.join(sorted(BLOCKS))})")
        return f"{m.group(1)}{BLOCKS[name]()}\n{m.group(4)}"

    return _BLOCK.sub(one, text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Rewrite the generated blocks of the docs and the README.")
    ap.add_argument("--check", action="store_true", help="only say which pages differ (exit 1 if any)")
    args = ap.parse_args(argv)
    stale = []
    for page in pages():
        text = page.read_text()
        new = render(text)
        if new != text:
            stale.append(page.relative_to(ROOT))
            if not args.check:
                page.write_text(new)
    for page in stale:
        print(f"{'differs' if args.check else 'rewrote'}: {page}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
