"""What auto-detection knows of every provider before it imports one: detection as data.

Each registered provider's :class:`Evidence` (the type keys its grammar reads, decodes, starts a run with and
owns a mark on, its family, whether it is detected and typed) is one row of :data:`TABLE`, generated from the
grammars: ``python -m spoolparse.providers.evidence`` rewrites it, and the tests fail while it differs from
what the grammars say. Detection (:class:`Index`) reads the table and imports a provider only once an event of
a type its grammar knows is seen; a named provider imports that provider alone; ``--provider``'s choices need
none.

Nothing here imports a provider, a grammar or the decoding family at run time: the command line imports this
module for the provider names.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from .base import Provider
    from .grammar import Grammar, Shape

__all__ = ["Evidence", "REGISTERED", "TABLE", "FALLBACK_NAME", "names", "of", "generate", "load", "Index"]

#: Every specific provider, as ``module:Class`` under :mod:`spoolparse.providers`, in registry order. ``generic``
#: is the fallback, never detected. Detection asks every grammar at once; this order only breaks a tie where no
#: evidence can (and orders the docs' tables). Qwen Code, Amp and Cursor are Claude's look-alikes (their grammars'
#: ``family``): a stream with none of their own marks reads as Claude's. Kilo prints opencode's stream unchanged:
#: it is chosen by name only.
REGISTERED = (
    "codex:CodexProvider", "qwen:QwenProvider", "amp:AmpProvider", "cursor:CursorProvider", "droid:DroidProvider",
    "claude:ClaudeProvider", "gemini:GeminiProvider", "opencode:OpencodeProvider", "kilo:KiloProvider",
    "copilot:CopilotProvider", "kimi:KimiProvider", "antigravity:AntigravityProvider",
)
#: The fallback provider, as ``module:Class``.
FALLBACK_AT = "generic:GenericProvider"


class Evidence(NamedTuple):
    """One provider's row: where it lives, and what of its grammar detection needs before importing it."""

    name: str
    #: ``module:Class`` under :mod:`spoolparse.providers`.
    at: str
    detected: bool
    family: str
    typed: bool
    #: Every type key its grammar knows (its document's ``""`` among them).
    known: frozenset[str]
    #: The keys it decodes.
    keep: frozenset[str]
    #: The keys of the events that start its runs.
    starts: frozenset[str]
    #: The keys on which it has a shape of its own (a mark that settles detection).
    owns: frozenset[str]


def of(cls: type[Provider], at: str) -> Evidence:
    """A provider's row, from its grammar (the provider at ``at`` is ``cls``)."""
    from .grammar import KEEP

    g = cls.grammar
    assert g is not None, f"{cls.name} has no grammar"
    return Evidence(
        g.name, at, g.detected, g.family, g.typed, g.types(), g.types(KEEP), frozenset(s.key for s in g.starts),
        frozenset(s.key for s in (*g.vocabulary, *([g.document] if g.document else ())) if s.own),
    )


def load(at: str) -> type[Provider]:
    """The provider class at ``module:Class`` (its module imported now)."""
    module, _, name = at.partition(":")
    cls: type[Provider] = getattr(importlib.import_module(f"{__package__}.{module}"), name)
    return cls


# -- the table (generated) ----------------------------------------------------------------------------------------

