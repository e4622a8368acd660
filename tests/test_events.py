"""Live events a UI can be built on: the same vocabulary from every provider, typed, bounded."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

import spoolparse
from spoolparse import _limits
from spoolparse.parser import StreamParser
from spoolparse.providers import _peek
from spoolparse.types import EVENT_FIELDS, EVENT_KINDS, JOBLOG_FIELDS, OUTCOME_FIELDS, SUMMARY_FIELDS

from .helpers import FIXTURES, jl

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = FIXTURES / "published" / "samples"


def events(source: Path | bytes, **options: Any) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    src = io.BytesIO(source) if isinstance(source, bytes) else source
    spoolparse.parse(src, on_event=lambda ev: seen.append(dict(ev.as_dict())), **options)
    return seen


def tools_and_text(evs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The part of the stream a UI draws tools and streamed text from."""
    out: list[tuple[Any, ...]] = []
    for e in evs:
        k = e["kind"]
        if k == "tool_start":
            out.append((k, e["call_id"], e["name"], e["title"]))
        elif k == "tool_end":
            out.append((k, e["call_id"], e["ok"], e["exit_code"]))
        elif k in ("text_delta", "text"):
            out.append((k, e["text"]))
        elif k == "retry":
            out.append((k, e["attempt"], e["max_attempts"]))
    return out


# -- recorded real-CLI transcripts (offline, mock model server) ------------------------------


def test_codex_real_cli_transcript() -> None:
    evs = events(FIXTURES / "codex" / "realcli_A.jsonl")
    assert tools_and_text(evs) == [
        ("tool_start", "item_1", "command_execution", "/bin/bash -lc 'echo hello'"),
        ("tool_end", "item_1", True, 0),
        ("text", "FINAL-ANSWER-codex"),
    ]
    assert [e["kind"] for e in evs if e["kind"].startswith("turn")] == ["turn_start", "turn_end"]


def test_claude_real_cli_transcript_with_partial_messages() -> None:
    evs = events(FIXTURES / "claude" / "realcli_A_partial.jsonl")
    assert tools_and_text(evs) == [
        ("tool_start", "toolu_msg_mock_1", "Bash", "echo hello"),
        ("tool_end", "toolu_msg_mock_1", True, None),
        ("text_delta", "FINAL-ANSWER-claude"),  # the stream_event delta, before the assistant message
        ("text", "FINAL-ANSWER-claude"),
        ("text", "FINAL-ANSWER-claude"),
    ]
    assert evs[-1]["kind"] == "result" and evs[-2]["kind"] == "turn_end"


def test_claude_real_cli_retries_are_retry_events() -> None:
    evs = events(FIXTURES / "claude" / "realcli_B_retries.jsonl")
    assert tools_and_text(evs) == [("retry", n, 10) for n in range(1, 6)]
    assert not any(e["kind"] == "error" for e in evs)


def test_gemini_real_cli_transcript() -> None:
    evs = events(FIXTURES / "gemini" / "realcli_A.jsonl")
    cid = "run_shell_command__run_shell_command_1795474062565_0"
    assert tools_and_text(evs) == [
        ("tool_start", cid, "run_shell_command", "echo hello"),
        ("tool_end", cid, True, None),
        ("text_delta", "FINAL-ANSWER-gemini"),
        ("text", "FINAL-ANSWER-gemini"),  # the message, whole, when the result ends it
    ]


def test_opencode_real_cli_transcript() -> None:
    evs = events(FIXTURES / "opencode" / "realcli_A.jsonl")
    assert tools_and_text(evs) == [
        ("tool_start", "call_chatcmpl-mock-2", "bash", "echo hello"),  # opencode reports a tool once, finished
        ("tool_end", "call_chatcmpl-mock-2", True, 0),
        ("text_delta", "FINAL-ANSWER-opencode"),
        ("text", "FINAL-ANSWER-opencode"),
    ]
    assert [e["kind"] for e in evs if e["kind"].startswith("turn")] == ["turn_start", "turn_end"] * 2


