"""The asyncio API: arun, open_run and events(); cancellation, failing callbacks, descriptors."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

import spoolparse
from spoolparse import aio
from spoolparse._cli_common import exit_status

from .helpers import FAKE_CODEX, FIXTURES, event_dict, group_gone, open_fds

LIVE_AGENT = [sys.executable, str(FIXTURES / "live_agent.py")]


class Boom(Exception):
    pass


def _posthoc(r: spoolparse.Result) -> list[dict[str, Any]]:
    assert r.stdout is not None
    r.stdout.seek(0)
    seen: list[dict[str, Any]] = []
    spoolparse.parse(r.stdout, on_event=lambda ev: seen.append(event_dict(ev)))
    return seen


def _comparable(r: spoolparse.Result) -> dict[str, Any]:
    s = r.summary()
    del s["duration_s"]
    return s


def test_arun_returns_what_run_returns() -> None:
    argv = [*FAKE_CODEX, "--size", "1M", "--noise", "--stderr", "3K", "--warning", "careful"]
    with spoolparse.run(argv) as expected:
        want = _comparable(expected)
    with asyncio.run(spoolparse.arun(argv)) as got:
        assert isinstance(got, spoolparse.Result)
        assert _comparable(got) == want
        assert got.stdout is not None and got.stdout.read(1) == b"{"


def test_events_arrive_before_exit_and_equal_posthoc_parse(tmp_path: Path) -> None:
    go = tmp_path / "go"

    async def main() -> tuple[list[dict[str, Any]], list[bool], spoolparse.Result]:
        seen: list[dict[str, Any]] = []
        running: list[bool] = []
        async with spoolparse.open_run([*LIVE_AGENT, "--wait-for", str(go), "--ticks", "3", "--partial"]) as run:
            async for ev in run.events():
                seen.append(event_dict(ev))
                if not go.exists():
                    running.append(not run.child.exited() and not group_gone(run.pgid))
                    if ev.kind == "tool_start":
                        go.touch()
            return seen, running, await run.wait()

    seen, running, res = asyncio.run(main())
    with res:
        assert res.ok and res.text == "FINAL-ANSWER: live"
        assert running == [True, True, True]
        assert seen == _posthoc(res)


def test_on_event_sync_and_async_callbacks_see_the_same_events() -> None:
    argv = [*FAKE_CODEX, "--size", "300K", "--pause", "0.0002"]

    async def main() -> tuple[list[str], list[str]]:
        plain: list[str] = []
        awaited: list[str] = []

        async def slow(ev: spoolparse.LiveEvent) -> None:
            await asyncio.sleep(0)
            awaited.append(ev.kind)

        (await spoolparse.arun(argv, on_event=lambda ev: plain.append(ev.kind), keep_output=False)).close()
        (await spoolparse.arun(argv, on_event=slow, keep_output=False)).close()
        return plain, awaited

    plain, awaited = asyncio.run(main())
    assert plain and plain == awaited
    assert plain[-2:] == ["usage", "turn_end"]


def test_cancellation_kills_the_group_and_closes_everything(tmp_path: Path) -> None:
    async def main() -> int:
        before = open_fds()
        started = asyncio.Event()
        runs: list[aio.AsyncRun] = []

        async def follow() -> None:
            async with spoolparse.open_run([*LIVE_AGENT, "--wait-for", str(tmp_path / "never")]) as run:
                runs.append(run)
                async for _ in run.events():
                    started.set()

        task = asyncio.create_task(follow())
        await started.wait()
        pgid = runs[0].pgid
        assert not group_gone(pgid)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert open_fds() == before
        return pgid

    pgid = asyncio.run(main())
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)


def test_wait_for_timeout_cancels_arun(tmp_path: Path) -> None:
    async def main() -> None:
        before = open_fds()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(spoolparse.arun([*LIVE_AGENT, "--wait-for", str(tmp_path / "never")]), 0.3)
        assert open_fds() == before

    asyncio.run(main())


@pytest.mark.parametrize("is_async", [False, True], ids=["sync-callback", "async-callback"])
@pytest.mark.parametrize("on_kind", ["session", "usage"], ids=["first-event", "last-event"])
def test_failing_callback_is_reraised_and_cleans_up(tmp_path: Path, is_async: bool, on_kind: str) -> None:
    go = tmp_path / "go"
    if on_kind == "usage":
        go.touch()
    pgids: list[int] = []

    async def main() -> None:
        before = open_fds()

        def plain(ev: spoolparse.LiveEvent) -> None:
            if ev.kind == on_kind:
                raise Boom(ev.kind)

        async def awaited(ev: spoolparse.LiveEvent) -> None:
            await asyncio.sleep(0)
            plain(ev)

        with pytest.raises(Boom, match=on_kind):
            async with spoolparse.open_run([*LIVE_AGENT, "--wait-for", str(go)],
                                           on_event=awaited if is_async else plain) as run:
                pgids.append(run.pgid)
                await run.wait()
        assert open_fds() == before

    asyncio.run(main())
    assert group_gone(pgids[0])


def test_leaving_the_block_early_kills_the_child(tmp_path: Path) -> None:
    async def main() -> int:
        before = open_fds()
        async with spoolparse.open_run([*LIVE_AGENT, "--wait-for", str(tmp_path / "never")]) as run:
            async for ev in run.events():
                if ev.kind == "session":
                    break
            pgid = run.pgid
        assert run.result is None
        assert open_fds() == before
        with pytest.raises(spoolparse.UsageError):
            await run.wait()
        return pgid

    assert group_gone(asyncio.run(main()))


@pytest.mark.slow
def test_timeout_sets_timed_out(tmp_path: Path) -> None:
    async def main() -> tuple[spoolparse.Result, list[str]]:
        kinds: list[str] = []
        res = await spoolparse.arun([*LIVE_AGENT, "--wait-for", str(tmp_path / "never")], timeout=1.5, grace=0.5,
                                    on_event=lambda ev: kinds.append(ev.kind), keep_output=False)
        return res, kinds

    res, kinds = asyncio.run(main())
    assert res.timed_out and not res.ok and exit_status(res) == 124
    assert kinds[:3] == ["session", "turn_start", "tool_start"]
    with pytest.raises(spoolparse.TimeoutExpired):
        asyncio.run(spoolparse.arun([*LIVE_AGENT, "--wait-for", "/nonexistent/x"], timeout=0.2, check=True))


def test_check_and_spool_full_raise_as_run_does() -> None:
    with pytest.raises(spoolparse.CalledProcessError, match="overloaded"):
        asyncio.run(spoolparse.arun([*FAKE_CODEX, "--size", "10K", "--fail", "overloaded"], check=True))
    with pytest.raises(spoolparse.SpoolFullError) as info:
        asyncio.run(spoolparse.arun([*FAKE_CODEX, "--size", "4M"], max_spool_bytes=200 * 1024))
    assert info.value.result is not None and info.value.result.spool_full
    info.value.result.close()


def test_concurrent_runs_hold_two_spools_and_a_pidfd_each(tmp_path: Path) -> None:
    n = 8
    go = tmp_path / "go"

    async def main() -> list[spoolparse.Result]:
        before = open_fds()
        ready = [asyncio.Event() for _ in range(n)]

        async def one(i: int) -> spoolparse.Result:
            def on_event(ev: spoolparse.LiveEvent) -> None:
                ready[i].set()

            return await spoolparse.arun([*LIVE_AGENT, "--wait-for", str(go)], on_event=on_event, keep_output=False)

        tasks = [asyncio.create_task(one(i)) for i in range(n)]
        await asyncio.gather(*(e.wait() for e in ready))
        during = open_fds() - before
        # two spools and a pidfd per child, one inotify instance for the whole loop
        assert len(during) <= 3 * n + 1
        go.touch()
        results = await asyncio.gather(*tasks)
        assert open_fds() == before
        return results

    results = asyncio.run(main())
    assert all(r.ok and r.text == "FINAL-ANSWER: live" for r in results)


def test_runs_on_one_loop_share_one_read_buffer_and_each_reads_its_own_stream() -> None:
    argvs = [[*FAKE_CODEX, "--size", "3M", "--noise", "--seed", str(i)] for i in range(6)]
    expected = []
    for argv in argvs:
        with spoolparse.run(argv) as r:
            expected.append(_comparable(r))

    async def main() -> list[dict[str, Any]]:
        async with spoolparse.open_run(argvs[0]) as a, spoolparse.open_run(argvs[1]) as b:
            assert a.child._buf is b.child._buf  # one per loop: READ_CHUNK per loop, not per live agent
            first = [await a.wait(), await b.wait()]
        rest = await asyncio.gather(*(spoolparse.arun(argv) for argv in argvs[2:]))
        out = []
        for r in [*first, *rest]:
            with r:
                out.append(_comparable(r))
        return out

    assert asyncio.run(main()) == expected


def test_polling_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aio, "open_inotify", lambda: None)
    argv = [*LIVE_AGENT, "--ticks", "3", "--interval", "0.01", "--partial"]

    async def main() -> tuple[list[dict[str, Any]], spoolparse.Result]:
        seen: list[dict[str, Any]] = []
        res = await spoolparse.arun(argv, on_event=lambda ev: seen.append(event_dict(ev)))
        return seen, res

    seen, res = asyncio.run(main())
    with res:
        assert res.ok and seen == _posthoc(res)


def test_bad_options_raise_usage_error() -> None:
    with pytest.raises(spoolparse.UsageError):
        spoolparse.open_run(["true"], timeout=-1)
    with pytest.raises(spoolparse.UsageError):
        asyncio.run(spoolparse.arun("echo hi"))
    with pytest.raises(spoolparse.SpawnError):
        asyncio.run(spoolparse.arun(["/nonexistent/binary"]))


def test_cancellation_ends_a_child_that_ignores_sigterm_and_its_orphan() -> None:
    argv = [*FAKE_CODEX, "--size", "10K", "--ignore-term", "--orphan", "--hang", "60"]

    async def main() -> int:
        before = open_fds()
        runs: list[aio.AsyncRun] = []
        seen = asyncio.Event()

        async def follow() -> None:
            async with spoolparse.open_run(argv) as run:
                runs.append(run)
                async for _ in run.events():
                    seen.set()

        task = asyncio.create_task(follow())
        await seen.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert open_fds() == before
        return runs[0].pgid

    assert group_gone(asyncio.run(main()))


def test_events_written_during_the_grace_are_followed() -> None:
    argv = [*FAKE_CODEX, "--size", "400K", "--ignore-term", "--pause", "0.01"]

    async def main() -> tuple[list[dict[str, Any]], spoolparse.Result]:
        seen: list[dict[str, Any]] = []
        async with spoolparse.open_run(argv, timeout=1.0, grace=0.3) as run:
            async for ev in run.events():
                seen.append(event_dict(ev))
            return seen, await run.wait()

    seen, res = asyncio.run(main())
    with res:
        assert res.timed_out and res.returncode in (-9, -15)  # -15: TERM came before the child's handler
        assert seen == _posthoc(res)


def test_a_steady_writer_is_read_in_batches_not_once_per_write() -> None:
    """3,000 lines, one write each, one every 0.2 ms or so: the run wakes far fewer times than that."""
    producer = (
        "import sys, time\n"
        "pad = 'x' * 1000\n"
        "for i in range(3000):\n"
        "    sys.stdout.write('{\"type\":\"item.completed\",\"item\":{\"id\":\"%d\",\"type\":\"reasoning\","
        "\"text\":\"%s\"}}\\n' % (i, pad))\n"
        "    sys.stdout.flush()\n"
        "    time.sleep(0.0002)\n"
        "print('{\"type\":\"item.completed\",\"item\":{\"id\":\"a\",\"type\":\"agent_message\",\"text\":\"done\"}}')\n"
        "print('{\"type\":\"turn.completed\",\"usage\":{}}')\n"
    )

    async def main() -> tuple[bool, int]:
        async with aio.open_run([sys.executable, "-c", producer], keep_output=False) as run:
            res = await run.wait()
            return res.ok, run.wakeups

    ok, wakeups = asyncio.run(main())
    assert ok
    assert wakeups < 600, wakeups  # one per READ_GAP at most: about 1 s of writing; once per write: 3,000


@pytest.mark.slow
def test_a_run_nobody_listens_to_reads_its_spool_on_an_interval_not_on_every_write() -> None:
    """``wait()`` with no ``on_event``: the spool is read every UNWATCHED_READ_INTERVAL (only to keep the
    parse current), not on each write; the exit still wakes the run at once. With a listener, every write."""
    argv = [*FAKE_CODEX, "--size", "48K", "--output-size", "400", "--pause", "0.01"]  # ~100 events over ~1.5 s

    async def follow(listen: bool) -> tuple[int, spoolparse.Result]:
        seen: list[object] = []
        async with aio.open_run(argv, on_event=seen.append if listen else None) as run:
            res = await run.wait()
            return run.wakeups, res

    quiet, res_quiet = asyncio.run(follow(False))
    busy, res_busy = asyncio.run(follow(True))
    try:
        assert res_quiet.ok and res_busy.ok and res_quiet.text == res_busy.text
        assert res_quiet.stdout_bytes == res_busy.stdout_bytes
        assert busy > 30, busy  # a listener is woken by (nearly) every write
        assert quiet < 10, quiet  # ~1.5 s at one read per 0.5 s, and the exit
    finally:
        res_quiet.close()
        res_busy.close()


@pytest.mark.slow
def test_a_run_parsing_a_large_backlog_leaves_the_event_loop_to_the_others() -> None:
    """A child that writes tens of MB of small events at once leaves seconds of parsing: it is done a
    ``PARSE_BUDGET`` at a time, with the event loop's other work between, so another run's timeout ends it on
    time meanwhile. The flooding run's result is whole."""
    import time

    line = b'{"type":"item.completed","item":{"type":"agent_message","text":"hello world"}}\n'
    count = 40 * (1 << 20) // len(line)
    writer = [sys.executable, "-c", f"import sys; sys.stdout.buffer.write({line!r} * {count})"]

    async def main() -> tuple[float, float, Any]:
        t0 = time.monotonic()

        async def other() -> float:
            r = await spoolparse.arun(["sleep", "30"], timeout=0.5)
            assert r.timed_out
            return time.monotonic() - t0

        async def flood() -> tuple[float, Any]:
            r = await spoolparse.arun(writer, keep_output=False)
            return time.monotonic() - t0, r

        (flood_s, res), other_s = await asyncio.gather(flood(), other())
        return flood_s, other_s, res

    flood_s, other_s, res = asyncio.run(main())
    assert other_s < 3.0 and other_s < flood_s, (other_s, flood_s)
    assert res.lines == count and res.stdout_bytes == count * len(line) and res.partial_text == "hello world"


