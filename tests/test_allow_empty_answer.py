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