def test_codex_real_cli_reconnects_are_retries() -> None:
    evs = events(FIXTURES / "codex" / "realcli_B_reconnect.jsonl")
    assert tools_and_text(evs) == [("retry", n, 5) for n in range(1, 6)]
    high_demand = "We’re currently experiencing high demand, which may cause temporary errors."
    assert [(e["kind"], e.get("message")) for e in evs if e["kind"] in ("error", "turn_end")] == [
        ("error", high_demand), ("error", high_demand), ("turn_end", None)]


def test_codex_reconnects_are_retries() -> None:
    lines = [{"type": "thread.started", "thread_id": "t"}, {"type": "turn.started"}]
    lines += [{"type": "error", "message": f"Reconnecting... {n}/5 (stream disconnected)"} for n in range(1, 6)]
    lines += [{"type": "error", "message": "stream disconnected"}, {"type": "turn.failed", "error": {"message": "x"}}]
    evs = events(jl(*lines))
    assert tools_and_text(evs) == [("retry", n, 5) for n in range(1, 6)]
    assert [e["message"] for e in evs if e["kind"] == "error"] == ["stream disconnected", "x"]


def test_generic_tool_and_delta_lines() -> None:
    data = jl({"type": "tool_call", "id": "c1", "name": "shell", "arguments": {"command": "ls -la"}},
              {"type": "tool_result", "id": "c1", "exit_code": 1, "output": "nope"},
              {"type": "delta", "text": "Hel"}, {"type": "delta", "text": "lo"},
              {"type": "message", "text": "Hello"})
    assert tools_and_text(events(data, provider="generic")) == [
        ("tool_start", "c1", "shell", "ls -la"), ("tool_end", "c1", False, 1),
        ("text_delta", "Hel"), ("text_delta", "lo"), ("text", "Hello")]


# -- the published samples ---------------------------------------------------------------------

needs_samples = pytest.mark.skipif(not SAMPLES.is_dir(), reason="needs fixtures/published/samples")


@needs_samples
def test_codex_docs_sample_has_paired_tool_and_reasoning() -> None:
    evs = events(SAMPLES / "codex" / "docs_exec_md_sample.jsonl")
    assert tools_and_text(evs) == [
        ("tool_start", "item_1", "command_execution", "bash -lc ls"),
        ("tool_end", "item_1", True, 0),
        ("text", "Yep — there’s a `README.md` in the repository root."),
    ]
    assert [e["text"] for e in evs if e["kind"] == "thinking"] == [
        "**Searching for README files**", "**Checking repository root for README**"]


@needs_samples
def test_codex_experimental_item_type_sample() -> None:
    evs = events(SAMPLES / "codex" / "legacy_experimental_json_pr4250_excerpt.jsonl")
    assert tools_and_text(evs) == [
        ("text", "Running `echo` to confirm shell access and print output."),
        ("tool_start", "item_3", "command_execution", "bash -lc echo hello"),
        ("tool_end", "item_3", True, 0),
    ]


@needs_samples
def test_gemini_failed_tool_result_sample() -> None:
    evs = events(SAMPLES / "gemini" / "stream_json_formatter_test_events.jsonl")
    tools = [t for t in tools_and_text(evs) if t[0].startswith("tool")]
    # the second result of the same id has no open call: it gets its own start
    assert tools == [
        ("tool_start", "read-123", "Read", "/path/to/file.txt"),
        ("tool_end", "read-123", True, None),
        ("tool_start", "read-123", None, None),
        ("tool_end", "read-123", False, None),
    ]


