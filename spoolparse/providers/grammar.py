"""What one agent CLI's stdout must look like, declared as data: a :class:`Grammar`.

A grammar names

* its **vocabulary**: the :class:`Shape` of every event the CLI prints — the type key (``""`` for an untyped
  line), how the line is read (decoded, noted by its head and size, or skipped), the keys that mark it
  (:class:`Cond`), whether only this CLI prints it (``own``: a mark that settles detection) and which
  look-alikes print it too (``shared``);
* its **run structure**: the events that start a run, the ones that begin a turn (one after the end means the
  agent went on, and must end again), the terminal events (the first is named in "stream ended before …"),
  the ones after which the CLI prints nothing more of the run (``final``), and the lines that carry the
  answer or a part of it (lost when one cannot be had);
* its **whole-document form**, if it has one (``gemini -o json``): read as the run only when it is the whole
  input.

A CLI's known traps (a failure printed as a success) are one table of their own,
:mod:`spoolparse.providers.traps`, which the folds consult.

Nothing here reads a stream: :mod:`spoolparse.providers.engine` derives detection, run and turn boundaries
and the verdict's facts from the grammars, one engine for every provider. A provider's code keeps what a
grammar cannot say (usage arithmetic, live events). The types a provider looks at (``Provider.keep``,
``note``, ``known``) are its grammar's keys by read mode (:meth:`Grammar.types`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .._decode.records import KEEP, NOTE, SKIP

__all__ = [
    "Cond", "Shape", "Grammar", "KEEP", "NOTE", "SKIP", "has", "any_of", "lacks", "is_", "is_not", "kind",
    "prefix", "filled", "empty", "shape", "lookup", "MISSING", "ok_table", "first_fit",
]

#: What :func:`lookup` gives for a path that is not there.
MISSING: Final[Any] = object()

_KINDS = {"string": (str,), "object": (dict,), "array": (list,), "number": (int, float), "boolean": (bool,)}


def lookup(data: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The value at a dotted path (``("part", "reason")``), or :data:`MISSING`."""
    value: Any = data
    for key in path:
        if not isinstance(value, Mapping):
            return MISSING
        value = value.get(key, MISSING)
        if value is MISSING:
            return MISSING
    return value


def _getter(path: tuple[str, ...]) -> Callable[[Mapping[str, Any]], Any]:
    """:func:`lookup` of a path of one or two keys, made once."""
    if len(path) == 1:
        key = path[0]
        return lambda d: d.get(key, MISSING)
    outer, inner = path

    def get(d: Mapping[str, Any]) -> Any:
        v = d.get(outer, MISSING)
        return v.get(inner, MISSING) if type(v) is dict or isinstance(v, Mapping) else MISSING

    return get


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b  # True is not 1


