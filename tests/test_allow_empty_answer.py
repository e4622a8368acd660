"""``allow_empty_answer``: a run that finished without an answer is ok when the caller says so, in every API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import spoolparse

from .test_seam_cases import _antigravity_denied

EMPTY = ["sh", "-c", "echo '{\"kind\":\"done\"}'"]  # any JSON event will do for the generic provider; no answer


def test_run_and_arun_take_allow_empty_answer() -> None:
    import asyncio

    r = spoolparse.run(EMPTY)
    assert not r.ok and r.error == "the agent finished without an answer", r
    assert spoolparse.run(EMPTY, allow_empty_answer=True).ok
    assert not asyncio.run(spoolparse.arun(EMPTY)).ok
    assert asyncio.run(spoolparse.arun(EMPTY, allow_empty_answer=True)).ok

    async def opened() -> bool:
        async with spoolparse.open_run(EMPTY, allow_empty_answer=True) as run:
            return (await run.wait()).ok

    assert asyncio.run(opened())


@pytest.mark.parametrize("command", ["parse", "run"])
def test_the_command_line_takes_allow_empty_answer(command: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "t.jsonl"
    path.write_bytes(_antigravity_denied())
    argv = ["parse", str(path)] if command == "parse" else ["run", "--", "cat", str(path)]
    for extra, status in (([], 1), (["--allow-empty-answer"], 0)):
        p = subprocess.run([sys.executable, "-m", "spoolparse", argv[0], *extra, *argv[1:]], capture_output=True,
                           timeout=60, check=False)
        out = json.loads(p.stdout)
        assert p.returncode == status and out["ok"] is (status == 0), (extra, p.stderr, out)


def test_batch_takes_allow_empty_answer_per_task_and_as_its_default(tmp_path: Path) -> None:
    import subprocess
    import sys

    rows = [{"id": "plain", "cmd": EMPTY}, {"id": "allowed", "cmd": EMPTY, "allow_empty_answer": True},
            {"id": "refused", "cmd": EMPTY, "allow_empty_answer": False},
            {"id": "bad", "cmd": EMPTY, "allow_empty_answer": "yes"}]
    tasks = tmp_path / "t.jsonl"
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for extra, want in (([], {"plain": "failed", "allowed": "ok", "refused": "failed"}),
                        (["--allow-empty-answer"], {"plain": "ok", "allowed": "ok", "refused": "failed"})):
        p = subprocess.run([sys.executable, "-m", "spoolparse", "batch", *extra, str(tasks)], capture_output=True,
                           timeout=120, check=False)
        outs = {o["id"]: o for o in map(json.loads, p.stdout.splitlines())}
        assert {k: outs[k]["verdict"] for k in want} == want, (extra, p.stderr)
        assert outs["bad"]["verdict"] == "spawn_error" and "allow_empty_answer" in outs["bad"]["error"]
    got = {o.id: o.verdict for o in spoolparse.run_many(
        [spoolparse.Task(EMPTY, id="a"), spoolparse.Task(EMPTY, id="b", allow_empty_answer=False)],
        allow_empty_answer=True)}
    assert got == {"a": "ok", "b": "failed"}


# -- an agent that prints nothing ------------------------------------------------------------------------------

EMPTY_TRANSCRIPT = "no JSON event: the transcript is empty"


def _empty_verdicts(path: str, provider: str, allow: bool, tmp_path: Path) -> dict[str, tuple[bool, str | None]]:
    """The verdict of an empty transcript (``path``) as every way in reads it: the library's ``run``, ``arun``,
    ``parse``, ``run_many``, and the commands ``run``, ``parse`` and ``batch``."""
    import asyncio
    import subprocess
    import sys

    kw: dict[str, object] = {"provider": provider, "allow_empty_answer": allow}
    argv = ["cat", path]
    got: dict[str, tuple[bool, str | None]] = {}
    r = spoolparse.run(argv, provider=provider, allow_empty_answer=allow)
    got["run"] = r.ok, r.error
    r = asyncio.run(spoolparse.arun(argv, provider=provider, allow_empty_answer=allow))
    got["arun"] = r.ok, r.error
    r = spoolparse.parse(path, provider=provider, allow_empty_answer=allow)
    got["parse"] = r.ok, r.error
    o = next(iter(spoolparse.run_many([spoolparse.Task(argv, id="e")], **kw)))  # type: ignore[arg-type]
    got["run_many"] = o.ok, o.error
    flags = ["--provider", provider, *(["--allow-empty-answer"] if allow else [])]
    for name, cmd in (("cli run", ["run", *flags, "--", *argv]), ("cli parse", ["parse", *flags, path])):
        p = subprocess.run([sys.executable, "-m", "spoolparse", *cmd], capture_output=True, timeout=60, check=False)
        out = json.loads(p.stdout)
        assert p.returncode == (0 if out["ok"] else 1), (name, p.stderr)
        got[name] = out["ok"], out["error"]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "e", "cmd": argv}) + "\n")
    p = subprocess.run([sys.executable, "-m", "spoolparse", "batch", *flags, str(tasks)], capture_output=True,
                       timeout=60, check=False)
    out = json.loads(p.stdout.splitlines()[0])
    got["cli batch"] = out["verdict"] == "ok", out["error"]
    return got


@pytest.mark.slow
@pytest.mark.parametrize("allow", [False, True])
@pytest.mark.parametrize("provider", ["auto", "generic", "codex", "claude"])
def test_an_empty_transcript_is_one_verdict_on_every_path(provider: str, allow: bool, tmp_path: Path) -> None:
    """An agent that printed nothing and exited 0 was ok with no answer in ``run``, ``batch`` and the library,
    while ``parse`` of the same empty transcript was not: no answer is in hand, so it is not ok, unless the
    caller allows a run without an answer and the provider's run needs no terminal event (the generic one)."""
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    got = _empty_verdicts(str(path), provider, allow, tmp_path)
    if allow and provider in ("auto", "generic"):
        want: tuple[bool, str | None] = (True, None)
    else:
        want = (False, EMPTY_TRANSCRIPT)
    assert got == dict.fromkeys(got, want), got


@pytest.mark.parametrize(("argv", "error"), [
    (["true"], EMPTY_TRANSCRIPT),
    (["false"], "the process exited with status 1"),
    (["sh", "-c", "kill -9 $$"], "the process was killed by SIGKILL"),
])
def test_a_run_that_prints_nothing(argv: list[str], error: str) -> None:
    """Printing nothing is no answer: ``ok: false``, naming the exit when it says more (a failed or killed process
    printed nothing because it failed); ``allow_empty_answer`` accepts only a run that exited 0."""
    r = spoolparse.run(argv)
    assert (r.ok, r.error, r.text) == (False, error, None), r
    r = spoolparse.run(argv, allow_empty_answer=True)
    assert (r.ok, r.error) == (argv == ["true"], None if argv == ["true"] else error), r