def test_claude_parallel_tool_results_in_one_line() -> None:
    sid = {"session_id": "s"}
    blocks = [{"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"file_path": f"/f{i}"}} for i in (1, 2)]
    results = [{"type": "tool_result", "tool_use_id": "t2", "content": "b", "is_error": True},
               {"type": "tool_result", "tool_use_id": "t1", "content": "a", "is_error": False}]
    data = jl({"type": "system", "subtype": "init", "model": "m", **sid},
              {"type": "assistant", "message": {"model": "m", "content": blocks}, **sid},
              {"type": "user", "message": {"role": "user", "content": results}, **sid},
              {"type": "result", "subtype": "success", "result": "ok", "is_error": False, **sid})
    assert [t for t in tools_and_text(events(data)) if t[0].startswith("tool")] == [
        ("tool_start", "t1", "Read", "/f1"), ("tool_start", "t2", "Read", "/f2"),
        ("tool_end", "t2", False, None), ("tool_end", "t1", True, None)]


def test_peek_reads_keys_never_text_that_looks_like_one() -> None:
    line = jl({"output": '{"id":"fake","exit_code":9}, "id": "also fake"', "id": "real", "exit_code": 0,
               "title": "caf\u00e9 \"x\"" + "y" * 50})[:-1]
    assert _peek.string(line, "id") == "real"
    assert _peek.scalar(line, "exit_code") == 0
    cut = line[: line.index(b"yyy") + 10]  # a head that ends inside the value
    assert _peek.string(cut, "title") == 'café "x"' + "y" * 10
    assert _peek.string(line[: line.index(b'"title"') + 3], "title") is None and _peek.scalar(cut, "nope") is None


# -- bounded: a tool's output is never decoded or buffered -----------------------------------------


@pytest.fixture
def decoded_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sizes: list[int] = []
    real = orjson.loads

    def loads(data: Any) -> Any:
        sizes.append(len(data))
        return real(data)

    # the providers' own decodes of noted lines only (the scanner's decodes of kept lines are not counted)
    monkeypatch.setattr(_peek, "orjson", SimpleNamespace(loads=loads, JSONDecodeError=orjson.JSONDecodeError))
    return sizes


@pytest.mark.parametrize("chunk", [None, 7 * 1024])
def test_huge_tool_output_is_read_from_its_head_and_tail(chunk: int | None, decoded_sizes: list[int]) -> None:
    big = "x" * 3_000_000
    start = {"type": "item.started", "item": {"id": "item_9", "type": "command_execution", "command": "make all",
                                              "aggregated_output": "", "exit_code": None, "status": "in_progress"}}
    end = {"type": "item.completed", "item": {"id": "item_9", "type": "command_execution", "command": "make all",
                                              "aggregated_output": big, "exit_code": 2, "status": "failed"}}
    data = jl({"type": "thread.started", "thread_id": "t"}, start, end)
    sp = StreamParser("auto")
    live = []
    for i in range(0, len(data), chunk or len(data)):
        live += sp.feed(data[i : i + (chunk or len(data))])
    live += sp.close()
    ends = [e.as_dict() for e in live if e.kind == "tool_end"]
    assert len(ends) == 1
    assert {k: ends[0][k] for k in ("call_id", "name", "title", "ok", "exit_code", "bytes", "output")} == {  # type: ignore[literal-required]
        "call_id": "item_9", "name": "command_execution", "title": "make all", "ok": False, "exit_code": 2,
        "bytes": len(jl(end)) - 1, "output": None}
    assert max(decoded_sizes) <= _limits.NOTE_HEAD


def test_only_the_noted_lines_that_make_events_are_decoded(decoded_sizes: list[int]) -> None:
    """Of 12 partial-message lines and 1 tool result, a line is decoded only when it makes an event."""
    path = FIXTURES / "claude" / "realcli_A_partial.jsonl"
    evs = events(path)
    lines = path.read_bytes().splitlines()
    assert sum(line.startswith(b'{"type":"stream_event"') for line in lines) == 12
    with_events = {e["line"] for e in evs if e["type"] in ("stream_event", "user")}
    assert len(decoded_sizes) == len(with_events) == 6  # 2 message starts, 2 message deltas, 1 text delta, 1 result
    assert [e["usage"]["output_tokens"] for e in evs if e["kind"] == "usage"] == [1, 56, 57, 112, 112]


def test_tool_output_when_asked_is_bounded() -> None:
    out = "line\n" * 10_000
    data = jl({"type": "tool_use", "timestamp": "t", "tool_name": "sh", "tool_id": "a", "parameters": {"command": "c"}},
              {"type": "tool_result", "timestamp": "t", "tool_id": "a", "status": "success", "output": out})
    end = next(e for e in events(data, provider="gemini", tool_output=100) if e["kind"] == "tool_end")
    assert end["output"] == out[:100]
    end = next(e for e in events(data, provider="gemini") if e["kind"] == "tool_end")
    assert end["output"] is None


def test_a_tool_result_over_the_line_cap_still_ends_its_call() -> None:
    data = jl({"type": "tool_use", "timestamp": "t", "tool_name": "sh", "tool_id": "a", "parameters": {"command": "c"}},
              {"type": "tool_result", "timestamp": "t", "tool_id": "a", "status": "success", "output": "x" * 5000},
              {"type": "result", "timestamp": "t", "status": "success", "stats": {}})
    evs = events(data, provider="gemini", max_line=1024)
    assert [(e["kind"], e.get("call_id"), e.get("bytes")) for e in evs if e["kind"] in ("tool_end", "dropped")] == [
        ("dropped", None, len(jl(json.loads(data.splitlines()[1]))) - 1),
        ("tool_end", "a", len(jl(json.loads(data.splitlines()[1]))) - 1)]


def test_without_a_listener_nothing_is_noted() -> None:
    data = (FIXTURES / "claude" / "realcli_A_partial.jsonl").read_bytes()
    sp = StreamParser("claude", live=False)
    recs: list[Any] = []
    feed = sp.scanner.feed
    sp.scanner.feed = lambda *a: recs.extend(r := feed(*a)) or r  # type: ignore[method-assign, func-returns-value]
    assert sp.feed(data) == [] and sp.close() == []
    assert not any(type(r).__name__ == "Noted" for r in recs)
    assert sp.finish(args=None).text == "FINAL-ANSWER-claude"


# -- the shape: one table, every kind, seq in order ----------------------------------------------------


def test_every_event_has_its_kinds_fields_in_order() -> None:
    seen_kinds = set()
    for path in [*(FIXTURES).glob("*/*.jsonl"), *(FIXTURES).glob("*/*.json")]:
        evs = events(path)
        assert [e["seq"] for e in evs] == list(range(1, len(evs) + 1)), path
        for e in evs:
            assert tuple(e) == EVENT_FIELDS[e["kind"]], (path, e)
            assert isinstance(e["time"], float) and e["time"] > 0
            seen_kinds.add(e["kind"])
    assert set(EVENT_FIELDS) == set(EVENT_KINDS)
    assert seen_kinds >= set(EVENT_KINDS) - {"thinking", "dropped"}


def test_docs_event_table_lists_every_kind_and_field() -> None:
    page = (ROOT / "docs" / "guides" / "live-events.md").read_text()
    rows = {}
    for line in page.splitlines():
        if line.startswith("| `") and "` |" in line:
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0].strip("`")] = cells[1]
    for kind, fields in EVENT_FIELDS.items():
        assert kind in rows, kind
        for field in fields[5:]:
            assert f"`{field}`" in rows[kind], (kind, field)


