"""What a provider is: the fold that turns one stdout format's retained events into an :class:`Answer`.

A provider declares its CLI's stream as a :class:`~spoolparse.providers.grammar.Grammar`
(``grammar``): the types it decodes, notes and skips (``keep``, ``note``,
``known`` are the grammar's keys by read mode), what starts a run, begins a
turn and ends it, and which lines carry the answer. The one engine,
:mod:`spoolparse.providers.engine`, derives detection, run and turn boundaries
and the verdict's facts from it; the provider's code keeps what a grammar
cannot say — where the answer's text is, usage arithmetic, errors, live events.

The fold's API (the engine calls it):

* :meth:`Provider.see` takes each record the provider retains: decoded
  :class:`~spoolparse.lines.Event` records, undecoded
  :class:`~spoolparse.lines.Noted` ones and :class:`~spoolparse.lines.Dropped`
  records for lines too large to keep (or undecodable); it returns
  :class:`LiveEvent` values for callers who follow a run as it happens;
* :meth:`Provider.conclude` gives the :class:`Answer`, with whether its answer
  was lost: a line of one of the grammar's answer types dropped after the
  answer began (``self.answer_from``, where the provider's current answer
  starts) loses it ("final answer (3.1 MiB) exceeded max_retained (1 MiB) and
  was dropped"), and an earlier message is never shown as the answer;
  :meth:`Provider.cut` says when the provider had to cut the answer's text;
* :meth:`Provider.new_turn` forgets the turn's answer when the agent goes on
  after the run's end, and :meth:`Provider.restart` the run folded so far when
  the stream's next run begins.

Providers are sans-I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar, cast

from .. import _limits
from .._decode.records import KEEP, NOTE, SKIP, Dropped, Event, Noted, Record
from ..types import EVENT_FIELDS, EVENT_KINDS, EventDict, EventKind
from ._peek import short
from ._text import BoundedText
from .grammar import Grammar

__all__ = [
    "Answer", "LiveEvent", "Provider", "Notes", "as_int", "message_of", "clip", "size_text", "sum_usage", "MISSING",
    "TEXTLESS", "renamed_counts", "usage_of", "fresh",
]

_T = TypeVar("_T")

#: Kinds of :class:`LiveEvent` (:data:`spoolparse.types.EventKind`).
KINDS = EVENT_KINDS


@dataclass(frozen=True, slots=True)
class LiveEvent:
    """One thing a provider saw, as it happened.

    ``kind`` is one of :data:`~spoolparse.types.EVENT_KINDS`; ``lineno`` the
    stdout line and ``type`` its type key; ``data`` the kind's fields (the
    docs' live-events guide, :mod:`spoolparse.types`). ``seq`` numbers the events of
    one stream from 1 and ``time`` is when the line was read; the parser
    stamps both as it hands the event on.
    """

    kind: EventKind
    lineno: int
    type: str
    data: dict[str, Any]
    seq: int = 0
    time: float = 0.0

    def as_dict(self) -> EventDict:
        """The JSON object: ``seq, time, kind, line, type``, then the kind's fields (absent ones ``null``)."""
        out: dict[str, Any] = {"seq": self.seq, "time": self.time, "kind": self.kind, "line": self.lineno,
                               "type": self.type}
        data = self.data
        for key in EVENT_FIELDS[self.kind][5:]:
            out[key] = data.get(key)
        return cast(EventDict, out)

    def stamp(self, seq: int, time: float) -> None:
        """Number and time the event (the parser does, once, as it hands it on)."""
        object.__setattr__(self, "seq", seq)
        object.__setattr__(self, "time", time)


class Notes:
    """A bounded list of warning texts: past ``limit`` only the count grows."""

    def __init__(self, limit: int = _limits.MAX_WARNINGS) -> None:
        self.items: list[str] = []
        self.count = 0
        self.limit = limit

    def add(self, text: str) -> str:
        text = clip(text)
        self.count += 1
        if len(self.items) < self.limit:
            self.items.append(text)
        return text

    def as_list(self) -> list[str]:
        extra = self.count - len(self.items)
        return self.items + ([f"{extra} more warnings not kept"] if extra > 0 else [])


