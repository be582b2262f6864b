# Probe part: the --perf canary, GPU performance measured in the training interpreter's torch.
# Runs only with params["perf"], after the machine collectors, and never where a GPU holds
# other processes' memory (params["perf_busy_mib"], the evaluator's figure): it must not
# disturb a job.
# All GPUs' matmuls run side by side (each timed by its own CUDA events: >= 1 s of GPU time
# after a warm-up); copies and the all-reduce run one at a time. The all-reduce uses NCCL
# through torch.cuda.nccl in this one process (one rank per GPU would cost a CUDA start per
# GPU out of the 20 s); where NCCL cannot start, a peer-to-peer copy is timed instead.

from .core import _number, _text, _time_left
from .packages import _MARK, _ask_python, _python_of

# The canary's own clock, its `import torch` included.
_PERF_BUDGET_S = 20.0

_PERF_SCRIPT = r'''
import sys
sys.path = [p for p in sys.path if p not in ("", ".")]
import json
import time
started = time.time()
budget = float(sys.argv[1])
out = {"gpus": []}
def emit():
    out["duration_s"] = round(time.time() - started, 3)
    sys.stdout.write("\n" + MARK + json.dumps(out) + "\n")
    sys.stdout.flush()
def failure(exc):
    lines = [line for line in ("%s: %s" % (type(exc).__name__, exc)).splitlines() if line.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:500]
def left():
    return budget - (time.time() - started)
def timed(index, work):
    """GPU milliseconds `work` takes on device `index`, by CUDA events."""
    with torch.cuda.device(index):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        work()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)
try:
    import torch
    count = torch.cuda.device_count()
except BaseException as exc:
    out["error"] = failure(exc)
    emit()
    sys.exit(0)
SIZE = 8192
gpus = []
for index in range(count):
    entry = {"index": index}
    try:
        entry["name"] = str(torch.cuda.get_device_name(index))
        major = torch.cuda.get_device_capability(index)[0]
        dtype = torch.bfloat16 if major >= 8 else torch.float16
        entry["dtype"] = repr(dtype).replace("torch.", "")
        device = "cuda:%d" % index
        a = torch.randn(SIZE, SIZE, device=device, dtype=dtype)
        b = torch.randn(SIZE, SIZE, device=device, dtype=dtype)
        c = torch.empty(SIZE, SIZE, device=device, dtype=dtype)
        entry["_mats"] = (a, b, c)
    except Exception as exc:
        entry["error"] = failure(exc)
    gpus.append(entry)
ready = [g for g in gpus if "_mats" in g]
try:
    # Warm-up, then enough iterations for >= 1 s of GPU time, all GPUs at once.
    per_iteration = {}
    for g in ready:
        a, b, c = g["_mats"]
        per_iteration[g["index"]] = timed(g["index"], lambda: [torch.matmul(a, b, out=c) for _ in range(3)]) / 3.0
    events = {}
    for g in ready:
        a, b, c = g["_mats"]
        iterations = max(5, int(1200.0 / max(per_iteration[g["index"]], 1e-3)) + 1)
        with torch.cuda.device(g["index"]):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iterations):
                torch.matmul(a, b, out=c)
            end.record()
        events[g["index"]] = (start, end, iterations)
    for g in ready:
        start, end, iterations = events[g["index"]]
        end.synchronize()
        seconds = start.elapsed_time(end) / 1000.0
        g["matmul_tflops"] = round(2.0 * SIZE ** 3 * iterations / seconds / 1e12, 1)
except Exception as exc:
    for g in ready:
        g.setdefault("error", failure(exc))
for g in ready:
    g.pop("_mats", None)
torch.cuda.empty_cache()
COPY_BYTES = 256 * 1024 * 1024
for g in ready:
    if left() < 3 or "error" in g:
        continue
    try:
        index = g["index"]
        host = torch.empty(COPY_BYTES, dtype=torch.uint8, pin_memory=True)
        dev = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda:%d" % index)
        dev.copy_(host, non_blocking=True)
        for key, work in (("h2d_gbps", lambda: [dev.copy_(host, non_blocking=True) for _ in range(4)]),
                          ("d2h_gbps", lambda: [host.copy_(dev, non_blocking=True) for _ in range(4)])):
            g[key] = round(4.0 * COPY_BYTES / (timed(index, work) / 1000.0) / 1e9, 1)
        del host, dev
    except Exception as exc:
        g["error"] = failure(exc)
out["gpus"] = gpus
if len(ready) > 1 and left() > 3:
    elements = 64 * 1024 * 1024  # 256 MB of float32 per GPU
    try:
        tensors = [torch.empty(elements, dtype=torch.float32, device="cuda:%d" % g["index"]) for g in ready]
        torch.cuda.nccl.all_reduce(tensors)
        for index in range(len(ready)):
            torch.cuda.synchronize(ready[index]["index"])
        n = len(tensors)
        ms = timed(ready[0]["index"], lambda: [torch.cuda.nccl.all_reduce(tensors) for _ in range(5)])
        out["interconnect_method"] = "nccl-allreduce"
        out["interconnect_gbps"] = round(5.0 * elements * 4 * 2.0 * (n - 1) / n / (ms / 1000.0) / 1e9, 1)
    except Exception as exc:
        out["interconnect_error"] = "NCCL all-reduce: " + failure(exc)
        try:
            src = torch.empty(elements, dtype=torch.float32, device="cuda:%d" % ready[0]["index"])
            dst = torch.empty(elements, dtype=torch.float32, device="cuda:%d" % ready[1]["index"])
            dst.copy_(src)
            ms = timed(ready[1]["index"], lambda: [dst.copy_(src) for _ in range(4)])
            out["interconnect_method"] = "p2p-copy"
            out["interconnect_gbps"] = round(4.0 * elements * 4 / (ms / 1000.0) / 1e9, 1)
        except Exception as exc:
            out["interconnect_error"] += "; P2P copy: " + failure(exc)
emit()
'''.replace("MARK", repr(_MARK))


