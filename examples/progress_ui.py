"""A progress display for a batch, built on its live events: one line per task, redrawn as events arrive.

    python examples/progress_ui.py

Each line shows the task's tool calls so far and what it runs now; the totals line counts the outcomes.
"""

import sys
import threading
from pathlib import Path

import spoolparse
from spoolparse.runner import Batch

FAKE_CODEX = Path(__file__).resolve().parent.parent / "fixtures" / "fake_codex.py"
tasks = [spoolparse.Task(id=f"task-{n}", argv=[sys.executable, str(FAKE_CODEX), "--size", f"{8 * (n + 1)}K"])
         for n in range(3)]

lock = threading.Lock()  # events come from the batch's event thread, outcomes from the loop below
tools: dict[str, int] = {}
now: dict[str, str] = {}


def on_event(task: spoolparse.Task, ev: spoolparse.LiveEvent) -> None:
    with lock:
        if ev.kind == "tool_start":
            tools[str(task.id)] = tools.get(str(task.id), 0) + 1
            now[str(task.id)] = str(ev.data["title"])
        elif ev.kind == "text":
            now[str(task.id)] = "answered"


done = 0
with Batch(tasks, spoolparse.BatchOptions(max_concurrent=2)) as batch:  # run_many's local batch, typed
    batch.on_event = on_event
    for outcome in batch:
        done += 1
        with lock:
            print(f"{outcome.id}: {outcome.verdict}, {tools.get(outcome.id, 0)} tool calls, "
                  f"last: {now.get(outcome.id, '-')}")
        print(f"  done {done}/{len(tasks)}, running {batch.running}, queued {batch.queued}")