def _gone_within(pgid: int, within: float = 20.0) -> Any:
    async def wait() -> bool:
        deadline = asyncio.get_running_loop().time() + within
        while not group_gone(pgid) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        return group_gone(pgid)

    return wait()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["on_event", "events"])
def test_a_slow_consumer_holds_up_no_timeout(tmp_path: Path, how: str) -> None:
    """An async listener that awaits a long time, or a consumer of ``events()`` slow between events, does not
    hold up the run's timeout: the deadlines are the event loop's timers, not the consumer's pace."""
    argv = [sys.executable, str(FIXTURES / "live_agent.py"), "--wait-for", str(tmp_path / "never")]

    async def main() -> tuple[list[bool], spoolparse.Result]:
        gone_in_time: list[bool] = []
        pgid: list[int] = []

        async def on_event(ev: Any) -> None:
            if not gone_in_time:
                gone_in_time.append(await _gone_within(pgid[0]))

        async with aio.open_run(argv, timeout=1.0, grace=0.5, on_event=on_event if how == "on_event" else None) as run:
            pgid.append(run.pgid)
            if how == "events":
                async for ev in run.events():
                    await on_event(ev)
            res = await run.wait()
        return gone_in_time, res

    gone_in_time, res = asyncio.run(main())
    assert gone_in_time == [True], "the timeout waited for the consumer"
    assert res.timed_out and not res.ok
    res.close()


