"""``python -m spoolparse`` is the ``spoolparse`` command; :func:`entry` is its console script."""

# No ``from __future__ import annotations`` here nor in the package's ``__init__``: ``--version`` loads these two
# modules and nothing else, not even ``__future__``.
import sys


def entry() -> int:
    """Load the command line with the ending signals held back, then run it."""
    if sys.argv[1:] == ["--version"]:  # the one answer that needs nothing loaded, not even the command line
        from . import __version__

        sys.stdout.write(f"spoolparse {__version__}\n")
        return 0
    from ._signals import deferred, interrupt_was_handled

    try:
        # A Ctrl-C raised inside the import machinery can be swallowed (a weakref callback there prints
        # "Exception ignored" and loading goes on, and so would the run): held back to the end of loading,
        # it is raised here instead.
        with deferred():
            from .cli import main
    except KeyboardInterrupt:  # nothing was started, so nothing to end
        interrupt_was_handled()
        return 130
    return main()


if __name__ == "__main__":
    raise SystemExit(entry())
