# Probe part: GPUs as nvidia-smi and /dev see them, their health (`nvidia-smi -q -x`), the
# fabric manager process and Xid lines of the kernel log.
#
# The CSV query stays the source of the GPU list: one fast call that every driver answers
# (compute_cap from R510), while -q -x takes seconds on 8 GPUs, renames its tags between
# driver releases and has no compute capability. -q -x adds the health facts and the CUDA
# version; the plain `nvidia-smi` table is read only when the XML did not give that.

import errno
import os
import re
import shutil
from xml.etree import ElementTree

from .core import _first_lines, _read_text, _root, _run_command, _text, _time_left

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
            values[1 : 2 + extra] = [", ".join(values[1 : 2 + extra])]
        if len(values) != len(fields):
            continue
        row = dict(zip(fields, values))
        index = _smi_int(row["index"])
        gpus.append(
            {
                "index": number if index is None else index,
                "name": _text(row["name"], 256),
                "uuid": _smi_value(row["uuid"]),
                "memory_total_mib": _smi_int(row["memory.total"]),
                "memory_used_mib": _smi_int(row["memory.used"]),
                "compute_cap": _smi_value(row.get("compute_cap", "")),
                "driver_version": _smi_value(row["driver_version"]),
            }
        )
    return gpus


def _device_nodes(params, prefix="nvidia"):
    """/dev/<prefix>N nodes in numeric order: GPUs (nvidia0...) or NVSwitches (nvidia-nvswitch0...)."""
    dev_root = _root(params, "dev")
    try:
        names = [name for name in os.listdir(dev_root) if re.match("^%s[0-9]+$" % re.escape(prefix), name)]
    except OSError:
        return []
    return [os.path.join(dev_root, name) for name in sorted(names, key=lambda n: int(n[len(prefix) :]))][:256]


def _smi_failure(result, seconds):
    if result["timed_out"]:
        return "nvidia-smi did not answer within %.1fs" % seconds
    if result["error"]:
        return _text(result["error"], 300)
    return _first_lines(result["stdout"] + "\n" + result["stderr"])


_SMI_XML_LIMIT = 16 * 1024 * 1024
_XML_NA = ("", "N/A", "n/a", "Unknown", "Unknown Error", "Not Supported", "Insufficient Permissions")


def _xml_text(node, path):
    if node is None:
        return None
    found = node.find(path)
    if found is None or found.text is None:
        return None
    value = " ".join(found.text.split())
    if value in _XML_NA or (value.startswith("[") and value.endswith("]")):
        return None
    return _text(value, 200)


def _xml_number(node, path, kind=int):
    value = _xml_text(node, path)
    if value is None:
        return None
    match = re.match(r"^[-+]?[0-9]+(\.[0-9]+)?", value)
    if not match:
        return None
    try:
        return kind(float(match.group(0))) if kind is int else kind(match.group(0))
    except ValueError:
        return None


def _xml_flag(node, path):
    value = _xml_text(node, path)
    if value is None:
        return None
    lowered = value.lower()
    if lowered in ("yes", "active", "enabled", "true"):
        return True
    if lowered in ("no", "not active", "disabled", "false"):
        return False
    return None


def _xml_first(node, paths, kind=None):
    for path in paths:
        value = _xml_number(node, path, kind) if kind else _xml_text(node, path)
        if value is not None:
            return value
    return None


def _clock_event_reasons(gpu):
    # Drivers before 535 call them throttle reasons; the children's names follow the parent's.
    for parent, prefix in (
        ("clocks_event_reasons", "clocks_event_reason_"),
        ("clocks_throttle_reasons", "clocks_throttle_reason_"),
    ):
        node = gpu.find(parent)
        if node is None:
            continue
        reasons = {}
        for child in list(node)[:32]:
            name = child.tag[len(prefix) :] if child.tag.startswith(prefix) else child.tag
            flag = _xml_flag(node, child.tag)
            if flag is not None and re.match(r"^[a-z0-9_]{1,64}$", name):
                reasons[name] = flag
        return reasons
    return {}


