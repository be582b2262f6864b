"""Capture a real GPU machine's driver and torch outputs as recordings, and compare them
with the hand-written ones (issue #10's real-GPU step).

Run it on the GPU machine, from a checkout, with the training interpreter:

    python3 bench/capture_gpu.py --python /path/to/venv/bin/python --out captured/

It writes, named after the GPU (e.g. `h100-80gb-hbm3x8`): `<name>.xml` (`nvidia-smi -q -x`),
`<name>.query.csv` (the probe's CSV query), `<name>.txt` (plain `nvidia-smi`) and
`<name>.facts.json` (the probe's facts with --perf). It then parses the captured XML with
the probe's parser and, for every hand-written recording of the same GPU model, prints the
health fields whose presence differs (a field the real driver reports that the recording
leaves unknown, or the other way round): those are parser or recording gaps to fix.
Nothing is installed or changed on the machine; the canary runs for up to 20 s.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from computefence.connectors.payload import parse_probe_output, probe_params  # noqa: E402
from computefence.models import CheckOptions  # noqa: E402
from computefence.probe.assemble import probe_payload  # noqa: E402
from computefence.probe.gpu import _GPU_FIELDS, _parse_smi_xml  # noqa: E402

RECORDINGS = REPO / "computefence" / "demo" / "recordings" / "nvidia-smi"


def _run(argv: list[str], stdin: str | None = None, timeout: float = 120) -> str:
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:3])} failed (exit {done.returncode}): {done.stderr.strip()[:300]}")
    return done.stdout


def _name(health: list[dict]) -> str:
    model = (health[0].get("name") or "gpu") if health else "gpu"
    slug = re.sub(r"[^a-z0-9]+", "-", model.lower().replace("nvidia", "").replace("geforce", "")).strip("-")
    return f"{slug}x{len(health)}"


def presence_differences(captured: dict, recorded: dict) -> list[str]:
    """Health fields one side knows and the other leaves unknown (None or empty)."""
    return sorted(
        key
        for key in captured
        if key != "index" and bool(captured[key] not in (None, {})) != bool(recorded.get(key) not in (None, {}))
    )


def compare(xml: str) -> list[str]:
    captured, _, _ = _parse_smi_xml(xml)
    lines = []
    for path in sorted(RECORDINGS.glob("*.xml")):
        recorded, _, _ = _parse_smi_xml(path.read_text(encoding="utf-8"))
        if recorded and captured and recorded[0].get("name") == captured[0].get("name"):
            differences = presence_differences(captured[0], recorded[0])
            lines.append(f"{path.name}: " + (", ".join(differences) if differences else "same fields known"))
    return lines or ["no hand-written recording of this GPU model"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default="python3", help="the training interpreter (torch is measured in it)")
    parser.add_argument("--out", type=Path, default=Path("captured"), help="folder for the captured files")
    args = parser.parse_args(argv)
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise SystemExit("nvidia-smi is not on PATH: run this on the GPU machine")
    xml = _run([smi, "-q", "-x"])
    query = _run([smi, "--query-gpu=" + ",".join(_GPU_FIELDS), "--format=csv,noheader,nounits"])
    table = _run([smi])
    health, _, _ = _parse_smi_xml(xml)
    name = _name(health)
    params = probe_params(CheckOptions(perf=True), python=args.python, deadline_s=60.0, timeouts={"perf": 40.0})
    facts = parse_probe_output(_run([sys.executable, "-"], probe_payload(params), timeout=150))
    args.out.mkdir(parents=True, exist_ok=True)
    for suffix, text in (
        (".xml", xml),
        (".query.csv", query),
        (".txt", table),
        (".facts.json", json.dumps(facts.model_dump(mode="json"), indent=1) + "\n"),
    ):
        (args.out / (name + suffix)).write_text(text, encoding="utf-8")
    print(f"captured {name} into {args.out}/")
    perf = facts.perf
    if perf is not None and perf.ran:
        for gpu in perf.gpus:
            print(
                f"GPU {gpu.index} {gpu.name}: {gpu.matmul_tflops} TFLOPS {gpu.dtype}, H2D {gpu.h2d_gbps} GB/s, "
                f"D2H {gpu.d2h_gbps} GB/s{' error: ' + gpu.error if gpu.error else ''}"
            )
        print(f"interconnect: {perf.interconnect_method} {perf.interconnect_gbps} GB/s {perf.interconnect_error or ''}")
    elif perf is not None:
        print(f"perf canary not run: {perf.skipped_reason or perf.error}")
    for line in compare(xml):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
