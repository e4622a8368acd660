"""Start-up: what the command and the package load before they do anything, counted in fresh interpreters.

``--version`` and ``--help`` load only what they print; a named provider loads that provider alone; detection
loads a provider only once an event of a type its grammar knows is seen (the evidence table, generated from the
grammars, says which); no module of the package compiles a pattern when imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spoolparse._decode.probe import key_of
from spoolparse.providers import evidence

from .helpers import ROOT

#: What ``spoolparse --version`` may load of the package.
VERSION_LOADS = {"spoolparse", "spoolparse.__main__"}
#: What ``spoolparse --help`` (and a missing or unknown command) may load: the command line's own modules.
HELP_LOADS = VERSION_LOADS | {"spoolparse.cli", "spoolparse._cli_common", "spoolparse._terminal",
                              "spoolparse._signals", "spoolparse._limits", "spoolparse._regex"}
#: What ``run --help`` and ``parse --help`` may load besides: the provider names for ``--provider``.
SUBCOMMAND_HELP_LOADS = HELP_LOADS | {"spoolparse.providers", "spoolparse.providers.evidence"}
#: Never loaded by a help or the version: the JSON decoders and the host's process table.
HEAVY = ("orjson", "ijson", "psutil", "asyncio")

#: Every registered provider's module, by provider name.
PROVIDER_MODULES = {e.name: "spoolparse.providers." + e.at.partition(":")[0] for e in evidence.TABLE}


def _loaded(code: str) -> set[str]:
    """The modules a fresh interpreter holds when ``code`` has run (it may end with SystemExit)."""
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stderr.write('\\nMODULES ' + __import__('json').dumps(sorted(sys.modules))))\n"
        + code
    )
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, cwd=ROOT, timeout=120, check=False)
    last = p.stderr.decode().rpartition("\nMODULES ")[2]
    return set(json.loads(last))


def _command(*argv: str) -> set[str]:
    """The modules the ``spoolparse`` console script loads for ``argv``."""
    return _loaded(f"sys.argv = ['spoolparse', *{list(argv)!r}]\nfrom spoolparse.__main__ import entry\n"
                   "raise SystemExit(entry())")


def _ours(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] == "spoolparse"}


def _heavy(modules: set[str]) -> set[str]:
    return {m for m in modules if m.split(".")[0] in HEAVY}


def test_version_loads_the_package_face_alone() -> None:
    loaded = _command("--version")
    assert _ours(loaded) == VERSION_LOADS
    assert _heavy(loaded) == set() and "typing" not in loaded and "subprocess" not in loaded


@pytest.mark.parametrize("argv", [["--help"], [], ["no-such-command"]], ids=["help", "none", "unknown"])
def test_the_top_level_help_loads_no_subcommand(argv: list[str]) -> None:
    loaded = _command(*argv)
    assert _ours(loaded) <= HELP_LOADS, sorted(_ours(loaded) - HELP_LOADS)
    assert _heavy(loaded) == set() and "subprocess" not in loaded


@pytest.mark.parametrize("command", ["run", "parse"])
def test_a_subcommands_help_loads_no_provider(command: str) -> None:
    loaded = _command(command, "--help")
    assert _ours(loaded) <= SUBCOMMAND_HELP_LOADS, sorted(_ours(loaded) - SUBCOMMAND_HELP_LOADS)
    assert _heavy(loaded) == set()


@pytest.mark.parametrize(("command", "other"), [("batch", "spoolparse.report"), ("report", "spoolparse.runner.cli")])
def test_a_runner_subcommands_help_loads_no_other_subcommand(command: str, other: str) -> None:
    assert other not in _command(command, "--help")


@pytest.mark.parametrize("name", sorted(PROVIDER_MODULES))
def test_a_named_provider_loads_no_other(name: str, tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_text('{"type":"x"}\n')
    loaded = _command("parse", "--provider", name, str(transcript)) & set(PROVIDER_MODULES.values())
    alone = _loaded(f"import {PROVIDER_MODULES[name]}") & set(PROVIDER_MODULES.values())  # what it imports itself
    assert PROVIDER_MODULES[name] in loaded
    assert loaded <= alone, sorted(loaded - alone)


def test_parse_provider_codex_loads_codex_alone() -> None:
    loaded = _command("parse", "--provider", "codex", str(ROOT / "fixtures/codex/realcli_A.jsonl"))
    assert loaded & set(PROVIDER_MODULES.values()) == {"spoolparse.providers.codex"}
    assert "spoolparse._os.cgroup" not in loaded and "spoolparse.runner" not in loaded  # nothing is contained


@pytest.mark.parametrize("fixture", ["codex/realcli_A.jsonl", "claude/api_error.jsonl", "gemini/realcli_A.jsonl"])
def test_detection_loads_a_provider_only_once_its_evidence_is_seen(fixture: str) -> None:
    path = ROOT / "fixtures" / fixture
    keys = {key_of(json.loads(line)) for line in path.read_bytes().splitlines() if line.strip()}
    evidenced = {PROVIDER_MODULES[e.name] for e in evidence.TABLE if e.known & keys}
    loaded = _command("parse", str(path)) & set(PROVIDER_MODULES.values())
    assert loaded, "no provider chose"
    assert loaded <= evidenced, sorted(loaded - evidenced)
    assert loaded != set(PROVIDER_MODULES.values())


def test_the_evidence_table_is_the_grammars() -> None:
    text = Path(evidence.__file__).read_text()
    begin = "# generated: evidence (python -m spoolparse.providers.evidence)\n"
    block = text.partition(begin)[2].partition("# end: evidence\n")[0]
    assert block == evidence.generate(), "the table differs from the grammars: python -m spoolparse.providers.evidence"
    assert [e.at for e in evidence.TABLE] == list(evidence.REGISTERED)


def test_the_registry_imports_a_provider_when_it_is_looked_up() -> None:
    loaded = _loaded("from spoolparse.providers import PROVIDERS, names\nassert 'kimi' in PROVIDERS\nnames()\n"
                     "list(PROVIDERS)\nPROVIDERS['kimi']")
    assert loaded & set(PROVIDER_MODULES.values()) == {"spoolparse.providers.kimi"}


#: Imports every module of the package with ``re``'s compiler counted: each call made from the package's code.
_COUNT_COMPILES = """
import os, pkgutil, re, sys, importlib
package_dir = os.path.join(os.getcwd(), "spoolparse") + os.sep
re_dir = os.path.dirname(re.__file__) + os.sep
compiles = []
real = re._compile
def counted(pattern, flags):
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(re_dir):
        f = f.f_back
    if f is not None and f.f_code.co_filename.startswith(package_dir):
        compiles.append(f"{f.f_code.co_filename[len(package_dir):]}:{f.f_lineno}")
    return real(pattern, flags)
