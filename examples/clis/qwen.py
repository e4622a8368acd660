"""Qwen Code under spoolparse: the command line, and what you read from the outcome.

    python examples/clis/qwen.py "fix the failing test"

Qwen Code reports the model it was configured with.
"""

import sys

import spoolparse

prompt = " ".join(sys.argv[1:]) or "Say hello."
argv = ["qwen", "-p", prompt, "--output-format", "stream-json", "--yolo"]

with spoolparse.run(argv, timeout=900) as r:
    if not r.ok:
        sys.exit(f"qwen failed: {r.error}")
    print(r.text)
    print(f"model {r.model}, session {r.session_id}")
    print(f"{r.usage.get('input_tokens', 0)} tokens in, {r.usage.get('output_tokens', 0)} out")
