"""CPU time to judge one large pod answer: the demo's healthy pod grown to N GPUs, each with
its health entry (`nvidia-smi -q -x`) and a --perf canary figure.

    python3 bench/answer_bench.py            # 10,000 GPUs
    python3 bench/answer_bench.py --gpus 20000

Prints the answer's size and the CPU seconds (time.process_time) of parsing it
(parse_probe_output), evaluating it (evaluate_host) and building the fleet report
(build_report: the perf figures beside the fleet median). Judging should grow linearly with
the GPU count: run it at two sizes and compare.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from computefence import evaluate
from computefence.connectors.payload import parse_probe_output
from computefence.models import CheckOptions, HostReport, HostStatus

RECORDING = Path(__file__).resolve().parents[1] / "computefence/demo/recordings/fleet/1-pod-healthy.json"


def big_answer(gpus: int) -> str:
    facts = json.loads(json.loads(RECORDING.read_text())["probe_output"])
    name = "NVIDIA H100 80GB HBM3"
    facts["gpu"]["gpus"] = [
        {"index": i, "name": name, "compute_cap": "9.0", "memory_total_mib": 81559, "memory_used_mib": 0,
         "uuid": f"GPU-{i:08d}-0000-0000-0000-000000000000"}
        for i in range(gpus)
    ]  # fmt: skip
    facts["gpu"].pop("health_error", None)
    facts["gpu"]["health"] = [
        {"index": i, "name": name, "pci_bus_id": f"00000000:{i % 256:02X}:00.0", "ecc_mode": "Enabled",
         "ecc_volatile_uncorrectable": 0, "remapped_rows_pending": False, "pcie_gen_max": 5,
         "pcie_width_current": 16, "clock_event_reasons": {"hw_slowdown": False, "sw_thermal_slowdown": False}}
        for i in range(gpus)
    ]  # fmt: skip
    facts["perf"] = {
        "ran": True,
        "gpus": [
            {"index": i, "name": name, "dtype": "bfloat16", "matmul_tflops": 700.0, "h2d_gbps": 50.0, "d2h_gbps": 50.0}
            for i in range(gpus)
        ],
    }
    return json.dumps(facts)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, default=10_000)
    args = parser.parse_args()
    answer = big_answer(args.gpus)
    started = time.process_time()
    facts = parse_probe_output(answer)
    parsed = time.process_time()
    findings = evaluate.evaluate_host(facts, CheckOptions(perf=True), None, None)
    evaluated = time.process_time()
    host = HostReport(name="big", status=HostStatus.OK, facts=facts, findings=findings)
    evaluate.build_report([host, host.model_copy(update={"name": "big-2"})], kind="fleet")
    built = time.process_time()
    print(
        f"{args.gpus} GPUs, answer {len(answer) / 1e6:.1f} MB: parse {parsed - started:.2f} CPU-s, "
        f"evaluate {evaluated - parsed:.2f} CPU-s, report {built - evaluated:.2f} CPU-s, "
        f"total {built - started:.2f} CPU-s"
    )


if __name__ == "__main__":
    main()
