"""Every bound and default of spoolparse, in one place.

The docs' table of bounds (docs/reference/bounds.md) is checked against these names; change a
number here and the docs test fails until the docs say the same.
"""

from __future__ import annotations

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

#: Longest line read whole before it is classified as oversize (the "cap").
MAX_LINE = 16 * MiB
#: Longest *retained* line kept in memory; past it even a retained line is drained.
MAX_RETAINED = 64 * MiB
#: Longest task line ``batch`` reads (a task with its prompt in its argv); a longer one is
#: drained in steps of this size and becomes that task's error outcome.
MAX_TASK_LINE = 8 * MiB
#: A kept line held in memory up to this size; past it the rest goes to an unlinked temporary file and
#: the line is decoded from there in pieces, so that it peaks near the size of its text, not 3x the line.
SPILL_BYTES = 4 * MiB
#: A string in such a line longer than this (raw bytes) is decoded a piece at a time into its final ``str``.
LONG_STRING = 256 * KiB
#: How much of a line's start the type probe may look at.
PROBE_BYTES = 64 * KiB
#: How much of a line's start the fast type match looks at.
FAST_PROBE_BYTES = 256
#: Read window when following or parsing a spool.
READ_CHUNK = 1 * MiB
#: Window ``parse`` maps of a file on disk, unmapped before the next: mapped pages
#: count in RSS as they are touched. A multiple of any mmap granularity.
MAP_WINDOW = 8 * MiB
#: Bytes parsed between two looks at the clock by a pump with a deadline (a few milliseconds of the smallest
#: events): a backlog of small events can take seconds to parse, and a timeout must not wait for it.
PARSE_SLICE = 64 * 1024
#: Seconds of parsing a batch's loop turn, or an asyncio run's step, spends on spools at most before it looks
#: at its deadlines again (and lets other runs on the event loop go on); the rest waits for the next one.
PARSE_BUDGET = 0.02
#: Live events a batch or a run keeps waiting for a slow listener (``on_event``) before it parses no more
#: output until the listener catches up (the spools hold what is not parsed yet).
EVENT_BACKLOG = 1000
#: Bytes of output the live events waiting for a slow listener may have come from (large events, an agent's
#: long messages, add up by size, not by count).
EVENT_BACKLOG_BYTES = 16 * MiB
#: Seconds a batch or a run that ends waits for its listener to finish the event it is in (a write cut short
#: at exit would leave the events' stream with half a line).
EVENT_JOIN = 5.0
#: Bytes parsed per step while following a child, between checks of its exit,
#: its timeout and its spool size: a fast writer overshoots a limit by at most this.
FOLLOW_STEP = 8 * MiB
#: Bytes of the child's stderr kept in the summary (the tail).
STDERR_TAIL = 8 * KiB
#: Records kept in ``dropped`` and ``warnings``; past these only counts grow.
MAX_DROPPED_RECORDS = 1000
MAX_WARNINGS = 200
#: Bytes (as JSON) of the raw usage of a stream's earlier runs that ``raw_usage`` keeps, first runs first (and at
#: most MAX_WARNINGS of them); the last run's is always kept, the rest are counted in a warning.
EARLIER_USAGE_BYTES = 1 * MiB
#: Longest warning or error text kept (characters).
MAX_MESSAGE_CHARS = 64 * KiB
#: Seconds between SIGTERM and SIGKILL.
DEFAULT_GRACE = 5.0
#: Share of the host's memory above which ``batch`` starts no task (``stop_at``, ``--stop-at``).
STOP_AT = 0.85
#: Share above which ``batch`` kills its youngest task and requeues it (``kill_at``, ``--kill-at``).
KILL_AT = 0.95
#: Starts again of a task killed for host memory pressure (``requeues``, ``--requeues``).
REQUEUES = 2
#: Seconds before a requeue or retry, doubled for each one after (``retry_backoff``).
RETRY_BACKOFF = 1.0
#: Seconds between a batch's memory samples, spool pumps and watchdog checks (``sample_interval``).
SAMPLE_INTERVAL = 0.1
#: Seconds a live follower lets a writing child write on before it is woken again: one read then takes many
#: lines instead of a wake-up per write (a steady writer would otherwise keep a core busy); it delays a live
#: event by at most this much, never an exit or a timeout.
READ_GAP = 0.005
#: Seconds between a batch's reads of a growing spool when no one listens to live events (every
#: ``SAMPLE_INTERVAL`` when someone does): what is read then only keeps the parse current, so that the rest
#: is short when the child exits. A spool found further behind than ``UNWATCHED_BACKLOG`` is read at every
#: sample until it has caught up (a batch finds that out at a sample while the spool is unwatched, at its
#: next read once it is watched).
UNWATCHED_READ_INTERVAL = 0.5
#: Unread bytes of a spool past which a batch reads it at every sample, listener or not (see above).
UNWATCHED_BACKLOG = 1 * MiB
#: A spool larger than this is closed by a background thread (:func:`spoolparse.spool.close_spool`):
#: freeing a large file's blocks can keep ``close`` busy for a long time, and the thread closing it may be
#: supervising other children. A smaller one is closed at once (about 0.1 ms at 1 MiB).
CLOSE_INLINE_BYTES = 1 * MiB
#: Emptied spools kept open for reuse (:func:`spoolparse.spool.recycle_spool`): a new one costs an inode.
SPOOL_POOL = 64
#: Spools waiting for the background close past which a batch starts no task until the closer catches up
#: (each holds a descriptor and its disk space). Whoever closes one never waits for it.
CLOSING_MAX = 64
#: Seconds between a batch's looks at every child's lifecycle whatever woke it (a safety net: exits wake
#: the loop through pidfds, deadlines through its timer heap).
LOOK_ALL_INTERVAL = 1.0
#: Seconds between memory readings of a task with no memory limit of its own (its cgroup's usage, or its
#: process tree in ``/proc``): they only feed admission and peaks. Near ``stop_at``, every sample interval.
MEMORY_SAMPLE_INTERVAL = 1.0
#: Seconds between a child's checks for a full disk and the file size limit (a child failing its writes
#: stops growing its spool, so nothing is lost by looking once a second); ``max_spool_bytes`` is checked on
#: every read.
SPOOL_CHECK_INTERVAL = 1.0
#: Seconds between SIGTERM and SIGKILL after Ctrl-C in the parent.
INTERRUPT_GRACE = 0.5
#: How many times an interrupted run's cleanup begins again when a signal comes just before it holds the
#: signals (each try needs a signal of its own: a storm of them cannot keep it from ending).
CLEANUP_TRIES = 8
#: Seconds a wait of the main thread (for an outcome, for a listener) lasts at most before it looks again:
#: the kernel may hand a process's SIGINT or SIGTERM to another thread, whose handler only sets a flag the
#: main thread sees when it next runs Python (a lock's wait is interrupted only by a signal to its own thread).
SIGNAL_SLICE = 0.2
#: Seconds a halted batch waits for the input's next task to give it its ``skipped`` outcome; an input that
#: pauses longer (an endless producer) is read no further.
HALT_INPUT_WAIT = 1.0
#: Polling interval bounds (seconds): the back-off during a kill's grace and, where
#: inotify is missing, while following a silent child (capped at POLL_IDLE then).
POLL_MIN = 0.001
POLL_MAX = 0.05
POLL_IDLE = 0.25
#: Longest sleep while following a silent child that inotify and a pidfd watch:
#: a safety net, since a write or the child's exit wakes the follower at once.
IDLE_WAKE = 1.0
#: Bytes of a noted line's start and end (a tool call or result, a stream delta) its
#: live event is read from; the rest of the line, its output, is never copied or decoded.
NOTE_HEAD = 8 * KiB
NOTE_TAIL = 512
#: Longest tool title (command line, path, query) in a live event (characters).
MAX_TITLE_CHARS = 200
#: Tool calls remembered between their start and end, to pair them; past it the oldest is forgotten.
MAX_OPEN_CALLS = 256
#: Events some grammar claims that auto-detection holds, undecided, before it settles with the evidence so far
#: (lines no grammar claims count only while none is claimed); what it holds is bounded by max_retained bytes too.
DETECT_EVENTS = 16
#: Size of the buffer used to copy a non-file ``input`` into its spool.
INPUT_CHUNK = 1 * MiB
#: Processes (and threads) one task's cgroup may hold at once (``pids.max``): a fork
#: bomb stops there. ``pids_max=None`` lifts it.
PIDS_MAX = 512
