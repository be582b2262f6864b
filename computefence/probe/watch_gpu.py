# Watch probe part: the GPUs over a short window. `nvidia-smi --query-gpu` a few times over
# about 3 s (one reading of utilization.gpu is one driver sample; a training step can fall
# between two of them), then the compute processes once. Read with --format=csv as printed
# (header with units, "[N/A]"), so columns are found by name whatever the driver's order.

import shutil
import time

from .core import _number, _run_command, _text, _time_left

_WATCH_GPU_QUERY = "index,uuid,utilization.gpu,memory.used,memory.total"
_WATCH_APPS_QUERY = "gpu_uuid,pid,used_memory"
# What the driver prints for a field it cannot give (MIG slices, WDDM, old boards).
_NOT_A_VALUE = ("[N/A]", "N/A", "[Not Supported]", "[Unknown Error]", "[Insufficient Permissions]")


def _csv_header_name(cell):
    """'utilization.gpu [%]' -> 'utilization.gpu'; 'used_gpu_memory [MiB]' -> 'used_gpu_memory'."""
    return cell.split(" [", 1)[0].strip()


def _csv_value(cell):
    cell = cell.strip()
    if cell in _NOT_A_VALUE or not cell:
        return None
    for unit in (" %", " MiB"):
        if cell.endswith(unit):
            return cell[: -len(unit)].strip()
    return cell


def _parse_smi_csv(text):
    """Rows of `nvidia-smi --query-*=... --format=csv` as dicts keyed by field name."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    names = [_csv_header_name(cell) for cell in lines[0].split(",")]
    rows = []
    for line in lines[1:]:
        cells = line.split(", ")
        if len(cells) != len(names):
            continue
        rows.append({name: _csv_value(cell) for name, cell in zip(names, cells)})
    return rows


def _int_or_none(value):
    number = _number(value, None)
    return None if number is None else int(number)


def _gpu_sample(row):
    return {
        "index": _int_or_none(row.get("index")),
        "uuid": _text(row["uuid"], 128) if row.get("uuid") else None,
        "utilization_pct": _number(row.get("utilization.gpu"), None),
        "memory_used_mib": _number(row.get("memory.used"), None),
        "memory_total_mib": _number(row.get("memory.total"), None),
    }


def collect_watch_gpu(params):
    facts = {"nvidia_smi_found": False, "samples": [], "apps": [], "error": None, "window_s": 0.0}
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return facts
    facts["nvidia_smi_found"] = True
    count = max(1, int(_number(params.get("gpu_samples"), 4)))
    window = max(0.0, _number(params.get("gpu_window_s"), 3.0))
    step = window / (count - 1) if count > 1 else 0.0
    started = time.time()
    for number in range(count):
        result = _run_command([smi, "--query-gpu=" + _WATCH_GPU_QUERY, "--format=csv"], min(5.0, _time_left(params)))
        if result["exit_code"] != 0:
            facts["error"] = _text(
                (result["stdout"] + result["stderr"]).strip()
                or result["error"]
                or ("timed out" if result["timed_out"] else "exit %s" % result["exit_code"]),
                300,
            )
            break
        rows = [_gpu_sample(row) for row in _parse_smi_csv(result["stdout"])]
        facts["samples"].append({"t": round(time.time() - started, 3), "gpus": rows})
        pause = started + step * (number + 1) - time.time()
        if number + 1 < count and pause > 0:
            if pause >= _time_left(params, reserve=1.5):
                break
            time.sleep(pause)
    facts["window_s"] = round(time.time() - started, 3)
    apps = _run_command(
        [smi, "--query-compute-apps=" + _WATCH_APPS_QUERY, "--format=csv"], min(5.0, _time_left(params))
    )
    if apps["exit_code"] == 0:
        for row in _parse_smi_csv(apps["stdout"])[:256]:
            facts["apps"].append(
                {
                    "gpu_uuid": _text(row["gpu_uuid"], 128) if row.get("gpu_uuid") else None,
                    "pid": _int_or_none(row.get("pid")),
                    "used_memory_mib": _number(row.get("used_gpu_memory"), None),
                }
            )
    return facts
