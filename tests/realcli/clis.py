"""The real agent CLIs the conformance tests drive: pinned versions, installed on first use.

The pinned versions live in :data:`PINNED` and nowhere else. Each is
installed with ``npm install --prefix <cache>/<package>-<version>`` (the cache
is ``$SPOOLPARSE_CLI_CACHE``, else ``$XDG_CACHE_HOME/spoolparse/clis``, else
``~/.cache/spoolparse/clis``, always outside the repository) and reused after.

To try newer versions, name them in ``SPOOLPARSE_CLI_VERSIONS``::

    SPOOLPARSE_CLI_VERSIONS=codex=0.170.0,gemini=0.62.0 python -m pytest -m realcli

or install ahead of time::

    python -m tests.realcli.clis install --version codex=0.170.0

.. seealso:: :mod:`tests.realcli.harness`, which runs them offline.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

__all__ = [
    "PINNED",
    "CliPackage",
    "CliInstallError",
    "versions",
    "cache_dir",
    "npm_problem",
    "node_major",
    "node_problem",
    "install",
    "main",
]

#: Seconds one ``npm install`` may take (the four packages are ~700 MB together).
INSTALL_TIMEOUT = 1800.0
#: Tail of npm's output kept in an install error.
ERROR_TAIL = 4000


@dataclass(frozen=True, slots=True)
class CliPackage:
    """One agent CLI on npm: its command name, package, version, executable and oldest Node it runs on."""

    name: str
    package: str
    version: str
    bin: str
    min_node: int = 0

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}"

    @property
    def dirname(self) -> str:
        return f"{self.package.lstrip('@').replace('/', '-')}-{self.version}"

    def executable(self, prefix: Path) -> Path:
        """Where the install under ``prefix`` puts it: ``node_modules/.bin/<bin>``, or, for a ``bin`` with a
        slash (a package that only ships a binary and declares no command), that path under ``node_modules``."""
        if "/" in self.bin:
            return prefix / "node_modules" / self.bin
        return prefix / "node_modules" / ".bin" / self.bin


#: The versions the conformance tests are known to pass with.
PINNED: Mapping[str, CliPackage] = {
    "codex": CliPackage("codex", "@openai/codex", "0.169.0", "codex", min_node=16),
    "claude": CliPackage("claude", "@anthropic-ai/claude-code", "2.1.197", "claude"),
    "gemini": CliPackage("gemini", "@google/gemini-cli", "0.61.0", "gemini", min_node=20),
    "opencode": CliPackage("opencode", "opencode-ai", "1.18.33", "opencode"),
    "qwen": CliPackage("qwen", "@qwen-code/qwen-code", "0.24.4", "qwen", min_node=20),
    # 7.8.1 has no linux-x64 platform binary on the registry; 7.7.7 has
    "kilo": CliPackage("kilo", "@kilocode/cli", "7.7.7", "kilo"),
    # @factory/cli 0.225.1 wants a platform binary of its own version the registry here lacks: the binary
    # package alone (linux x64; on other machines its install fails and the runs are skipped, saying so)
    "droid": CliPackage("droid", "@factory/cli-linux-x64", "0.225.2", "@factory/cli-linux-x64/bin/droid"),
}

VERSIONS_ENV = "SPOOLPARSE_CLI_VERSIONS"
CACHE_ENV = "SPOOLPARSE_CLI_CACHE"


class CliInstallError(RuntimeError):
    """``npm install`` of a CLI failed; the message ends with npm's output."""


def _overrides(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.replace(" ", ",").split(","):
        if not part:
            continue
        name, sep, version = part.partition("=")
        if not sep or name not in PINNED or not version:
            raise ValueError(f"bad CLI version {part!r}: use NAME=VERSION with NAME one of {', '.join(PINNED)}")
        out[name] = version
    return out


def versions(overrides: Mapping[str, str] | None = None) -> dict[str, CliPackage]:
    """The pinned CLIs, with versions from ``$SPOOLPARSE_CLI_VERSIONS`` and ``overrides`` applied."""
    chosen = dict(PINNED)
    merged = _overrides(os.environ.get(VERSIONS_ENV, ""))
    merged.update(overrides or {})
    for name, version in merged.items():
        chosen[name] = replace(chosen[name], version=version)
    return chosen


def cache_dir() -> Path:
    """Where installed CLIs live (created on demand, never inside the repository)."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "spoolparse" / "clis"


def npm_problem() -> str | None:
    """Why the CLIs cannot be installed here, or ``None`` when node and npm are present."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not found on PATH (the real agent CLIs are npm packages)"
    return None


def node_major() -> int | None:
    """The major version of ``node`` on PATH, or ``None`` when there is none that answers."""
    node = shutil.which("node")
    if node is None:
        return None
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    head = out.strip().lstrip("v").split(".", 1)[0]
    return int(head) if head.isdigit() else None


def node_problem(cli: CliPackage) -> str | None:
    """Why ``cli`` cannot run on this Node, or ``None``."""
    major = node_major()
    if major is None:
        return "node not found on PATH"
    if major < cli.min_node:
        return f"{cli.spec} needs Node >= {cli.min_node}, this is Node {major}"
    return None


def install(cli: CliPackage, *, root: Path | None = None) -> Path:
    """The path of ``cli``'s executable, running ``npm install`` first if it is not cached.

    Concurrent callers (several test processes) serialize on a lock file; a
    half-finished install is never reused, since the stamp is written last.
    """
    root = root if root is not None else cache_dir()
    prefix = root / cli.dirname
    exe = cli.executable(prefix)
    stamp = prefix / ".spoolparse-installed"
    if stamp.exists() and exe.exists():
        return exe
    problem = npm_problem()
    if problem is not None:
        raise CliInstallError(problem)
    prefix.mkdir(parents=True, exist_ok=True)
    with open(root / f".{cli.dirname}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and exe.exists():
            return exe
        cmd = ["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--loglevel=error", cli.spec]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False)
        except subprocess.TimeoutExpired as e:
            raise CliInstallError(f"npm install {cli.spec} took longer than {INSTALL_TIMEOUT:.0f} s") from e
        if proc.returncode != 0 or not exe.exists():
            tail = (proc.stdout + proc.stderr)[-ERROR_TAIL:]
            raise CliInstallError(f"npm install {cli.spec} failed (exit {proc.returncode}): {tail.strip()}")
        stamp.write_text(cli.spec + "\n")
    return exe


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tests.realcli.clis install|list [--version NAME=VERSION ...] [NAME ...]``."""
    parser = argparse.ArgumentParser(prog="python -m tests.realcli.clis", description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=("install", "list"))
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"CLIs (default: all of {', '.join(PINNED)})")
    parser.add_argument("--version", action="append", default=[], metavar="NAME=VERSION", help="use this version")
    args = parser.parse_intermixed_args(argv)
    try:
        chosen = versions(_overrides(",".join(args.version)))
    except ValueError as e:
        parser.error(str(e))
    names = args.names or list(chosen)
    for name in names:
        if name not in chosen:
            parser.error(f"unknown CLI {name!r}; choose from {', '.join(chosen)}")
    for name in names:
        cli = chosen[name]
        if args.action == "list":
            exe = cli.executable(cache_dir() / cli.dirname)
            print(f"{name}\t{cli.spec}\t{exe if exe.exists() else '(not installed)'}")
            continue
        try:
            print(f"{name}\t{cli.spec}\t{install(cli)}")
        except CliInstallError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
