"""Command-line entry point: `computefence ...`.

Exit codes: 0 no blockers; 1 blockers (or warnings with --fail-on warn); 2 usage or
configuration error; 130 interrupted.
"""

from __future__ import annotations

import gc
import re
import sys

import typer

from computefence.cli.app import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, app
from computefence.cli.help_layout import built_command
from computefence.errors import ComputeFenceError
from computefence.interrupt import ignore_from_now, said_interrupted, say_interrupted
from computefence.text import clean, clean_stderr

SHOWN_CHARS = 200

# An error quotes the value it is about; a 1 MB host name is shown by its start.
_LONG_WORD = re.compile(r"\S{%d,}" % (SHOWN_CHARS + 1))


def _cut_long_words(message: str) -> str:
    return _LONG_WORD.sub(lambda m: f"{m.group(0)[:SHOWN_CHARS]}...({len(m.group(0)) - SHOWN_CHARS} more)", message)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns (and in a console script, exits with) the exit code."""
    said_interrupted(forget=True)
    try:
        with clean_stderr():
            result = built_command(app)(args=argv, prog_name="computefence", standalone_mode=False)
        code = result if isinstance(result, int) else EXIT_OK
    except typer.Exit as exc:
        code = exc.exit_code
    except typer.Abort:
        code = EXIT_INTERRUPTED
    except typer.TyperException as exc:
        # typer vendors its own click; its usage errors (unknown flag, bad value) land here.
        show = getattr(exc, "show", None)
        if show is not None:
            show()
        else:
            print(f"computefence: error: {exc}", file=sys.stderr)
        code = EXIT_USAGE
    except ComputeFenceError as exc:
        print(f"computefence: error: {clean(_cut_long_words(str(exc)))}", file=sys.stderr)
        code = exc.exit_code
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    if code == EXIT_INTERRUPTED and not said_interrupted():
        # A Ctrl-C the command did not handle: typer returns 130 for it and prints nothing.
        say_interrupted()
    if argv is None:
        # A Ctrl-C up to here, even after the report is written, is exit 130: the user asked
        # to stop, so `computefence fleet check && launch` launches nothing (what was written
        # is complete and stays). From here the status is decided and the process leaves.
        ignore_from_now()
        # The interpreter's last collection at exit walks every object the run made (the
        # parsed facts of every pod, the models' validators): 0.1-0.7 s after doctor's or a
        # pool's report is out. Everything that must be finished is (the report written and
        # flushed, subprocesses reaped, temporary folders left to their atexit finalizers),
        # so the objects are frozen out of it.
        gc.freeze()
        sys.exit(code)
    return code