@dataclass(frozen=True, slots=True)
class Cond:
    """One condition on an event's keys; made by :func:`has`, :func:`is_`, :func:`lacks` and the others."""

    op: str
    paths: tuple[tuple[str, ...], ...]
    values: tuple[Any, ...] = ()
    #: The test itself, made once: a detected stream's events are tested one by one.
    test: Callable[[Mapping[str, Any]], bool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "test", self._compile())

    def _compile(self) -> Callable[[Mapping[str, Any]], bool]:
        op, values = self.op, self.values
        if len(self.paths) != 1 or op not in ("has", "any", "lacks", "is", "not", "prefix"):
            return self._test
        path = self.paths[0]
        if op in ("is", "not") and len(values) == 1 and len(path) <= 2:
            # one value at a key or one level down (a step's reason): no generator, no walk of the path
            get, value, kind = _getter(path), values[0], type(values[0])
            if op == "is":
                return lambda d: type(v := get(d)) is kind and v == value
            return lambda d: not (type(v := get(d)) is kind and v == value)
        if len(path) != 1 or op == "not":
            return self._test
        key = path[0]  # one top-level key: a dict lookup, the common case
        if op == "is":
            return lambda d: any(_same(d.get(key, MISSING), v) for v in values)
        if op == "prefix":
            start = values[0]
            return lambda d: isinstance(v := d.get(key), str) and v.startswith(start)
        if op == "lacks":
            return lambda d: key not in d
        return lambda d: key in d

    def _test(self, data: Mapping[str, Any]) -> bool:
        op, values = self.op, self.values
        if op == "has":
            return all(lookup(data, p) is not MISSING for p in self.paths)
        if op == "any":
            return any(lookup(data, p) is not MISSING for p in self.paths)
        if op == "lacks":
            return all(lookup(data, p) is MISSING for p in self.paths)
        value = lookup(data, self.paths[0])
        if op == "is":
            return any(_same(value, v) for v in values)
        if op == "not":
            return not any(_same(value, v) for v in values)
        if op == "kind":
            return any(isinstance(value, _KINDS[k]) and not (k == "number" and isinstance(value, bool))
                       for k in values)
        if op == "prefix":
            return isinstance(value, str) and value.startswith(values[0])
        if op == "filled":
            return bool(value) and value is not MISSING and value is not None
        assert op == "empty", op
        return value is MISSING or not value

    def __str__(self) -> str:
        names = [f"`{'.'.join(p)}`" for p in self.paths]
        op, values = self.op, self.values
        if op == "has":
            return ", ".join(names)
        if op == "any":
            return " or ".join(names)
        if op == "lacks":
            return "no " + " nor ".join(names)
        said = "/".join(f"`{v}`" for v in values)
        if op == "is":
            return f"{names[0]}: {said}"
        if op == "not":
            return f"{names[0]} not {said}"
        if op == "kind":
            return f"{names[0]} " + " or ".join(("an " if v in ("object", "array") else "a ") + v for v in values)
        if op == "prefix":
            return f"{names[0]}: `{values[0]}…`"
        return f"{names[0]} not empty" if op == "filled" else f"no {names[0]}"


def _paths(paths: Iterable[str]) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(p.split(".")) for p in paths)


def has(*paths: str) -> Cond:
    """Every one of these keys is there (a dotted path reaches into an object: ``part.reason``)."""
    return Cond("has", _paths(paths))


def any_of(*paths: str) -> Cond:
    """At least one of these keys is there."""
    return Cond("any", _paths(paths))


def lacks(*paths: str) -> Cond:
    """None of these keys is there."""
    return Cond("lacks", _paths(paths))


def is_(path: str, *values: Any) -> Cond:
    """The key holds one of these values."""
    return Cond("is", _paths([path]), values)


def is_not(path: str, *values: Any) -> Cond:
    """The key is missing or holds none of these values."""
    return Cond("not", _paths([path]), values)


def kind(path: str, *kinds: str) -> Cond:
    """The key holds a JSON ``string``, ``object``, ``array``, ``number`` or ``boolean``."""
    unknown = set(kinds) - set(_KINDS)
    if unknown:
        raise ValueError(f"no JSON kind {sorted(unknown)}")
    return Cond("kind", _paths([path]), kinds)


def prefix(path: str, start: str) -> Cond:
    """The key holds a string that begins with ``start``."""
    return Cond("prefix", _paths([path]), (start,))


def filled(path: str) -> Cond:
    """The key holds something that is not empty (a non-empty string, list or object, a true value)."""
    return Cond("filled", _paths([path]))


def empty(path: str) -> Cond:
    """The key is missing, ``null`` or empty."""
    return Cond("empty", _paths([path]))