@dataclass(slots=True)
class Answer:
    """What a provider folded from a stream."""

    text: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    raw_usage: Any = None
    model: str | None = None
    session_id: str | None = None
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    #: Per-model usage, normalized (``{model: usage}``), where the format reports it.
    usage_by_model: dict[str, dict[str, Any]] | None = None
    #: The CLI's own word on why a finished run has no answer (a warning it printed, a reason it gave), if any.
    no_answer: str | None = None
    # -- verdict facts: ``lost`` from :meth:`Provider.conclude`, the rest from the engine --
    #: Whether the run's terminal event was seen.
    finished: bool = False
    #: The terminal event the run waits for, as the error names it.
    awaited: str = ""
    #: Why the answer is not complete in hand (dropped or cut), or ``None``.
    lost: str | None = None
    #: Kept and dropped JSON events the provider saw (noted ones are not counted: parse skips them unread).
    events: int = 0
    #: Why the stream is not the named provider's at all ("no claude event in the stream"), or ``None``.
    unknown: str | None = None


#: The reason of a lost answer line that was decoded but carries no text (see :meth:`Provider.textless`).
TEXTLESS = "textless"
#: What :meth:`Provider.textless` is given for a field that is absent: ``d.get(key, MISSING)``.
MISSING: Any = object()


def _not_numbers(value: Any, path: str, depth: int = 0) -> list[tuple[str, str]]:
    """The places in a (small) usage object that hold NaN or an infinity: ``[(path, "NaN"), …]``."""
    if isinstance(value, float) and not math.isfinite(value):
        return [(path or "usage", "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity"))]
    if depth >= 4:
        return []
    items: Any = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    out: list[tuple[str, str]] = []
    for key, inner in items:
        out += _not_numbers(inner, f"{path}.{key}" if path else str(key), depth + 1)
    return out


def _json_kind(value: Any) -> str:
    """A JSON value's kind, as a message names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def clip(text: str, limit: int = _limits.MAX_MESSAGE_CHARS) -> str:
    """A message cut to ``limit`` characters (answers are never clipped, messages are)."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"… [{len(text) - limit} more characters]"