def _gpu_health(gpu, index):
    power = gpu.find("gpu_power_readings")
    if power is None:
        power = gpu.find("power_readings")
    retired = gpu.find("retired_pages")
    retired_counts = [
        _xml_number(retired, path)
        for path in ("multiple_single_bit_retirement/retired_count", "double_bit_retirement/retired_count")
    ]
    known = [count for count in retired_counts if count is not None]
    processes = gpu.find("processes")
    return {
        "index": index,
        "name": _xml_text(gpu, "product_name"),
        "pci_bus_id": _xml_text(gpu, "pci/pci_bus_id") or _text(gpu.get("id") or "", 64) or None,
        "ecc_mode": _xml_text(gpu, "ecc_mode/current_ecc"),
        "ecc_volatile_uncorrectable": _ecc_sum(gpu, "volatile", "uncorrectable"),
        "ecc_volatile_correctable": _ecc_sum(gpu, "volatile", "correctable"),
        "ecc_aggregate_uncorrectable": _ecc_sum(gpu, "aggregate", "uncorrectable"),
        "ecc_aggregate_correctable": _ecc_sum(gpu, "aggregate", "correctable"),
        "retired_pages": sum(known) if known else None,
        "retired_pages_pending": _xml_flag(retired, "pending_retirement"),
        "remapped_rows_correctable": _xml_number(gpu, "remapped_rows/remapped_row_corr"),
        "remapped_rows_uncorrectable": _xml_number(gpu, "remapped_rows/remapped_row_unc"),
        "remapped_rows_pending": _xml_flag(gpu, "remapped_rows/remapped_row_pending"),
        "remapped_rows_failure": _xml_flag(gpu, "remapped_rows/remapped_row_failure"),
        "clock_event_reasons": _clock_event_reasons(gpu),
        "utilization_pct": _xml_number(gpu, "utilization/gpu_util"),
        "processes": None if processes is None else len(processes.findall("process_info")),
        "pcie_gen_current": _xml_number(gpu, "pci/pci_gpu_link_info/pcie_gen/current_link_gen"),
        "pcie_gen_max": _xml_number(gpu, "pci/pci_gpu_link_info/pcie_gen/max_link_gen"),
        "pcie_width_current": _xml_number(gpu, "pci/pci_gpu_link_info/link_widths/current_link_width"),
        "pcie_width_max": _xml_number(gpu, "pci/pci_gpu_link_info/link_widths/max_link_width"),
        "power_draw_w": _xml_first(power, ("power_draw", "instant_power_draw", "average_power_draw"), float),
        # 535 renamed enforced_power_limit to current_power_limit.
        "power_limit_w": _xml_first(power, ("current_power_limit", "enforced_power_limit"), float),
        "power_limit_default_w": _xml_number(power, "default_power_limit", float),
        "power_limit_max_w": _xml_number(power, "max_power_limit", float),
        "temperature_c": _xml_number(gpu, "temperature/gpu_temp"),
        "temperature_slowdown_c": _xml_number(gpu, "temperature/gpu_temp_slow_threshold"),
        "persistence_mode": _xml_text(gpu, "persistence_mode"),
        "compute_mode": _xml_text(gpu, "compute_mode"),
        "mig_current": _xml_text(gpu, "mig_mode/current_mig"),
        "mig_pending": _xml_text(gpu, "mig_mode/pending_mig"),
        "fabric_state": _xml_text(gpu, "fabric/state"),
        "fabric_status": _xml_text(gpu, "fabric/status"),
    }


def _ecc_sum(gpu, scope, kind):
    """Volta and later: sram_/dram_<kind> counts; before: a <single_bit>/<double_bit> total."""
    node = gpu.find("ecc_errors/" + scope)
    if node is None:
        return None
    values = [_xml_number(node, child.tag) for child in list(node)[:64] if child.tag.endswith("_" + kind)]
    values.append(_xml_number(node, ("double_bit" if kind == "uncorrectable" else "single_bit") + "/total"))
    known = [value for value in values if value is not None]
    return sum(known) if known else None


def _parse_smi_xml(text):
    """(gpus, driver_version, cuda_version) from `nvidia-smi -q -x` output; raises ValueError."""
    # The DTD line names a file that is not there; entities and DTDs are never expanded.
    if "<!ENTITY" in text:
        raise ValueError("nvidia-smi XML declares entities")
    text = re.sub(r"<!DOCTYPE[^>\[]*>", "", text, count=1)
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        raise ValueError("nvidia-smi -q -x printed XML that does not parse (%s)" % exc)
    if root.tag != "nvidia_smi_log":
        raise ValueError("nvidia-smi -q -x printed <%s>, not <nvidia_smi_log>" % _text(root.tag, 40))
    # nvidia-smi's index is the order it lists the GPUs in, as in the CSV query.
    gpus = [_gpu_health(gpu, index) for index, gpu in enumerate(root.findall("gpu")[:64])]
    return gpus, _xml_text(root, "driver_version"), _xml_text(root, "cuda_version")


