"""`python -m computefence`: the CLI, with a Ctrl-C during its imports (the first half second)
one line and exit 130 like any other interrupt, never a traceback."""

import os
import sys

try:
    from computefence.cli import main
except KeyboardInterrupt:
    print("computefence: interrupted", file=sys.stderr, flush=True)
    # Not sys.exit: an import cut short by the interrupt can leave CPython to report it at exit
    # as a death by SIGINT (-2) instead of 130. Nothing has been written yet.
    os._exit(130)

main()
