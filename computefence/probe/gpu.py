# Probe part: GPUs as nvidia-smi and /dev see them.

import os
import re
import shutil

from .core import _first_lines, _root, _run_command, _text, _time_left


_GPU_FIELDS = ("index", "name", "uuid", "driver_version", "memory.total", "memory.used", "compute_cap")


def _smi_value(value):
    value = value.strip()
    # "[N/A]", "[Not Supported]", "[Unknown Error]", "[Insufficient Permissions]" ...
    if not value or value == "N/A" or (value.startswith("[") and value.endswith("]")):
        return None
    return value


def _smi_int(value):
    value = _smi_value(value)
    try:
        return int(value.split()[0]) if value else None
    except ValueError:
        return None


def _parse_gpu_rows(text, fields):
    gpus = []
    for number, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        values = [part.strip() for part in line.split(",")]
        if len(values) > len(fields):
            # A comma inside the name: everything beyond the field count belongs to it.
            extra = len(values) - len(fields)
            values[1:2 + extra] = [", ".join(values[1:2 + extra])]
        if len(values) != len(fields):
            continue
        row = dict(zip(fields, values))
        index = _smi_int(row["index"])
        gpus.append({
            "index": number if index is None else index,
            "name": _text(row["name"], 256),
            "uuid": _smi_value(row["uuid"]),
            "memory_total_mib": _smi_int(row["memory.total"]),
            "memory_used_mib": _smi_int(row["memory.used"]),
            "compute_cap": _smi_value(row.get("compute_cap", "")),
            "driver_version": _smi_value(row["driver_version"]),
        })
    return gpus


def _device_nodes(params):
    dev_root = _root(params, "dev")
    try:
        names = [name for name in os.listdir(dev_root) if re.match(r"^nvidia[0-9]+$", name)]
    except OSError:
        return []
    return [os.path.join(dev_root, name) for name in sorted(names, key=lambda n: int(n[6:]))]


def _smi_failure(result, seconds):
    if result["timed_out"]:
        return "nvidia-smi did not answer within %.1fs" % seconds
    if result["error"]:
        return _text(result["error"], 300)
    return _first_lines(result["stdout"] + "\n" + result["stderr"])


def collect_gpu(params):
    facts = {"nvidia_smi_found": False, "nvidia_smi_path": None, "timed_out": False, "gpus": [],
             "device_nodes": _device_nodes(params)}
    smi = shutil.which("nvidia-smi")
    if not smi:
        return facts
    facts["nvidia_smi_found"] = True
    facts["nvidia_smi_path"] = _text(smi)
    fields = list(_GPU_FIELDS)
    seconds = _time_left(params)
    result = _run_command([smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"], seconds)
    output = result["stdout"] + result["stderr"]
    if result["exit_code"] not in (0, None) and "compute_cap" in output and "not a valid field" in output:
        # Drivers before R510 do not know compute_cap.
        fields.remove("compute_cap")
        seconds = _time_left(params)
        result = _run_command([smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"], seconds)
    facts["exit_code"] = result["exit_code"]
    facts["timed_out"] = result["timed_out"]
    if result["exit_code"] != 0:
        facts["error_output"] = _smi_failure(result, seconds)
        return facts
    gpus = _parse_gpu_rows(result["stdout"], fields)
    drivers = [gpu.pop("driver_version") for gpu in gpus]
    facts["gpus"] = gpus
    facts["driver_version"] = next((d for d in drivers if d), None)
    # The CUDA version the driver supports is only in the human-readable table.
    seconds = _time_left(params)
    table = _run_command([smi], seconds)
    if table["exit_code"] == 0:
        match = re.search(r"CUDA Version\s*:\s*([0-9][0-9.]*)", table["stdout"])
        facts["cuda_version"] = match.group(1) if match else None
        if not facts["driver_version"]:
            match = re.search(r"Driver Version\s*:\s*([0-9][0-9.]*)", table["stdout"])
            facts["driver_version"] = match.group(1) if match else None
    elif table["timed_out"]:
        facts["timed_out"] = True
        facts["error_output"] = "plain " + _smi_failure(table, seconds)
    return facts