@pytest.mark.slow
def test_a_deadline_whose_first_look_fails_is_looked_at_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop's timer for a deadline meets an OSError (a signal or a look at the group that failed once): it
    looks again soon, and the timeout still fires while the consumer is busy elsewhere."""
    from spoolparse.child import Child

    real = Child.advance
    failed: list[bool] = []

    def advance(self: Child, now: float, **kw: Any) -> Any:
        if not failed and now >= self.started + 1.0:
            failed.append(True)
            raise OSError(5, "once")
        return real(self, now, **kw)

    monkeypatch.setattr(Child, "advance", advance)
    argv = [sys.executable, str(FIXTURES / "live_agent.py"), "--wait-for", str(tmp_path / "never")]

    async def main() -> tuple[bool, spoolparse.Result]:
        async with aio.open_run(argv, timeout=1.0, grace=0.5) as run:
            async for _ in run.events():
                gone = await _gone_within(run.pgid)
                break
            return gone, await run.wait()

    gone, res = asyncio.run(main())
    assert failed == [True]
    assert gone, "the timeout waited for the consumer after a failed look"
    assert res.timed_out and not res.ok
    res.close()


def test_the_loop_runs_on_while_a_child_is_started(tmp_path: Path) -> None:
    """``async with open_run`` makes the child (spools, cgroup, input, exec) in a worker thread: an input that
    is a FIFO without a writer blocked the whole loop in ``open`` until another thread wrote to it."""
    fifo = tmp_path / "input"
    os.mkfifo(fifo)
    opened_by: list[str] = []

    def fallback() -> None:  # the old behaviour: nobody on the loop can open it; this thread does, late
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return  # the loop's writer had it (or nobody reads: the start went on)
        opened_by.append("thread")
        os.write(fd, b"x\n")
        os.close(fd)

    async def main() -> spoolparse.Result:
        async def writer() -> None:
            while True:
                try:
                    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO until the start opens it to read
                except OSError:
                    await asyncio.sleep(0.01)
                    continue
                opened_by.append("loop")
                os.write(fd, b'{"type":"x"}\n')
                os.close(fd)
                return

        task = asyncio.create_task(writer())
        import threading

        late = threading.Timer(3.0, fallback)
        late.start()
        try:
            async with spoolparse.open_run(["cat"], input=fifo, allow_empty_answer=True) as run:
                result = await run.wait()
        finally:
            late.cancel()
        await task
        return result

    r = asyncio.run(main())
    assert opened_by == ["loop"]  # the loop's own writer got to it while the start waited in its thread
    assert r.returncode == 0 and r.lines == 1


def test_a_start_cancelled_while_the_child_is_made_leaves_no_child(tmp_path: Path) -> None:
    """The start's thread goes on after the await is cancelled: what it makes, it ends (nothing escapes)."""
    import threading

    fifo = tmp_path / "input"
    os.mkfifo(fifo)
    token = f"spoolparse-test-{os.getpid()}-{id(fifo)}"

    def writer() -> None:  # opens the FIFO once (a reader must be there), so that the start goes on
        fd = os.open(fifo, os.O_WRONLY)
        os.close(fd)

    async def main() -> None:
        run = spoolparse.open_run(["sh", "-c", f"exec sleep 60 # {token}"], input=fifo)
        start = asyncio.create_task(run.__aenter__())
        await asyncio.sleep(0.2)  # the worker thread waits in open() for a writer
        start.cancel()
        with pytest.raises(asyncio.CancelledError):
            await start
        threading.Thread(target=writer, daemon=True).start()  # now the start goes on, for nobody

    late = threading.Timer(3.0, writer)  # the loop blocked in open(): it goes on late (and the test fails)
    late.daemon = True
    late.start()
    try:
        asyncio.run(main())  # returns once the start's thread is done (the default executor is joined)
    finally:
        late.cancel()
    alive = []
    for proc in Path("/proc").iterdir():
        try:
            if token.encode() in (proc / "cmdline").read_bytes():
                alive.append(proc.name)
        except OSError:
            continue
    assert alive == []