def _small_file(path):
    try:
        return _read_text(path, 256)
    except OSError:  # a process that exited, a file that is not there
        return ""


def _fabric_manager_running(params):
    """Whether nv-fabricmanager is in the process table; None when /proc cannot be listed.
    In a container only the container's processes show: the driver's fabric state decides there."""
    proc_root = _root(params, "proc")
    try:
        pids = [name for name in os.listdir(proc_root) if name.isdigit()]
    except OSError:
        return None
    return any(_small_file(os.path.join(proc_root, pid, "comm")).strip() == "nv-fabricmanager" for pid in pids[:100000])


_XID = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f:.]+)\): ([0-9]+)")
_KMSG_BYTES = 4 * 1024 * 1024
_XID_KEPT = 50


def _read_kmsg(path):
    """The kernel log's lines; /dev/kmsg hands one record per read, a plain file many."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    lines, total, tail = [], 0, ""
    try:
        while total < _KMSG_BYTES:
            try:
                chunk = os.read(fd, 65536)
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # records overwritten while reading: go on
                    continue
                if exc.errno == errno.EAGAIN:  # the end of the buffer
                    break
                raise
            if not chunk:
                break
            total += len(chunk)
            text = tail + chunk.decode("utf-8", "replace")
            parts = text.split("\n")
            tail = parts.pop()
            lines.extend(parts)
    finally:
        os.close(fd)
    if tail:
        lines.append(tail)
    return [line.split(";", 1)[-1] for line in lines]


def _kernel_log(params):
    """Recent Xid lines when the kernel log is readable without privileges; why not, if not."""
    path = os.path.join(_root(params, "dev"), "kmsg")
    try:
        lines = _read_kmsg(path)
    except OSError as exc:
        reason = "/dev/kmsg: %s" % (exc.strerror or exc)
        if _small_file(os.path.join(_root(params, "proc"), "sys", "kernel", "dmesg_restrict")).strip() == "1":
            reason += " (kernel.dmesg_restrict=1: reading it needs root or CAP_SYSLOG)"
        return {"readable": False, "reason": _text(reason, 300)}
    events = []
    for line in lines:
        match = _XID.search(line)
        if match:
            events.append({"code": int(match.group(2)), "pci_bus_id": match.group(1), "line": _text(line.strip(), 300)})
    return {"readable": True, "source": "/dev/kmsg", "xid_events": events[-_XID_KEPT:]}


def _smi_health(smi, params, facts):
    """Health facts from `nvidia-smi -q -x` into facts; health_error says why there are none."""
    seconds = _time_left(params)
    result = _run_command([smi, "-q", "-x"], seconds)
    if result["exit_code"] != 0:
        facts["health_error"] = "nvidia-smi -q -x: " + _smi_failure(result, seconds)
        return
    if len(result["stdout"]) > _SMI_XML_LIMIT:
        facts["health_error"] = "nvidia-smi -q -x printed over %d bytes" % _SMI_XML_LIMIT
        return
    try:
        health, driver, cuda = _parse_smi_xml(result["stdout"])
    except ValueError as exc:
        facts["health_error"] = _text(str(exc), 300)
        return
    facts["health"] = health
    if health and len(health) != len(facts["gpus"]):
        facts["health_error"] = "nvidia-smi -q -x lists %d GPUs, the query %d" % (len(health), len(facts["gpus"]))
    facts["cuda_version"] = cuda
    facts["driver_version"] = facts.get("driver_version") or driver


def collect_gpu(params):
    facts = {
        "nvidia_smi_found": False,
        "nvidia_smi_path": None,
        "timed_out": False,
        "gpus": [],
        "device_nodes": _device_nodes(params),
        "nvswitch_nodes": _device_nodes(params, "nvidia-nvswitch"),
    }
    smi = shutil.which("nvidia-smi")
    if not smi:
        return facts
    facts["nvidia_smi_found"] = True
    facts["fabric_manager_running"] = _fabric_manager_running(params)
    facts["kernel_log"] = _kernel_log(params)
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
    _smi_health(smi, params, facts)
    if facts.get("cuda_version"):
        return facts
    # Without the XML, the CUDA version the driver supports is only in the human-readable table.
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