@dataclass(frozen=True, eq=False, slots=True)
class Shape:
    """One kind of event: its type key and the conditions that mark it.

    ``read`` is how a line of this key is read (``KEEP``: decoded; ``NOTE``: its head and size only;
    ``SKIP``: counted, never read). ``own``: only this CLI prints an event of this shape, so it settles
    detection (the look-alikes whose shapes fit it too do not claim it). ``shared``: every grammar whose
    stream holds this shape, when more than one does (the tests check it on ``example``). ``label`` names it
    in the docs and in messages.
    """

    key: str
    when: tuple[Cond, ...] = ()
    read: int = KEEP
    own: bool = False
    label: str = ""
    example: Mapping[str, Any] | None = None
    shared: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """How messages and the docs name it: its label, else its key."""
        return self.label or self.key or "an untyped line"

    def fits(self, key: str, data: Mapping[str, Any] | None) -> bool:
        """Whether an event of ``key`` is of this shape; ``data`` ``None``: not read, judged by its key alone."""
        if key != self.key:
            return False
        if data is not None:
            for c in self.when:
                if not c.test(data):
                    return False
        return True

    def marks(self) -> str:
        """Its conditions, those its label already says left out (``subtype: init`` in ``system/init``), and a
        key's presence when another of its conditions names the key."""
        said = {p for c in self.when if c.op != "has" for p in c.paths}
        return ", ".join(str(c) for c in self.when
                         if not (c.op == "is" and all(str(v) in self.name for v in c.values))
                         and not (c.op == "has" and set(c.paths) <= said))

    def said(self) -> str:
        """How the docs show it: its name, then its marks — unless its label says it all, in words ("an assistant
        message without tool calls") or as the object it is (``{event: result}``)."""
        if self.name.startswith(("a ", "an ", "the ")):
            return self.name
        if self.name.startswith("{"):
            return f"`{self.name}`"
        marks = self.marks()
        return f"`{self.name}`" + (f" ({marks})" if marks else "")


def shape(key: str, *when: Cond, read: int = KEEP, own: bool = False, label: str = "",
          example: Mapping[str, Any] | None = None, shared: Iterable[str] = ()) -> Shape:
    """A :class:`Shape`, its conditions given as arguments."""
    return Shape(key, tuple(when), read, own, label, example, tuple(shared))