def test_summary_outcome_and_joblog_keys_come_from_the_types() -> None:
    r = spoolparse.parse(FIXTURES / "codex" / "realcli_A.jsonl")
    assert tuple(r.summary()) == SUMMARY_FIELDS == spoolparse.SUMMARY_FIELDS
    assert tuple(spoolparse.Outcome(id="1", verdict="ok").to_dict()) == OUTCOME_FIELDS
    assert JOBLOG_FIELDS[:4] == ("id", "attempt", "final", "verdict")


# -- the property: starts and ends pair up -------------------------------------------------------------


def _tool_line(provider: str, start: bool, cid: str) -> dict[str, Any]:
    if provider == "claude":
        if start:
            block = {"type": "tool_use", "id": cid, "name": "Bash", "input": {"command": "c"}}
            return {"type": "assistant", "message": {"model": "m", "content": [block]}, "session_id": "s"}
        result = {"type": "tool_result", "tool_use_id": cid, "content": "o", "is_error": False}
        return {"type": "user", "message": {"role": "user", "content": [result]}, "session_id": "s"}
    if provider == "codex":
        return {"type": "item.started" if start else "item.completed",
                "item": {"id": cid, "type": "command_execution", "command": "c", "aggregated_output": "o"}}
    if start:
        return {"type": "tool_use", "timestamp": "t", "tool_name": "n", "tool_id": cid, "parameters": {}}
    return {"type": "tool_result", "timestamp": "t", "tool_id": cid, "status": "success", "output": "o"}


