"""Every program in examples/ and every example in the docs runs, from a scratch directory, against the fixtures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import spoolparse

from .docs_examples import fake_calls, generator, mypy_strict, run_page, sandbox
from .helpers import FIXTURES, ROOT

CLIS = generator().CLIS
EXAMPLES = ROOT / "examples"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _run(script: Path, *args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.parametrize("cli", CLIS, ids=lambda c: c.name)
def test_each_cli_example_runs_its_command_line_and_reads_the_answer(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    env = sandbox(tmp_path)
    p = _run(EXAMPLES / "clis" / f"{cli.name}.py", "fix the failing test", cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    expected = spoolparse.parse(FIXTURES / cli.fixture).text
    assert p.stdout.splitlines()[0] == expected
    # the example runs the command line its docs page gives, word for word
    assert fake_calls(env) == [cli.argv("fix the failing test")]


def test_every_cli_has_a_page_an_example_and_a_fixture() -> None:
    from spoolparse.providers import PROVIDERS

    assert {c.name for c in CLIS} == set(PROVIDERS), "a provider without a docs page, or a page without one"
    for cli in CLIS:
        page = ROOT / "docs" / "clis" / f"{cli.name}.md"
        assert f'--8<-- "examples/clis/{cli.name}.py"' in page.read_text(), page
        assert (FIXTURES / cli.fixture).is_file(), cli.fixture
    assert sorted(p.stem for p in (EXAMPLES / "clis").glob("*.py")) == sorted(c.name for c in CLIS)


def test_batch_with_a_job_log_then_resumed(tmp_path: Path) -> None:
    p = _run(EXAMPLES / "batch_resume.py", str(tmp_path / "jobs.ndjson"), cwd=tmp_path, env=sandbox(tmp_path))
    assert p.returncode == 0, p.stderr
    first = sorted(line.split()[2] for line in p.stdout.splitlines() if line.startswith("first run:"))
    resumed = sorted(line.split()[1] for line in p.stdout.splitlines() if line.startswith("resumed:"))
    assert first == ["issue-0", "issue-1"] and resumed == ["issue-2", "issue-3"], p.stdout


def test_kept_transcripts_of_failed_tasks(tmp_path: Path) -> None:
    results = tmp_path / "failed-runs"
    p = _run(EXAMPLES / "read_results.py", str(results), cwd=tmp_path, env=sandbox(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "bad failed rate limited" in p.stdout and "ok tasks keep nothing: True" in p.stdout, p.stdout
    assert (results / "bad" / "stdout").stat().st_size > 0 and not (results / "good").exists()


def test_live_events_in_asyncio(tmp_path: Path) -> None:
    p = _run(EXAMPLES / "live_asyncio.py", cwd=tmp_path, env=sandbox(tmp_path))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert any(line.startswith("tool: ") for line in lines)
    assert lines[-1] == "ok: True answer: FINAL-ANSWER: the bug is fixed in src/main.py", lines


def test_progress_display(tmp_path: Path) -> None:
    p = _run(EXAMPLES / "progress_ui.py", cwd=tmp_path, env=sandbox(tmp_path))
    assert p.returncode == 0, p.stderr
    assert sorted(line.split(":")[0] for line in p.stdout.splitlines() if line.startswith("task-")) == [
        "task-0", "task-1", "task-2"]
    assert "done 3/3, running 0, queued 0" in p.stdout
    assert " 0 tool calls" not in p.stdout, "the events reached the display"


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_examples_of_a_docs_page_run(page: Path, tmp_path: Path) -> None:
    failures = run_page(page, tmp_path, sandbox(tmp_path))
    assert failures == [], "\n\n".join(failures)


@pytest.mark.slow
def test_examples_pass_mypy_strict(tmp_path: Path) -> None:
    programs = sorted(EXAMPLES.rglob("*.py"))
    assert len(programs) >= len(CLIS) + 5
    assert mypy_strict(programs, tmp_path, at="examples/") == []