def sum_usage(per_model: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The totals of per-model usage: every count summed (costs too)."""
    out: dict[str, Any] = {}
    for usage in per_model.values():
        for key, value in usage.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[key] = out.get(key, 0) + value
    return out


def renamed_counts(raw: Any, names: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """The whole-number counts of a usage object under other names: for each ``(source, destination)`` of
    ``names``, ``raw[source]`` as ``destination`` where it is one (``{}`` when ``raw`` is not an object)."""
    out: dict[str, Any] = {}
    if not isinstance(raw, dict):
        return out
    for src, dst in names:
        n = as_int(raw.get(src))
        if n is not None:
            out[dst] = n
    return out


def usage_of(
    *, fresh: int | None = None, read: int | None = None, write: int | None = None, output: int | None = None,
    reasoning: int | None = None, total: int | None = None, cost: Any = None,
) -> dict[str, Any]:
    """Normalized usage from the parts a format counts apart, each token once: ``input_tokens`` is every prompt
    token (``fresh`` ones, cache reads and cache writes), ``output_tokens`` every generated one (with the
    ``reasoning``); a part not given is left out, and so is a ``cost`` that is not a number."""
    out: dict[str, Any] = {}
    if fresh is not None or read is not None or write is not None:
        out["input_tokens"] = (fresh or 0) + (read or 0) + (write or 0)
    if read is not None:
        out["cached_input_tokens"] = read
    if write is not None:
        out["cache_write_input_tokens"] = write
    if output is not None or reasoning is not None:
        out["output_tokens"] = (output or 0) + (reasoning or 0)
    if reasoning is not None:
        out["reasoning_output_tokens"] = reasoning
    if total is not None:
        out["total_tokens"] = total
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        out["cost_usd"] = float(cost)
    return out


def size_text(n: int) -> str:
    """Bytes for people: ``3.1 MiB``, ``512 KiB``, ``900 bytes``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            text = f"{v:.1f}".removesuffix(".0") if v < 10 else str(int(v))
            return f"{text} {unit}"
    return f"{n} bytes"


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def message_of(value: Any) -> str | None:
    """The text of an error-ish value: a string, ``{message}``, ``{error: {message}}`` …"""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        for key in ("message", "error", "detail", "data"):
            inner = value.get(key)
            text = message_of(inner) if inner is not value else None
            if text:
                return text
        name = value.get("name") or value.get("type")
        if isinstance(name, str):
            return name
    return None


class _Fresh:
    """A run-state field's start value made anew for each run (:func:`fresh`)."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


def fresh(make: Callable[[], _T]) -> _T:
    """Declare a run-state field whose start value is made anew for each run, as a mutable one must be:
    ``usage: dict[str, Any] = fresh(dict)``."""
    return cast(_T, _Fresh(make))


def _same(value: Any) -> Callable[[], Any]:
    return lambda: value


#: Start values one object can be for every run: nothing in them changes.
_IMMUTABLE = (type(None), bool, int, float, str, bytes, tuple, frozenset)


def _declared_state(cls: type) -> tuple[tuple[str, Callable[[], Any]], ...]:
    """The run state ``cls`` itself declares: its annotated class attributes with a start value, but ``ClassVar``s
    (with postponed annotations their annotations are strings). Read once a class (a mixin's too), and kept."""
    own: tuple[tuple[str, Callable[[], Any]], ...] | None = cls.__dict__.get("_own_run_state")
    if own is not None:
        return own
    state: list[tuple[str, Callable[[], Any]]] = []
    # (not inspect.get_annotations: importing inspect would cost every parse's start-up some 6 ms)
    for name, note in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063
        if name not in cls.__dict__ or "ClassVar" in str(note):
            continue
        value = cls.__dict__[name]
        if isinstance(value, _Fresh):
            state.append((name, value.make))
        elif not isinstance(value, _IMMUTABLE):  # a list, a dict, a buffer: one object would serve every run
            raise TypeError(f"{cls.__name__}.{name}: a start value that can change must be made anew for each "
                            f"run: use fresh(...)")
        else:
            state.append((name, _same(value)))
    if state:
        for name, _ in state:
            if isinstance(cls.__dict__[name], _Fresh):
                delattr(cls, name)  # never read from the class: every instance has its own
        type.__setattr__(cls, "_own_run_state", tuple(state))
    return tuple(state)


class Provider:
    """Base class: declare ``grammar`` and override :meth:`event` and :meth:`answer`.

    ``keep``: type keys decoded and folded. ``note``: type keys reported
    undecoded (size and head only). ``known``: every type key of the format,
    including the ones skipped. All three are the grammar's keys by read mode.
    A retained event that is dropped for its size gets a warning by default — a
    provider that loses its answer to it says so in ``error``.

    A provider's state of one run is declared, as a dataclass's fields are: an
    annotated class attribute with its start value (``text: str | None = None``;
    a mutable one made anew with :func:`fresh`). Each instance starts with its
    own copy of every field, and :meth:`restart` sets them all back.
    """

    #: The provider's name: its grammar's, set from it (a provider without a grammar names itself).
    name: ClassVar[str] = "base"
    #: The CLI's stream, as data (``None``: the generic provider, which has no format of its own).
    grammar: ClassVar[Grammar | None] = None
    keep: ClassVar[frozenset[str]] = frozenset()
    note: ClassVar[frozenset[str]] = frozenset()
    known: ClassVar[frozenset[str]] = frozenset()
    #: The declared run state of the class and its bases: each field and what makes its start value.
    _run_state: ClassVar[tuple[tuple[str, Callable[[], Any]], ...]] = ()

    def __init__(self) -> None:
        self.notes = Notes()
        # the last dropped record of each kept type: bounded by ``keep``, whatever the stream
        self._lost: dict[str, Dropped] = {}
        #: Most characters of answer text a provider holds (deltas it joins, parts it
        #: concatenates); :class:`~spoolparse.StreamParser` sets it to its ``max_retained``.
        self.max_text = _limits.MAX_RETAINED
        #: Whether anyone listens to live events; without a listener a provider skips the work
        #: that only feeds them (the parser sets it).
        self.live = True
        #: Characters of a tool's output a ``tool_end`` event carries (0: none, only its size).
        self.tool_output = 0
        # tool calls started and not yet ended: call_id -> (name, title), oldest first, bounded
        self._calls: dict[str, tuple[str | None, str | None]] = {}
        #: Line where the current answer begins: a dropped answer line at or after it loses the answer.
        self.answer_from = 0
        #: Line of the run's terminal event once seen, ``None`` while the run goes on (the engine sets it).
        self.ended_at: int | None = None
        #: The CLIs whose known traps this stream is checked for (:mod:`spoolparse.providers.traps`): its own, or
        #: every one of its family when it was read as the family's head for want of a look-alike's mark.
        self.trap_clis: tuple[str, ...] = (self.name,)
        # the run's facts most formats report, for its answer (:meth:`found`)
        self.session_id: str | None = None
        self.model: str | None = None
        self.raw_usage: Any = None  # the usage as the CLI reported it
        #: Whether the cut of the answer joined from pieces (:meth:`join_text`) was warned about.
        self.truncation_noted = False
        for name, make in self._run_state:
            setattr(self, name, make())

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        # every class's it derives from, a mixin's too, the nearest last (its start values win)
        cls._run_state = tuple(field for c in reversed(cls.__mro__) for field in _declared_state(c))
        g = cls.__dict__.get("grammar")
        if isinstance(g, Grammar):  # its name and the types it looks at are its grammar's: one declaration, not two
            cls.name = g.name
            cls.keep = g.types(KEEP)
            cls.note = g.types(NOTE)
            cls.known = g.types()

    # -- the fold's API --------------------------------------------------------

    def see(self, rec: Record) -> list[LiveEvent]:
        """Fold one record: the one entry point."""
        if type(rec) is Event:
            return self.event(rec)
        if type(rec) is Noted:
            return self.noted(rec)
        assert isinstance(rec, Dropped)
        return self.dropped(rec)

    def new_turn(self, line: int) -> None:
        """The agent went on after its run's end, at ``line`` (the grammar's turn event): the answer and the failure
        must be the new turn's, never the one before's. Override to forget what the fold keeps of a turn."""

    def restart(self) -> None:
        """Forget the run folded so far (the stream's next run begins); the caller's settings stay."""
        kept = self.max_text, self.live, self.tool_output, self.trap_clis
        type(self).__init__(self)
        self.max_text, self.live, self.tool_output, self.trap_clis = kept

    def lost_answer(self) -> Dropped | None:
        """The dropped line that held the answer (or a part of it), if one did."""
        keys = self.grammar.answer_keys if self.grammar is not None else ()
        r = self.last_lost(*keys) if keys else None
        return r if r is not None and r.line >= self.answer_from else None

    def cut(self) -> str | None:
        """Why the answer text was cut short, if the provider had to cut it (override)."""
        return None

    def conclude(self) -> Answer:
        """The :class:`Answer`, with whether its answer was lost (the engine adds the rest of the facts)."""
        ans = self.answer()
        odd = _not_numbers(ans.raw_usage, "")
        if odd:  # left out of usage by every normalization (no count): said, not silently dropped
            shown = ", ".join(f"{path} is {what}" for path, what in odd[:_limits.MAX_WARNINGS])
            ans.warnings.append(clip(f"usage: {shown} — not a number, so not counted (written as null)"))
        r = self.lost_answer()
        if r is not None:
            ans.text = None  # never an earlier message in place of the lost one
            ans.lost = f"final answer ({size_text(r.bytes)} at line {r.line}) {self.why_lost(r)}"
        else:
            ans.lost = self.cut()
        return ans

    def why_lost(self, r: Dropped) -> str:
        """Why a line was not had, as the verdict says it: "could not be decoded … and was lost" …"""
        return {
            "unreadable": "could not be read back from its spill file and was lost",
            "invalid": "could not be decoded (not a JSON object, or nested too deep) and was lost",
            TEXTLESS: "carries no text (a missing or non-string field) and was lost",
        }.get(r.reason, f"exceeded max_retained ({size_text(self.max_text)}) and was dropped")

    def retain(self, key: str) -> int:
        if key in self.keep:
            return KEEP
        if key in self.note:
            return NOTE
        return SKIP

    def event(self, ev: Event) -> list[LiveEvent]:
        raise NotImplementedError

    def noted(self, rec: Noted) -> list[LiveEvent]:
        return []

    def dropped(self, rec: Dropped) -> list[LiveEvent]:
        live = [LiveEvent("dropped", rec.line, rec.type, {"bytes": rec.bytes, "reason": rec.reason})]
        if self.retain(rec.type) == NOTE:
            # a tool result too long even to drain as a noted line still ends its call, by size only
            live.extend(self.noted(Noted(rec.line, rec.type, rec.bytes)))
        if self.remember_lost(rec):
            text = self.warn(
                f"retained event {rec.type!r} at line {rec.line} ({rec.bytes} bytes) was dropped "
                f"({rec.reason}); the answer may be incomplete"
            )
            live.append(LiveEvent("warning", rec.line, rec.type, {"message": text}))
        return live

    def remember_lost(self, rec: Dropped) -> bool:
        """Remember a dropped line of a type this provider decodes (the last of each: bounded by its grammar,
        whatever types a stream invents), for :meth:`lost_answer`; whether it was one."""
        if self.retain(rec.type) != KEEP:
            return False
        self._lost[rec.type] = rec
        return True

    def textless(self, ev: Event, field: str, value: Any) -> LiveEvent:
        """An answer line whose text (``field``: ``value``) is missing or not a string: its answer is not in hand.

        It counts as a lost answer line (see :meth:`lost_answer`): unless a later answer replaces it, the run
        is not ok and ``text`` is ``null`` — never an earlier message, nor the parts around it, in its place.
        """
        self._lost[ev.type] = Dropped(ev.lineno, ev.size, ev.type, TEXTLESS)
        what = "missing" if value is MISSING else f"{_json_kind(value)}, not a string"
        msg = self.warn(f"answer event {ev.type!r} at line {ev.lineno} carries no text ({field} is {what})")
        return LiveEvent("warning", ev.lineno, ev.type, {"message": msg})

    def take_session(self, sid: Any, n: int, t: str, live: list[LiveEvent], model: str | None = None) -> None:
        """Take ``sid`` as the run's session id when it is a new one (a non-empty string other than the one held),
        with a ``session`` event in ``live`` naming it and ``model``."""
        if isinstance(sid, str) and sid and sid != self.session_id:
            self.session_id = sid
            live.append(LiveEvent("session", n, t, {"session_id": sid, "model": model}))

    def join_text(self, buf: BoundedText, piece: str, n: int, t: str, live: list[LiveEvent]) -> None:
        """Add ``piece`` of the answer to ``buf``, which keeps ``max_text`` characters: the first piece past them is
        warned about (once, until ``truncation_noted`` is reset)."""
        buf.limit = self.max_text
        buf.add(piece)
        if buf.cut and not self.truncation_noted:
            self.truncation_noted = True
            msg = self.warn(f"the answer text passed {self.max_text} characters and was cut at line {n}")
            live.append(LiveEvent("warning", n, t, {"message": msg}))

    def tool_start(self, n: int, t: str, call_id: str | None, name: str | None, title: Any) -> LiveEvent:
        """A ``tool_start`` event, remembered until its ``tool_end``.

        A call without an id gets ``L<line>``, so every start can be paired.
        """
        call_id = call_id if isinstance(call_id, str) and call_id else f"L{n}"
        title = short(title)
        calls = self._calls
        calls.pop(call_id, None)
        if len(calls) >= _limits.MAX_OPEN_CALLS:
            del calls[next(iter(calls))]
        calls[call_id] = (name, title)
        return LiveEvent("tool_start", n, t, {"call_id": call_id, "name": name, "title": title})

    def tool_end(
        self,
        n: int,
        t: str,
        call_id: str | None,
        *,
        name: str | None = None,
        title: Any = None,
        ok: bool | None = None,
        exit_code: int | None = None,
        size: int = 0,
        output: str | None = None,
    ) -> list[LiveEvent]:
        """The ``tool_end`` event of a call (after a ``tool_start`` made here if none was seen).

        Without an id the end closes the oldest open call (tools of one agent
        mostly finish in order); the name and title of the start carry over.
        """
        live: list[LiveEvent] = []
        calls = self._calls
        if not (isinstance(call_id, str) and call_id):
            call_id = next(iter(calls), None)
        opened = calls.pop(call_id, None) if call_id is not None else None
        if opened is None:
            start = self.tool_start(n, t, call_id, name, title)
            live.append(start)
            call_id = start.data["call_id"]
            opened = calls.pop(call_id)
        output = output[: self.tool_output] if output is not None and self.tool_output > 0 else None
        live.append(LiveEvent("tool_end", n, t, {
            "call_id": call_id,
            "name": opened[0] or name,
            "title": opened[1] or short(title),
            "ok": ok,
            "exit_code": exit_code,
            "bytes": size,
            "output": output,
        }))
        return live

    def last_lost(self, *types: str) -> Dropped | None:
        """The latest line of one of ``types`` that was kept by type but dropped for its size."""
        found = [r for t in types if (r := self._lost.get(t)) is not None]
        return max(found, key=lambda r: r.line, default=None)

    def warn(self, text: str) -> str:
        return self.notes.add(text)

    def final_or_last(
        self, final: str | None, last: str | None, *, ended: bool, end: str, lost_in: tuple[str, ...],
        unended: str | None = None,
    ) -> tuple[str | None, list[str]]:
        """The answer text and the warnings that go with it, for a format whose ``end`` event carries the final
        text (``final``): else the last assistant message's (``last``), saying why; with neither and no end,
        where the answer may have been dropped (in an event of ``lost_in``), else ``unended``."""
        extra: list[str] = []
        text = final or None
        if text is None and last is not None:
            text = last
            why = f"the {end} event has no text" if ended else f"there is no {end} event"
            extra.append(f"{why}; the text is taken from the last assistant message")
        elif text is None and not ended:
            r = self.last_lost(*lost_in)
            if r is not None:
                extra.append(f"the answer may be in the {r.type!r} event dropped at line {r.line} ({r.reason})")
            elif unended is not None:
                extra.append(unended)
        return text, extra

    def found(self, text: str | None, **facts: Any) -> Answer:
        """The :class:`Answer` of ``text``: the run's session id, model and usage as reported, and the warnings
        so far, with ``facts`` (``usage``, ``error``, ``warnings``, ...) over them."""
        common: dict[str, Any] = {"raw_usage": self.raw_usage, "model": self.model, "session_id": self.session_id,
                                  "warnings": self.notes.as_list()}
        return Answer(text=text, **{**common, **facts})

    def answer(self) -> Answer:
        raise NotImplementedError
