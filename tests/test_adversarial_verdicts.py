"""Streams built to make the verdict wrong: a run that goes on past its end in a line that cannot be read, a CLI's
stream after lines of no known format, a whole document among blank lines, and a verdict that must not depend on
whether anyone listens. Each case is generated for every CLI whose stream has the seam."""

from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spoolparse import StreamParser, _limits, parse
from spoolparse.providers import grammars

from .helpers import FIXTURES, jl
from .test_seam_cases import SUCCESS, lines_of, objects

GRAMMARS = {g.name: g for g in grammars()}


def summary(data: bytes, **kw: Any) -> dict[str, Any]:
    s = dict(parse(io.BytesIO(data), **kw).summary())
    s.pop("duration_s")
    return s


def verdict(s: dict[str, Any]) -> tuple[Any, ...]:
    return s["provider"], s["ok"], s["text"]


# -- a run that goes on in a line that cannot be read ---------------------------------------------------------


def _unreadable(obj: dict[str, Any], how: str) -> tuple[bytes, dict[str, Any]]:
    """The event as a line that cannot be read, and the parse options that make it so: cut mid-line (a writer
    killed as it wrote), a bad escape in it, or longer than the lines kept."""
    line = jl(obj)
    if how == "cut":
        return line[: len(line) // 2], {}
    if how == "bad escape":
        return line[:-2] + b',"x":"\\q"}\n', {}
    padded = jl({**obj, "pad": "x" * 3 * _limits.PROBE_BYTES})
    return padded, {"max_line": 2 * _limits.PROBE_BYTES, "max_retained": 2 * _limits.PROBE_BYTES}


def _goes_on(cli: str) -> dict[str, Any]:
    """An event of ``cli`` after its run's end that means the stream goes on: the next run's start, the next
    turn's beginning, or for a CLI that prints nothing after its end, any of its events."""
    g = GRAMMARS[cli]
    objs = objects(SUCCESS[cli])
    for role in (g.starts, g.turns):
        for obj in objs:
            key = obj.get("type") or ""
            if any(s.fits(key, obj) for s in role):
                return obj
    assert g.final, cli
    return objs[0]


@pytest.mark.parametrize("how", ["cut", "bad escape", "oversize"])
@pytest.mark.parametrize("cli", sorted(SUCCESS))
def test_a_run_that_goes_on_past_its_end_in_a_line_that_cannot_be_read_is_not_ok(cli: str, how: str) -> None:
    """After a complete run, the next run's first line (or the next turn's) cut, undecodable or too long: the
    stream's last run did not end (the summary is that run's), so the first run's answer is no answer."""
    whole = (FIXTURES / SUCCESS[cli]).read_bytes()
    line, kw = _unreadable(_goes_on(cli), how)
    alone = summary(whole, **kw)
    assert alone["ok"] is True, alone
    s = summary(whole + line, **kw)
    assert s["ok"] is False and s["text"] is None, s
    assert s["provider"] == alone["provider"], s


# -- a CLI's stream after lines of no known format -------------------------------------------------------------


def _logs(n: int) -> bytes:
    """``n`` JSON lines no CLI prints: a wrapper's logger writing to the same stdout."""
    return jl(*({"level": "info", "msg": f"starting step {i}"} for i in range(n)))


@pytest.mark.parametrize("cli", sorted(SUCCESS))
def test_a_clis_stream_after_more_lines_of_no_known_format_than_detection_holds_is_still_its(cli: str) -> None:
    """Detection settles on generic when its budget of lines no grammar claims runs out, but the CLI's events
    after them are still its: the same verdict as the stream alone (generic took the last delta for the
    answer, and any text for a finished run)."""
    objs = objects(SUCCESS[cli])
    whole = jl(*objs)
    cut = jl(*objs[:-1])
    for logs in (_limits.DETECT_EVENTS - 1, _limits.DETECT_EVENTS, 3 * _limits.DETECT_EVENTS):
        after = summary(_logs(logs) + whole)
        assert verdict(after) == verdict(summary(whole)), (logs, after)
        assert after["provider"] != "generic" and after["detected_by"] != "", after
        short = summary(_logs(logs) + cut)
        assert verdict(short) == verdict(summary(cut)), (logs, short)


def test_lines_of_no_known_format_alone_are_still_generic() -> None:
    s = summary(_logs(3 * _limits.DETECT_EVENTS) + jl({"type": "done", "result": "FINAL"}))
    assert (s["provider"], s["ok"], s["text"]) == ("generic", True, "FINAL"), s
    assert s["detected_by"].startswith("no event of a known format"), s


# -- a whole document among blank lines --------------------------------------------------------------------------


DOCUMENT = {"session_id": "g", "response": "FINAL", "stats": {"models": {}}}


@pytest.mark.parametrize("around", [(b"\n", b""), (b"", b"\n"), (b" \r\n\n", b"\n\t\n"), (b"", b"\n" * 40)])
def test_a_compact_gemini_document_among_blank_lines_is_still_the_whole_input(around: tuple[bytes, bytes]) -> None:
    """A blank line is no JSON object: ``-o json`` piped through a tool that adds one is still one document."""
    before, after = around
    s = summary(before + jl(DOCUMENT) + after)
    assert (s["provider"], s["ok"], s["text"]) == ("gemini", True, "FINAL"), s
    other = summary(before + jl(DOCUMENT) + after + jl({"level": "info"}))
    assert other["ok"] is False, other  # another object: the document is none


# -- whether anyone listens ------------------------------------------------------------------------------------


def test_a_look_alikes_mark_after_many_noted_lines_reads_the_same_listened_to_or_not() -> None:
    """Cursor's init cut to the fields Claude's shares, then more prompt echoes (lines Claude's grammar only
    notes) than the records held after a decision, then its own tool_call: the switch reads from the same line
    whether or not anyone listens (noted lines are skipped unread without a listener, so they cannot count)."""
    objs = objects("cursor/success.jsonl")
    init = {k: v for k, v in objs[0].items() if k in ("type", "subtype", "session_id", "model", "cwd")}
    echo = {"type": "user", "session_id": init["session_id"], "message": {"role": "user", "content": "hi"}}
    rest = [o for o in objs[1:] if o["type"] != "user"]
    data = jl(init, *[echo] * (2 * _limits.DETECT_EVENTS), *rest)
    quiet, heard = summary(data), summary(data, on_event=lambda ev: None)
    assert quiet == heard, (quiet, heard)
    assert (quiet["provider"], quiet["model"]) == ("cursor", init["model"]), quiet


def _fed(data: bytes, chunk: int, *, live: bool) -> dict[str, Any]:
    sp = StreamParser("auto", live=live)
    for at in range(0, len(data), chunk):
        sp.feed(data[at : at + chunk])
    s = dict(sp.finish(args=None).summary())
    s.pop("duration_s")
    for key in ("args", "stdout_bytes"):
        s.pop(key, None)
    return s


LINE_FIXTURES = sorted(p for p in FIXTURES.glob("*/*.jsonl"))


@pytest.mark.parametrize("path", LINE_FIXTURES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_the_summary_does_not_depend_on_listeners_or_chunks(path: Any) -> None:
    """Each fixture as is, after lines of no known format, cut at each line, and after another copy of itself:
    the same summary parsed whole, fed in pieces of 1 and 7 bytes, listened to or not."""
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    variants = [data, _logs(_limits.DETECT_EVENTS + 2) + data, data + data]
    variants += [b"".join(lines[:k]) for k in range(1, len(lines))]
    for v in variants:
        want = _fed(v, len(v) or 1, live=False)
        for chunk, live in ((1, False), (7, True), (len(v) or 1, True)):
            assert _fed(v, chunk, live=live) == want, (chunk, live, v[:200])


@pytest.mark.parametrize("cli", sorted(c for c in SUCCESS if GRAMMARS[c].typed))
def test_a_gemini_document_before_another_clis_stream_is_no_document(cli: str) -> None:
    """A line shaped like Gemini's ``-o json`` document, then another CLI's whole run (a log of two commands):
    the document is withheld until the end shows it was the whole input, and the switch to the CLI whose events
    follow must refuse it under Gemini's grammar (it raised an AssertionError from parse)."""
    whole = (FIXTURES / SUCCESS[cli]).read_bytes()
    s = summary(jl(DOCUMENT) + whole)
    assert verdict(s) == verdict(summary(whole)), s
    if cli != "gemini":
        assert any("looks like gemini's `-o json` document" in w for w in s["warnings"]), s["warnings"]


@pytest.mark.parametrize("before", ["a stray chat line", "lines of no known format"])
def test_an_event_decoded_before_a_switch_and_noted_after_it_may_hold_any_integer(before: str) -> None:
    """A Gemini tool_use (a type its grammar only notes) with an integer past 64 bits, decoded while the stream
    was read as another provider's (here the first of Gemini's events), then handed to Gemini as a noted line:
    it raised TypeError out of the parser when the chunks fell so that it was decoded."""
    objs = objects(SUCCESS["gemini"])
    call = next(o for o in objs if o["type"] == "tool_use")
    call = {**call, "parameters": {**call["parameters"], "offset": 2**70}}
    rest = [o for o in objs if o["type"] != "tool_use"]
    head = jl({"role": "assistant", "content": "a log line"}) if before == "a stray chat line" else _logs(20)
    data = head + jl(call, *rest)
    for chunk in (50, len(data)):
        s = _fed(data, chunk, live=False)
        assert (s["provider"], s["ok"], s["text"]) == ("gemini", True, "Running it. FINAL-ANSWER-gemini"), s


def _lines(cli: str) -> list[bytes]:
    return lines_of(SUCCESS[cli])


@settings(max_examples=80, deadline=None)
@given(pair=st.permutations(sorted(SUCCESS)).map(lambda p: (p[0], p[1])), data=st.data())
def test_a_stream_with_another_clis_lines_reads_the_same_in_any_chunks_listened_to_or_not(
        pair: tuple[str, str], data: st.DataObject) -> None:
    """One CLI's run with a few lines of another's put anywhere in it, perhaps cut short: the same summary parsed
    whole, fed a byte or a few bytes at a time, listened to or not. The scanner classifies a chunk's lines with
    the reading in force when the chunk starts, so a line of a type only noted while detecting must count for as
    little after the decision (a Qwen run with a Copilot line in it read as Qwen or as Claude, a Gemini run with
    a Droid tool call as either, by where the chunks fell)."""
    cli, other = pair
    lines = _lines(cli)
    theirs = [ln for ln in _lines(other) if ln.lstrip().startswith(b"{")]
    for _ in range(data.draw(st.integers(1, 3), label="insertions")):
        lines.insert(data.draw(st.integers(0, len(lines)), label="at"), data.draw(st.sampled_from(theirs)))
    stream = b"".join(lines[: data.draw(st.integers(1, len(lines)), label="kept")])
    want = _fed(stream, len(stream), live=False)
    for chunk, live in ((1, False), (7, True), (len(stream), True)):
        assert _fed(stream, chunk, live=live) == want, (chunk, live)


# -- a turn after the end answers for itself ------------------------------------------------------------------------


def _claude_turn(cli: str, said: list[dict[str, Any]], result: str, *, failed: bool = False) -> list[dict[str, Any]]:
    objs = objects(SUCCESS[cli])
    res = next(o for o in reversed(objs) if o["type"] == "result")
    sid = res.get("session_id")
    msg = {"type": "assistant", "session_id": sid, "parent_tool_use_id": None,
           "message": {"model": "m", "content": said}}
    end = {**res, "result": result, "is_error": failed, **({"subtype": "error_during_execution"} if failed else {})}
    return [msg, end]


def _codex_turn(said: str | None, *, failed: bool = False) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"type": "turn.started"}]
    if said is not None:
        out.append({"type": "item.completed", "item": {"id": "item_9", "type": "agent_message", "text": said}})
    out.append({"type": "turn.failed", "error": {"message": "overloaded"}} if failed else
               {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}})
    return out