@dataclass(frozen=True, eq=False)
class Grammar:
    """One CLI's stdout as data (see the module's docstring); checked when made."""

    name: str
    vocabulary: tuple[Shape, ...]
    #: Events that start a run: one after the terminal event starts the next run of the stream.
    starts: tuple[Shape, ...] = ()
    #: Events that begin a turn: one after the terminal event means the agent went on (the run must end again).
    turns: tuple[Shape, ...] = ()
    #: Events that end a run; the first is the one "stream ended before …" names.
    terminal: tuple[Shape, ...] = ()
    #: Terminal events after which the CLI prints nothing more of the run: any event after one starts a new run.
    final: tuple[Shape, ...] = ()
    #: Lines that carry the answer or a part of it: one that cannot be had (too large, undecodable) loses it.
    answer: tuple[Shape, ...] = ()
    #: The whole-document form: the run itself, only when it is the whole input.
    document: Shape | None = None
    #: The grammar this one is a look-alike of: it shares that one's shapes and is told from it only by its
    #: own marks, so a stream with none of them is read as that one.
    family: str = ""
    #: Whether auto-detection may choose it (a CLI whose stream is another's unchanged is chosen by name).
    detected: bool = True
    #: Whether its events carry their type in ``type``: an untyped grammar's stream holds no other CLI's typed
    #: line, while a typed stream may carry a stray untyped one.
    typed: bool = True
    #: For the docs: where the answer comes from, and what a finished run without one is told by.
    says_answer: str = ""
    says_no_answer: str = ""
    _by_key: dict[str, tuple[Shape, ...]] = field(init=False, repr=False, compare=False)
    _reads: dict[str, int] = field(init=False, repr=False, compare=False)
    _types: dict[int | None, frozenset[str]] = field(init=False, repr=False, compare=False)
    _roles: dict[str, dict[str, tuple[Shape, ...]]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_key: dict[str, list[Shape]] = {}
        reads: dict[str, int] = {}
        for s in self.vocabulary:
            by_key.setdefault(s.key, []).append(s)
            if reads.setdefault(s.key, s.read) != s.read:
                raise ValueError(f"{self.name}: the shapes of {s.key!r} are read two ways")
        if self.document is not None:
            if self.document.key != "" or self.document.read != KEEP:
                raise ValueError(f"{self.name}: a document is an untyped line, decoded")
            if reads.setdefault("", KEEP) != KEEP:
                raise ValueError(f"{self.name}: untyped lines are read two ways")
        for role in ("starts", "turns", "terminal", "final", "answer"):
            for s in getattr(self, role):
                # what the verdict rests on is decoded whether or not anyone listens to live events
                if reads.get(s.key) != KEEP:
                    raise ValueError(f"{self.name}: its {role} event {s.name!r} is not a decoded type")
        for s in self.final:
            if s not in self.terminal:
                raise ValueError(f"{self.name}: final event {s.name!r} is not a terminal one")
        object.__setattr__(self, "_by_key", {k: tuple(v) for k, v in by_key.items()})
        object.__setattr__(self, "_reads", reads)
        object.__setattr__(self, "_types", {read: frozenset(k for k, r in reads.items() if read is None or r == read)
                                            for read in (None, KEEP, NOTE, SKIP)})
        roles: dict[str, dict[str, tuple[Shape, ...]]] = {}
        for role in ("starts", "turns", "terminal"):
            keyed: dict[str, list[Shape]] = {}
            for s in getattr(self, role):
                keyed.setdefault(s.key, []).append(s)
            roles[role] = {k: tuple(v) for k, v in keyed.items()}
        object.__setattr__(self, "_roles", roles)

    def types(self, read: int | None = None) -> frozenset[str]:
        """The type keys of the vocabulary (and the document's), all or those read one way."""
        return self._types[read]

    def read(self, key: str) -> int:
        """How a line of ``key`` is read (``SKIP`` for a key the grammar does not know)."""
        return self._reads.get(key, SKIP)

    def role(self, role: str, key: str, data: Mapping[str, Any] | None) -> Shape | None:
        """The event's shape among the ``starts``, ``turns`` or ``terminal`` events, or ``None`` (found by key first:
        the engine asks for every event)."""
        for s in self._roles[role].get(key, ()):
            if s.fits(key, data):
                return s
        return None

    def shapes(self, key: str) -> tuple[Shape, ...]:
        """The vocabulary's shapes of ``key``."""
        return self._by_key.get(key, ())

    def explains(self, key: str, data: Mapping[str, Any] | None) -> Shape | None:
        """The vocabulary's shape this event is of (``data`` ``None``: judged by its key), or ``None``."""
        for s in self._by_key.get(key, ()):
            if s.fits(key, data):
                return s
        return None

    @property
    def answer_keys(self) -> frozenset[str]:
        """The keys of the lines that carry the answer, the document's included."""
        keys = {s.key for s in self.answer}
        if self.document is not None:
            keys.add(self.document.key)
        return frozenset(keys)

    @property
    def awaited(self) -> str:
        """The terminal event "stream ended before …" names."""
        return self.terminal[0].name if self.terminal else ""


def first_fit(shapes: Iterable[Shape], key: str, data: Mapping[str, Any] | None) -> Shape | None:
    """The first of ``shapes`` the event is of, or ``None``."""
    for s in shapes:
        if s.fits(key, data):
            return s
    return None


def _names(shapes: Iterable[Shape], last: str = "or") -> str:
    seen: list[str] = []
    for s in shapes:
        if s.said() not in seen:
            seen.append(s.said())
    if len(seen) < 2:
        return "".join(seen) or "—"
    return ", ".join(seen[:-1]) + f" {last} {seen[-1]}"


#: The header of :func:`ok_table`.
OK_TABLE_HEAD = (
    "| provider | a run starts at | `ok` needs (terminal event) | the answer | finished without one: not ok, with |\n"
    "|---|---|---|---|---|\n"
)


def ok_row(g: Grammar) -> str:
    """One grammar's row of the docs' "What ``ok`` means" table (Markdown)."""
    end = _names(g.terminal)
    if g.final:
        end += "; after " + _names(g.final) + ", the next event starts a new run"
    if g.document is not None:
        end += f"; its {g.document.said()} when that is the whole input"
    starts = _names(g.starts) if g.starts else "— (one run)"
    if g.turns:
        starts += "; after the end, " + _names(g.turns) + " begins a turn that must end too"
    answer = g.says_answer or _names(g.answer)
    return f"| {g.name} | {starts} | {end} | {answer} | {g.says_no_answer or '—'} |\n"


def ok_table(grammars: Iterable[Grammar]) -> str:
    """The docs' "What ``ok`` means" table, one row per grammar (Markdown)."""
    return OK_TABLE_HEAD + "".join(ok_row(g) for g in grammars)
