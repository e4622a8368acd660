"""Claude Code ``claude -p --output-format stream-json --verbose`` (and ``--output-format json``).

Facts: ``system`` events carry a ``subtype`` (``init`` has the model and the
session id; ``api_retry`` reports a retried request); ``assistant`` events
are API messages (``message.model``, ``message.content[]`` blocks);
``user`` events carry tool results (the bulky lines, never decoded); the last
line is ``result`` with the final text, ``usage`` (main loop), ``modelUsage``
(cumulative, per model), ``total_cost_usd`` and the error flags. A failed API
call shows up as an assistant message with ``model: "<synthetic>"`` and a
top-level ``error``; the run then still ends with ``subtype: "success"`` and
``is_error: true``.

.. seealso:: :mod:`spoolparse.providers.codex` for the shape every provider follows.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .._decode.records import Dropped, Event, Noted
from .._regex import regex
from . import _peek, traps
from ._text import message_text
from .base import Answer, LiveEvent, Provider, as_int, clip, fresh, message_of, renamed_counts, sum_usage, usage_of
from .grammar import NOTE, SKIP, Grammar, Shape, any_of, has, is_, is_not, kind, shape

__all__ = [
    "ClaudeProvider", "normalize_claude_usage", "normalize_claude_model_usage", "GRAMMAR", "FAMILY", "LOOKALIKES",
    "STARTS", "TURNS", "TERMINAL", "ANSWER", "look_alike",
]


def normalize_claude_usage(raw: Any, cost: Any = None) -> dict[str, Any]:
    """Anthropic usage → normalized names.

    Anthropic counts cache reads and cache writes apart from ``input_tokens``;
    the normalized ``input_tokens`` is every prompt token (as OpenAI counts
    them), so it is the sum of the three.
    """
    raw = raw if isinstance(raw, dict) else {}
    return usage_of(fresh=as_int(raw.get("input_tokens")), read=as_int(raw.get("cache_read_input_tokens")),
                    write=as_int(raw.get("cache_creation_input_tokens")), output=as_int(raw.get("output_tokens")),
                    cost=cost)


_TOOL_USE_ID = regex(rb'[{,][ \t]*"tool_use_id"[ \t]*:[ \t]*"([^"\\]*)"')


def _output_text(content: Any) -> str | None:
    """A tool result's content as text: a string, or its text blocks joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)]
        return "".join(parts) if parts else None
    return None


def normalize_claude_model_usage(raw: Any) -> dict[str, Any]:
    """One ``modelUsage`` entry (camelCase, cumulative) → normalized names, as :func:`normalize_claude_usage`."""
    if not isinstance(raw, dict):
        return {}
    out = normalize_claude_usage(renamed_counts(raw, (
        ("inputTokens", "input_tokens"),
        ("cacheReadInputTokens", "cache_read_input_tokens"),
        ("cacheCreationInputTokens", "cache_creation_input_tokens"),
        ("outputTokens", "output_tokens"),
    )), raw.get("costUSD"))
    searches = as_int(raw.get("webSearchRequests"))
    if searches:
        out["web_search_requests"] = searches
    return out


def _reason(result: dict[str, Any]) -> str | None:
    """Why a result may hold no answer, in the CLI's words: its terminal reason, or the tools it was denied."""
    reason = result.get("terminal_reason")
    if isinstance(reason, str) and reason and reason != "completed":
        return f"terminal_reason: {clip(reason, 200)}"
    denied = result.get("permission_denials")
    if isinstance(denied, list) and denied:
        names = [d.get("tool_name") for d in denied if isinstance(d, dict)]
        return "permission denied: " + clip(", ".join(str(n) for n in names if n) or "a tool", 200)
    return None


LOOKALIKES = ("claude", "qwen", "amp", "cursor")
_S = "5d1c8f1e-2b7a-4c8e-9a51-0f6e1d2c3b4a"