def _opencode_turn(said: str | None) -> list[dict[str, Any]]:
    sid = objects(SUCCESS["opencode"])[0]["sessionID"]
    out: list[dict[str, Any]] = [{"type": "step_start", "sessionID": sid, "part": {"messageID": "msg_9"}}]
    if said is not None:
        out.append({"type": "text", "sessionID": sid, "part": {"messageID": "msg_9", "text": said}})
    out.append({"type": "step_finish", "sessionID": sid, "part": {"messageID": "msg_9", "reason": "stop"}})
    return out


def _first_turn(cli: str) -> list[dict[str, Any]]:
    objs = objects(SUCCESS[cli])
    return [o for o in objs if o.get("type") != "done"]  # opencode's idle session would end the run for good


TURNS = {  # a complete run, then a turn that said nothing (each CLI's way), then one that answered
    "claude": (lambda: _claude_turn("claude", [{"type": "thinking", "thinking": "hmm"}], ""),
               lambda: _claude_turn("claude", [{"type": "text", "text": "SECOND"}], "SECOND")),
    "qwen": (lambda: _claude_turn("qwen", [{"type": "thinking", "thinking": "hmm"}], ""),
             lambda: _claude_turn("qwen", [{"type": "text", "text": "SECOND"}], "SECOND")),
    "codex": (lambda: _codex_turn(None), lambda: _codex_turn("SECOND")),
    "opencode": (lambda: _opencode_turn(None), lambda: _opencode_turn("SECOND")),
}