def _perf_skip(facts):
    """Why the canary must not run here, or None."""
    gpu = facts.get("gpu") or {}
    gpus = [g for g in gpu.get("gpus") or [] if isinstance(g, dict)]
    if not gpus:
        return "nvidia-smi lists no GPU"
    torch = facts.get("torch") or {}
    if not torch.get("cuda_available"):
        return "torch cannot use CUDA here"
    return None


def _perf_number(value):
    return round(float(value), 1) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def collect_perf(params):
    facts = params.get("_facts") or {}
    busy_mib = _number(params.get("perf_busy_mib"), 1024.0)
    gpus = [g for g in (facts.get("gpu") or {}).get("gpus") or [] if isinstance(g, dict)]
    busy = [g for g in gpus if (g.get("memory_used_mib") or 0) > busy_mib]
    if busy:
        held = ", ".join("GPU %s holds %s MiB" % (g.get("index"), g.get("memory_used_mib")) for g in busy)
        return {
            "ran": False,
            "skipped_reason": "other processes use the GPUs (%s); the canary never disturbs a running job" % held,
        }
    why = _perf_skip(facts)
    if why:
        return {"ran": False, "skipped_reason": why}
    python = _python_of(params)
    seconds = _time_left(params)
    budget = max(1.0, min(_PERF_BUDGET_S, seconds - 2.0))
    asked = _ask_python(python, [_PERF_SCRIPT, "%.1f" % budget], seconds, "the canary did not finish")
    answer = asked["answer"]
    if answer is None:
        return {"ran": True, "error": _text(asked["error"], 500)}
    out = {"ran": True, "duration_s": _perf_number(answer.get("duration_s")) or 0.0, "gpus": []}
    for entry in answer.get("gpus") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("index"), int):
            continue
        out["gpus"].append(
            {
                "index": entry["index"],
                "name": _text(entry["name"], 256) if isinstance(entry.get("name"), str) else None,
                "dtype": _text(entry["dtype"], 32) if isinstance(entry.get("dtype"), str) else None,
                "matmul_tflops": _perf_number(entry.get("matmul_tflops")),
                "h2d_gbps": _perf_number(entry.get("h2d_gbps")),
                "d2h_gbps": _perf_number(entry.get("d2h_gbps")),
                "error": _text(entry["error"], 500) if isinstance(entry.get("error"), str) else None,
            }
        )
    for key in ("error", "interconnect_method", "interconnect_error"):
        if isinstance(answer.get(key), str):
            out[key] = _text(answer[key], 500)
    out["interconnect_gbps"] = _perf_number(answer.get("interconnect_gbps"))
    return out
