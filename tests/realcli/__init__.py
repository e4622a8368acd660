"""The real-CLI conformance suite: the real agent CLIs run offline against a mock model server.

Its support modules live with the tests (they are not part of the installed package):

* :mod:`.mockserver` — a local mock model server speaking just enough of the
  OpenAI Responses, Anthropic Messages, Gemini and OpenAI chat-completions APIs.
* :mod:`.clis` — the pinned CLI versions and their on-demand ``npm install``.
* :mod:`.harness` — one CLI × scenario run through ``spoolparse run`` against the mock,
  in a loopback-only network namespace where possible.

Standard library only; nothing here is imported by spoolparse itself. Import
the submodules by name (``from tests.realcli import harness``) from the
repository's root, as pytest does.
"""

from __future__ import annotations

__all__ = ["clis", "harness", "mockserver"]