@pytest.mark.parametrize("cli", sorted(TURNS))
def test_a_turn_after_the_end_answers_for_itself(cli: str) -> None:
    """A run that answered, then went on (its next turn began after the end): the run's answer is the last turn's.
    One that said nothing has no answer — never the turn before's — and one that answered gives its own."""
    silent, answered = TURNS[cli]
    first = _first_turn(cli)
    alone = summary(jl(*first))
    assert alone["ok"] is True, alone
    s = summary(jl(*first, *silent()))
    assert s["ok"] is False and s["text"] is None, s
    assert s["error"].startswith("the agent finished without an answer"), s
    s = summary(jl(*first, *answered()))
    assert (s["ok"], s["text"]) == (True, "SECOND"), s
    s = summary(jl(*first, *silent(), *answered()))
    assert (s["ok"], s["text"]) == (True, "SECOND"), s


def test_a_codex_turn_that_failed_then_one_that_answered() -> None:
    """The failure of a turn before is not the last turn's: the answer of the one after it is in hand (Claude's
    result of each turn says the same)."""
    first = _first_turn("codex")
    s = summary(jl(*first, *_codex_turn(None, failed=True), *_codex_turn("SECOND")))
    assert (s["ok"], s["text"], s["error"]) == (True, "SECOND", None), s
    s = summary(jl(*first, *_codex_turn("SECOND"), *_codex_turn(None, failed=True)))
    assert (s["ok"], s["text"], s["error"]) == (False, None, "overloaded"), s


