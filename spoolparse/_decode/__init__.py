"""Decoding: JSON-lines bytes in, records out, and JSON out again (private; the public face is
:mod:`spoolparse.lines`).

The layer under the providers: it imports nothing of spoolparse above it (``_limits``, ``errors`` and
``_signals`` aside), and what it needs from above — a file to spill a long line into — is handed in.

* :mod:`.records` — the retain decisions and the records (``Event``, ``Noted``, ``Dropped``);
* :mod:`.probe` — a line's type key from its first bytes; :mod:`.topkeys` — from its top-level keys;
* :mod:`.reading` — a line's bytes to its object (orjson, then the lenient reader);
* :mod:`.scanner` — :class:`~.scanner.LineScanner`, a window at a time (:mod:`.window`) or line by line,
  a line the window cuts in a small state object (:mod:`.states`), a long kept one in pieces
  (:mod:`.longline`);
* :mod:`.document` — a whole JSON document instead of lines;
* :mod:`.jsonout` — any decoded value written back as JSON; :mod:`.ijson_lazy` — ijson, loaded on first use.
"""
