"""One engine for every provider: detection, runs and turns, and the verdict's facts, from the grammars.

:class:`Engine` sits between the line scanner and a provider's fold. It is
sans-I/O and per record: :meth:`Engine.see` takes each record the scanner
gives (decoded :class:`~spoolparse.lines.Event`, undecoded
:class:`~spoolparse.lines.Noted`, :class:`~spoolparse.lines.Dropped`) and
returns the live events of the fold; :meth:`Engine.retain` is the scanner's
retain function.

**Detection** (``--provider auto``, an :class:`AutoProvider`): each record is
matched against every candidate's :class:`~spoolparse.providers.grammar.Grammar`.
An event claimed by one grammar decides; an event one CLI alone prints
(``own``) is claimed by it alone; an event several grammars explain narrows
the candidates, and the stream is decided once they are one grammar, or one
family (read as its head: a look-alike is chosen only by its own marks). Until
then the records are held — at most ``DETECT_EVENTS`` claimed ones (records no
grammar claims count only while none is claimed) and ``max_retained`` bytes
(each record counted as at least ``RECORD_BYTES``) — and replayed into the
chosen provider: nothing is read twice. Past the budget, or at the end,
candidates of more than one family give ``generic`` with a warning; no
claimed event at all gives ``generic``, until the first claimed event, where
detection starts again (the lines before it were no CLI's). A later event that the chosen grammar
does not know and another grammar claims re-decides, with a warning naming
both: an event of a type it does not know until its terminal event, a
look-alike's own mark on one of its types while the records since the
decision are held (``DETECT_EVENTS`` of them, replayed into the new provider).
A typed event does so after an untyped grammar's end too, while an untyped
line never displaces a typed grammar.

**Runs and turns**: an event that starts a run (or any event after a *final*
terminal event) after the terminal event begins a new run, which the provider
folds from scratch; the summary is the last run's, with every run's usage in
``raw_usage``. An event that begins a turn after the terminal event means the
agent went on: the run must end again.

**Verdict facts**: whether the run's terminal event came (and could be read),
which it awaits, how many events there were, and whether a named provider's
grammar explains any of them (:class:`~spoolparse.providers.base.Answer`).
:func:`spoolparse.verdict.judge` turns them into ``ok`` and ``error``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from .. import _limits
from .._decode import jsonout as _json
from .._decode.records import KEEP, NOTE, SKIP, Dropped, Event, Noted, Record
from . import _peek
from .base import Answer, LiveEvent, Notes, Provider, clip, size_text
from .evidence import TABLE, Index, load
from .evidence import of as _evidence_of
from .generic import GenericProvider
from .grammar import Grammar, Shape

__all__ = ["AutoProvider", "Engine", "RECORD_BYTES"]

#: What a held record counts for at least, against the detection byte budget (its Python objects).
RECORD_BYTES = 512
#: Earlier runs whose usage ``raw_usage`` keeps (the last run's is always there).
_RUNS_KEPT = _limits.MAX_WARNINGS


class AutoProvider(Provider):
    """Auto-detection: the stream's provider is chosen from its events by their grammars (:class:`Engine`).

    ``candidates`` are the providers it may choose (default: every registered one whose grammar allows
    detection, each imported only once its evidence is seen); ``chosen`` is the provider reading the stream once
    one is chosen.
    """

    name: ClassVar[str] = "auto"

    def __init__(self, candidates: Sequence[type[Provider]] | None = None) -> None:
        super().__init__()
        self._given = None if candidates is None else [
            c for c in candidates if c.grammar is not None and c.grammar.detected]
        self.chosen: Provider | None = None

    @property
    def candidates(self) -> list[type[Provider]]:
        """The providers it may choose (asking imports every one)."""
        if self._given is not None:
            return list(self._given)
        return [load(e.at) for e in TABLE if e.detected]

    def index(self) -> Index:
        """Detection's index of the candidates: the registered ones from their evidence (:mod:`evidence`'s table),
        imported as it is seen; given ones from their grammars."""
        if self._given is None:
            return Index([e for e in TABLE if e.detected], lambda e: load(e.at))
        # by grammar: detection names what it finds by the grammar that claims it (a given subclass may name
        # itself otherwise, MyClaude(ClaudeProvider) with Claude's grammar)
        given = {c.grammar.name: c for c in self._given if c.grammar is not None}
        rows = [_evidence_of(c, f"{c.__module__}:{c.__qualname__}") for c in self._given]
        return Index(rows, lambda e: given[e.name])

    @property
    def provider_name(self) -> str:
        return self.chosen.name if self.chosen is not None else "auto"

    def event(self, ev: Event) -> list[LiveEvent]:
        raise TypeError("an AutoProvider reads nothing itself: give it to a StreamParser")

    def answer(self) -> Answer:
        raise TypeError("an AutoProvider reads nothing itself: give it to a StreamParser")


def _data(rec: Record) -> Mapping[str, Any] | None:
    """What of a record its shape can be judged by: an event's object, a short noted line's, else nothing."""
    if type(rec) is Event:
        return rec.data
    if type(rec) is Noted:
        return _peek.whole(rec)
    return None


def _line(rec: Record) -> int:
    return rec.line if type(rec) is Dropped else rec.lineno  # type: ignore[union-attr]


def _held(rec: Record) -> int:
    """Bytes a held record counts for against the detection budget."""
    if type(rec) is Event:
        size = rec.size
    elif type(rec) is Noted:
        size = len(rec.head) + len(rec.tail)
    else:
        size = 0
    return max(size, RECORD_BYTES)


class Engine:
    """The reading of one stream: which provider folds it, its runs and turns, and the verdict's facts.

    ``provider`` is the fold for a named provider, or an :class:`AutoProvider` whose candidates the
    stream is detected among (its settings — ``max_text``, ``live``, ``tool_output`` — pass to the one
    chosen). ``detect_bytes`` bounds what is held while undecided (the parser's ``max_retained``).
    """

    #: Line of the run's terminal event, once seen (``None`` while the run goes on).
    ended_at: int | None
    _final: bool  # the run ended at an event after which its CLI prints nothing more of it
    _maybe: bool  # the run ended at a line not read, which may have been anything
    _unread: Dropped | None  # the run's terminal line, when it could not be read

    def __init__(self, provider: Provider, *, detect_bytes: int = _limits.MAX_RETAINED) -> None:
        self.auto = provider if isinstance(provider, AutoProvider) else None
        self.fold: Provider | None = None if self.auto is not None else provider
        self.detect_bytes = detect_bytes
        self._index = self.auto.index() if self.auto else None
        #: What decided the provider (``"--provider"`` for a named one).
        self.detected_by = "--provider" if self.auto is None else ""
        #: Bumped whenever :meth:`retain` may answer differently (the parser re-reads it then).
        self.retain_version = 0
        self.notes = Notes()  # the engine's own warnings: switches, ambiguity, documents that were none
        self._buffer: list[Record] | None = None  # what detection holds (a named provider holds nothing)
        self._begin_detection()
        if self.auto is None:
            self._buffer = None
        # read as generic for want of any event a grammar claims: the first one after that detects again
        self._blind = False
        self._doc: Record | None = None  # a document withheld until it is known to be the whole input
        # a named provider's first events, looked at for another CLI's own mark (None: not, or no longer)
        self._looked: int | None = 0 if self.auto is None and provider.grammar is not None else None
        self._begin_stream()
        self._closed = False
        self._reset_retain()

    # -- what the parser reads ----------------------------------------------------------------------------------

    @property
    def grammar(self) -> Grammar | None:
        return self.fold.grammar if self.fold is not None else None

    @property
    def provider_name(self) -> str:
        return self.fold.name if self.fold is not None else "auto"

    @property
    def decided(self) -> bool:
        """Whether the provider is known for good: not while detecting, nor while read as generic for want of
        evidence (a line that detection noted may then still be the evidence, listened to or not)."""
        return self.fold is not None and not self._blind

    def retain(self, key: str) -> int:
        """How the scanner reads a line of ``key``: the fold's choice, and while detecting the candidates'."""
        fold = self.fold
        if fold is None:
            idx = self._index
            assert idx is not None
            if key in idx.keep:
                return KEEP
            if key in idx.note:
                return NOTE  # evidence by its key and head, never decoded
            return KEEP  # no grammar's: the generic provider may need it
        d = fold.retain(key)
        if d != SKIP:
            return d
        # another grammar's event could re-decide: it is read (only in the streams that print one)
        return KEEP if key in self._foreign else SKIP

    def retained(self) -> frozenset[str] | None:
        """The keys :meth:`retain` does not skip, once they are known (``None`` while detecting, or for a provider
        with no grammar: any key may be read)."""
        fold = self.fold
        if fold is None or fold.grammar is None:
            return None
        return frozenset(k for k in fold.keep | fold.note | self._foreign if self.retain(k) != SKIP)

    def _reset_retain(self) -> None:
        self._foreign: frozenset[str] = frozenset()
        self._quiet: frozenset[str]  # the keys of events that need no check mid-run (see())
        self._ends: frozenset[str]  # and those of its terminal events
        self._reads: dict[str, int]  # how it reads each of its keys (Grammar.read, with no call per record)
        self._their_starts: frozenset[str] = frozenset()  # types other grammars start a run with, and it knows not
        g = self.grammar
        self._quiet = (g.types() - {""}) | ({""} if g.typed else set()) if g is not None else frozenset()
        self._ends = frozenset(s.key for s in g.terminal) if g is not None else frozenset()
        self._reads = {k: g.read(k) for k in g.types()} if g is not None else {}
        if self.auto is not None and self._index is not None and g is not None:
            # keys another candidate decodes: typed ones, and untyped ones when the chosen grammar is untyped too or
            # another starts its runs with one (it may begin after this one's run ended). (A type every grammar that
            # knows it only notes is no evidence: detection notes it too, so whether a line of it were decoded
            # would depend on whether it came in the chunk that decided.)
            idx = self._index
            untyped_starts = "" in idx.starts
            self._foreign = frozenset(
                k for k in idx.keys
                if k in idx.keep and k not in g.types() and (k != "" or not g.typed or untyped_starts)
            )
            # (an untyped line that cannot be read says no type: nothing of it is evidence in a typed stream)
            self._their_starts = (idx.starts - {""}) & self._foreign
        self.retain_version += 1

    # -- records ------------------------------------------------------------------------------------------------

    def see(self, rec: Record) -> list[LiveEvent]:
        """Take one record; the live events it gave."""
        if self.fold is None:
            return self._detect(rec)
        if self._blind:
            if not isinstance(rec, Dropped) and self._claimed_by_any(rec):
                return self._detect_again(rec, "the lines before it hold no event of a known format")
        elif self.auto is not None and not (
                self.ended_at is None and self._buffer is None and type(rec) is Event and rec.type in self._quiet):
            # (one of its own typed events, or an untyped one in a typed stream, mid-run with nothing held: no other
            # CLI's run begins there, and it contradicts nothing)
            if type(rec) is Event and self._another_run(rec):
                assert self.fold is not None
                return self._detect_again(rec, f"after {self.fold.name}'s run ended, another CLI's run begins",
                                          noted_unseen=True)
            switch = self._contradicted(rec)
            if switch is not None:
                return self._redecide(rec, *switch)
            self._hold(rec)
        elif self._looked is not None and type(rec) is Event:
            self._another_cli(rec)
        return self._feed(rec)

    def close(self, objects: int) -> list[LiveEvent]:
        """End of stream: decide if still undecided, and read a withheld document if it was the whole input
        (``objects``: the JSON objects the input held, read or skipped). Idempotent."""
        if self._closed:
            return []
        self._closed = True
        live = self._settle(at_end=True) if self.fold is None else []
        doc, self._doc = self._doc, None
        if doc is not None:
            if objects == 1 and self.events == 0:
                live += self._take_document(doc)
            else:
                self._refuse(doc)
        return live

    def conclude(self) -> Answer:
        """The :class:`Answer` of the last run, with the verdict's facts."""
        assert self.fold is not None, "close() decides the provider"
        fold, g = self.fold, self.grammar
        ans = fold.conclude()
        ans.events = self.events
        if g is None:  # the generic provider: any JSON event will do
            ans.finished, ans.awaited = True, ""
        else:
            ans.finished = self.ended_at is not None
            ans.awaited = g.awaited
            if self.auto is None and self.known == 0 and self.events:
                ans.unknown = f"no {fold.name} event in the stream"
            r = self._unread
            if ans.finished and ans.lost is None and r is not None and r.line == self.ended_at:
                # the run ended, but how (a failure, a status, the step's reason) was in the line that is lost
                ans.lost = (f"the run's last event ({r.type or 'untyped'}, {size_text(r.bytes)} at line {r.line}) "
                            f"{fold.why_lost(r)}: how the run ended is not known")
        notes = self.notes.as_list()
        if self.runs > 1:
            notes.append(f"the stream held {self.runs} runs; the summary is the last one's (from line {self.run_from})")
            kept = [*self._earlier, ans.raw_usage]
            ans.raw_usage = kept
            missing = self._earlier_count - len(self._earlier)
            if missing:
                notes.append(f"the usage of {missing} earlier runs was not kept")
        ans.warnings = notes + ans.warnings
        return ans

    # -- reading, once the provider is known ------------------------------------------------------------------

    def _feed(self, rec: Record) -> list[LiveEvent]:
        """A record for the fold, with the run structure its grammar declares."""
        fold = self.fold
        assert fold is not None
        g = fold.grammar
        if g is None:  # the generic provider has no grammar: every record is its, and any JSON event ends it
            if type(rec) is not Noted:
                self.events += 1
            return fold.see(rec)
        key, kind = rec.type, type(rec)
        read = self._reads.get(key, SKIP)  # the provider's retain, which its grammar's read modes make
        if read == SKIP:
            # not this CLI's (read while detecting, or to see whether it re-decides); a line of it too long to keep
            # is reported, but it is no event of the stream's, as a shorter one would not be
            if kind is not Dropped:
                return []
            if self.ended_at is not None and key in self._their_starts:
                self._new_run(_line(rec))  # another CLI's run may have begun with it, after this one's end: unfinished
            return fold.see(rec)
        if read == NOTE and kind is Event:
            rec = _synthetic_note(rec)  # type: ignore[arg-type]  # decoded while detecting; this provider notes it
            kind = Noted
        data = rec.data if kind is Event else None  # type: ignore[union-attr]
        if not key:
            if g.document is not None and kind is not Noted:
                return self._document(rec)
            if data is not None and g.explains(key, data) is None:
                return []  # an untyped line the grammar does not know: no event of this CLI
        if self._doc is not None:  # something after a document: it was no document
            doc, self._doc = self._doc, None
            self._refuse(doc)
        if kind is Noted:
            # not counted, as an event or as the grammar's: with nobody listening they are skipped unread, and the
            # verdict must not depend on whether anyone listened
            return fold.see(rec)
        self.events += 1
        if not self.known and g.explains(key, data) is not None:
            self.known += 1
        if self.ended_at is not None and (data is not None or read == KEEP):
            # a line of a type the grammar decodes that could not be read is judged by its type alone: one that
            # may have started a run or begun a turn after the end leaves the stream's last run unfinished
            if self._maybe:
                if data is not None:
                    self.ended_at = fold.ended_at = None  # the unread line that may have ended it did not: more came
            elif self._final or g.role("starts", key, data) is not None:
                self._new_run(_line(rec))
            elif g.role("turns", key, data) is not None:
                self.ended_at = fold.ended_at = None  # the agent went on: this turn must end too, with its answer
                fold.new_turn(_line(rec))
        live = fold.see(rec)
        end = g.role("terminal", key, data) if key in self._ends else None
        if end is not None:
            self.ended_at = fold.ended_at = _line(rec)
            # a line not read ends the run by its type alone: for an untyped one, only if nothing follows it
            self._maybe = data is None and key == ""
            self._final = data is not None and end in g.final
            self._unread = rec if type(rec) is Dropped else None
        return live

    def _begin_stream(self) -> None:
        """The facts of a stream read from its start (or from a line a switch reads it from)."""
        self.events = 0
        self.known = 0  # events the grammar's vocabulary explains (a named provider with none is not ok)
        self.runs = 1
        self.run_from = 1
        self._earlier: list[Any] = []
        self._earlier_bytes = 0  # their size as JSON: a run's usage object can be as large as its line
        self._earlier_count = 0
        self._begin_run()

    def _begin_run(self) -> None:
        """The facts of a run that has just begun."""
        self.ended_at = None
        self._final = False
        self._maybe = False
        self._unread = None

    def _new_run(self, line: int) -> None:
        """The next run of the stream begins at ``line``: the fold starts over; the finished run's usage is kept."""
        fold = self.fold
        assert fold is not None
        self._earlier_count += 1
        if len(self._earlier) == self._earlier_count - 1 and len(self._earlier) < _RUNS_KEPT:
            raw = fold.answer().raw_usage
            size = len(_json.dumps(raw))
            if self._earlier_bytes + size <= _limits.EARLIER_USAGE_BYTES:  # the first runs' that fit, in order
                self._earlier.append(raw)
                self._earlier_bytes += size
        fold.restart()
        self.runs += 1
        self.run_from = line
        self._begin_run()

    def _document(self, rec: Record) -> list[LiveEvent]:
        """An untyped line of a grammar with a whole-document form: withheld until the end shows whether it was
        the whole input (only then is it the run); with other events around, it is none."""
        g = self.grammar
        assert g is not None and g.document is not None
        if type(rec) is Event and not g.document.fits("", rec.data):
            return []  # not even shaped like one: a stray untyped line
        if self.events or self._doc is not None:
            self._refuse(rec)
            return []
        self._doc = rec
        return []

    def _take_document(self, rec: Record) -> list[LiveEvent]:
        fold = self.fold
        assert fold is not None
        self.events += 1
        self.known += 1
        live = fold.see(rec)
        self.ended_at = _line(rec)
        fold.ended_at = self.ended_at
        return live

    def _refuse(self, rec: Record) -> None:
        g = self.grammar
        assert g is not None and g.document is not None
        self.notes.add(f"line {_line(rec)} looks like {g.name}'s {g.document.name} but the input holds other "
                          f"events: it is not taken for the run")

    # -- detection ----------------------------------------------------------------------------------------------

    def _begin_detection(self) -> None:
        """Detection's state before its first record."""
        self._buffer = []
        self._bytes = 0
        self._claimed = 0
        self._unclaimed = 0
        self._cands: dict[str, Shape] | None = None  # candidate -> the shape that kept it in
        self._typed_evidence = False
        self._after = 0  # records held past the decision
        # detecting again after a provider's run ended: the lines it only noted may have been skipped unread (with
        # nobody listening) in the chunk that ended it, so a noted line is no evidence until the decision
        self._noted_unseen = False

    def _claimed_by_any(self, rec: Event | Noted) -> bool:
        assert self._index is not None
        return bool(self._index.claims(rec.type, _data(rec))[0])

    def _another_run(self, rec: Event) -> bool:
        """Whether, after the chosen typed grammar's run ended, this event begins another CLI's run: one that carries
        another CLI's own mark, or that it does not explain and another grammar starts its runs with (a log of two
        commands, a wrapper that fell back to a second agent). The stream is then that run's from here, as a second
        run of one CLI would be."""
        g, idx = self.grammar, self._index
        if g is None or idx is None or self.ended_at is None or not g.typed:
            return False
        key, data = rec.type, rec.data
        claims, owned = idx.claims(key, data)
        if not claims or g.name in claims:
            return False
        if owned and key:
            return True
        return g.explains(key, data) is None and any(
            idx.grammar(n).role("starts", key, data) is not None for n in claims)

    def _detect_again(self, rec: Event | Noted, why: str, *, noted_unseen: bool = False) -> list[LiveEvent]:
        """An event a grammar claims where what came before it is no run of the stream's: lines of no known format
        (a stream read as generic for want of evidence) or another CLI's finished run. Detection starts again at
        this line and the stream is read from there — as it would be had it begun there. ``noted_unseen``: the
        provider was known till now, so lines it noted may have been skipped unread; they are no evidence."""
        line = _line(rec)
        self.notes.add(f"auto-detection: line {line}: {why}: the stream is read from line {line} on")
        self.fold = None
        self._blind = False
        self.detected_by = ""
        self._begin_stream()
        self._begin_detection()
        self._noted_unseen = noted_unseen
        self._reset_retain()
        return self._detect(rec)

    def _detect(self, rec: Record) -> list[LiveEvent]:
        idx = self._index
        assert idx is not None and self._buffer is not None
        if self._noted_unseen and type(rec) is Noted:
            return []
        self._buffer.append(rec)
        self._bytes += _held(rec)
        claims: dict[str, Shape] = {}
        if type(rec) is not Dropped:
            claims, _ = idx.claims(rec.type, _data(rec))
        typed = rec.type != ""
        if claims and not (not typed and self._typed_evidence):  # an untyped line never sways typed evidence
            self._claimed += 1
            cands = self._cands
            both = {n: s for n, s in claims.items() if cands is None or n in cands}
            if cands is None or not both:
                self._cands = dict(claims)  # the newer evidence: the earlier was another CLI's noise
            else:
                self._cands = both
            self._typed_evidence |= typed
            choice = self._decision()
            if choice is not None:
                name, s = choice
                # one family's head for want of a look-alike's mark: the stream may be any of theirs
                family = tuple(sorted(self._cands, key=lambda n: (n != name, idx.order[n])))
                return self._choose(name, f"line {_line(rec)}: {self._describe(s)}", traps=family)
        else:
            self._unclaimed += 1
        count = self._claimed if self._claimed else self._unclaimed
        if count >= _limits.DETECT_EVENTS or self._bytes > self.detect_bytes:
            return self._settle(at_end=False)
        return []

    def _decision(self) -> tuple[str, Shape] | None:
        """The grammar the candidates settle on: the one left, or the head of the one family left."""
        cands = self._cands
        assert cands is not None and self._index is not None
        if len(cands) == 1:
            return next(iter(cands.items()))
        heads = {self._index.head(n) for n in cands}
        if len(heads) == 1:
            head = heads.pop()
            if head in cands:
                return head, cands[head]
        return None

    def _settle(self, *, at_end: bool) -> list[LiveEvent]:
        """Decide with the evidence so far: the budget ran out, or the stream ended."""
        idx = self._index
        assert idx is not None
        where = "in the stream" if at_end else f"in its first {self._claimed or self._unclaimed} events"
        if self._cands:
            names = sorted(self._cands, key=idx.order.__getitem__)
            said = ", ".join(names[:-1]) + f" and {names[-1]}"
            self.notes.add(f"auto-detection: the events {where} fit {said} alike: read as generic")
            return self._choose(GenericProvider.name, f"ambiguous: {said}")
        live = self._choose(GenericProvider.name, f"no event of a known format {where}")
        self._blind = not at_end
        return live

    def _choose(self, name: str, by: str, *, traps: tuple[str, ...] = ()) -> list[LiveEvent]:
        """Hand the stream to ``name``'s provider: the held records are replayed into it. ``traps``: the CLIs whose
        known traps it is checked for, when it may be any of several (default: its own)."""
        fold = self._new_fold(name)
        if traps:
            fold.trap_clis = traps
        self.fold = fold
        self.detected_by = by
        self._reset_retain()
        held = self._buffer or []
        live: list[LiveEvent] = []
        for rec in held:
            live += self._feed(rec)
        if fold.grammar is None:
            self._buffer = None  # nothing switches from generic (only evidence after none at all detects again)
        return live

    def _new_fold(self, name: str) -> Provider:
        auto = self.auto
        assert auto is not None
        idx = self._index
        assert idx is not None
        cls = idx.cls(name) if name in idx.order else GenericProvider
        fold = cls()
        fold.max_text, fold.live, fold.tool_output = auto.max_text, auto.live, auto.tool_output
        auto.chosen = fold
        return fold

    def _describe(self, s: Shape) -> str:
        """A shape as ``detected_by`` and the warnings name it: its name, and its marks when it is a CLI's own."""
        return (s.name + (f" ({s.marks()})" if s.own and s.marks() else "")).replace("`", "")

    def _hold(self, rec: Record) -> None:
        """Keep a record for a replay should the choice change: past the decision, as many records as detection
        looks at, within its byte budget. A noted line is not held: it gives live events only, and with nobody
        listening it is skipped unread, so counting it would make where a switch reads from depend on a listener."""
        buf = self._buffer
        if buf is None or type(rec) is Noted or self.retain(rec.type) != KEEP:
            # (nor one the provider does not decode: the scanner skips or notes it once the provider is known, and
            # a line classified before the decision in the same chunk must count as one after it does)
            return
        self._bytes += _held(rec)
        self._after += 1
        buf.append(rec)
        if self._after > _limits.DETECT_EVENTS or self._bytes > self.detect_bytes:
            self._buffer = None  # past the budget: a later switch reads on from where it happens

    # -- re-deciding --------------------------------------------------------------------------------------------

    def _another_cli(self, rec: Event) -> None:
        """A named provider is read as named, whatever the stream says; but an event among its first
        ``DETECT_EVENTS`` that carries another CLI's own mark, and none of the named one's (Claude Code's init
        read as Qwen Code's, or the reverse: the same events, told apart by their marks only), is said once,
        as auto-detection would have said it in switching: the usage, the price and the traps read are the
        named CLI's."""
        assert self._looked is not None and self.fold is not None
        self._looked += 1
        if self._looked > _limits.DETECT_EVENTS:
            self._looked = None
            return
        name = self.fold.name
        if not any(rec.type in e.owns for e in TABLE if e.name != name):
            return  # no other CLI owns a mark on this type (decided from the table: no provider is imported)
        claims, owned = _every_grammar().claims(rec.type, rec.data)
        if not owned or name in claims:
            return
        other = min(claims)
        self.notes.add(f"--provider {name}: line {rec.lineno}: {self._describe(claims[other])} is {other}'s, "
                       f"not {name}'s: read as {name}, as --provider says")
        self._looked = None


    def _contradicted(self, rec: Record) -> tuple[str, Shape] | None:
        """Another grammar claims an event the chosen one does not know, where that may re-decide: the grammar
        and the shape it fits, or ``None``."""
        g, idx = self.grammar, self._index
        if g is None or idx is None or type(rec) is not Event:
            # a noted line is no evidence once the provider is known: with nobody listening it is skipped unread,
            # and the verdict must not depend on whether anyone listened
            return None
        key = rec.type
        typed = key != ""
        if g.typed and not typed:
            return None  # a stray untyped line never displaces a typed grammar
        if self.ended_at is not None and g.typed:
            return None  # after its end a typed stream may print anything (an untyped one holds only its own lines)
        known = typed and key in g.types()
        if known:
            if self._buffer is None:
                # a look-alike's mark on one of its types is looked for while the records since the decision are
                # held (the first DETECT_EVENTS): a stream shows its marks from its start, and a switch later would
                # read on from there only; an event of a type it does not know re-decides until its end
                return None
            # the marks other grammars own in the chosen one's types: only an event of one of them can re-decide
            for s in idx.rivals(g, key):
                if s.fits(key, rec.data):
                    break
            else:
                return None  # one of its own types, with no other grammar's own mark on it
        claims, owned = idx.claims(key, rec.data)
        if not claims or g.name in claims or (known and not owned):
            return None  # explained, unclaimed, or a type it knows in a shape it does not: no other CLI's mark
        head = idx.head(next(iter(claims)))
        one_family = head in claims and all(idx.head(n) == head for n in claims)
        name = head if one_family else min(claims, key=idx.order.__getitem__)
        return name, claims[name]

    def _redecide(self, rec: Record, name: str, s: Shape) -> list[LiveEvent]:
        old = self.fold
        assert old is not None
        held = self._buffer
        line = _line(rec)
        if self._doc is not None:  # a document withheld under the old grammar: other events came, so it is none
            doc, self._doc = self._doc, None
            self._refuse(doc)
        said = f"line {line}: {self._describe(s)} is {name}'s, not {old.name}'s"
        self.notes.add(clip(f"auto-detection: {said}: read as {name}"
                               + (" from the start" if held is not None else f" from line {line} on")))
        self._begin_stream()
        self._cands = {name: s}
        fold = self._new_fold(name)
        self.fold = fold
        self.detected_by = f"line {line}: {self._describe(s)} (after {old.name})"
        self._reset_retain()
        if held is not None:
            for r in held:
                self._feed(r)  # read before, as another CLI's: the live events were given then
            self._hold(rec)
        return self._feed(rec)


@functools.cache
def _every_grammar() -> Index:
    """Every registered provider's grammar by key, for a named provider's check (made once, when first asked;
    a provider is imported when an event of a type it owns a mark on is looked up)."""
    return Index(list(TABLE), lambda e: load(e.at))


def _synthetic_note(ev: Event) -> Noted:
    """A decoded event as the noted line a provider that only notes its type expects (head and tail of its JSON)."""
    raw = _json.dumps(ev.data)  # (a decoded line may hold what orjson refuses: an integer past 64 bits)
    return Noted(ev.lineno, ev.type, ev.size, raw[: _limits.NOTE_HEAD], raw[-_limits.NOTE_TAIL :])
