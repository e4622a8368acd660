"""The offline harness's recipes and the pinned-CLI installer, without running any CLI."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest

from tests.realcli import clis, harness
from tests.realcli.mockserver import SCENARIOS, prompt

pytestmark = pytest.mark.realcli

_URL = re.compile(r"[a-z][a-z0-9+.-]*://[^\s\"']+", re.IGNORECASE)


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("cli", harness.CLIS)
def test_recipes_point_only_at_the_mock(tmp_path: Path, cli: str, scenario: str) -> None:
    rec = harness.recipe(cli, scenario, tmp_path)
    texts = [*rec.args, *rec.env.values(), *rec.files.values()]
    # The only base URL is the placeholder the wrapper fills with http://127.0.0.1:PORT.
    assert any(harness.URL in t for t in texts)
    assert [u for t in texts for u in _URL.findall(t)] == []
    assert prompt(scenario) in rec.args
    for rel in rec.files:
        assert not Path(rel).is_absolute() and ".." not in Path(rel).parts


@pytest.mark.parametrize("cli", harness.CLIS)
def test_failure_scenarios_cut_retries_and_success_keeps_defaults(tmp_path: Path, cli: str) -> None:
    def retry_settings(scenario: str) -> str:
        rec = harness.recipe(cli, scenario, tmp_path)
        return json.dumps([rec.args, rec.env, rec.files])

    marks = {
        "codex": "request_max_retries = 0",
        "claude": "CLAUDE_CODE_MAX_RETRIES",
        "gemini": "maxAttempts",
        "opencode": None,  # no setting: the mock's retry-after-ms header does it
        "qwen": "maxRetries",  # the client's own retries; its outer loop still tries 7 times
        "kilo": None,  # opencode's: the same header does it
        "droid": None,  # no setting at all: its failures are runs that the timeout ends
    }[cli]
    if marks is None:
        assert retry_settings("B") == retry_settings("A").replace("scenario: A", "scenario: B")
        return
    assert marks in retry_settings("B") and marks in retry_settings("Bevent")
    assert marks not in retry_settings("A") and marks not in retry_settings("Abig")


def test_extra_args_go_before_the_prompt(tmp_path: Path) -> None:
    rec = harness.recipe("gemini", "B", tmp_path, extra_args=["--debug"])
    at = rec.args.index(prompt("B"))
    assert rec.args[at - 1] == "--debug"
    with pytest.raises(ValueError):
        harness.recipe("aider", "A", tmp_path)
    with pytest.raises(ValueError):
        harness.recipe("codex", "Z", tmp_path)


def test_versions_are_pinned_once_and_overridable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(clis.VERSIONS_ENV, raising=False)
    assert {n: c.spec for n, c in clis.versions().items()} == {
        "codex": "@openai/codex@0.169.0",
        "claude": "@anthropic-ai/claude-code@2.1.197",
        "gemini": "@google/gemini-cli@0.61.0",
        "opencode": "opencode-ai@1.18.33",
        "qwen": "@qwen-code/qwen-code@0.24.4",
        "kilo": "@kilocode/cli@7.7.7",
        "droid": "@factory/cli-linux-x64@0.225.2",
    }
    monkeypatch.setenv(clis.VERSIONS_ENV, "codex=0.170.0, gemini=0.62.0")
    chosen = clis.versions({"gemini": "0.63.0"})
    assert chosen["codex"].spec == "@openai/codex@0.170.0"
    assert chosen["gemini"].spec == "@google/gemini-cli@0.63.0"
    assert chosen["claude"] == clis.PINNED["claude"]
    assert chosen["codex"].dirname == "openai-codex-0.170.0"
    monkeypatch.setenv(clis.VERSIONS_ENV, "cursor=1.0")
    with pytest.raises(ValueError):
        clis.versions()


def _fake_npm(bindir: Path, calls: Path, *, fail: bool = False) -> None:
    # Stands in for npm: creates node_modules/.bin/<name> under --prefix and counts its calls.
    script = bindir / "npm"
    body = f'echo "$@" >> "{calls}"\n'
    if fail:
        body += 'echo "npm error 404 Not Found" >&2; exit 1\n'
    else:
        body += (
            'prefix=""; while [ $# -gt 0 ]; do [ "$1" = --prefix ] && prefix="$2"; last="$1"; shift; done\n'
            'name="${last%@*}"; name="${name##*/}"; [ "$name" = claude-code ] && name=claude\n'
            'mkdir -p "$prefix/node_modules/.bin" && printf "#!/bin/sh\\n" > "$prefix/node_modules/.bin/$name"\n'
        )
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    node = bindir / "node"
    node.write_text("#!/bin/sh\necho v20.0.0\n")
    node.chmod(node.stat().st_mode | stat.S_IEXEC)


def test_install_runs_npm_once_then_reuses_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls"
    _fake_npm(bindir, calls)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(clis.CACHE_ENV, str(tmp_path / "cache"))
    cli = clis.PINNED["claude"]
    exe = clis.install(cli)
    assert exe == tmp_path / "cache" / cli.dirname / "node_modules" / ".bin" / "claude"
    assert clis.install(cli) == exe
    lines = calls.read_text().splitlines()
    assert len(lines) == 1 and lines[0].split()[-1] == cli.spec and "--prefix" in lines[0]
    assert clis.node_problem(clis.PINNED["gemini"]) is None


def test_install_failure_says_what_npm_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _fake_npm(bindir, tmp_path / "calls", fail=True)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(clis.CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(clis.CliInstallError, match="404 Not Found"):
        clis.install(clis.PINNED["codex"])
    assert not (tmp_path / "cache" / clis.PINNED["codex"].dirname / ".spoolparse-installed").exists()


def test_missing_npm_is_one_clear_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    problem = clis.npm_problem()
    assert problem is not None and "npm" in problem and "node" in problem
    with pytest.raises(clis.CliInstallError, match="not found"):
        clis.install(clis.PINNED["opencode"], root=tmp_path / "cache")


def test_clis_command_lists_and_rejects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(clis.CACHE_ENV, str(tmp_path))
    monkeypatch.delenv(clis.VERSIONS_ENV, raising=False)
    assert clis.main(["list", "--version", "codex=0.170.0", "codex", "gemini"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "codex\t@openai/codex@0.170.0\t(not installed)",
        "gemini\t@google/gemini-cli@0.61.0\t(not installed)",
    ]
    with pytest.raises(SystemExit) as exc:
        clis.main(["install", "--version", "cursor=1"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        clis.main(["install", "aider"])
