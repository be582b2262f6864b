"""The `computefence` command: the console script (pyproject's [project.scripts]) and
`python -m computefence`. A Ctrl-C while the CLI is still importing (up to a second on a busy
machine) is held until the imports are done, then is one line and exit 130 like any other
interrupt, never a traceback."""

import contextlib
import os
import sys


def run() -> None:
    # No pydantic plugin sees what the CLI validates (pods' facts, inventories, provider
    # answers: untrusted, some of it secret), as typer already keeps them from its own
    # parsing; nor does the CLI scan every installed package's entry points for them. (A
    # program that imports computefence as a library keeps its own choice.)
    os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"
    try:
        from computefence.interrupt import held, install_for_the_cli

        install_for_the_cli()
        with held():
            from computefence.cli import main
    except KeyboardInterrupt:
        print("computefence: interrupted", file=sys.stderr, flush=True)
        # Not sys.exit: an import cut short by the interrupt (before `held` is in place) can
        # leave CPython to report it at exit as a death by SIGINT (-2). Nothing is written yet.
        os._exit(130)
    try:
        main()
    except KeyboardInterrupt:
        # A Ctrl-C between the command's own handling and the exit: still one line and 130.
        from computefence.interrupt import said_interrupted, say_interrupted

        if not said_interrupted():
            say_interrupted()
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()  # what the command printed stands, as at any exit
        os._exit(130)


if __name__ == "__main__":
    run()
