"""``run_many(backend="ray")`` and ``batch --ray`` on a real local Ray cluster of three nodes.

The cluster must not send anything off this machine, so the cases run in a
network namespace that has only loopback: ``test_ray_cases_in_a_loopback_namespace``
re-runs this module under ``unshare -n`` (as root) and the cases themselves
run only there.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from spoolparse.runner import Outcome, Task, arun_many, run_many
from spoolparse.runner.joblog import DoneIds
from spoolparse.runner.ray_backend import RayBatch

from .helpers import as_from_a_terminal
from .ray_support import INSIDE, RAY_ENV, ROOT, NodeProbe, cannot_unshare, local_cluster, loopback_only
from .runner_support import (
    FAKE_CODEX,
    escapee_tag,
    escaping,
    marked_pids,
    marker,
    one_each,
    sleeping,
    wait_for,
    wait_gone,
)

ray = pytest.importorskip("ray", reason="the Ray backend needs the ray extra: pip install -e '.[ray]'")

GiB = 1 << 30
MiB = 1 << 20
SMALL = ["--size", "8K"]

inside = pytest.mark.skipif(
    not loopback_only(),
    reason="needs a loopback-only network namespace; run test_ray_cases_in_a_loopback_namespace, which starts one",
)
pytestmark = pytest.mark.slow


@pytest.mark.skipif(
    loopback_only() or INSIDE in os.environ, reason="needs to start outside the namespace it makes (already inside it)"
)
def test_ray_cases_in_a_loopback_namespace() -> None:
    why = cannot_unshare()
    if why:
        pytest.skip(why)
    here = str(Path(__file__).relative_to(ROOT))
    cmd = [
        "unshare", "-n", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh",
        sys.executable, "-m", "pytest", here, "-q", "-p", "no:cacheprovider", "-x", "-o", "addopts=-ra",
    ]
    p = subprocess.run(cmd, cwd=ROOT, env={**os.environ, INSIDE: "1"}, capture_output=True, text=True, timeout=900)
    report = (p.stdout + p.stderr)[-6000:]
    assert p.returncode == 0, report
    summary = report.strip().splitlines()[-1]
    passed = re.search(r"(\d+) passed", summary)
    skipped = re.search(r"(\d+) skipped", summary)
    # inside, only the launcher itself is skipped
    assert passed and int(passed.group(1)) >= 8 and (skipped is None or int(skipped.group(1)) <= 1), report


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with local_cluster(3) as c:
        yield c


def comparable(o: Outcome) -> tuple[Any, ...]:
    summary = dict(o.summary or {})
    summary.pop("duration_s", None)
    return (o.id, o.verdict, o.attempts, o.returncode, o.signal, o.enforcement, o.error, sorted(summary.items()))


def fake(*args: str) -> list[str]:
    return [*FAKE_CODEX, *SMALL, *args]


@inside
def test_outcomes_are_those_of_the_local_backend(cluster: Any) -> None:
    tasks = [
        Task(id="ok", argv=fake()),
        Task(id="fails", argv=fake("--fail", "model overloaded")),
        Task(id="warns", argv=fake("--warning", "careful")),
        Task(id="no-answer", argv=fake("--no-answer")),
        Task(id="timeout", argv=fake("--hang", "30"), timeout=3),  # long enough to print what comes first
        Task(id="missing", argv=["/nonexistent/agent"]),
        Task(id="stdin", argv=[sys.executable, "-c", "import sys; print(sys.stdin.read().strip())"],
             input="{\"a\": 1}"),
        Task(id="bytes", argv=[sys.executable, "-c", "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read())"],
             input=b"{\"type\": \"x\"}\n"),
        *[Task(id=f"n{i}", argv=fake("--seed", str(i))) for i in range(9)],
    ]
    opts: dict[str, Any] = {"max_concurrent": 3, "memory_per_task": 64 * MiB, "grace": 0.5}
    local = sorted(map(comparable, run_many(list(tasks), **opts)))
    batch = run_many(list(tasks), backend="ray", **opts)
    assert isinstance(batch, RayBatch)
    remote = sorted(map(comparable, batch))
    assert remote == local
    assert sum(n["done"] for n in batch.nodes) == len(tasks)
    assert batch.wire_bytes[0] > 0 and batch.wire_bytes[1] > 0


@inside
def test_arun_many_on_ray_with_an_async_source(cluster: Any) -> None:
    async def source() -> AsyncIterator[Task]:
        for i in range(6):
            await asyncio.sleep(0.01)
            yield Task(id=f"a{i}", argv=fake("--seed", str(i)))

    async def main() -> list[Outcome]:
        return [o async for o in arun_many(source(), backend="ray", max_concurrent=2, memory_per_task=64 * MiB)]

    outs = one_each(asyncio.run(main()), [f"a{i}" for i in range(6)])
    assert all(o.ok for o in outs.values())


@inside
def test_ordered_outcomes_come_in_input_order_across_nodes(cluster: Any) -> None:
    # later tasks end first: the driver holds them back until the earlier ones are in
    tasks = [Task(id=f"o{i}", argv=fake("--hang", str(round(0.1 * (8 - i), 1)))) for i in range(8)]
    outs = list(run_many(tasks, backend="ray", ordered=True, max_concurrent=3, memory_per_task=64 * MiB))
    assert [o.id for o in outs] == [t.id for t in tasks]


@inside
def test_the_input_rules_are_those_of_a_local_batch(cluster: Any) -> None:
    # one intake for both runners: a duplicate id is its own error, and a halt gives every task read an outcome
    dup = list(run_many([Task(id="a", argv=fake()), Task(id="a", argv=fake()), Task(id="b", argv=fake())],
                        backend="ray", max_concurrent=1, memory_per_task=64 * MiB))
    assert sorted((o.id, o.verdict) for o in dup) == [("a", "ok"), ("a", "spawn_error"), ("b", "ok")]
    assert any("duplicate task id 'a'" in (o.error or "") for o in dup)
    tasks = [Task(id="f", argv=fake("--fail", "boom"))]
    tasks += [Task(id=f"h{i}", argv=fake("--hang", "0.5")) for i in range(12)]
    outs = one_each(run_many(tasks, backend="ray", max_concurrent=1, ordered=True, halt="soon",
                             memory_per_task=64 * MiB), [t.id for t in tasks if t.id])
    assert outs["f"].verdict == "failed"
    skipped = [o for o in outs.values() if o.verdict == "skipped"]
    assert len(skipped) >= 6  # at most 2 x -j per node (3 nodes) were sent before the halt
    assert all(o.error == "not started: the batch halted (--halt)" for o in skipped)
    assert all(o.verdict in ("ok", "skipped") for k, o in outs.items() if k != "f")


@inside
def test_a_node_with_less_free_memory_gets_fewer_tasks(cluster: Any) -> None:
    nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    roomy, tight, full = (n[:12] for n in nodes[:3])
    # 0.85 × 16 GiB = 13.6 GiB may be used: roomy has all of it free, tight 1.6 GiB, full none
    probe = NodeProbe(16 * GiB, {roomy: 0, tight: 12 * GiB, full: 14 * GiB})
    tasks = [Task(id=f"m{i}", argv=fake("--hang", "0.3"), memory=GiB) for i in range(30)]
    batch = run_many(tasks, backend="ray", max_concurrent=4, memory_probe=probe)
    assert isinstance(batch, RayBatch)
    one_each(batch, [t.id for t in tasks if t.id])
    done = {n["name"]: n["done"] for n in batch.nodes}
    assert done[full] == 0, done
    assert done[tight] >= 1 and done[roomy] > 2 * done[tight], done


@inside
def test_resume_from_the_job_log(cluster: Any, tmp_path: Path) -> None:
    log = tmp_path / "jobs.ndjson"
    flaky = tmp_path / "flaky"

    def tasks() -> list[Task]:
        # r3 and r4 fail until the flag file exists
        return [Task(id=f"r{i}", argv=fake() if i < 3 or flaky.exists() else fake("--fail", "flaky")) for i in range(5)]

    first = one_each(run_many(tasks(), backend="ray", joblog=log, max_concurrent=2), [f"r{i}" for i in range(5)])
    assert {k for k, o in first.items() if not o.ok} == {"r3", "r4"}
    flaky.touch()
    batch = run_many(tasks(), backend="ray", joblog=log, resume="failed", max_concurrent=2)
    second = one_each(batch, ["r3", "r4"])
    assert all(o.ok for o in second.values())
    assert isinstance(batch, RayBatch) and batch.skipped == 3
    assert isinstance(batch.skip, DoneIds)  # the done ids in a spill-file table: memory flat in their number
    finals = [json.loads(line) for line in log.read_text().splitlines()]
    assert Counter(r["id"] for r in finals if r["final"]) == {"r0": 1, "r1": 1, "r2": 1, "r3": 2, "r4": 2}


@inside
def test_a_node_removed_mid_run_loses_no_task_and_leaves_no_agent(cluster: Any, tmp_path: Path) -> None:
    victim = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    name = victim.node_id[:12]
    token, env = marker()
    log = tmp_path / "jobs.ndjson"
    ids = [f"x{i}" for i in range(24)]
    tasks = [Task(id=i, argv=fake("--hang", "2", "--orphan"), env=env) for i in ids]
    removed = threading.Event()

    def on_tick(b: RayBatch) -> None:
        if not removed.is_set() and any(n["name"] == name and n["running"] >= 2 for n in b.nodes):
            removed.set()
            time.sleep(0.5)  # its agents are running
            cluster.remove_node(victim)

    batch = run_many(tasks, backend="ray", max_concurrent=3, grace=0.5, joblog=log)
    assert isinstance(batch, RayBatch)
    batch.on_tick = on_tick
    outs = one_each(batch, ids)
    assert removed.is_set()
    assert all(o.ok for o in outs.values()), [o for o in outs.values() if not o.ok]
    lost = [json.loads(line) for line in log.read_text().splitlines() if '"final":false' in line]
    assert lost and all("was lost" in r["error"] for r in lost)
    assert {o.id for o in outs.values() if o.attempts == 2} == {r["id"] for r in lost}
    assert next(n["lost"] for n in batch.nodes if n["name"] == name)
    assert wait_gone(token, timeout=15) == [], "agents of the removed node outlived it"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGKILL])
@inside
def test_interrupting_the_driver_ends_every_agent_on_every_node(cluster: Any, tmp_path: Path, sig: int) -> None:
    """Each ending signal gives what Ctrl-C gives (``ray.init`` installs its own SIGTERM handler: ours are put
    back after it): every task in flight printed ``cancelled``, a final job-log line for each outcome printed
    and no other, 128 + N. Every agent ends, and so does what one started out of its session with its
    environment cleared (its task's cgroup holds it). ``kill -9``: Ray ends the actors, their guardians the rest."""
    token, env = marker()
    tag = escapee_tag()
    tasks = tmp_path / "tasks.jsonl"
    with tasks.open("w") as f:
        for i in range(12):
            f.write(json.dumps({"id": f"c{i}", "cmd": fake("--hang", "60", "--orphan"), "env": env}) + "\n")
        f.write(json.dumps({"id": "escapee", "cmd": escaping(tag, "exec sleep 300"), "env": env}) + "\n")
    log = tmp_path / "jobs.ndjson"
    p = subprocess.Popen(
        [sys.executable, "-m", "spoolparse", "batch", str(tasks), "--ray", cluster.address, "-j", "3",
         "--joblog", str(log), "--progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **RAY_ENV},
        preexec_fn=as_from_a_terminal,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (len(marked_pids(token)) < 6 or not sleeping(tag)):
            time.sleep(0.2)
        assert len(marked_pids(token)) >= 6 and sleeping(tag), "the agents never started"
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # a killed driver: Ray ends its actors once it notices, then each runner's watcher ends the agents
    left = wait_gone(token, timeout=20 if sig != signal.SIGKILL else 60)
    assert left == [], f"agents outlived the driver: {_describe(left)}"
    assert wait_for(lambda: not sleeping(tag), timeout=20 if sig != signal.SIGKILL else 60), sleeping(tag)
    if sig != signal.SIGKILL:
        said = err.decode(errors="replace")
        assert p.returncode == 128 + sig, said[-2000:]
        assert said.rstrip().endswith(f"spoolparse: error: interrupted by {signal.Signals(sig).name}"), said[-2000:]
        outs = [json.loads(line) for line in out.splitlines()]
        assert outs and {o["verdict"] for o in outs} == {"cancelled"}
        assert len({o["id"] for o in outs}) == len(outs)
        # why spoolparse cancelled them, as a local batch's tasks say it (not a bare "cancelled")
        why = f"cancelled ({signal.Signals(sig).name} to spoolparse)"
        assert {o["error"] for o in outs} == {why}, {o["error"] for o in outs}
        finals = [json.loads(line) for line in log.read_text().splitlines()]
        assert sorted(r["id"] for r in finals if r["final"]) == sorted(o["id"] for o in outs)
        assert "running" in said


@inside
def test_each_node_contains_its_tasks_as_a_local_batch_does(cluster: Any, tmp_path: Path) -> None:
    """A task's descendant that left its session and cleared its environment (no mark on it for the node
    runner's sweep) ends with the task; a program the kernel refuses is a spawn_error, never retried."""
    tag = escapee_tag()
    missing = tmp_path / "missing-interpreter"
    missing.write_text("#!/nonexistent/interp\n")
    missing.chmod(0o755)
    tasks = [Task(id=f"e{i}", argv=escaping(f"{tag}{i}", "sleep 1")) for i in range(3)]
    tasks.append(Task(id="bad", argv=[str(missing)]))
    outs = one_each(run_many(tasks, backend="ray", max_concurrent=2, grace=0.5, retries=2, retry_backoff=0),
                    ["e0", "e1", "e2", "bad"])
    assert [sleeping(f"{tag}{i}") for i in range(3)] == [[], [], []]
    assert all(outs[f"e{i}"].ok and outs[f"e{i}"].enforcement in ("cgroup1", "cgroup2") for i in range(3)), outs
    assert outs["bad"].verdict == "spawn_error" and outs["bad"].attempts == 1
    assert outs["bad"].error == f"cannot start {str(missing)!r}: its #! interpreter was not found (/nonexistent/interp)"


def _describe(pids: list[int]) -> str:
    """Each pid with its parent's command line (to tell which runner left it)."""
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            with open(f"/proc/{ppid}/cmdline", "rb") as f:
                parent = f.read().replace(b"\0", b" ").decode(errors="replace")[:120]
        except (OSError, ValueError, IndexError):
            ppid, parent = -1, "?"
        out.append(f"{pid} (parent {ppid}: {parent})")
    return "; ".join(out)


@inside
def test_batch_cli_on_ray_prints_one_outcome_per_task(cluster: Any, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"l{i}", "cmd": fake()}) + "\n" for i in range(8)) + "not json\n")
    p = subprocess.run(
        [sys.executable, "-m", "spoolparse", "batch", str(tasks), "--ray", cluster.address, "-j", "2", "--progress"],
        capture_output=True, env={**os.environ, **RAY_ENV}, timeout=120,
    )
    outs = [json.loads(line) for line in p.stdout.splitlines()]
    assert p.returncode == 1  # the bad line
    assert Counter(o["id"] for o in outs) == {**{f"l{i}": 1 for i in range(8)}, "9": 1}
    assert [o["verdict"] for o in outs if o["id"] == "9"] == ["spawn_error"]
    assert b"nodes" in p.stderr