@given(provider=st.sampled_from(["codex", "gemini", "claude"]),
       steps=st.lists(st.tuples(st.booleans(), st.sampled_from(["a", "b", "c", ""]), st.integers(0, 3)), max_size=30))
def test_every_tool_start_has_at_most_one_end_in_order(provider: str, steps: list[tuple[bool, str, int]]) -> None:
    lines = [_tool_line(provider, start, cid) for start, cid, _ in steps]
    evs = events(jl(*lines), provider=provider, max_line=4096)
    assert [e["seq"] for e in evs] == list(range(1, len(evs) + 1))
    open_ids: set[str] = set()
    for e in evs:
        if e["kind"] == "tool_start":
            open_ids.add(e["call_id"])
        elif e["kind"] == "tool_end":
            assert e["call_id"] in open_ids, "an end without its start, or a second end"
            open_ids.remove(e["call_id"])
        assert e["kind"] not in ("tool_start", "tool_end") or isinstance(e["call_id"], str)


# -- the typed public API, checked as a user would ------------------------------------------------------


def _mypy(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", *map(str, paths)],
                          capture_output=True, text=True, cwd=ROOT, check=False)


def test_live_log_example_is_in_the_docs_and_runs(tmp_path: Path) -> None:
    example = ROOT / "examples" / "live_log.py"
    assert '--8<-- "examples/live_log.py"' in (ROOT / "docs" / "guides" / "live-events.md").read_text()
    assert len(example.read_text().splitlines()) <= 40
    p = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert p.stdout.count("▶") == 3 and p.stdout.count("■") == 3
    for cli in ("codex", "claude", "gemini"):
        assert f"{cli}: ok=True text='FINAL-ANSWER-{cli}'" in p.stdout


def test_typed_consumer_runs(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, str(ROOT / "tests" / "typed_consumer.py"),
                        str(FIXTURES / "gemini" / "realcli_A.jsonl"), str(tmp_path / "joblog")],
                       capture_output=True, text=True, check=True)
    assert "start run_shell_command" in p.stdout and "0 ok 'hi'" in p.stdout and "0#1 ok final=True" in p.stdout


@pytest.mark.slow
def test_user_programs_pass_mypy_strict() -> None:
    p = _mypy(ROOT / "examples" / "live_log.py", ROOT / "tests" / "typed_consumer.py")
    assert p.returncode == 0, p.stdout + p.stderr


LIVE_PEAK = """
import json, sys
import spoolparse
ends = []
with spoolparse.run(json.loads(sys.argv[1]), on_event=lambda ev: ends.append(ev.data["bytes"])
                    if ev.kind == "tool_end" else None) as r:
    ok, text = r.ok, r.text
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
print(json.dumps({"maxrss": int(hwm.split()[1]) * 1024, "ok": ok, "text": text, "biggest": max(ends)}))
"""


@pytest.mark.slow
def test_live_events_of_a_12_mib_tool_line_add_less_than_6_mib() -> None:
    """With a listener, a tool line under the line cap is still read from its head and tail only."""
    from .helpers import FAKE_CODEX

    def peak(*args: str) -> dict[str, Any]:
        p = subprocess.run([sys.executable, "-c", LIVE_PEAK, json.dumps([*FAKE_CODEX, *args])],
                           capture_output=True, check=True, timeout=600)
        return json.loads(p.stdout)  # type: ignore[no-any-return]

    tiny, blob = peak("--size", "64K"), peak("--size", "64K", "--blob", "12M")
    growth = blob["maxrss"] - tiny["maxrss"]
    print(f"\nlive peak RSS: tiny {tiny['maxrss'] / (1 << 20):.1f} MiB, 12 MiB tool line "
          f"{blob['maxrss'] / (1 << 20):.1f} MiB, growth {growth / (1 << 20):.1f} MiB")
    assert blob["ok"] and blob["text"] == tiny["text"]
    assert blob["biggest"] > 12 * (1 << 20)
    assert growth < 6 * (1 << 20)  # one copy of the line (or its decode) would be 12 MiB and more
