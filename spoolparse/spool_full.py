"""When a spool is full: over its cap (``max_spool_bytes``), at the file size limit the child inherits, or on a
filesystem with no room left; what such checks ask the kernel, shared by the checks of one pass.
"""

from __future__ import annotations

import os
import resource

__all__ = ["DiskFacts", "spool_problem"]


class DiskFacts:
    """What a full-spool check asks the kernel beyond the spools' sizes: the file size limit, whether we are
    root, and whether a spool filesystem has room. Taken when first asked and kept for the life of the
    object: one per pass over many children (a batch looks at all of them once a second) spares each child's
    check the same three system calls; one per check otherwise (then nothing is cached).
    """

    __slots__ = ("_fsize_limit", "_no_space", "_root")

    def __init__(self) -> None:
        self._fsize_limit: int | None = None
        self._root: bool | None = None
        self._no_space: dict[str, bool] = {}

    @property
    def fsize_limit(self) -> int:
        """The soft ``RLIMIT_FSIZE`` (the child inherits it)."""
        if self._fsize_limit is None:
            self._fsize_limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        return self._fsize_limit

    def no_space(self, fd: int, where: str) -> bool:
        """Whether the filesystem of ``fd`` (a spool in directory ``where``) has no free block for us."""
        full = self._no_space.get(where)
        if full is None:
            vfs = os.fstatvfs(fd)
            if self._root is None:
                self._root = os.geteuid() == 0
            # root may write into the reserved blocks, so only the truly free ones count for it
            free = vfs.f_bfree if self._root else vfs.f_bavail
            full = self._no_space[where] = free == 0 and vfs.f_blocks > 0
        return full


def spool_problem(
    fds: tuple[int, ...],
    max_bytes: int | None,
    *,
    thorough: bool = True,
    sizes: tuple[int, ...] | None = None,
    facts: DiskFacts | None = None,
    where: str = "",
) -> str | None:
    """Why the spool is full, or ``None``: over ``max_bytes`` together, or (``thorough``) a spool at the
    file size limit (``RLIMIT_FSIZE``, which the child inherits) or no room left on its filesystem.

    ``sizes``: the files' sizes, when the caller has just taken them (else taken only when a limit needs
    them). ``facts``: shared by the checks of one pass, with ``where`` the spools' directory."""
    if max_bytes is not None:
        if sizes is None:
            sizes = tuple(os.fstat(fd).st_size for fd in fds)
        if sum(sizes) > max_bytes:
            return f"max_spool_bytes {max_bytes} exceeded"
    if not thorough:
        return None
    if facts is None:
        facts = DiskFacts()
    # a child that ignores SIGXFSZ (Python does) just fails its writes with EFBIG: only the size tells
    limit = facts.fsize_limit
    if limit != resource.RLIM_INFINITY:
        if sizes is None:
            sizes = tuple(os.fstat(fd).st_size for fd in fds)
        if max(sizes, default=0) >= limit:
            return f"file size limit (RLIMIT_FSIZE) of {limit} bytes reached"
    if facts.no_space(fds[0], where):
        return "no space left on the spool filesystem"
    return None
