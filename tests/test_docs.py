"""The README tells the truth about the bounds and the set-up commands."""

from __future__ import annotations

import re

from spoolparse import _limits

from .helpers import ROOT

README = (ROOT / "README.md").read_text()


def _human(n: float, unit: str) -> float:
    return n * {"B": 1, "KiB": _limits.KiB, "MiB": _limits.MiB, "GiB": _limits.GiB, "s": 1, "ms": 0.001}[unit]


def test_bounds_table_matches_the_limits_module() -> None:
    rows = re.findall(r"^\| `([A-Z_]+)`[^|]*\| ([^|]+) \|", README, re.M)
    seen = {name for name, _ in rows}
    for name, value in rows:
        actual = getattr(_limits, name, None)
        if name == "POLL_MIN":
            lo, hi, unit = re.match(r"(\d+)–(\d+) (ms)", value.strip()).groups()  # type: ignore[union-attr]
            assert _human(int(lo), unit) == _limits.POLL_MIN and _human(int(hi), unit) == _limits.POLL_MAX
            continue
        assert actual is not None, name
        m = re.match(r"([\d.]+) ?(B|KiB|MiB|GiB|s|ms|Ki characters)?", value.strip())
        assert m is not None, (name, value)
        number, unit = float(m.group(1)), m.group(2)
        if unit == "Ki characters":
            expected = number * 1024
        elif unit is None:
            expected = number
        else:
            expected = _human(number, unit)
        assert expected == actual, (name, value, actual)
    public = {n for n in dir(_limits) if n.isupper() and n not in ("KiB", "MiB", "GiB", "POLL_MAX")}
    assert public <= seen, f"bounds missing from the README table: {sorted(public - seen)}"


def test_setup_commands_and_ci_agree() -> None:
    blocks = re.findall(r"```sh\n(.*?)```", README, re.S)
    assert "spoolparse run -- python fixtures/fake_codex.py" in blocks[0]
    test_cmd = blocks[1].strip()
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_cmd in ci, f"{test_cmd!r} is not what .ci/run runs"


def test_exit_status_table_matches_the_code() -> None:
    from spoolparse._cli_common import EXIT_STATUSES

    table = README[README.index("| exit status | meaning |"):]
    table = table[: table.index("\n\n")]
    rows = dict(re.findall(r"^\| (?!exit status|---)([^|]+?) \| (.+) \|$", table, re.M))
    assert rows == EXIT_STATUSES
    assert README.count("| exit status | meaning |") == 1, "one exit-status table, not a copy per command"


def test_every_skip_says_what_it_needs() -> None:
    # a newcomer reading "SKIPPED" must learn what to install or where to run, not just that it was skipped
    sources = sorted((ROOT / "tests").rglob("*.py"))
    reasons = []
    for path in sources:
        text = path.read_text()
        reasons += [(path.name, m) for m in re.findall(r"pytest\.skip\(\s*f?\"([^\"]*)", text)]
        reasons += [(path.name, m) for m in re.findall(r"skipif\([^#]*?reason=\s*f?\"([^\"]*)", text, re.S)]
    assert reasons, "no skips found: the search is wrong"
    vague = [(name, r) for name, r in reasons if "needs" not in r and "; run " not in r]
    assert vague == [], vague


DOCS = ROOT / "docs"


def _block(page: str, name: str) -> str:
    """The text of a generated block of a docs page (between its ``generated`` and ``end`` markers)."""
    text = (DOCS / page).read_text()
    start, end = f"<!-- generated: {name} -->\n", f"<!-- end: {name} -->"
    assert start in text and end in text, f"docs/{page} has no {name} block"
    return text[text.index(start) + len(start) : text.index(end)]


def task_keys_table() -> str:
    """The table of a task line's keys, as the code knows them (docs/guides/tasks.md shows it)."""
    from spoolparse.runner.tasks import TASK_KEY_HELP, TASK_KEYS

    rows = ["| key | what it is |", "| --- | --- |", *(f"| `{key}` | {TASK_KEY_HELP[key]} |" for key in TASK_KEYS)]
    return "\n".join(rows) + "\n"


def test_the_task_keys_table_is_the_codes() -> None:
    from spoolparse.runner.tasks import TASK_KEY_HELP, TASK_KEYS

    missing = set(TASK_KEYS) - set(TASK_KEY_HELP)
    assert not missing, f"say what each key is in TASK_KEY_HELP (spoolparse/runner/tasks.py): {sorted(missing)}"
    assert set(TASK_KEY_HELP) <= set(TASK_KEYS), "TASK_KEY_HELP describes a key that is no task key"
    want = task_keys_table()
    assert _block("guides/tasks.md", "task-keys") == want, (
        f"docs/guides/tasks.md's task-keys block is not what the code has; replace the block with:\n{want}")