# -- an answer taken from a message when the terminal event has none ------------------------------------------------

BIG = {"max_line": 4096, "max_retained": 4096}


def _claude_fallback(cli: str, after: dict[str, Any]) -> bytes:
    objs = objects(SUCCESS[cli])
    init, res = objs[0], next(o for o in reversed(objs) if o["type"] == "result")
    sid = res.get("session_id")
    said = {"type": "assistant", "session_id": sid, "parent_tool_use_id": None,
            "message": {"model": "m", "content": [{"type": "text", "text": "Let me think."}]}}
    last = {**said, "message": {"model": "m", "content": [{"type": "text", "text": "FINAL"}]}, **after}
    return jl(init, said, last, {**res, "result": ""})


def _droid_fallback(after: dict[str, Any]) -> bytes:
    objs = objects(SUCCESS["droid"])
    said = next(o for o in reversed(objs) if o["type"] == "message" and o["role"] == "assistant")
    done = {k: v for k, v in objs[-1].items() if k != "finalText"}
    return jl(*objs[:-2], {**said, "text": "Earlier."}, {**said, **after}, done)


FALLBACKS = {
    "claude": lambda after: _claude_fallback("claude", after),
    "qwen": lambda after: _claude_fallback("qwen", after),
    "cursor": lambda after: _claude_fallback("cursor", after),
    "droid": _droid_fallback,
}


@pytest.mark.parametrize("cli", sorted(FALLBACKS))
def test_a_fallback_answer_is_lost_with_a_later_message_that_could_not_be_read(cli: str) -> None:
    """The terminal event has no text, so the answer is taken from the last assistant message (with a warning);
    when a message after the one taken was too long or could not be read, that one may have been the answer:
    it is lost, never the message before it."""
    fine = summary(FALLBACKS[cli]({}), **BIG)
    assert fine["ok"] is True and fine["text"] in ("FINAL", "FINAL-ANSWER-droid"), fine
    s = summary(FALLBACKS[cli]({"pad": "x" * 5000}), **BIG)
    assert s["ok"] is False and s["text"] is None and s["partial_text"] is None, s
    assert "final answer" in s["error"] and "dropped" in s["error"], s


