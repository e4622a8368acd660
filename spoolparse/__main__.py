"""``python -m spoolparse`` is the ``spoolparse`` command."""

try:
    from .cli import main
except KeyboardInterrupt:  # Ctrl-C while the command loads: nothing was started, so nothing to end
    from ._signals import interrupt_was_handled

    interrupt_was_handled()
    raise SystemExit(130) from None

raise SystemExit(main())
