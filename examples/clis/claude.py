"""Claude Code under spoolparse: the command line, and what you read from the outcome.

    python examples/clis/claude.py "fix the failing test"

Claude Code reports the model, the session and the cost.
"""

import sys

import spoolparse

prompt = " ".join(sys.argv[1:]) or "Say hello."
argv = ["claude", "-p", "--output-format", "stream-json", "--verbose", prompt]

with spoolparse.run(argv, timeout=900) as r:
    if not r.ok:
        sys.exit(f"claude failed: {r.error}")
    print(r.text)
    print(f"model {r.model}, session {r.session_id}")
    print(f"{r.usage.get('input_tokens', 0)} tokens in, {r.usage.get('output_tokens', 0)} out, "
          f"${r.usage.get('cost_usd', 0):.4f}")