# -- another CLI's run after a run's end ---------------------------------------------------------------------------


FAILED = {
    "claude": "claude/api_error.jsonl", "gemini": "gemini/fatal_error.jsonl", "opencode": "opencode/api_error.jsonl",
    "codex": "codex/realcli_B_reconnect.jsonl", "copilot": "copilot/api_error.jsonl", "droid": "droid/error.jsonl",
    "qwen": "qwen/api_error.jsonl", "amp": "amp/error.jsonl", "antigravity": "antigravity/api_error.jsonl",
}
TYPED = sorted(c for c in SUCCESS if GRAMMARS[c].typed)


def _family(cli: str) -> str:
    return GRAMMARS[cli].family or cli


@pytest.mark.parametrize(("first", "then"), [(a, b) for a in TYPED for b in [*TYPED, "antigravity"]
                                             if _family(a) != _family(b)])
def test_another_clis_run_after_a_runs_end_is_the_last_run(first: str, then: str) -> None:
    """A log of two commands: one CLI's complete run, then another's (a wrapper that fell back to a second
    agent). The summary is the last run's, as for two runs of one CLI: its answer, or its failure — never the
    first run's answer with the second's events folded into it as its own."""
    before = (FIXTURES / SUCCESS[first]).read_bytes()
    for name in (SUCCESS[then], FAILED.get(then)):
        if name is None:
            continue
        after = (FIXTURES / name).read_bytes()
        alone, s = summary(after), summary(before + after)
        assert verdict(s) == verdict(alone), (name, s)
        assert s["session_id"] == alone["session_id"], (name, s)


@pytest.mark.parametrize(("first", "then"), [(a, b) for a in TYPED for b in TYPED
                                             if _family(a) != _family(b) and GRAMMARS[b].starts])
def test_another_clis_run_cut_in_its_first_line_after_a_runs_end_is_not_ok(first: str, then: str) -> None:
    """The second command's first line cut as it was written (its run start, a type the first CLI does not
    print): the stream's last run did not end, so the first run's answer is no answer."""
    before = (FIXTURES / SUCCESS[first]).read_bytes()
    start = next(ln for ln in (FIXTURES / SUCCESS[then]).read_bytes().splitlines() if ln.startswith(b"{"))
    s = summary(before + start[: len(start) // 2])
    assert s["ok"] is False and s["text"] is None, s


@pytest.mark.parametrize("cli", TYPED)
def test_an_untyped_line_that_cannot_be_read_after_a_typed_runs_end_changes_nothing(cli: str) -> None:
    """An untyped line carries no type to judge it by: cut or too long after a typed run's end (a logger's), it is
    no evidence that another run began."""
    whole = (FIXTURES / SUCCESS[cli]).read_bytes()
    alone = summary(whole, **BIG)
    for tail in (b'{"level":"info","msg":"do', jl({"level": "info", "msg": "x" * 5000})):
        s = summary(whole + tail, **BIG)
        assert verdict(s) == verdict(alone), s


def test_a_noted_line_after_another_clis_run_began_is_no_evidence_in_any_chunks() -> None:
    """After a Gemini run, Droid's init (Claude's too, field for field) and then a Droid tool_result, a type Droid
    only notes: with nobody listening, the chunk that held Gemini's end skipped it unread, so whether it decided
    Droid depended on where the chunks fell. It is no evidence either way: the run is undecided, read as generic."""
    droid = objects(SUCCESS["droid"])
    data = (FIXTURES / SUCCESS["gemini"]).read_bytes() + jl(droid[0], next(o for o in droid
                                                                           if o["type"] == "tool_result"))
    want = _fed(data, len(data), live=False)
    for chunk, live in ((1, False), (13, False), (7, True), (len(data), True)):
        assert _fed(data, chunk, live=live) == want, (chunk, live)
    assert want["provider"] == "generic" and want["ok"] is False, want
