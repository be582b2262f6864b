"""Record the demo fleet for replay: `python3 bench/record_demo.py [DIR]` (a maintainer's
script: it sits outside the package, which only reads the recording).

Checks the demo fleet over SSH as `fleet check --demo` does and writes each pod's target,
status and probe output to DIR (default: computefence/demo/recordings/fleet), the recording
the replay tests serve. Record again when the probe or a demo pod changes what it reports;
tests/demo/test_demo_replay.py says when they drifted apart.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from computefence.connectors.replay import record_run
from computefence.connectors.ssh import RunOptions, probe_targets
from computefence.demo import DEMO_RECORDING
from computefence.demo.fleet import demo_fleet
from computefence.text import plural


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else DEMO_RECORDING
    with demo_fleet() as fleet:
        # The demo's own known_hosts vouches for every pod: nothing is trusted on first use.
        options = RunOptions(use_user_known_hosts=False, own_known_hosts=fleet.root / "own_known_hosts")
        hosts = asyncio.run(probe_targets(fleet.targets, options))
        for old in folder.glob("*.json"):
            old.unlink()
        record_run(folder, fleet.targets, hosts)
    print(f"recorded {plural(len(hosts), 'pod')} in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
