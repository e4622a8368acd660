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
    import contextlib
    import os
    import signal

    from . import _LOADING_INTERRUPTED, _quit_while_loading
    from ._signals import command_process, deferred, interrupt_was_handled

    if signal.getsignal(signal.SIGINT) is _quit_while_loading:  # the package's, while it loaded: ours from now on
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        # A Ctrl-C raised inside the import machinery can be swallowed (a weakref callback there prints
        # "Exception ignored" and loading goes on, and so would the run): held back to the end of loading,
        # it is raised here instead.
        with deferred():
            from .cli import main
    except KeyboardInterrupt:  # nothing was started, so nothing to end
        interrupt_was_handled()
        with contextlib.suppress(OSError):
            os.write(2, _LOADING_INTERRUPTED)
        return 130
    command_process()  # this process ends with the command: a late signal cannot change its status
    return main()


if __name__ == "__main__":
    raise SystemExit(entry())