# generated: evidence (python -m spoolparse.providers.evidence)
FALLBACK_NAME = "generic"
TABLE: tuple[Evidence, ...] = (
    Evidence("codex", "codex:CodexProvider", detected=True, family="", typed=True,
             known=frozenset({"error", "item.completed/agent_message", "item.completed/assistant_message",
                              "item.completed/collab_tool_call", "item.completed/command_execution",
                              "item.completed/error", "item.completed/file_change", "item.completed/mcp_tool_call",
                              "item.completed/plan", "item.completed/reasoning", "item.completed/todo_list",
                              "item.completed/web_search", "item.plan.delta", "item.started/collab_tool_call",
                              "item.started/command_execution", "item.started/file_change",
                              "item.started/mcp_tool_call", "item.started/todo_list", "item.started/web_search",
                              "item.updated/command_execution", "item.updated/mcp_tool_call",
                              "item.updated/todo_list", "msg/agent_message", "msg/agent_message_delta",
                              "msg/agent_reasoning", "msg/agent_reasoning_delta", "msg/error",
                              "msg/exec_command_begin", "msg/exec_command_end", "msg/exec_command_output_delta",
                              "msg/session_configured", "msg/stream_error", "msg/task_complete", "msg/task_started",
                              "msg/token_count", "request_user_input", "result", "session.created", "session.end",
                              "thread.started", "turn.completed", "turn.failed", "turn.started"}),
             keep=frozenset({"error", "item.completed/agent_message", "item.completed/assistant_message",
                             "item.completed/error", "item.completed/plan", "msg/agent_message", "msg/error",
                             "msg/exec_command_begin", "msg/session_configured", "msg/stream_error",
                             "msg/task_complete", "msg/token_count", "result", "session.created", "session.end",
                             "thread.started", "turn.completed", "turn.failed", "turn.started"}),
             starts=frozenset({"msg/session_configured", "session.created", "thread.started"}),
             owns=frozenset()),
    Evidence("qwen", "qwen:QwenProvider", detected=True, family="claude", typed=True,
             known=frozenset({"assistant", "control_cancel_request", "control_request", "control_response",
                              "conversation_reset", "rate_limit_event", "result", "stream_event", "system", "user"}),
             keep=frozenset({"assistant", "rate_limit_event", "result", "system"}),
             starts=frozenset({"system"}),
             owns=frozenset({"system"})),
    Evidence("amp", "amp:AmpProvider", detected=True, family="claude", typed=True,
             known=frozenset({"assistant", "control_cancel_request", "control_request", "control_response",
                              "conversation_reset", "rate_limit_event", "result", "stream_event", "system", "user"}),
             keep=frozenset({"assistant", "rate_limit_event", "result", "system"}),
             starts=frozenset({"system"}),
             owns=frozenset({"assistant", "result", "system", "user"})),
    Evidence("cursor", "cursor:CursorProvider", detected=True, family="claude", typed=True,
             known=frozenset({"assistant", "control_cancel_request", "control_request", "control_response",
                              "conversation_reset", "rate_limit_event", "result", "stream_event", "system",
                              "thinking", "tool_call", "user"}),
             keep=frozenset({"assistant", "rate_limit_event", "result", "system", "tool_call"}),
             starts=frozenset({"system"}),
             owns=frozenset({"result", "system", "thinking", "tool_call"})),
    Evidence("droid", "droid:DroidProvider", detected=True, family="", typed=True,
             known=frozenset({"completion", "error", "message", "system", "tool_call", "tool_result"}),
             keep=frozenset({"completion", "error", "message", "system", "tool_call"}),
             starts=frozenset({"system"}),
             owns=frozenset({"completion", "message", "tool_call", "tool_result"})),
    Evidence("claude", "claude:ClaudeProvider", detected=True, family="", typed=True,
             known=frozenset({"assistant", "control_cancel_request", "control_request", "control_response",
                              "conversation_reset", "rate_limit_event", "result", "stream_event", "system", "user"}),
             keep=frozenset({"assistant", "rate_limit_event", "result", "system"}),
             starts=frozenset({"system"}),
             owns=frozenset({"result", "system"})),
    Evidence("gemini", "gemini:GeminiProvider", detected=True, family="", typed=True,
             known=frozenset({"", "error", "init", "message", "result", "tool_result", "tool_use"}),
             keep=frozenset({"", "error", "init", "message", "result"}),
             starts=frozenset({"init"}),
             owns=frozenset({"tool_result", "tool_use"})),
    Evidence("opencode", "opencode:OpencodeProvider", detected=True, family="", typed=True,
             known=frozenset({"done", "error", "reasoning", "step_finish", "step_start", "text", "tool_use"}),
             keep=frozenset({"done", "error", "step_finish", "step_start", "text"}),
             starts=frozenset(),
             owns=frozenset({"done", "error", "reasoning", "step_finish", "step_start", "text", "tool_use"})),
    Evidence("kilo", "kilo:KiloProvider", detected=False, family="", typed=True,
             known=frozenset({"done", "error", "reasoning", "step_finish", "step_start", "text", "tool_use"}),
             keep=frozenset({"done", "error", "step_finish", "step_start", "text"}),
             starts=frozenset(),
             owns=frozenset({"done", "error", "reasoning", "step_finish", "step_start", "text", "tool_use"})),
    Evidence("copilot", "copilot:CopilotProvider", detected=True, family="", typed=True,
             known=frozenset({"assistant.message", "assistant.message_delta", "assistant.reasoning",
                              "assistant.reasoning_delta", "assistant.turn_end", "assistant.turn_start", "result",
                              "session.error", "session.info", "session.shutdown", "session.start",
                              "session.usage_checkpoint", "tool.execution_complete", "tool.execution_partial_result",
                              "tool.execution_start", "user.message"}),
             keep=frozenset({"assistant.message", "result", "session.error", "session.start",
                             "session.usage_checkpoint", "tool.execution_start"}),
             starts=frozenset({"session.start"}),
             owns=frozenset({"result"})),
    Evidence("kimi", "kimi:KimiProvider", detected=True, family="", typed=False,
             known=frozenset({"", "session.resume_hint", "system.version"}),
             keep=frozenset({"", "session.resume_hint"}),
             starts=frozenset(),
             owns=frozenset({"session.resume_hint", "system.version"})),
    Evidence("antigravity", "antigravity:AntigravityProvider", detected=True, family="", typed=False,
             known=frozenset({""}),
             keep=frozenset({""}),
             starts=frozenset({""}),
             owns=frozenset()),
)
# end: evidence


def names() -> list[str]:
    """What ``--provider`` takes: ``auto``, every registered provider, the fallback."""
    return ["auto", *(e.name for e in TABLE), FALLBACK_NAME]


