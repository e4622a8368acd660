"""Follow an agent's live events in asyncio, then take its result.

    python examples/live_asyncio.py

The agent is the bundled fake Codex; it pauses between events so you can watch them arrive.
"""

import asyncio
import sys
from pathlib import Path

import spoolparse

FAKE_CODEX = Path(__file__).resolve().parent.parent / "fixtures" / "fake_codex.py"


async def main() -> None:
    argv = [sys.executable, str(FAKE_CODEX), "--size", "16K", "--pause", "0.01"]
    async with spoolparse.open_run(argv, timeout=600) as run:
        async for ev in run.events():
            if ev.kind == "tool_start":
                print("tool:", ev.data["title"])
            elif ev.kind == "text":
                print("said:", ev.data["text"])
        with await run.wait() as result:
            print("ok:", result.ok, "answer:", result.text)


asyncio.run(main())
