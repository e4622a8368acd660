"""Run a real agent CLI through ``spoolparse run`` against the mock model server, offline.

Each run gets a scratch directory holding ``HOME``, ``TMPDIR``, the XDG
directories, the CLI's configuration and a working directory, and an
environment built from scratch (nothing inherited but ``PATH`` and the
locale): telemetry, update checks and model-list fetches are off and every
base URL points at the mock on 127.0.0.1.

When the caller is root and ``unshare -n`` works, the mock server *and* the CLI
run inside a fresh network namespace whose only interface is loopback, so
nothing can leave the machine; otherwise they share the host's loopback.
Either way the wrapper (``python -m tests.realcli.harness SPEC``) starts
the mock on a free port, writes the configuration with the port filled in,
runs ``python -m spoolparse run --timeout T -- CLI …``, passes its summary
through and saves the mock's request log.

.. seealso:: :mod:`tests.realcli.mockserver`, :mod:`tests.realcli.clis`
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .mockserver import SCENARIOS, MockModelServer, prompt

__all__ = ["CLIS", "Recipe", "OfflineRun", "recipe", "network_isolation", "run_offline", "main"]

CLIS = ("codex", "claude", "gemini", "opencode", "qwen", "kilo", "droid")
#: Stands for ``http://127.0.0.1:PORT`` in a recipe until the mock has its port.
URL = "@MOCK_URL@"
API_KEY = "mock-key-not-secret"
#: Seconds the wrapper may outlive the run's own timeout before it is killed.
WRAPPER_MARGIN = 60.0
#: Characters of the wrapper's stderr kept in :class:`OfflineRun`.
STDERR_KEPT = 8000


@dataclass(slots=True)
class Recipe:
    """How to run one CLI offline: argv after the executable, env, and files under the scratch dir."""

    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)


def recipe(
    cli: str, scenario: str, root: Path, *, extra_args: Sequence[str] = (), cut_retries: bool = True
) -> Recipe:
    """The command line, environment and config files ``cli`` needs to talk only to the mock.

    ``root`` is the scratch directory (``home``, ``tmp``, ``work`` live under it);
    ``extra_args`` go before the prompt (e.g. ``--include-partial-messages``).
    In the failure scenarios the CLIs' own retries are cut where a setting allows
    (unless ``cut_retries`` is false), so a failure is reported in seconds
    rather than minutes.
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}")
    home = root / "home"
    failing = cut_retries and scenario in ("B", "Bevent")
    text = prompt(scenario)
    rec = _recipe(cli, scenario, home, failing, text)
    at = rec.args.index(text)
    rec.args[at:at] = list(extra_args)
    return rec


def _recipe(cli: str, scenario: str, home: Path, failing: bool, text: str) -> Recipe:
    if cli == "codex":
        retries = "request_max_retries = 0\nstream_max_retries = 0\n" if failing else ""
        config = (
            'model = "mock-model"\nmodel_provider = "mock"\ncheck_for_update_on_startup = false\n'
            "[analytics]\nenabled = false\n"
            f'[model_providers.mock]\nname = "Mock"\nbase_url = "{URL}/v1"\nwire_api = "responses"\n'
            f'env_key = "MOCK_API_KEY"\n{retries}'
        )
        return Recipe(
            ["exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", text],
            {"CODEX_HOME": str(home / ".codex"), "MOCK_API_KEY": API_KEY},
            {"home/.codex/config.toml": config},
        )
    if cli == "claude":
        env = {
            "ANTHROPIC_BASE_URL": URL,
            "ANTHROPIC_API_KEY": API_KEY,
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            # --dangerously-skip-permissions refuses to run as root without it.
            "IS_SANDBOX": "1",
        }
        if failing:
            env["CLAUDE_CODE_MAX_RETRIES"] = "0"
        return Recipe(
            ["-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions", text], env
        )
    if cli == "gemini":
        general: dict[str, Any] = {"enableAutoUpdate": False, "enableAutoUpdateNotification": False}
        if failing:
            general["maxAttempts"] = 1
        settings = {
            # Without it GOOGLE_GEMINI_BASE_URL selects the "gateway" auth type, which
            # headless mode rejects (exit 41); the base URL is honoured for this type too.
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": general,
        }
        # Its model-routing classifier retries a 500 five times with backoff whatever
        # maxAttempts says (about a minute); naming the model skips routing in B.
        model = ["-m", "gemini-2.5-flash"] if scenario == "B" else []
        return Recipe(
            ["-p", text, "-o", "stream-json", "--yolo", "--skip-trust", *model],
            {"GOOGLE_GEMINI_BASE_URL": URL, "GEMINI_API_KEY": API_KEY},
            {"home/.gemini/settings.json": json.dumps(settings, indent=2)},
        )
    if cli in ("opencode", "kilo"):
        return _opencode_recipe(cli, home, text)
    more = _more_recipe(cli, home, failing, text)
    if more is not None:
        return more
    raise ValueError(f"unknown CLI {cli!r}; choose one of {', '.join(CLIS)}")


