"""Cursor CLI under spoolparse: the command line, and what you read from the outcome.

    python examples/clis/cursor.py "fix the failing test"

Cursor prints no usage; its answer is every text delta joined.
"""

import sys

import spoolparse

prompt = " ".join(sys.argv[1:]) or "Say hello."
argv = ["cursor-agent", "-p", prompt, "--output-format", "stream-json", "--force"]

with spoolparse.run(argv, timeout=900) as r:
    if not r.ok:
        sys.exit(f"cursor-agent failed: {r.error}")
    print(r.text)
    print(f"model {r.model}, session {r.session_id}")