def _set(keys: Iterable[str], indent: int) -> str:
    """A frozenset literal of ``keys``, sorted, wrapped to the line length."""
    import json

    items = [json.dumps(k) for k in sorted(keys)]
    if not items:
        return "frozenset()"
    lines: list[str] = []
    line = "frozenset({"
    for i, item in enumerate(items):
        item += "})" if i == len(items) - 1 else ","
        if len(line) + (0 if lines else indent) + 1 + len(item) > 118 and not line.endswith("{"):
            lines.append(line)
            line = " " * (indent + len("frozenset({"))
            line += item
        else:
            line += ("" if line.endswith(("{", " ")) else " ") + item
    return "\n".join([*lines, line])


def generate() -> str:
    """The table's block, from the registered providers' grammars (this imports every provider)."""
    import json

    rows = []
    for at in REGISTERED:
        e = of(load(at), at)
        rows.append(
            f"    Evidence({json.dumps(e.name)}, {json.dumps(e.at)}, detected={e.detected}, "
            f"family={json.dumps(e.family)}, typed={e.typed},\n"
            f"             known={_set(e.known, 19)},\n"
            f"             keep={_set(e.keep, 18)},\n"
            f"             starts={_set(e.starts, 20)},\n"
            f"             owns={_set(e.owns, 18)}),\n"
        )
    return (f"FALLBACK_NAME = {json.dumps(load(FALLBACK_AT).name)}\n"
            "TABLE: tuple[Evidence, ...] = (\n" + "".join(rows) + ")\n")


# -- detection's index ----------------------------------------------------------------------------------------------


class Index:
    """The candidates' grammars by key, loaded as their evidence is seen: who knows a key, and who claims an event.

    ``entries`` are the candidates' rows, in order; ``load`` gives a candidate's class by its row. A grammar is
    loaded (its provider imported) when an event of a type it knows is looked up, or when it is chosen.
    """

    def __init__(self, entries: Sequence[Evidence], load: Callable[[Evidence], type[Provider]]) -> None:
        self.entries = list(entries)
        self._load = load
        self.order = {e.name: i for i, e in enumerate(self.entries)}
        self._rows = {e.name: e for e in self.entries}
        self._classes: dict[str, type[Provider]] = {}
        self._by_key: dict[str, list[tuple[Grammar, Shape]]] = {}
        self._rivals: dict[tuple[str, str], tuple[Shape, ...]] = {}
        #: Every key some candidate knows, decodes, and notes (or skips) only.
        self.keys = frozenset(k for e in self.entries for k in e.known)
        self.keep = frozenset(k for e in self.entries for k in e.keep)
        self.note = self.keys - self.keep
        #: The keys some candidate starts its runs with.
        self.starts = frozenset(k for e in self.entries for k in e.starts)

    def cls(self, name: str) -> type[Provider]:
        """A candidate's class (its module imported now, if it was not)."""
        cls = self._classes.get(name)
        if cls is None:
            cls = self._classes[name] = self._load(self._rows[name])
        return cls

    def grammar(self, name: str) -> Grammar:
        g = self.cls(name).grammar
        assert g is not None
        return g

    def pairs(self, key: str) -> list[tuple[Grammar, Shape]]:
        """Every candidate's shapes of ``key`` (a document's, of ``""``), in the candidates' order."""
        found = self._by_key.get(key)
        if found is None:
            found = []
            for e in self.entries:
                if key in e.known:
                    g = self.grammar(e.name)
                    found += [(g, s) for s in g.shapes(key)]
                    if key == "" and g.document is not None:
                        found.append((g, g.document))
            self._by_key[key] = found
        return found

    def claims(self, key: str, data: Mapping[str, Any] | None) -> tuple[dict[str, Shape], bool]:
        """The grammars that claim an event, each with the shape it fits, and whether one of them owns it.

        An event one grammar owns (an ``own`` shape fits) is claimed by the owners alone. A record that was
        not read (``data`` ``None``) is claimed by the grammars that know its key, owned by none.
        """
        fits: dict[str, Shape] = {}
        owners: dict[str, Shape] = {}
        for g, s in self.pairs(key):
            if s.fits(key, data):
                fits.setdefault(g.name, s)
                if s.own and data is not None:
                    owners.setdefault(g.name, s)
        return (owners, True) if owners else (fits, False)

    def rivals(self, g: Grammar, key: str) -> tuple[Shape, ...]:
        """The marks other candidates own on ``key``, one of ``g``'s types, that ``g``'s vocabulary lacks."""
        if key not in g.types() or not any(key in e.owns for e in self.entries if e.name != g.name):
            return ()  # (decided from the table: no grammar is loaded for it)
        found = self._rivals.get((g.name, key))
        if found is None:
            found = self._rivals[g.name, key] = tuple(
                s for h, s in self.pairs(key) if s.own and h is not g and s not in g.vocabulary)
        return found

    def head(self, name: str) -> str:
        """The head of a candidate's family (itself when it is none's look-alike)."""
        family = self._rows[name].family
        return family if family in self._rows else name


if __name__ == "__main__":  # rewrite the generated table from the grammars
    import pathlib
    import re

    path = pathlib.Path(__file__)
    text = path.read_text()
    begin, end = "# generated: evidence (python -m spoolparse.providers.evidence)\n", "# end: evidence\n"
    new = re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _: begin + generate() + end, text, flags=re.S)
    path.write_text(new)
