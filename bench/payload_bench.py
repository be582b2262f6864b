"""What the probe costs on the wire: bytes per pod with and without a dataset, and the parts' sizes.

Prints the line count of every probe part, then for each kind of check the parts it sends, the
script's size and what `fleet check` writes to each pod's stdin (probe_wire: the script in three
zlib streams). "every part" is the whole probe, which every pod got before the payload carried
only the parts its parameters need (#20). No timing: sizes are exact and the same on every run.

    python3 bench/payload_bench.py
"""

from __future__ import annotations

import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from computefence.connectors.payload import probe_params
from computefence.models import CheckOptions
from computefence.probe import PARTS, assemble

PARTS_DIR = Path(assemble.__file__).resolve().parent


def main() -> int:
    print(f"{'part':<16} {'lines':>6}")
    for name in PARTS:
        lines = len((PARTS_DIR / f"{name}.py").read_text(encoding="utf-8").splitlines())
        print(f"{name:<16} {lines:>6}")
    print()
    plain = CheckOptions(output_dir="/workspace/checkpoints")
    with_dataset = CheckOptions(output_dir="/workspace/checkpoints", dataset="/workspace/data/train.jsonl")
    # What a policy's `job: {model: ...}` adds to the parameters (computefence/run.py).
    model = {"job_model": {"ref": "Qwen/Qwen2.5-7B"}}
    kinds = {
        "no dataset": (plain, {}),
        "with a dataset": (with_dataset, {}),
        "with a job model": (plain, model),
        "dataset + model": (with_dataset, model),
    }
    print(f"{'check':<16} {'parts':>5} {'script bytes':>13} {'wire bytes/pod':>15}")
    for label, (options, extra) in kinds.items():
        params = probe_params(options, "python3", deadline_s=60.0, **extra)
        parts = assemble.probe_parts(params)
        script = assemble.probe_payload(params).encode("utf-8")
        print(f"{label:<16} {len(parts):>5} {len(script):>13,} {len(assemble.probe_wire(params)):>15,}")
    # The whole probe with the no-dataset parameters, as probe_wire sends it: what every pod got before.
    params = probe_params(plain, "python3", deadline_s=60.0)
    line = assemble._params_line(params)
    head, tail = assemble._compressed_source(PARTS)
    wire = head + zlib.compress(line.encode("utf-8"), 9) + tail
    script = assemble.probe_source(PARTS).replace(assemble._PARAMS_LINE, line, 1).encode("utf-8")
    print(f"{'every part':<16} {len(PARTS):>5} {len(script):>13,} {len(wire):>15,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
