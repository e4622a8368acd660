"""The docs tell the truth: generated blocks match the code, the bounds match the limits, the set-up commands
match CI, the site builds, and the README stays a first-five-minutes page."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spoolparse import _limits

from .docs_examples import generator, run_page, sandbox
from .helpers import ROOT

README = (ROOT / "README.md").read_text()
BOUNDS = (ROOT / "docs" / "reference" / "bounds.md").read_text()
FIX = "python docs/generate.py"


def _human(n: float, unit: str) -> float:
    return n * {"B": 1, "KiB": _limits.KiB, "MiB": _limits.MiB, "GiB": _limits.GiB, "s": 1, "ms": 0.001}[unit]


def test_generated_blocks_match_the_code() -> None:
    gen = generator()
    stale = [str(page.relative_to(ROOT)) for page in gen.pages() if gen.render(page.read_text()) != page.read_text()]
    assert stale == [], f"generated blocks differ from the code in {', '.join(stale)}: run {FIX}"


def test_every_generator_has_its_block_and_every_block_its_generator() -> None:
    gen = generator()
    used: dict[str, int] = {}
    for page in gen.pages():
        for name, _ in gen.blocks_of(page.read_text()):
            if name in gen.GENERATED_ELSEWHERE:
                continue
            assert name in gen.BLOCKS, f"{page.relative_to(ROOT)}: no generator named {name!r}"
            used[name] = used.get(name, 0) + 1
    assert set(used) == set(gen.BLOCKS), f"generated blocks no page holds: {sorted(set(gen.BLOCKS) - set(used))}"
    assert used["exit-statuses"] == 1, "one exit-status table, not a copy per page"


def test_a_stale_block_is_found_and_rewritten() -> None:
    gen = generator()
    page = "intro\n<!-- generated: exit-statuses -->\nan old table\n<!-- end: exit-statuses -->\nafter\n"
    new = gen.render(page)
    assert new != page and "an old table" not in new and new.startswith("intro\n") and new.endswith("after\n")
    assert "| 124 |" in new and gen.render(new) == new
    elsewhere = "<!-- generated: traps -->\nkept as it is\n<!-- end: traps -->\n"
    assert gen.render(elsewhere) == elsewhere, "a block another generator owns is left alone"


def test_every_json_key_has_a_meaning() -> None:
    from spoolparse import types

    gen = generator()
    for shape in (types.Summary, types.OutcomeDict, types.JobLogRecord, types.Usage, types.DroppedLine):
        missing = [k for k in shape.__annotations__ if k not in gen.MEANINGS]
        assert missing == [], f"{shape.__name__}: say what {missing} mean in docs/generate.py MEANINGS, then {FIX}"


def test_bounds_table_matches_the_limits_module() -> None:
    rows = re.findall(r"^\| `([A-Z_]+)`[^|]*\| ([^|]+) \|", BOUNDS, re.M)
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
    assert public <= seen, f"bounds missing from docs/reference/bounds.md: {sorted(public - seen)}"


def test_setup_commands_and_ci_agree() -> None:
    blocks = re.findall(r"```sh\n(.*?)```", README, re.S)
    setup, test_cmd = blocks[0].strip(), blocks[1].strip()
    assert "spoolparse run -- python fixtures/fake_codex.py" in setup
    ci = (ROOT / ".ci" / "run").read_text()
    install = re.search(r"pip install (-e '\.\[test\]'.*?) &&", setup)
    assert install is not None, setup
    how = f"python -m pip install --quiet {install.group(1)}"
    assert how in ci, f"{install.group(1)!r} is not how .ci/run installs"
    assert test_cmd in ci.splitlines(), f"{test_cmd!r} is not what .ci/run runs"
    for slow in re.findall(r"`(python -m pytest -m [^`]+)`", README):  # the README's other test commands
        assert slow in ci.splitlines(), f"{slow!r} is not what .ci/run runs"
    # and the docs give the same set-up command
    for page in ("getting-started.md", "contributing.md"):
        assert setup in (ROOT / "docs" / page).read_text(), page


def test_the_readme_fits_the_first_five_minutes() -> None:
    assert len(README.splitlines()) <= 250
    for link in re.findall(r"\]\((docs/[^)#]+|examples/)\)", README):
        assert (ROOT / link).exists(), f"the README links to {link}, which does not exist"


def test_every_docs_page_is_in_the_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    missing = sorted(p for p in pages if p not in nav)
    assert missing == [], f"pages not in mkdocs.yml's nav: {missing}"


def test_the_example_checker_can_fail(tmp_path: Path) -> None:
    page = tmp_path / "probe.md"
    page.write_text("```console\n$ spoolparse parse transcript.jsonl | jq -r .text\nnot the answer\n```\n\n"
                    "```sh\nspoolparse parse missing.jsonl\n```\n\n```python\nraise SystemExit(3)\n```\n")
    failures = run_page(page, tmp_path, sandbox(tmp_path))
    assert len(failures) == 3, failures
    assert "instead of:\nnot the answer" in failures[0] and "exited 2, not 0" in failures[1]


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


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None,
                    reason="needs the docs extra: pip install -e '.[docs]'")
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """Broken links, anchors, snippets or API references fail the build."""
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or "mkdocs"
    p = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                       capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, check=False)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "api" / "index.html").read_text().count("doc-heading") > 20


@pytest.mark.slow
def test_a_typed_program_outside_the_checkout_passes_mypy_strict(tmp_path: Path) -> None:
    """After the documented install, mypy sees spoolparse from anywhere (an import hook it cannot follow
    would make it "Cannot find implementation or library stub for module named spoolparse")."""
    program = tmp_path / "consumer.py"
    shutil.copy(ROOT / "tests" / "typed_consumer.py", program)
    p = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
                        "--no-incremental", str(program)], cwd=tmp_path, capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}, check=False)
    hint = " (install with: pip install -e '.[test]' --config-settings editable_mode=strict)"
    assert p.returncode == 0, p.stdout + p.stderr + hint


@pytest.mark.slow
def test_the_documented_test_commands_select_what_they_say() -> None:
    """Plain pytest: the quick suite on workers; -m and -n on the command line replace pyproject's."""

    def pytest_run(*args: str) -> str:
        p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/test_docs.py", *args],
                           cwd=ROOT, capture_output=True, text=True, check=False)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        return p.stdout

    slow = {"test_the_site_builds_strictly", "test_a_typed_program_outside_the_checkout_passes_mypy_strict",
            "test_the_documented_test_commands_select_what_they_say"}
    quick = set(re.findall(r"::(\w+)", pytest_run("--co", "-q")))
    asked = set(re.findall(r"::(\w+)", pytest_run("--co", "-q", "-m", "slow or realcli")))
    assert quick and not quick & slow and asked == slow, (quick, asked)
    assert "created: 3/3 workers" in pytest_run("-k", "skip_says")
    assert "workers" not in pytest_run("-k", "skip_says", "-n", "0")
