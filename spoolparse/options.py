"""One child's options, in one typed place: :class:`ChildOptions`.

Everything about one child is here: what its stdout is read as (provider,
bounds, decoder, whether an empty answer is ok), where its spools go and how
large they may grow, how it is contained, its deadlines, and what it is given
(input, working directory, environment). :func:`~spoolparse.run`,
:func:`~spoolparse.arun` and :func:`~spoolparse.open_run` take its fields as
keyword arguments (:class:`ChildKeywords`) and build one, as
:func:`subprocess.run` builds a :class:`subprocess.Popen`;
:class:`~spoolparse.process.Child` takes one. A batch's
:class:`~spoolparse.BatchOptions` holds every field (its per-task default,
:attr:`~spoolparse.BatchOptions.child`), and a task overrides fields of it.
Every field is checked here, once, before anything starts; defaults are named
in :mod:`spoolparse._limits`.
"""

from __future__ import annotations

import dataclasses
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Literal, TypedDict, TypeVar, Union

from . import _limits
from ._os.lifecycle import Deadlines, check_times
from .errors import UsageError
from .lines import Loads
from .providers import PROVIDERS, make_provider
from .providers.base import Provider

__all__ = ["ChildOptions", "ChildKeywords", "Input", "Containment"]

#: What a child is given on its stdin: bytes or text (UTF-8), a path, a binary file, or ``None`` (``/dev/null``).
Input = Union[bytes, bytearray, memoryview, str, "os.PathLike[str]", IO[bytes], None]
if TYPE_CHECKING:  # a cgroup is made by the caller: parsing alone never loads the cgroup machinery
    from ._os.cgroup import Cgroup
#: How a child is contained: ``"auto"`` (a cgroup of our own where one can be made, else its process group),
#: a cgroup made by the caller, or ``None`` (its process group alone).
Containment = Union["Cgroup", Literal["auto"], None]

_PROVIDER_NAMES = frozenset(["auto", "generic", *PROVIDERS])
_O = TypeVar("_O", bound="ChildOptions")


