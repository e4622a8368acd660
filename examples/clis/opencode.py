"""opencode under spoolparse: the command line, and what you read from the outcome.

    python examples/clis/opencode.py "fix the failing test"

opencode prints no model; its usage is summed over the steps.
"""

import sys

import spoolparse

prompt = " ".join(sys.argv[1:]) or "Say hello."
argv = ["opencode", "run", "--format", "json", prompt]

with spoolparse.run(argv, timeout=900) as r:
    if not r.ok:
        sys.exit(f"opencode failed: {r.error}")
    print(r.text)
    print(f"session {r.session_id}")
    print(f"{r.usage.get('input_tokens', 0)} tokens in, {r.usage.get('output_tokens', 0)} out")
