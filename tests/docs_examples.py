"""Run the examples of the docs as a reader would: a scratch directory, and agent CLIs that print a recording.

Every agent CLI of ``docs/generate.py``'s ``CLIS`` gets a fake of the same name on ``PATH`` that writes
its argv to ``$FAKE_CLI_LOG`` and prints its fixture transcript, so an example written with the real
command line (``codex exec --json "…"``) runs here unchanged.

What runs, per page (``README.md`` and every page under ``docs/``):

* a ```` ```console ```` block: each ``$ `` command, its output compared with the lines after it
  (doctest's rules: ``...`` or ``…`` matches anything; the output is the check, not the exit status);
* a ```` ```sh ```` block: each line that calls ``spoolparse``, expecting exit status 0, or N when the line
  ends with a comment that ends in ``exits N``;
* a ```` ```python ```` block: run as a script (``<!-- check: mypy -->`` before it: type-checked instead);
* a block with ``title="FILE"``: written to FILE before the page's commands run;
* ``<!-- check: skip REASON -->`` before a block: left out.
"""

from __future__ import annotations

import doctest
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from .helpers import FIXTURES, ROOT

#: Seconds one command of an example may take (they read small fixtures).
COMMAND_TIMEOUT = 120


def generator() -> ModuleType:
    """``docs/generate.py``, loaded by path (docs/ is no package)."""
    spec = importlib.util.spec_from_file_location("spoolparse_docs_generate", ROOT / "docs" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return sys.modules[spec.name]


FAKE = """#!{python}
import json, os, shutil, sys
log = os.environ.get("FAKE_CLI_LOG")
if log:
    with open(log, "a") as f:
        f.write(json.dumps([os.path.basename(sys.argv[0]), *sys.argv[1:]]) + "\\n")
with open({fixture!r}, "rb") as f:
    shutil.copyfileobj(f, sys.stdout.buffer)
"""


def fake_clis(bin_dir: Path) -> None:
    """A fake of every agent CLI in ``bin_dir``, each printing its fixture transcript."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for cli in generator().CLIS:
        path = bin_dir / cli.executable
        path.write_text(FAKE.format(python=sys.executable, fixture=str(FIXTURES / cli.fixture)))
        path.chmod(0o755)


def sandbox(where: Path) -> dict[str, str]:
    """A scratch directory as a reader's would be after the docs' first steps; returns its environment."""
    fake_clis(where / ".bin")
    (where / "fixtures").symlink_to(FIXTURES)
    (where / "examples").symlink_to(ROOT / "examples")
    shutil.copy(FIXTURES / "codex" / "realcli_A.jsonl", where / "transcript.jsonl")
    (where / "prompt.txt").write_text("fix the failing test\n")
    (where / "tasks.jsonl").write_text("".join(
        json.dumps({"id": f"fix-{n}", "cmd": cli.argv(f"fix issue {n}")}) + "\n"
        for n, cli in enumerate(generator().CLIS[:3], 1)))
    path = os.pathsep.join([str(where / ".bin"), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path, "FAKE_CLI_LOG": str(where / ".bin" / "log"), "NO_COLOR": "1"}


# -- the blocks of a page ------------------------------------------------------------------------------


@dataclass
class Block:
    lang: str
    title: str | None
    check: str  # "run", "mypy" or "skip"
    text: str
    line: int  # of the opening fence, 1-based


_FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```\s*$", re.M | re.S)
_CHECK = re.compile(r"<!-- check: (\w+)[^>]*-->\s*$")


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    out = []
    for m in _FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        check = _CHECK.search(before)
        title = re.search(r'title="([^"]+)"', m.group(2))
        out.append(Block(m.group(1), title.group(1) if title else None, check.group(1) if check else "run",
                         m.group(3), text.count("\n", 0, m.start()) + 1))
    return out


def is_cli_line(line: str) -> bool:
    """A shell line that calls spoolparse: it starts with it, or pipes into it."""
    line = line.strip()
    return line.startswith("spoolparse ") or re.search(r"\|\s*spoolparse ", line) is not None


_EXITS = re.compile(r"#.*\bexits (\d+)\s*$")


def _shell(command: str, cwd: Path, env: dict[str, str], *, pipefail: bool = True) -> subprocess.CompletedProcess[str]:
    shell = ["bash", "-o", "pipefail"] if pipefail else ["bash"]
    return subprocess.run([*shell, "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT, stdin=subprocess.DEVNULL, check=False)


def run_page(page: Path, cwd: Path, env: dict[str, str]) -> list[str]:
    """Run every example of ``page`` in ``cwd``; returns what failed, one sentence each."""
    failures: list[str] = []
    where = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
    found = blocks(page)
    for b in found:  # the files a page shows are there before its commands run
        if b.title is not None and b.check != "skip":
            (cwd / b.title).write_text(b.text)
    typed: list[Path] = []
    for n, b in enumerate(found):
        at = f"{where}:{b.line}"
        if b.check == "skip" or b.title is not None:
            continue
        if b.lang == "console":
            failures += _console(b.text, at, cwd, env)
        elif b.lang == "sh":
            for line in b.text.splitlines():
                if not is_cli_line(line):
                    continue
                m = _EXITS.search(line)
                want = int(m.group(1)) if m else 0
                p = _shell(line, cwd, env)
                if p.returncode != want:
                    failures.append(f"{at}: `{line}` exited {p.returncode}, not {want}: {p.stderr[-500:]}")
        elif b.lang == "python" and not b.text.lstrip().startswith("--8<--"):
            script = cwd / f"_example_{n}.py"
            script.write_text(b.text)
            if b.check == "mypy":
                typed.append(script)
                continue
            p = subprocess.run([sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, text=True,
                               timeout=COMMAND_TIMEOUT, check=False)
            if p.returncode != 0:
                failures.append(f"{at}: the Python example failed: {p.stderr[-1500:]}")
    if typed:
        failures += mypy_strict(typed, cwd, at=str(where))
    return failures


def mypy_strict(paths: list[Path], cwd: Path, *, at: str) -> list[str]:
    p = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cwd / ".mypy_cache"),
                        *map(str, paths)], cwd=cwd, capture_output=True, text=True, check=False)
    return [] if p.returncode == 0 else [f"{at}: mypy --strict: {p.stdout[-1500:]}{p.stderr[-500:]}"]


def _console(text: str, at: str, cwd: Path, env: dict[str, str]) -> list[str]:
    failures = []
    checker = doctest.OutputChecker()
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    commands: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line)
    for command, expected in commands:
        p = _shell(command, cwd, env, pipefail=False)  # the output is the check (a failing run shows one too)
        want = "\n".join(expected).strip().replace("…", "...") + "\n"  # … is an ellipsis too
        got = p.stdout.strip() + "\n"
        if not checker.check_output(want, got, flags):
            failures.append(f"{at}: `{command}` exited {p.returncode} and printed:\n{got}instead of:\n{want}"
                            f"{p.stderr[-500:]}")
    return failures


def fake_calls(env: dict[str, str]) -> list[list[str]]:
    """The argv of every fake CLI call so far (executable name first)."""
    log = Path(env["FAKE_CLI_LOG"])
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