@dataclass(frozen=True, kw_only=True)
class ChildOptions:
    """Everything about one child: how its output is read, its spools, its containment, its time, its start.

    Every field has a default; :meth:`replace` changes some. A bad value is a
    :class:`~spoolparse.UsageError` when the options are made.
    """

    #: The stdout format: ``"auto"`` (detected from the first events), a provider's name, or a provider.
    provider: str | Provider = "auto"
    #: Where the spools go (``None``: ``$PDD_AGENT_SPOOL_DIR``, else the temp dir).
    spool_dir: str | os.PathLike[str] | None = None
    #: Longest line read whole (bytes); a longer one is classified by its type and drained.
    max_line: int = _limits.MAX_LINE
    #: Longest retained event kept (bytes); past it the line is dropped and reported.
    max_retained: int = _limits.MAX_RETAINED
    #: Kill the child once its stdout and stderr pass this many bytes (``None``: no cap but the disk's).
    max_spool_bytes: int | None = None
    #: Decodes the lines that are kept (default: orjson, integers of any size exact).
    loads: Loads | None = None
    #: Whether a run whose agent finished without an answer is ``ok``.
    allow_empty_answer: bool = False
    #: Characters of each tool's output a ``tool_end`` event carries (0: only its size).
    tool_output: int = 0
    #: How the child is contained (see :data:`Containment`). A batch contains its tasks by its ``enforce``.
    containment: Containment = "auto"
    #: Seconds from the start to SIGTERM (``None``: never).
    timeout: float | None = None
    #: Seconds from the start to ``soft_signal`` (once; ``None``: never).
    soft_timeout: float | None = None
    soft_signal: int = signal.SIGUSR1
    #: Seconds between SIGTERM and SIGKILL.
    grace: float = _limits.DEFAULT_GRACE
    #: The child's stdin (see :data:`Input`).
    input: Input = None
    #: The child's working directory (``None``: ours).
    cwd: str | bytes | os.PathLike[str] | os.PathLike[bytes] | None = None
    #: The child's whole environment (``None``: ours).
    env: Mapping[str, str] | None = None
    #: Run the command (one string) through ``/bin/sh``.
    shell: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.provider, str):
            if self.provider not in _PROVIDER_NAMES:
                make_provider(self.provider)  # its UsageError names the providers there are
        elif not isinstance(self.provider, Provider):
            raise UsageError(f"provider must be a provider's name or a Provider, not {type(self.provider).__name__}")
        for name in ("max_line", "max_retained", "tool_output"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                unit = "characters" if name == "tool_output" else "bytes"
                raise UsageError(f"{name} must be a whole number of {unit}, not {value!r}")
        if self.max_line < 1:
            raise UsageError(f"max_line must be at least 1 byte, not {self.max_line}")
        if self.max_retained < self.max_line:
            raise UsageError(f"max_retained ({self.max_retained}) must be at least max_line ({self.max_line})")
        if self.tool_output < 0:
            raise UsageError(f"tool_output must not be negative, not {self.tool_output}")
        if self.max_spool_bytes is not None and self.max_spool_bytes <= 0:
            raise UsageError(f"max_spool_bytes must be positive, not {self.max_spool_bytes}")
        check_times(self.timeout, self.grace, self.soft_timeout)  # the one rule for times
        for name in ("allow_empty_answer", "shell"):
            if not isinstance(getattr(self, name), bool):
                raise UsageError(f"{name} must be True or False, not {getattr(self, name)!r}")
        if self.containment is not None and self.containment != "auto" and not hasattr(self.containment, "dirs"):
            raise UsageError(f"containment must be 'auto', None or a cgroup, not {self.containment!r}")

    @property
    def deadlines(self) -> Deadlines:
        """The time policy of the child's lifecycle: timeout, grace, soft timeout and signal."""
        return Deadlines(timeout=self.timeout, grace=self.grace, soft_timeout=self.soft_timeout,
                         soft_signal=self.soft_signal)

    def replace(self: _O, **changes: Any) -> _O:
        """A copy with ``changes`` (checked as when made); an unknown name is a :class:`TypeError`."""
        return dataclasses.replace(self, **changes) if changes else self

    @classmethod
    def given(cls: type[_O], values: Mapping[str, Any]) -> _O:
        """Options made of those of ``values`` that are fields (a command line's, say), the others at their
        defaults; checked as when made."""
        return cls(**{f.name: values[f.name] for f in dataclasses.fields(cls) if f.name in values})

    @classmethod
    def of(cls: type[_O], options: _O | None, changes: Mapping[str, Any], *, caller: str) -> _O:
        """``options`` (default: all defaults) with the keyword arguments ``changes`` of ``caller`` applied."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise TypeError(f"{caller}() got an unexpected keyword argument {unknown[0]!r}")
        if options is not None and not isinstance(options, cls):
            raise TypeError(f"{caller}() options must be a {cls.__name__}, not {type(options).__name__}")
        return (options if options is not None else cls()).replace(**changes)


class ChildKeywords(TypedDict, total=False):
    """The fields of :class:`ChildOptions` as keyword arguments of :func:`~spoolparse.run`,
    :func:`~spoolparse.arun` and :func:`~spoolparse.open_run` (each documented there)."""

    provider: str | Provider
    spool_dir: str | os.PathLike[str] | None
    max_line: int
    max_retained: int
    max_spool_bytes: int | None
    loads: Loads | None
    allow_empty_answer: bool
    tool_output: int
    containment: Containment
    timeout: float | None
    soft_timeout: float | None
    soft_signal: int
    grace: float
    input: Input
    cwd: str | bytes | os.PathLike[str] | os.PathLike[bytes] | None
    env: Mapping[str, str] | None
    shell: bool

