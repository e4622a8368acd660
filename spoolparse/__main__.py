"""``python -m spoolparse`` is the ``spoolparse`` command."""

from .cli import main

raise SystemExit(main())
