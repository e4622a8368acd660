"""The package as people adopt it: a cheap import, one CLI helper module below every subcommand, option
values with units, one exit-status table, and ``--events`` streams that stay pure NDJSON."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import spoolparse
from spoolparse import _cli_common
from spoolparse._cli_common import EXIT_STATUSES, exit_status, parse_duration, parse_size, positive_size
from spoolparse.result import Result

from .helpers import FAKE_CODEX, ROOT

CLI = [sys.executable, "-m", "spoolparse"]


def _fresh(code: str) -> list[str]:
    """The modules a fresh interpreter has loaded after running ``code``."""
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, check=True, cwd=ROOT, timeout=60)
    return list(json.loads(out.stdout.splitlines()[-1]))


def _heavy(modules: list[str], *roots: str) -> list[str]:
    return [m for m in modules if m.split(".")[0] in roots]


def test_import_spoolparse_loads_no_asyncio_rich_or_ray() -> None:
    loaded = _fresh("import spoolparse")
    assert _heavy(loaded, "asyncio", "rich", "ray") == []
    assert "spoolparse.runner" not in loaded and "spoolparse.aio" not in loaded


def test_lazy_names_are_the_real_objects_and_all_is_complete() -> None:
    from spoolparse.process import run
    from spoolparse.runner import Task

    assert spoolparse.run is run and spoolparse.Task is Task
    assert set(spoolparse.__all__) <= set(dir(spoolparse))
    for name in spoolparse.__all__:
        assert getattr(spoolparse, name) is not None, name
    with pytest.raises(AttributeError, match="no_such_name"):
        spoolparse.no_such_name  # noqa: B018


@pytest.mark.parametrize(
    ("argv", "unwanted"),
    [
        (["parse", "{small}"], ("asyncio", "rich", "ray", "psutil", "ijson")),  # ijson: on first need
        (["--version"], ("asyncio", "rich", "ray", "psutil")),
        (["run", "--no-progress", "--", "true"], ("asyncio", "rich", "ray")),
    ],
)
def test_the_command_imports_only_what_its_subcommand_uses(argv: list[str], unwanted: tuple[str, ...],
                                                           tmp_path: Path) -> None:
    small = tmp_path / "small.jsonl"
    small.write_text('{"type":"result","result":"hi"}\n')
    args = [a.replace("{small}", str(small)) for a in argv]
    loaded = _fresh(
        "import contextlib, io, sys\nfrom spoolparse.cli import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    main({args!r})"
    )
    assert _heavy(loaded, *unwanted) == []
    # the batch scheduler and its command are never needed (run may place its child in a cgroup)
    assert "spoolparse.runner.scheduler" not in loaded and "spoolparse.runner.cli" not in loaded


def test_the_cli_modules_import_each_other_in_one_direction() -> None:
    # runner/cli.py uses the shared helpers below both; importing it alone does not pull in spoolparse.cli
    loaded = _fresh("import spoolparse.runner.cli")
    assert "spoolparse.cli" not in loaded and "spoolparse._cli_common" in loaded


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("1.5", 1.5), ("1.5s", 1.5), ("250ms", 0.25), ("10m", 600.0), ("10min", 600.0),
     ("2h", 7200.0), ("1d", 86400.0), (" 3 S ", 3.0), (".5s", 0.5)],
)
def test_durations_take_units(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "message"),
    [("0", "must be positive"), ("-1", "must be positive"), ("0s", "must be positive"), ("10x", "not a duration"),
     ("nan", "not a duration"), ("inf", "not a duration"), ("1e3", "not a duration"), ("", "not a duration"),
     ("9" * 400, "out of range")],
)
def test_durations_are_finite_and_positive(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        parse_duration(text)


def test_a_grace_may_be_zero_but_not_negative() -> None:
    assert parse_duration("0", zero=True) == 0.0
    with pytest.raises(argparse.ArgumentTypeError, match="0 or more"):
        parse_duration("-0.5s", zero=True)


@pytest.mark.parametrize(
    ("text", "size"),
    [("1024", 1024), ("16M", 16 << 20), ("64MiB", 64 << 20), ("1.5G", 3 << 29), ("1.5GB", 3 << 29), ("2k", 2048),
     ("1T", 1 << 40), ("0", 0)],
)
def test_sizes_take_units(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(("text", "message"), [("lots", "not a size"), ("-1G", "not a size"), ("1Q", "not a size"),
                                               ("0", "must be positive"), ("0.0001", "must be positive"),
                                               ("9" * 400, "out of range")])
def test_positive_sizes_refuse_nonsense(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        positive_size(text)


def test_units_reach_the_run() -> None:
    # --timeout 300ms really is 0.3 s: the run times out, not the 300 s a bare number would mean
    p = subprocess.run([*CLI, "run", "--timeout", "300ms", "--grace", "0.1s", "--", "sleep", "30"],
                       capture_output=True, timeout=60, check=False)
    assert p.returncode == 124, p.stderr
    assert "timed out after 0.3 seconds" in p.stderr.decode()


def _result(**kw: object) -> Result:
    return Result(args=["x"], provider="generic", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "status"),
    [
        ({"returncode": 0}, 0),
        ({"returncode": 0, "error": "the agent said no"}, 1),
        ({"returncode": 3}, 1),
        ({"returncode": 2}, 1),  # never the usage status
        ({"returncode": 125}, 1),  # never spoolparse's own failure
        ({"returncode": -9}, 137),
        ({"returncode": -9, "timed_out": True}, 124),
        ({"returncode": -9, "spool_full": True}, 125),
        ({"returncode": None}, 0),
    ],
)
def test_one_exit_status_policy(fields: dict[str, object], status: int) -> None:
    res = _result(**fields)
    assert exit_status(res) == status


def test_every_exit_status_is_in_the_table() -> None:
    table = " ".join(EXIT_STATUSES)
    for name in dir(_cli_common):
        if name.startswith("EXIT_") and name not in ("EXIT_STATUSES", "EXIT_INTERRUPTED"):
            assert str(getattr(_cli_common, name)) in table, name
    assert _cli_common.EXIT_INTERRUPTED == 128 + 2


def _ndjson(data: bytes) -> list[dict[str, object]]:
    lines = data.decode().splitlines()
    events = [json.loads(line) for line in lines]  # every line is JSON: nothing plain mixed in
    assert all(isinstance(e, dict) and "kind" in e for e in events), lines
    return events


@pytest.mark.parametrize(
    ("argv", "status", "kind", "needle"),
    [
        (["run", "--events", "--timeout", "0.3", "--", "sleep", "30"], 124, "error", "timed out after 0.3 seconds"),
        (["run", "--events", "--bogus", "--", "true"], 2, "error", "unrecognized arguments: --bogus"),
        (["run", "--events", "--timeout", "soon", "--", "true"], 2, "error", "not a duration"),
        (["run", "--events", "--", "no-such-command-spoolparse"], 127, "error", "cannot start"),
        (["run", "--events", "--spool-dir", "/no/such/dir", "--", "true"], 2, "error", "does not exist"),
        (["run", "--events", "--max-spool-bytes", "64K", "--", "sh", "-c", "yes '{}'"], 125, "error", "spool full"),
    ],
)
def test_events_on_stderr_stay_pure_ndjson(argv: list[str], status: int, kind: str, needle: str) -> None:
    p = subprocess.run([*CLI, *argv], capture_output=True, timeout=60, check=False)
    assert p.returncode == status, p.stderr
    events = _ndjson(p.stderr)
    ours = [e for e in events if e.get("source")]
    assert ours and ours[-1]["kind"] == kind and needle in str(ours[-1]["message"]), events
    assert str(ours[-1]["source"]).startswith("spoolparse")


def test_warnings_are_events_too(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "PDD_AGENT_SPOOL_DIR": str(tmp_path / "missing")}
    p = subprocess.run([*CLI, "run", "--events", "--", *FAKE_CODEX, "--size", "4K"], capture_output=True,
                       timeout=60, check=False, env=env, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    events = _ndjson(p.stderr)
    warnings = [e for e in events if e.get("source") == "spoolparse" and e["kind"] == "warning"]
    assert len(warnings) == 1 and "PDD_AGENT_SPOOL_DIR" in str(warnings[0]["message"])
    assert any(e["kind"] == "text" for e in events)


def test_without_events_messages_stay_plain_lines() -> None:
    p = subprocess.run([*CLI, "run", "--timeout", "0.3", "--", "sleep", "30"], capture_output=True, timeout=60,
                       check=False)
    assert p.stderr.decode() == "spoolparse: error: command ['sleep', '30'] timed out after 0.3 seconds\n"


def test_a_missing_rich_is_named_when_the_status_line_is_asked_for(tmp_path: Path) -> None:
    # a stand-in 'rich' that fails to import, as when spoolparse[cli] is not installed
    (tmp_path / "rich").mkdir()
    (tmp_path / "rich" / "__init__.py").write_text("raise ImportError('no rich here')\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{tmp_path}:{ROOT}"}
    asked = subprocess.run([*CLI, "run", "--progress", "--", "true"], capture_output=True, timeout=60,
                           check=False, env=env, cwd=tmp_path)
    assert asked.returncode == 2 and asked.stdout == b""
    assert "pip install 'spoolparse[cli]'" in asked.stderr.decode()
    quiet = subprocess.run([*CLI, "run", "--", "sh", "-c", "echo '{\"type\":\"result\",\"result\":\"hi\"}'"],
                           capture_output=True, timeout=60, check=False, env=env, cwd=tmp_path)
    assert quiet.returncode == 0 and json.loads(quiet.stdout)["text"] == "hi" and quiet.stderr == b""
    helped = subprocess.run([*CLI, "--help"], capture_output=True, timeout=60, check=False, env=env, cwd=tmp_path)
    assert helped.returncode == 0 and b"batch" in helped.stdout



def test_task_lines_take_units_too() -> None:
    tasks = (
        b'{"id": "quick", "cmd": ["sleep", "30"], "timeout": "300ms", "memory": "64M"}\n'
        b'{"id": "bad", "cmd": ["true"], "timeout": "soon"}\n'
    )
    p = subprocess.run([*CLI, "batch", "-", "-j", "2", "--grace", "0.1s", "--no-progress"], input=tasks,
                       capture_output=True, timeout=60, check=False)
    assert p.returncode == 1, p.stderr
    outcomes = {o["id"]: o for o in map(json.loads, p.stdout.splitlines())}
    assert outcomes["quick"]["verdict"] == "timeout"  # 0.3 s, not 300 s
    assert outcomes["bad"]["verdict"] != "ok" and "timeout: not a duration: 'soon'" in outcomes["bad"]["error"]


@pytest.mark.slow
def test_the_wheel_has_no_test_code_and_the_sdist_carries_the_tests(tmp_path: Path) -> None:
    """``python -m build``: what a user installs, and what a packager rebuilds and tests from."""
    pytest.importorskip("build", reason="needs the build package: pip install -e '.[test]'")
    import tarfile
    import zipfile

    root = Path(__file__).resolve().parent.parent
    p = subprocess.run([sys.executable, "-m", "build", "--outdir", str(tmp_path), str(root)],
                       capture_output=True, timeout=600)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    wheel = next(tmp_path.glob("*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "spoolparse/py.typed" in names and any(n.endswith("/licenses/LICENSE") for n in names), names
    assert not [n for n in names if n.startswith(("tests/", "fixtures/", "benchmarks/", "spoolparse/testing/"))]
    sdist = next(tmp_path.glob("*.tar.gz"))
    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
    for needed in ("tests/conftest.py", "tests/helpers.py", "fixtures/fake_codex.py", "LICENSE", "pyproject.toml"):
        assert needed in members, needed
    # and its tests run from it, against its own code
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "src", filter="data") if sys.version_info >= (3, 12) else tar.extractall(
            tmp_path / "src")
    tree = next((tmp_path / "src").iterdir())
    env = {**os.environ, "PYTHONPATH": str(tree), "HYPOTHESIS_PROFILE": "dev"}
    where = subprocess.run([sys.executable, "-c", "import spoolparse; print(spoolparse.__file__)"],
                           capture_output=True, text=True, cwd=tree, env=env, check=True).stdout
    assert where.startswith(str(tree)), where
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_lines.py",
                        "tests/test_codex.py", "tests/test_docs.py", "tests/test_cli.py"],
                       capture_output=True, text=True, cwd=tree, env=env, timeout=600)
    assert p.returncode == 0 and " passed" in p.stdout, p.stdout[-3000:] + p.stderr[-2000:]
