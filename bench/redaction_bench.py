"""Time `computefence.redaction.redact` on hostile inputs of growing size: linear or not.

    python3 bench/redaction_bench.py [--size 65536] [--steps 4]

Each input is built to make a backtracking pattern quadratic: one long word, `a=` repeated,
`x://` repeated with no `@`, `a:b,` repeated, `TOKEN=` repeated, unclosed quotes, and a mix of
real secrets, each after a prefix that makes every pass run (the cheap tests that skip a
pass on text with no `@`, no secret-like word and no key prefix all pass). For each, the time at SIZE, 2*SIZE, 4*SIZE ... characters: linear when each
doubling about doubles it. CPU seconds of the process, best of 3.
"""

from __future__ import annotations

import argparse
import time

from computefence.redaction import redact

SHAPES = {
    "one long word": "a",
    "name=": "a=",
    "scheme:// no @": "x://",
    "user:pass, no @": "a:b,",
    "TOKEN= repeated": "TOKEN=",
    "unclosed quotes": 'KEY="x ',
    "flags": "--token ",
    "hex": "0123456789abcdef",
    "mixed secrets": "HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUv https://u:p@h ",
}


# Holds `@`, a secret-like name and a key prefix, so that no pass is skipped.
EVERY_PASS = "password token@host hf_ rpa_ "


def _best(text: str) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        redact(text)
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=65536)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    sizes = [args.size * 2**i for i in range(args.steps)]
    print(f"{'input':<18}" + "".join(f"{size:>12,}" for size in sizes) + "   ratio last/first per size ratio")
    for label, unit in SHAPES.items():
        times = [_best(EVERY_PASS + (unit * (size // len(unit) + 1))[:size]) for size in sizes]
        growth = (times[-1] / times[0]) / (sizes[-1] / sizes[0]) if times[0] else 0.0
        print(f"{label:<18}" + "".join(f"{t * 1000:>10.1f}ms" for t in times) + f"   {growth:.2f}")


if __name__ == "__main__":
    main()
