"""Reading ``/proc``: the one place that walks every process's ``stat`` line."""

from __future__ import annotations

import os
from collections.abc import Iterator

__all__ = ["proc_stats"]


def proc_stats() -> Iterator[tuple[int, list[bytes]]]:
    """``(pid, fields)`` for every process we can read; ``fields`` start at the state.

    So ``fields[0]`` is the state, ``[1]`` the parent pid, ``[2]`` the process
    group, ``[21]`` the RSS in pages (``man 5 proc`` numbering less 3).
    Processes that vanish while we read are skipped.
    """
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        # the command name may hold spaces and parentheses: split after the last ')'
        yield int(name), data[data.rfind(b")") + 2 :].split()