#: The shapes Claude Code's stream shares with its look-alikes (Qwen Code, Amp, Cursor): each of those grammars
#: holds them, and is told from Claude's only by its own marks.
FAMILY: tuple[Shape, ...] = (
    shape("system", is_("subtype", "init"), label="system/init", shared=(*LOOKALIKES, "droid"),
          example={"type": "system", "subtype": "init", "session_id": _S, "model": "m", "tools": ["Bash"],
                   "cwd": "/w"}),
    shape("system", kind("subtype", "string"), label="system", shared=LOOKALIKES,
          example={"type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 10, "session_id": _S}),
    shape("assistant", kind("message", "object"), shared=LOOKALIKES,
          example={"type": "assistant", "session_id": _S, "parent_tool_use_id": None,
                   "message": {"model": "m", "content": [{"type": "text", "text": "FINAL-ANSWER"}]}}),
    shape("result", any_of("subtype", "is_error", "result"), shared=LOOKALIKES,
          example={"type": "result", "subtype": "success", "is_error": False, "result": "FINAL-ANSWER",
                   "session_id": _S}),
    shape("user", read=NOTE, shared=LOOKALIKES,
          example={"type": "user", "session_id": _S, "message": {"role": "user", "content": [
              {"type": "tool_result", "tool_use_id": "toolu_1", "content": "hello"}]}}),
    shape("stream_event", read=NOTE, shared=LOOKALIKES,
          example={"type": "stream_event", "session_id": _S, "event": {"type": "message_stop"}}),
    shape("rate_limit_event", shared=LOOKALIKES,
          example={"type": "rate_limit_event", "session_id": _S, "rate_limit_info": {"status": "allowed"}}),
    *(shape(k, read=SKIP, shared=LOOKALIKES) for k in (
        "conversation_reset", "control_request", "control_response", "control_cancel_request")),
)

# The run structure Claude Code and its look-alikes share: a run starts at ``system/init``; ``result`` ends a
# turn (with stream-json input there is one per turn) and an assistant message after it begins the next.
STARTS = (shape("system", is_("subtype", "init"), label="system/init"),)
TURNS = (shape("assistant"),)
TERMINAL = (shape("result"),)
ANSWER = TERMINAL

#: ``claude -p --output-format stream-json --verbose`` (and ``--output-format json``).
GRAMMAR = Grammar(
    name="claude",
    vocabulary=(
        # what Claude Code alone prints: its version in the init, its key source (Cursor's are env/flag/login),
        # the run's cost in the result
        shape("system", is_("subtype", "init"), has("claude_code_version"), own=True, label="system/init",
              example={"type": "system", "subtype": "init", "session_id": _S, "model": "m",
                       "claude_code_version": "2.1.197"}),
        shape("system", is_("subtype", "init"), has("apiKeySource"), is_not("apiKeySource", "env", "flag", "login"),
              own=True, label="system/init",
              example={"type": "system", "subtype": "init", "session_id": _S, "model": "m",
                       "apiKeySource": "ANTHROPIC_API_KEY"}),
        shape("result", any_of("total_cost_usd", "modelUsage"), own=True,
              example={"type": "result", "subtype": "success", "is_error": False, "result": "FINAL-ANSWER",
                       "session_id": _S, "total_cost_usd": 0.01}),
        *FAMILY,
    ),
    starts=STARTS,
    turns=TURNS,
    terminal=TERMINAL,
    answer=ANSWER,
    says_answer="`result.result`; if it is empty, the last (main-agent) `assistant` message's text, with a warning",
    says_no_answer="the result's `terminal_reason` or its permission denials where it gives them",
)


def look_alike(name: str, own: tuple[Shape, ...], *, says_answer: str,
               shared: tuple[Shape, ...] = FAMILY) -> Grammar:
    """A look-alike's grammar: Claude's shared events and run structure, told from Claude's by ``own`` marks."""
    return Grammar(name=name, vocabulary=(*own, *shared), starts=STARTS, turns=TURNS, terminal=TERMINAL,
                   answer=ANSWER, family=GRAMMAR.name, says_answer=says_answer)


class ClaudeProvider(Provider):
    grammar: ClassVar[Grammar] = GRAMMAR
    init_model: str | None = None
    message_model: str | None = None
    result_seen: bool = False
    result_text: str | None = None
    result_error: str | None = None
    result_reason: str | None = None
    last_text: str | None = None
    #: Where a message that may stand in for an empty result can begin: after the last main-agent message that
    #: set or cleared ``last_text`` (a line lost there may have been the one it would be).
    said_from: int = 0
    api_error: str | None = None
    usage: dict[str, Any] = fresh(dict)
    usage_model: str | None = None
    in_turn: bool = False
    # running usage for live views, per API message (the result's usage is the run's own):
    # totals of the messages before the current one, and the current one's id and counts
    usage_before: dict[str, Any] = fresh(dict)
    message_id: Any = None
    message_usage: dict[str, Any] = fresh(dict)
    usage_by_model: dict[str, dict[str, Any]] | None = None

    def new_turn(self, line: int) -> None:
        self.result_seen = False
        self.result_text = self.result_error = self.result_reason = self.last_text = self.api_error = None
        self.said_from = line

    def lost_answer(self) -> Dropped | None:
        r = super().lost_answer()
        if r is None and self.result_seen and not self.result_text and self.result_error is None:
            # the answer is then the last assistant message's: one after it that could not be read may have been it
            m = self.last_lost("assistant")
            r = m if m is not None and m.line >= self.said_from else None
        return r

    @staticmethod
    def normalize_usage(raw: Any) -> dict[str, Any]:
        """One API message's (or the result's) usage → normalized names."""
        return normalize_claude_usage(raw)

    def event(self, ev: Event) -> list[LiveEvent]:
        d, t, n = ev.data, ev.type, ev.lineno
        live: list[LiveEvent] = []
        self.take_session(d.get("session_id"), n, t, live, self.init_model)
        if t == "system":
            self._system(d, n, t, live)
        elif t == "assistant":
            self._turn(n, t, live)
            self._assistant(d, n, t, live)
        elif t == "result":
            self._result(d, n, t, live)
            if self.in_turn:
                # the turn ends, then the run's result (the last event)
                self.in_turn = False
                live.insert(len(live) - 1, LiveEvent("turn_end", n, t, {"ok": live[-1].data.get("ok")}))
        elif t == "rate_limit_event":
            info = d.get("rate_limit_info")
            if isinstance(info, dict) and info.get("status") == "rejected":
                text = self.warn(f"rate limit reached ({info.get('rateLimitType', 'unknown')})")
                live.append(LiveEvent("warning", n, t, {"message": text}))
        return live

    def _system(self, d: dict[str, Any], n: int, t: str, live: list[LiveEvent]) -> None:
        sub = d.get("subtype")
        if sub == "init":
            model = d.get("model")
            if isinstance(model, str) and model:
                self.init_model = model
                live.append(LiveEvent("session", n, t, {"session_id": self.session_id, "model": model}))
            self._turn(n, t, live)
        elif sub == "api_retry":
            status = d.get("error_status")
            text = self.warn(
                f"API retry {d.get('attempt', '?')}/{d.get('max_retries', '?')}"
                + (f" after HTTP {status}" if status is not None else "")
                + (f": {d['error']}" if isinstance(d.get("error"), str) else "")
            )
            live.append(LiveEvent("retry", n, t, {
                "message": text, "attempt": as_int(d.get("attempt")), "max_attempts": as_int(d.get("max_retries")),
            }))

    def _turn(self, n: int, t: str, live: list[LiveEvent]) -> None:
        """A turn runs from the first event after the last ``result`` (or from init) to the next ``result``."""
        if not self.in_turn:
            self.in_turn = True
            live.append(LiveEvent("turn_start", n, t, {}))

    def _assistant(self, d: dict[str, Any], n: int, t: str, live: list[LiveEvent]) -> None:
        msg = d.get("message")
        msg = msg if isinstance(msg, dict) else {}
        model = msg.get("model")
        text = message_text(msg)
        sprung = traps.check_any(self.trap_clis, t, d)
        if sprung is not None:
            # An API failure dressed as a message (a known trap): its text is the error, never the answer.
            self.api_error = sprung.error
            live.append(LiveEvent("error", n, t, {"message": self.api_error}))
            return
        if isinstance(model, str) and model:
            self.message_model = model
        if self.live:
            self._running_usage(msg.get("id"), msg.get("usage"), n, t, live)
        content = msg.get("content")
        calls = False  # a client tool call: the message goes on after the tool, its text is no answer
        if isinstance(content, list):
            listening = self.live  # tool starts and thinking feed live events only
            for block in content:
                if not isinstance(block, dict):
                    continue
                kind = block.get("type")
                calls = calls or kind == "tool_use"
                if not listening:
                    continue
                if kind in ("tool_use", "server_tool_use"):
                    name = block.get("name")
                    live.append(self.tool_start(n, t, block.get("id"), name if isinstance(name, str) else None,
                                                _peek.title_of(block.get("input"))))
                elif kind == "thinking" and isinstance(block.get("thinking"), str):
                    live.append(LiveEvent("thinking", n, t, {"text": clip(block["thinking"]), "delta": False}))
        # Subagent messages (parent_tool_use_id set) are not the answer.
        if d.get("parent_tool_use_id") is not None:
            return
        if calls:
            self.last_text = None  # what was said before a tool call never stands in for an empty result
            self.said_from = n + 1
        if text is not None:
            if len(text) > self.max_text:
                text = text[: self.max_text]
                self.warn(f"assistant text at line {n} cut to {self.max_text} characters")
            if not calls:
                self.last_text = text
                self.said_from = n + 1
            live.append(LiveEvent("text", n, t, {"text": text}))

    def _result(self, d: dict[str, Any], n: int, t: str, live: list[LiveEvent]) -> None:
        # With stream-json input there is one result per turn: the last one is the run's outcome.
        self.result_seen = True
        self.answer_from = n
        self.result_reason = _reason(d)
        text = d.get("result")
        self.result_text = text if isinstance(text, str) else None
        if self.result_text:
            live.append(LiveEvent("text", n, t, {"text": self.result_text}))
        usage = self.normalize_usage(d.get("usage"))
        cost = d.get("total_cost_usd")
        if isinstance(cost, (int, float)) and not isinstance(cost, bool):
            usage["cost_usd"] = float(cost)
        model_usage = d.get("modelUsage")
        self.usage_by_model = None
        if isinstance(model_usage, dict) and model_usage:
            # result.usage counts the main loop only; modelUsage every model the run used (side
            # models for titles, sub-agents, fallbacks), which total_cost_usd is the cost of
            per = {str(m): normalize_claude_model_usage(u) for m, u in model_usage.items() if isinstance(u, dict)}
            if per:
                self.usage_by_model = per
                totals = sum_usage(per)
                if isinstance(cost, (int, float)) and not isinstance(cost, bool):
                    totals["cost_usd"] = float(cost)
                usage = totals
        if usage or isinstance(model_usage, dict):
            self.usage = usage
            raw: dict[str, Any] = {}
            if isinstance(d.get("usage"), dict):
                raw["usage"] = d["usage"]
            if isinstance(model_usage, dict):
                raw["modelUsage"] = model_usage
            if "total_cost_usd" in d:
                raw["total_cost_usd"] = d["total_cost_usd"]
            if isinstance(model_usage, dict) and len(model_usage) == 1:
                only = next(iter(model_usage))
                if isinstance(only, str) and only:
                    self.usage_model = only
            self.raw_usage = raw
            live.append(LiveEvent("usage", n, t, {"usage": usage}))
        sub = d.get("subtype")
        # a known trap: a result that reports success around an error (Qwen Code's "[API Error: …]")
        sprung = traps.check_any(self.trap_clis, t, d)
        failed = sprung is not None or d.get("is_error") is True or (isinstance(sub, str) and sub.startswith("error_"))
        self.result_error = None
        if failed:
            errors = d.get("errors")
            msgs = [m for m in (message_of(e) for e in errors) if m] if isinstance(errors, list) else []
            msg = sprung.error if sprung is not None else "; ".join(msgs) or self.result_text or self.api_error or ""
            if msg and msg == self.result_text:
                # The text is the error report ("API Error: …"), not an answer.
                self.result_text = None
                self.last_text = None
            status = as_int(d.get("api_error_status"))
            if not msg:
                if status is not None:
                    msg = f"API error (HTTP {status})"
                else:
                    msg = sub if isinstance(sub, str) and sub.startswith("error_") else "error"
            elif status is not None and str(status) not in msg:
                msg = f"{msg} (HTTP {status})"
            self.result_error = clip(msg)
            live.append(LiveEvent("error", n, t, {"message": self.result_error}))
        live.append(LiveEvent("result", n, t, {"ok": not failed, "status": sub if isinstance(sub, str) else None}))

    def noted(self, rec: Noted) -> list[LiveEvent]:
        if rec.type == "stream_event":
            return self._delta(rec)
        # A user line: the results of one or more tool calls (or a prompt, which has none and is not read).
        n, t = rec.lineno, rec.type
        live: list[LiveEvent] = []
        if rec.head and b'"tool_use_id"' not in rec.head:
            return live
        obj = _peek.whole(rec)
        if obj is not None:
            msg = obj.get("message")
            content = msg.get("content") if isinstance(msg, dict) else None
            for block in content if isinstance(content, list) else ():
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    out = block.get("content")
                    err = block.get("is_error")
                    live.extend(self.tool_end(
                        n, t, block.get("tool_use_id"), ok=None if not isinstance(err, bool) else not err,
                        size=rec.size, output=_output_text(out) if self.tool_output else None,
                    ))
            return live
        ids = [i for i in _TOOL_USE_ID.findall(rec.head)] if rec.head else [b""]
        err = _peek.scalar(rec.head + b"\n" + rec.tail, "is_error")
        out = _peek.string(rec.head, "content") if self.tool_output else None
        for raw in ids:
            cid = raw.decode("utf-8", "replace") if raw else None
            live.extend(self.tool_end(n, t, cid, ok=None if not isinstance(err, bool) else not err,
                                      size=rec.size, output=out))
        return live

    def _delta(self, rec: Noted) -> list[LiveEvent]:
        """A partial-message event: text and thinking deltas of the main agent become live events.

        Only those are decoded; the other stream events (message and block starts and stops, tool-input
        JSON deltas) are told apart by their head and never decoded.
        """
        head = rec.head
        n, t = rec.lineno, rec.type
        if b'"message_delta"' in head or b'"message_start"' in head:
            return self._stream_usage(rec)
        if b'"text_delta"' not in head and b'"thinking_delta"' not in head:
            return []
        obj = _peek.whole(rec)
        if obj is None:
            # a delta too long to hold whole: its start, from the head
            if b'"text_delta"' in rec.head and b'"parent_tool_use_id":"' not in rec.head:
                text = _peek.string(rec.head, "text")
                return [LiveEvent("text_delta", n, t, {"text": text})] if text else []
            return []
        if obj.get("parent_tool_use_id") is not None:
            return []  # a subagent's stream is not the answer
        ev = obj.get("event")
        delta = ev.get("delta") if isinstance(ev, dict) and ev.get("type") == "content_block_delta" else None
        if not isinstance(delta, dict):
            return []
        kind = delta.get("type")
        if kind == "text_delta" and isinstance(delta.get("text"), str):
            return [LiveEvent("text_delta", n, t, {"text": delta["text"]})]
        if kind == "thinking_delta" and isinstance(delta.get("thinking"), str):
            return [LiveEvent("thinking", n, t, {"text": delta["thinking"], "delta": True})]
        return []

    def _stream_usage(self, rec: Noted) -> list[LiveEvent]:
        """``message_start`` and ``message_delta`` stream events: the message's usage so far."""
        obj = _peek.whole(rec)
        ev = obj.get("event") if obj is not None else None
        if not isinstance(ev, dict):
            return []
        live: list[LiveEvent] = []
        if ev.get("type") == "message_start":
            msg = ev.get("message")
            if isinstance(msg, dict):
                self._running_usage(msg.get("id"), msg.get("usage"), rec.lineno, rec.type, live)
        elif ev.get("type") == "message_delta":
            self._running_usage(self.message_id, ev.get("usage"), rec.lineno, rec.type, live)
        return live

    def _running_usage(self, mid: Any, raw: Any, n: int, t: str, live: list[LiveEvent]) -> None:
        """Running totals over the API messages so far, as a ``usage`` event when they change.

        A message's lines repeat its usage (``assistant`` lines carry the
        ``message_start`` snapshot; ``message_delta`` the final output count),
        so each message counts once, with the largest counts seen for it.
        """
        usage = self.normalize_usage(raw)
        if not usage:
            return
        if mid is None or mid != self.message_id:
            for key, value in self.message_usage.items():
                self.usage_before[key] = self.usage_before.get(key, 0) + value
            self.message_id, self.message_usage = mid, {}
        cur = self.message_usage
        changed = False
        for key, value in usage.items():
            if value > cur.get(key, -1):
                cur[key] = value
                changed = True
        if changed:
            before = self.usage_before
            total = {k: before.get(k, 0) + cur.get(k, 0) for k in (*before, *(k for k in cur if k not in before))}
            live.append(LiveEvent("usage", n, t, {"usage": total}))

    def answer(self) -> Answer:
        text, extra = self.final_or_last(
            self.result_text, self.last_text, ended=self.result_seen, end="result", lost_in=("result", "assistant"),
            unended="the stream ended without a result event",
        )
        error = self.result_error
        if error is None and not self.result_seen:
            error = self.api_error
        return self.found(
            text, usage=dict(self.usage), model=self.init_model or self.message_model or self.usage_model, error=error,
            warnings=self.notes.as_list() + extra, usage_by_model=self.usage_by_model, no_answer=self.result_reason,
        )

