"""`python -m computefence`: the CLI, with a Ctrl-C during its imports (the first half second)
one line and exit 130 like any other interrupt, never a traceback."""

import sys

try:
    from computefence.cli import main
except KeyboardInterrupt:
    print("computefence: interrupted", file=sys.stderr)
    sys.exit(130)

main()