def _opencode_recipe(cli: str, home: Path, text: str) -> Recipe:
    """opencode, and Kilo (its fork: the same config under its own names, ``KILO_CONFIG``, ``KILO_DISABLE_*``)."""
    config = {
        "provider": {
            "mock": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Mock",
                "options": {"baseURL": f"{URL}/v1", "apiKey": "{env:MOCK_API_KEY}"},
                "models": {"mock-model": {"name": "Mock Model"}},
            }
        },
        "model": "mock/mock-model",
        "autoupdate": False,
        "share": "disabled",
    }
    prefix = cli.upper()
    env = {f"{prefix}_CONFIG": str(home / f"{cli}.json"), "MOCK_API_KEY": API_KEY}
    for switch in ("MODELS_FETCH", "AUTOUPDATE", "SHARE", "LSP_DOWNLOAD", "DEFAULT_PLUGINS"):
        env[f"{prefix}_DISABLE_{switch}"] = "1"
    files = {f"home/{cli}.json": json.dumps(config, indent=2)}
    return Recipe(["run", "--format", "json", "--auto", text], env, files)


def _more_recipe(cli: str, home: Path, failing: bool, text: str) -> Recipe | None:
    """The CLIs added after the first four (OpenAI-compatible chat clients of the mock)."""
    if cli == "qwen":
        generation: dict[str, Any] = {"maxRetries": 0} if failing else {}
        settings = {
            "security": {"auth": {"selectedType": "openai"}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"disableAutoUpdate": True},
            "model": {"generationConfig": generation},
        }
        env = {
            "OPENAI_API_KEY": API_KEY,
            "OPENAI_BASE_URL": f"{URL}/v1",
            "OPENAI_MODEL": "mock-model",
            "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
        }
        files = {"home/.qwen/settings.json": json.dumps(settings, indent=2)}
        return Recipe(["-p", text, "--output-format", "stream-json", "--yolo"], env, files)
    if cli == "droid":
        # a custom model (BYOK) on the mock's chat completions endpoint; its id is custom:<name>-<index>.
        # Droid has no retry setting: it retries a failing model for minutes (see test_realcli).
        model = {"model": "mock-model", "displayName": "Mock", "baseUrl": f"{URL}/v1", "apiKey": API_KEY,
                 "provider": "generic-chat-completion-api", "maxOutputTokens": 4096}
        files = {"home/.factory/settings.json": json.dumps({"customModels": [model]}, indent=2)}
        return Recipe(["exec", "--output-format", "stream-json", "--auto", "high", "-m", "custom:Mock-0", text],
                      {}, files)
    return None


@functools.cache
def network_isolation() -> bool:
    """Whether runs can go into their own loopback-only network namespace (root + ``unshare -n`` + ``ip``)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    try:
        probe = subprocess.run(
            ["unshare", "-n", "ip", "link", "set", "lo", "up"], capture_output=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


@dataclass(slots=True)
class OfflineRun:
    """What one offline run produced: spoolparse's summary and exit status, and what the mock saw."""

    cli: str
    scenario: str
    summary: dict[str, Any] | None
    exit_status: int
    stderr: str
    requests: list[dict[str, Any]]
    isolated: bool
    wall_s: float

    def answers(self) -> list[str]:
        """The mock's decision per request, in order (``tool_call``, ``final``, ``http_500`` …)."""
        return [str(r["answer"]) for r in self.requests]


