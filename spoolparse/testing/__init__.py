"""Tools for testing spoolparse against the real agent CLIs, offline.

* :mod:`.mockserver` — a local mock model server speaking just enough of the
  OpenAI Responses, Anthropic Messages, Gemini and OpenAI chat-completions APIs.
* :mod:`.clis` — the pinned CLI versions and their on-demand ``npm install``.
* :mod:`.harness` — one CLI × scenario run through ``spoolparse run`` against the mock,
  in a loopback-only network namespace where possible.

Standard library only; nothing here is imported by spoolparse itself, and the
submodules are imported by name (``from spoolparse.testing import harness``).
"""

from __future__ import annotations

__all__ = ["clis", "harness", "mockserver"]
