"""Which spools a batch's sample looks at, and which of them inotify watches.

A sample looks at every running child once a second; in between only at
those whose spools were written (an inotify watch on each spool whose child
has run :data:`WATCH_AFTER`), whose spools are not watched (young, or refused
a watch), that hold bytes not parsed yet, or whose memory limit is checked
by sampling: a quiet agent so costs nothing per sample. What a growing spool
holds is read every sample for a listener; with none, only to keep the parse
current: every ``UNWATCHED_READ_INTERVAL``, or at once when far behind
(``UNWATCHED_BACKLOG``). The tables hold only slots whose leader runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .. import _limits
from .._os.capabilities import Inotify, open_inotify

if TYPE_CHECKING:
    from .slot import Slot

__all__ = ["SpoolLooks", "WATCH_AFTER"]

#: Seconds a child runs before its spool is watched (inotify) instead of looked at every sample: a short
#: task never costs a watch, a long quiet one costs nothing between the once-a-second looks at all.
WATCH_AFTER = 1.0


class SpoolLooks:
    """The sample's tables over the loop's running set (by key), and the inotify instance of the watches."""

    def __init__(self, running: Mapping[int, Slot]) -> None:
        self._running = running
        #: Made at the first watch; ``None`` where inotify cannot be had (then every spool is looked at).
        self.ino: Inotify | None = None
        self._no_inotify = False
        self.watched: dict[int, Slot] = {}  # by watch descriptor
        self.looked: dict[int, Slot] = {}  # running slots whose spools are not watched: looked at every sample
        self.behind: dict[int, Slot] = {}  # slots whose spool holds bytes not parsed yet (read on read_all)
        self.far: dict[int, Slot] = {}  # of those, the ones found UNWATCHED_BACKLOG behind (read every sample)
        self.watchdogs: dict[int, Slot] = {}  # slots whose memory limit is checked every sample

    def add(self, s: Slot) -> None:
        """A child that started: looked at every sample until it is watched."""
        self.looked[s.key] = s
        if s.cg is None and s.limit is not None:
            self.watchdogs[s.key] = s

    def remove(self, s: Slot) -> None:
        """``s`` leaves the tables (its leader exited, or it is done)."""
        self.unwatch(s)
        for table in (self.looked, self.watchdogs, self.behind, self.far):
            if table.get(s.key) is s:
                del table[s.key]

    def everyone(self, now: float) -> list[Slot]:
        """The once-a-second sample: every running child (what the watches saw is looked at now anyway); the
        ones that have run :data:`WATCH_AFTER` are watched from now on."""
        slots = [s for s in self._running.values() if not s.child.life.leader_exited]
        if self.ino is not None:
            self.ino.drain()
            self.ino.overflowed = False
        self._watch(slots, now)
        return slots

    def changed(self, read_all: bool, now: float) -> list[Slot]:
        """The slots a sample between two looks at all looks at: those whose spools were written since the
        last sample, are not watched, hold bytes not parsed yet, or whose memory limit is checked. An unwatched
        one that has run :data:`WATCH_AFTER` is watched after this look, not at the next look at all (a child
        started just after one would be looked at every sample for a second more).

        Between two reads (not ``read_all``) a written spool is only noted as holding unread bytes, here, for
        the next read: the sample then visits only the slots that need it now (unwatched, far behind, under a
        watchdog, a cap on their spools to compare with), not every agent that wrote a line."""
        picked: dict[int, Slot] = {}
        if self.ino is not None:
            fired = self.ino.drain()
            if self.ino.overflowed:  # events were lost: any spool may have grown
                self.ino.overflowed = False
                picked = {k: s for k, s in self._running.items() if not s.child.life.leader_exited}
            else:
                watched = self.watched
                picked = {s.key: s for s in map(watched.get, fired) if s is not None}
        if read_all:
            picked.update(self.behind)
        else:
            self.behind.update(picked)
            # a cap on a spool is checked at every look: the written ones with a cap are looked at all the same
            picked = {**self.far, **{k: s for k, s in picked.items() if s.child.max_spool_bytes is not None}}
        picked.update(self.looked)
        picked.update(self.watchdogs)
        if self.looked:
            self._watch(list(self.looked.values()), now)
        return list(picked.values())

    def due(self, s: Slot, *, every: bool, read_all: bool) -> bool | None:
        """How a sample looks at the slot's spools: ``None``, not at all; ``False``, a look (sizes, the cap, the
        disk) without a read; ``True``, a read of what they hold too."""
        child = s.child
        # (what is known unread is as of its last look: one found far behind is read at every sample)
        far_behind = child.unread >= _limits.UNWATCHED_BACKLOG
        if not (every or read_all or far_behind) and s.wds and child.max_spool_bytes is None:
            return None  # watched, and not due for a read (a watchdog's): if it grew, changed() noted it
        # a quiet unwatched child costs one fstat call; once a second every spool is looked at all the same
        # (a full disk fails a child's writes without growing its spool)
        if not child.has_news() and not every:
            self.behind.pop(s.key, None)  # nothing unread
            self.far.pop(s.key, None)
            return None
        return every or read_all or child.unread >= _limits.UNWATCHED_BACKLOG

    def looked_at(self, s: Slot) -> None:
        """After a look: what is left to read is read at the next read_all sample, or at the next sample when far
        behind."""
        unread = s.child.unread
        if unread:
            self.behind[s.key] = s
        else:
            self.behind.pop(s.key, None)
        if unread >= _limits.UNWATCHED_BACKLOG:
            self.far[s.key] = s
        else:
            self.far.pop(s.key, None)

    def _watch(self, slots: list[Slot], now: float) -> None:
        """Watch the spools of the slots that have run :data:`WATCH_AFTER` (from then on a sample looks at
        them only when they were written); where inotify is missing or refuses, they stay looked at."""
        if self._no_inotify:
            return
        for s in slots:
            if s.wds or s.watch_failed or now - s.started < WATCH_AFTER or self.looked.get(s.key) is not s:
                continue
            if self.ino is None:
                self.ino = open_inotify()
                if self.ino is None:
                    self._no_inotify = True
                    return
            child = s.child
            assert child.stderr is not None
            # a cap on the spools counts stderr too: its writes must wake a look as well
            fds = [child.stdout.fileno()]
            if child.max_spool_bytes is not None:
                fds.append(child.stderr.fileno())
            wds: list[int] = []
            try:
                for fd in fds:
                    wds.append(self.ino.watch(fd))
            except OSError:  # the watch limit (max_user_watches): looked at every sample, as before
                for wd in wds:
                    self.ino.unwatch(wd)
                s.watch_failed = True
                continue
            s.wds = tuple(wds)
            for wd in wds:
                self.watched[wd] = s
            del self.looked[s.key]
            # written between its last look and the watch: it is looked at in this sample all the same

    def unwatch(self, s: Slot) -> None:
        """The slot's watches go (before its spools close: a watch pins a spool's inode)."""
        if s.wds and self.ino is not None:
            for wd in s.wds:
                self.ino.unwatch(wd)
                if self.watched.get(wd) is s:
                    del self.watched[wd]
        s.wds = ()

    def close(self) -> None:
        """The instance and its watches go: none pins a spool once the children are closed."""
        if self.ino is not None:
            self.ino.close()
            self.ino = None
        self.watched.clear()