def _base_env(root: Path, exe: Path) -> dict[str, str]:
    node = shutil.which("node")
    path = [str(exe.parent)]
    if node is not None:
        path.append(str(Path(node).parent))
    path += ["/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"]
    return {
        "PATH": os.pathsep.join(dict.fromkeys(path)),
        "HOME": str(root / "home"),
        "TMPDIR": str(root / "tmp"),
        "XDG_CONFIG_HOME": str(root / "home" / ".config"),
        "XDG_DATA_HOME": str(root / "home" / ".local" / "share"),
        "XDG_CACHE_HOME": str(root / "home" / ".cache"),
        "XDG_STATE_HOME": str(root / "home" / ".local" / "state"),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


def run_offline(
    cli: str,
    scenario: str,
    *,
    exe: str | os.PathLike[str],
    root: str | os.PathLike[str],
    timeout: float = 120.0,
    isolate: bool | None = None,
    extra_args: Sequence[str] = (),
    cut_retries: bool = True,
) -> OfflineRun:
    """Run ``cli`` (executable ``exe``) in ``scenario`` through ``spoolparse run``, offline.

    ``root`` must be an empty scratch directory; it keeps the spec, the
    summary (``summary.json``) and the mock's request log (``requests.jsonl``). ``isolate`` defaults to
    :func:`network_isolation`; ``extra_args`` and ``cut_retries`` are passed to
    :func:`recipe`. The wrapper gets ``timeout`` plus a margin
    before it is killed; the CLI itself is bounded by ``spoolparse run --timeout``.
    """
    root = Path(root)
    exe = Path(exe)
    rec = recipe(cli, scenario, root, extra_args=extra_args, cut_retries=cut_retries)
    isolated = network_isolation() if isolate is None else isolate
    for sub in ("home", "tmp", "work"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    env = _base_env(root, exe)
    env.update(rec.env)
    spec = {
        "scenario": scenario,
        "isolated": isolated,
        "timeout": timeout,
        "argv": [str(exe), *rec.args],
        "env": env,
        "files": {str(root / rel): text for rel, text in rec.files.items()},
        "cwd": str(root / "work"),
        "requests": str(root / "requests.jsonl"),
    }
    spec_path = root / "spec.json"
    spec_path.write_text(json.dumps(spec, indent=2))
    wrapper = [sys.executable, "-m", "tests.realcli.harness", str(spec_path)]
    if isolated:
        wrapper = ["unshare", "-n", *wrapper]
    # The wrapper imports spoolparse and this module (tests.realcli) from the repository's root;
    # nothing else of ours leaks in.
    package_root = str(Path(__file__).resolve().parents[2])
    wrapper_env = {"PATH": env["PATH"], "PYTHONPATH": package_root, "LANG": "C.UTF-8", "TMPDIR": env["TMPDIR"]}
    started = time.monotonic()
    with subprocess.Popen(
        wrapper,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=wrapper_env,
        cwd=str(root),
        start_new_session=True,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout + WRAPPER_MARGIN)
        except subprocess.TimeoutExpired:
            # spoolparse's own --timeout should have ended the run long before this backstop.
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            stderr += f"\nthe wrapper was killed after {timeout + WRAPPER_MARGIN:.0f} s".encode()
    wall = time.monotonic() - started
    out = stdout.decode("utf-8", "replace").strip()
    (root / "summary.json").write_text(out + "\n")
    try:
        summary = json.loads(out) if out else None
    except ValueError:
        summary = None
    requests: list[dict[str, Any]] = []
    log = root / "requests.jsonl"
    if log.exists():
        requests = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return OfflineRun(
        cli=cli,
        scenario=scenario,
        summary=summary if isinstance(summary, dict) else None,
        exit_status=proc.returncode,
        stderr=stderr.decode("utf-8", "replace")[-STDERR_KEPT:],
        requests=requests,
        isolated=isolated,
        wall_s=wall,
    )


def _fill(value: str, url: str) -> str:
    return value.replace(URL, url)


def _serve_and_run(spec: Mapping[str, Any]) -> int:
    if spec["isolated"]:
        # A new network namespace starts with loopback down.
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    with MockModelServer(scenario=str(spec["scenario"])) as mock:
        env = {k: _fill(v, mock.url) for k, v in spec["env"].items()}
        for path, text in spec["files"].items():
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(_fill(text, mock.url))
        argv: Sequence[str] = [_fill(a, mock.url) for a in spec["argv"]]
        env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
        cmd = [sys.executable, "-m", "spoolparse", "run", "--timeout", str(spec["timeout"]), "--", *argv]
        try:
            proc = subprocess.run(cmd, env=env, cwd=spec["cwd"], stdin=subprocess.DEVNULL, check=False)
        finally:
            with open(spec["requests"], "w") as log:
                for r in mock.requests:
                    log.write(json.dumps(r.as_dict()) + "\n")
        return proc.returncode


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tests.realcli.harness SPEC.json``: the in-namespace half of :func:`run_offline`."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m tests.realcli.harness SPEC.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(args[0]).read_text())
    return _serve_and_run(spec)


if __name__ == "__main__":
    sys.exit(main())
