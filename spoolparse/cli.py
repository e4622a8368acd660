"""The ``spoolparse`` command: JSON on stdout, one-line messages on stderr.

Exit status (see the README): 0 ok; the child's own non-zero code; 128+N when
signal N ended it; 124 timeout; 1 when the child exited 0 but the agent
reported an error; 2 usage error; 125 spool full; 126 the command could not
be executed; 127 the command was not found; 130 interrupted.
"""

from __future__ import annotations

import argparse
import errno
import os
import re
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, NoReturn

from . import __version__, _limits
from ._json import dumps
from .errors import Error, SpawnError, SpoolFullError, TimeoutExpired, UsageError
from .parser import parse
from .process import run
from .progress import follow
from .providers import names as provider_names
from .result import Result

__all__ = ["main", "build_parser", "parse_size", "parse_seconds", "EXIT_USAGE"]

EXIT_USAGE = 2
EXIT_SPOOL_FULL = 125
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127
EXIT_INTERRUPTED = 130

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``"16M"``, ``"64MiB"``, ``"4G"``, ``"1024"`` → bytes (powers of 1024)."""
    m = _SIZE.match(text)
    if m is None:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (try 16M, 64MiB, 4G)")
    number, unit = float(m.group(1)), m.group(2).lower()
    scale = {"": 1, "k": _limits.KiB, "m": _limits.MiB, "g": _limits.GiB, "t": _limits.GiB << 10}[unit]
    return int(number * scale)


def parse_seconds(text: str) -> float:
    """``"1.5"`` → 1.5 seconds; negative or non-numbers are argparse errors."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"seconds must not be negative: {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, never a usage block: scripts read stderr too.
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


RUN_EXAMPLES = """\
examples:
  spoolparse run -- codex exec --json "fix the bug"
  spoolparse run --timeout 900 -- claude -p --output-format stream-json --verbose "…"
  spoolparse run --input prompt.txt --spool-dir /scratch -- gemini -o stream-json
  spoolparse run -- python fixtures/fake_codex.py --size 256M
  spoolparse run --events --no-progress -- python fixtures/fake_codex.py --pause 0.1
"""

PARSE_EXAMPLES = """\
examples:
  spoolparse parse transcript.jsonl
  codex exec --json "…" | spoolparse parse -
  spoolparse parse --provider claude --max-line 4M run.jsonl
"""


def _add_bounds(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--provider",
        default="auto",
        choices=provider_names(),
        help="stdout format (default: auto, detected from the first events)",
    )
    p.add_argument(
        "--max-line",
        type=parse_size,
        default=_limits.MAX_LINE,
        metavar="SIZE",
        help="longest line read whole; longer lines are classified by type and drained (default: 16M)",
    )
    p.add_argument(
        "--max-retained",
        type=parse_size,
        default=_limits.MAX_RETAINED,
        metavar="SIZE",
        help="longest retained event kept; past it the line is dropped and reported (default: 64M)",
    )
    p.add_argument("--pretty", action="store_true", help="indent the JSON summary")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="spoolparse",
        description="Run JSON-lines agent CLIs, or parse their transcripts, with bounded memory; "
        "print one JSON summary (text, usage, model, session id, error).",
    )
    parser.add_argument("--version", action="version", version=f"spoolparse {__version__}")
    sub = parser.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=_Parser)

    r = sub.add_parser(
        "run",
        help="run CMD with stdout/stderr spooled to disk and print its answer",
        description="Run CMD with its stdout and stderr spooled to nameless files, parse stdout as it is "
        "written, and print one JSON summary on stdout.",
        epilog=RUN_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("--timeout", type=parse_seconds, metavar="S", help="SIGTERM the process group after S seconds")
    r.add_argument(
        "--grace", type=parse_seconds, default=_limits.DEFAULT_GRACE, metavar="S",
        help="seconds between SIGTERM and SIGKILL (default: 5)",
    )
    r.add_argument("--spool-dir", metavar="DIR", help="spool directory (default: $PDD_AGENT_SPOOL_DIR or the temp dir)")
    r.add_argument("--max-spool-bytes", type=parse_size, metavar="SIZE", help="kill the child past this much output")
    r.add_argument(
        "--input", metavar="FILE|-", help="the child's stdin: a file, or - for this stdin (default: /dev/null)"
    )
    r.add_argument("--cwd", metavar="DIR", help="the child's working directory")
    r.add_argument("--shell", action="store_true", help="run CMD (one string) through /bin/sh")
    r.add_argument(
        "--events", action="store_true", help="write each event as one NDJSON line to stderr as it happens"
    )
    r.add_argument("--events-file", metavar="FILE", help="write the NDJSON events to FILE instead (implies --events)")
    r.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=None,
        help="one live status line on stderr (default: on when stderr is a terminal)",
    )
    _add_bounds(r)
    r.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD [ARG ...]", help="the command to run")
    r.set_defaults(func=_cmd_run)

    p = sub.add_parser(
        "parse",
        help="parse a transcript already on disk (or stdin) and print its answer",
        description="Parse a JSON-lines transcript (a file, or - for stdin) and print one JSON summary.",
        epilog=PARSE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", metavar="FILE|-", help="the transcript, or - for stdin")
    _add_bounds(p)
    p.set_defaults(func=_cmd_parse)

    for register in EXTRA_COMMANDS:
        register(sub)
    parser.set_defaults(commands=sorted(sub.choices))
    return parser


#: Other modules add subcommands here (``register(subparsers)``), each setting ``func``.
EXTRA_COMMANDS: list[Callable[[Any], None]] = []


def _register_runner(sub: Any) -> None:
    from .runner.cli import register  # lazy: the runner's CLI imports this module

    register(sub)


EXTRA_COMMANDS.append(_register_runner)


def emit_json(obj: Any, *, pretty: bool = False, out: IO[bytes] | None = None) -> None:
    stream = out if out is not None else sys.stdout.buffer
    stream.write(dumps(obj, pretty=pretty) + b"\n")  # integers of any size, exactly
    stream.flush()


def _print_result(res: Result, args: argparse.Namespace) -> int:
    emit_json(res.summary(), pretty=args.pretty)
    if res.timed_out:  # exit 124 is ours, not the child's: say why, as for every other failure of ours
        fail(str(TimeoutExpired(res, res.timeout)))
    return res.exit_status()


def _cmd_run(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("run needs a command: spoolparse run [options] -- CMD [ARG ...]")
    if args.shell and len(command) != 1:
        raise UsageError("--shell takes the command as one string")
    inp: Any = None
    if args.input == "-":
        inp = sys.stdin.buffer
    elif args.input is not None:
        inp = Path(args.input)
    with follow(events=args.events, events_file=args.events_file, progress=args.progress) as (on_event, on_start):
        res = run(
            command[0] if args.shell else command,
            input=inp,
            timeout=args.timeout,
            grace=args.grace,
            cwd=args.cwd,
            shell=args.shell,
            provider=args.provider,
            spool_dir=args.spool_dir,
            max_line=args.max_line,
            max_retained=args.max_retained,
            max_spool_bytes=args.max_spool_bytes,
            keep_output=False,
            on_event=on_event,
            on_start=on_start,
        )
    return _print_result(res, args)


def _cmd_parse(args: argparse.Namespace) -> int:
    # anything readable: a file, a pipe or FIFO, /dev/stdin, <(…); a directory is not
    source: Any = sys.stdin.buffer if args.file == "-" else args.file
    if source is not sys.stdin.buffer:
        if not os.path.exists(source):
            raise UsageError(f"no such file: {args.file}")
        if os.path.isdir(source):
            raise UsageError(f"is a directory, not a transcript: {args.file}")
    res = parse(source, provider=args.provider, max_line=args.max_line, max_retained=args.max_retained)
    return _print_result(res, args)


def _show_warning(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
    sys.stderr.write(f"spoolparse: warning: {message}\n")


def fail(message: str) -> None:
    sys.stderr.write(f"spoolparse: error: {message}\n")
    sys.stderr.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``spoolparse`` command; returns the exit status."""
    warnings.showwarning = _show_warning
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        fail(f"a command is needed: {', '.join(args.commands)} (see 'spoolparse --help')")
        return EXIT_USAGE
    try:
        return int(args.func(args))
    except SpoolFullError as e:
        if e.result is not None:
            emit_json(e.result.summary(), pretty=getattr(args, "pretty", False))
        fail(str(e))
        return EXIT_SPOOL_FULL
    except SpawnError as e:
        fail(str(e))
        return EXIT_NOT_FOUND if e.errno == errno.ENOENT else EXIT_CANNOT_EXECUTE
    except UsageError as e:
        fail(str(e))
        return EXIT_USAGE
    except Error as e:
        fail(str(e))
        return 1
    except KeyboardInterrupt:
        fail("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 1
    except OSError as e:
        fail(f"{e.strerror or e}" + (f": {e.filename}" if e.filename else ""))
        return 1
    except Exception as e:
        if os.environ.get("SPOOLPARSE_DEBUG"):
            raise
        fail(f"internal error: {type(e).__name__}: {e} (set SPOOLPARSE_DEBUG=1 for a traceback)")
        return 70