re._compile = counted
import spoolparse
names = ["spoolparse"] + [m.name for m in pkgutil.walk_packages(spoolparse.__path__, "spoolparse.")]
skipped = []
for name in names:
    try:
        importlib.import_module(name)
    except ImportError as e:  # an extra that is not installed (ray)
        skipped.append(f"{name}: {e}")
print(__import__("json").dumps({"modules": len(names), "compiles": compiles, "skipped": skipped}))
"""


def test_importing_every_module_compiles_no_pattern() -> None:
    p = subprocess.run([sys.executable, "-c", _COUNT_COMPILES], capture_output=True, text=True, cwd=ROOT,
                       timeout=120, check=True)
    found = json.loads(p.stdout.splitlines()[-1])
    assert found["modules"] - len(found["skipped"]) > 50, found["skipped"]
    assert found["compiles"] == [], f"patterns compiled at import (compile on first use): {found['compiles']}"


def test_a_pattern_compiled_on_first_use_is_the_pattern() -> None:
    from spoolparse._regex import regex

    words, raw = regex(r"(?P<w>\w+)", 0), regex(rb"a+", 2)  # 2: re.IGNORECASE
    assert repr(words) == "regex('(?P<w>\\\\w+)', 0)"  # not compiled yet: no attribute but the source
    assert words.findall("a bc") == ["a", "bc"] and words.sub("x", "a bc") == "x x"
    m = words.match("hello there")
    assert m is not None and m.group("w") == "hello"
    assert (words.pattern, words.groups, dict(words.groupindex)) == (r"(?P<w>\w+)", 1, {"w": 1})
    assert [x.span() for x in raw.finditer(b"xAax")] == [(1, 3)] and raw.flags & 2
    assert words.search is words.search  # the compiled pattern's bound method, kept as the stand-in's own


@pytest.mark.parametrize("argv", [["-h", "batch"], ["--help", "run"]])
def test_the_top_level_help_before_a_command_lists_every_command(argv: list[str]) -> None:
    from spoolparse._cli_common import COMMANDS

    p = subprocess.run([sys.executable, "-m", "spoolparse", *argv], capture_output=True, text=True, cwd=ROOT,
                       timeout=60, check=False)
    assert p.returncode == 0 and p.stdout.startswith("usage: spoolparse [-h] [--version] COMMAND")
    assert all(f"    {name}" in p.stdout for name in COMMANDS), p.stdout
    loaded = _command(*argv)
    assert _ours(loaded) <= HELP_LOADS, sorted(_ours(loaded) - HELP_LOADS)
