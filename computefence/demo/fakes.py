"""Fake `nvidia-smi` and `torch` that replay recorded outputs of real drivers and builds.

Tests and the `--demo` fleet use them to present GPU pods on machines without GPUs. A
scenario is chosen per pod by where its fakes are written, never by global state: put the
bin dir on that pod's PATH and the site dir on its PYTHONPATH. The fake torch finds "its
driver" the way real torch does, through the machine: it reads the state file that
write_fake_nvidia_smi leaves next to the first `nvidia-smi` on PATH, so torch sees the
same GPUs (filtered by CUDA_VISIBLE_DEVICES) as the fake driver reports. No fake driver on
PATH means no driver: a CUDA build then reports no devices, silently, like real torch.

The written files are standard-library Python that runs under Python 3.8 (pods run old
images); the recordings live in computefence/demo/recordings/.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from importlib import resources
from pathlib import Path
from typing import Any

DRIVER_STATE_FILE = "fake-nvidia-driver.json"
# Beside the fake nvidia-smi: what the GPUs are doing now (utilisation, memory, compute
# processes), read on every call so a test can change it while a pod runs. See write_gpu_activity.
GPU_ACTIVITY_FILE = "fake-nvidia-activity.json"

_RECORDINGS = resources.files("computefence.demo").joinpath("recordings")


def _recording(*parts: str) -> str:
    return _RECORDINGS.joinpath(*parts).read_text(encoding="utf-8")


_SMI_INDEX = {k: v for k, v in json.loads(_recording("nvidia-smi", "scenarios.json")).items() if not k.startswith("_")}
NVIDIA_SMI_SCENARIOS = tuple(_SMI_INDEX)

# The agreed name "cu118-no-sm90" predates checking the builds: official cu118 wheels do
# ship sm_90, so it replays the real build that lacks it, torch 1.13.1+cu117.
_TORCH_ALIASES = {"cu118-no-sm90": "cu117-no-sm90"}
TORCH_SCENARIOS = (
    "cu124",
    "cu121-h100",
    "cu117-no-sm90",
    "cu118-no-sm90",
    "cpu",
    "cu126-driver-too-old",
    "import-error",
    "hang-on-import",
)


def write_fake_nvidia_smi(bin_dir: Path, scenario: str) -> Path:
    """Write an executable `nvidia-smi` replaying `scenario` into bin_dir; returns its path."""
    if scenario not in _SMI_INDEX:
        raise ValueError(f"unknown nvidia-smi scenario {scenario!r}; known: {', '.join(NVIDIA_SMI_SCENARIOS)}")
    entry = _SMI_INDEX[scenario]
    data: dict[str, Any] = {"hang": bool(entry.get("hang"))}
    state: dict[str, Any] = {"scenario": scenario, "usable": False, "cuda_version": None, "devices": []}
    if "failure" in entry:
        data["failure"] = _recording("nvidia-smi", entry["failure"])
        data["exit_code"] = entry["exit_code"]
    elif not data["hang"]:
        fields = entry["fields"]
        rows = [
            [value.strip() for value in line.split(",")]
            for line in _recording("nvidia-smi", entry["query"]).splitlines()
            if line.strip()
        ]
        table = _recording("nvidia-smi", entry["table"]) if "table" in entry else None
        xml = _recording("nvidia-smi", entry["xml"]) if "xml" in entry else None
        data.update(fields=fields, rows=rows, table=table, xml=xml)
        cuda = re.search(r"CUDA Version:\s*(\S+)", table) if table else re.search(r"<cuda_version>([^<]+)<", xml or "")
        state.update(usable=True, cuda_version=cuda.group(1) if cuda else None)
        if "torch_warning" in entry:
            state["cuda_init_warning"] = _recording("torch", entry["torch_warning"]).strip()
        for row in rows:
            values = dict(zip(fields, row))
            state["devices"].append(
                {
                    "index": int(values["index"]),
                    "name": values["name"],
                    "uuid": values["uuid"],
                    "memory_total_mib": int(values["memory.total"]),
                    "capability": values.get("compute_cap") or entry["compute_cap"],
                }
            )
    bin_dir = Path(bin_dir)
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "nvidia-smi"
    script.write_text(
        _NVIDIA_SMI_SCRIPT.replace("@PYTHON@", sys.executable)
        .replace("@SCENARIO@", scenario)
        .replace("@DATA@", repr(json.dumps(data)))
        .replace("@ACTIVITY_FILE@", GPU_ACTIVITY_FILE),
        encoding="utf-8",
    )
    script.chmod(0o755)
    (bin_dir / DRIVER_STATE_FILE).write_text(json.dumps(state, indent=1) + "\n", encoding="utf-8")
    return script


def write_gpu_activity(
    bin_dir: Path,
    utilization: list[float | None],
    apps: list[dict[str, Any]] | None = None,
    memory_used_mib: list[float | None] | None = None,
) -> Path:
    """What the fake driver in bin_dir reports from now on: per GPU its utilisation (None
    prints [N/A], as MIG slices do) and memory used, and the compute processes, each
    {"pid": 1234, "gpu": 0, "used_memory_mib": 70000} (None prints [N/A], as WDDM and some
    containers do). Without the file the GPUs are idle (0 %, no processes)."""
    path = Path(bin_dir) / GPU_ACTIVITY_FILE
    document = {"utilization": utilization, "apps": apps or [], "memory_used_mib": memory_used_mib}
    path.write_text(json.dumps(document) + "\n", encoding="utf-8")
    return path


def write_fake_torch(site_dir: Path, scenario: str, canary: dict[str, Any] | None = None) -> Path:
    """Write a fake `torch` package (and its dist-info) for `scenario` into site_dir; returns the package dir.

    `canary` sets what the --perf canary measures on this pod's GPUs: {"tflops": 740.0 (or one
    figure per GPU), "h2d_gbps": 53.0, "d2h_gbps": 52.0, "allreduce_busbw_gbps": 470.0 (None:
    NCCL fails to start), "p2p_gbps": 40.0}. The fake GPU work takes no time: CUDA events
    report the time the figures imply, as real events report the GPU's time."""
    if scenario not in TORCH_SCENARIOS:
        raise ValueError(f"unknown torch scenario {scenario!r}; known: {', '.join(TORCH_SCENARIOS)}")
    spec = json.loads(_recording("torch", _TORCH_ALIASES.get(scenario, scenario) + ".json"))
    site_dir = Path(site_dir)
    site_dir.mkdir(parents=True, exist_ok=True)
    package = site_dir / "torch"
    # Rewriting a pod with another scenario replaces the previous fake entirely.
    shutil.rmtree(package, ignore_errors=True)
    for old in site_dir.glob("torch-*.dist-info"):
        shutil.rmtree(old, ignore_errors=True)
    recorded = (
        _TORCH_RECORDED.replace("@SPEC@", repr(json.dumps(spec, sort_keys=True)))
        .replace("@UNKNOWN_ERROR@", repr(_recording("torch", "unknown-error-warning.txt").strip()))
        .replace("@STATE_FILE@", repr(DRIVER_STATE_FILE))
        .replace("@CANARY@", repr(json.dumps(canary)))
    )
    files = {
        "__init__.py": _TORCH_INIT.replace("@SCENARIO@", scenario),
        "_recorded.py": recorded,
        "version.py": _TORCH_VERSION,
        "cuda/__init__.py": _TORCH_CUDA,
        "cuda/nccl.py": _TORCH_NCCL,
        "_canary.py": _TORCH_CANARY,
        "backends/__init__.py": "from torch.backends import cudnn  # noqa: F401\n",
        "backends/cudnn/__init__.py": _TORCH_CUDNN,
    }
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    dist_info = site_dir / f"torch-{spec['version']}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: torch\nVersion: {spec['version']}\n", encoding="utf-8"
    )
    return package


# ---------------------------------------------------------------- the written files

_NVIDIA_SMI_SCRIPT = """#!@PYTHON@
# Fake nvidia-smi (computefence.demo.fakes, scenario @SCENARIO@): replays recorded driver output.
import json
import os
import signal
import sys
import time

DATA = json.loads(@DATA@)
UNITS = {"memory.total": "MiB", "memory.used": "MiB", "memory.free": "MiB", "utilization.gpu": "%"}
ACTIVITY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "@ACTIVITY_FILE@")
# --query-compute-apps fields as the driver names them in its header.
APP_HEADERS = {"pid": "pid", "used_memory": "used_gpu_memory [MiB]", "gpu_uuid": "gpu_uuid", "process_name": "process_name"}


def activity():
    try:
        with open(ACTIVITY) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {"utilization": [], "apps": [], "memory_used_mib": None}


def live_value(field, index, row):
    # utilization.gpu and memory.used as the activity file has them now; None is [N/A].
    now = activity()
    if field == "utilization.gpu":
        values = now.get("utilization") or []
        return values[index] if index < len(values) else 0
    values = now.get("memory_used_mib") or []
    if index < len(values):
        return values[index]
    return row[DATA["fields"].index(field)]


def compute_apps(fields, units, header):
    for field in fields:
        if field not in APP_HEADERS:
            sys.stdout.write('Field "%s" is not a valid field to query.\\n\\n' % field)
            return 2
    if header:
        print(", ".join(APP_HEADERS[f] if units or f != "used_memory" else "used_gpu_memory" for f in fields))
    for app in activity().get("apps") or []:
        row = DATA["rows"][app.get("gpu", 0)]
        values = []
        for field in fields:
            if field == "pid":
                values.append(str(app["pid"]))
            elif field == "gpu_uuid":
                values.append(row[DATA["fields"].index("uuid")])
            elif field == "process_name":
                values.append(app.get("process_name", "python"))
            elif app.get("used_memory_mib") is None:
                values.append("[N/A]")
            else:
                values.append("%d%s" % (app["used_memory_mib"], " MiB" if units else ""))
        print(", ".join(values))
    return 0


def wants_xml(argv):
    return sorted(argv) in (["-q", "-x"], ["--query", "--xml-format"], ["--query", "-x"], ["--xml-format", "-q"])


def parse(argv):
    fields, fmt = None, None
    for arg in argv:
        if arg.startswith("--query-gpu=") or arg.startswith("--query-compute-apps="):
            fields = [f.strip() for f in arg.split("=", 1)[1].split(",") if f.strip()]
        elif arg.startswith("--format="):
            fmt = arg.split("=", 1)[1].split(",")
        else:
            return None, None
    return fields, fmt


def main(argv):
    if DATA["hang"]:
        # A wedged driver: SIGTERM is not enough, only SIGKILL ends the process.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(3600)
    if "failure" in DATA:
        sys.stdout.write(DATA["failure"])
        return DATA["exit_code"]
    if not argv or wants_xml(argv):
        output = DATA["xml"] if argv else DATA["table"]
        if output is None:
            sys.stderr.write("fake nvidia-smi: scenario @SCENARIO@ has no recording of `nvidia-smi %s`\\n" % " ".join(argv))
            return 2
        sys.stdout.write(output)
        return 0
    fields, fmt = parse(argv)
    if not fields or not fmt or "csv" not in fmt:
        sys.stderr.write("fake nvidia-smi: only plain `nvidia-smi`, `-q -x`, --query-gpu=... and --query-compute-apps=... --format=csv[,noheader][,nounits] are recorded\\n")
        return 2
    if any(arg.startswith("--query-compute-apps=") for arg in argv):
        return compute_apps(fields, "nounits" not in fmt, "noheader" not in fmt)
    for field in fields:
        if field not in DATA["fields"] and field not in ("utilization.gpu",):
            sys.stdout.write('Field "%s" is not a valid field to query.\\n\\n' % field)
            return 2
    units = "nounits" not in fmt
    if "noheader" not in fmt:
        print(", ".join(f + (" [%s]" % UNITS[f] if units and f in UNITS else "") for f in fields))
    for number, row in enumerate(DATA["rows"]):
        values = []
        for field in fields:
            if field in ("utilization.gpu", "memory.used"):
                value = live_value(field, number, row)
                if value is None:
                    values.append("[N/A]")
                    continue
                value = "%d" % value if isinstance(value, (int, float)) else value
            else:
                value = row[DATA["fields"].index(field)]
            values.append(value + " " + UNITS[field] if units and field in UNITS else value)
        print(", ".join(values))
    return 0


sys.exit(main(sys.argv[1:]))
"""

_TORCH_INIT = """# Fake torch (computefence.demo.fakes, scenario @SCENARIO@): replays a recorded torch build.
import time

from torch._recorded import SPEC

if SPEC.get("hang_on_import"):
    while True:
        time.sleep(3600)
if SPEC.get("import_error"):
    raise ImportError(SPEC["import_error"])

__version__ = SPEC["version"]

from torch import backends, cuda, version  # noqa: E402,F401
from torch._canary import bfloat16, empty, float16, float32, matmul, randn, uint8  # noqa: E402,F401
"""

_TORCH_RECORDED = """import json

SPEC = json.loads(@SPEC@)
UNKNOWN_ERROR_WARNING = @UNKNOWN_ERROR@
DRIVER_STATE_FILE = @STATE_FILE@
CANARY = json.loads(@CANARY@)
"""

_TORCH_VERSION = """from torch._recorded import SPEC

__version__ = SPEC["version"]
cuda = SPEC["cuda"]
hip = None
"""

_TORCH_CUDNN = """from torch._recorded import SPEC


def version():
    return SPEC["cudnn"]


def is_available():
    return SPEC["cudnn"] is not None
"""

_TORCH_NCCL = """from torch._recorded import SPEC


def version():
    if SPEC["nccl"] is None:
        raise AttributeError("module 'torch._C' has no attribute '_nccl_version'")
    return tuple(SPEC["nccl"])


def all_reduce(inputs, outputs=None, op=0, streams=None, comms=None):
    from torch._canary import all_reduce as run
    run(inputs)
"""

_TORCH_CUDA = '''import json
import os
import shutil
import warnings

from torch._recorded import DRIVER_STATE_FILE, SPEC, UNKNOWN_ERROR_WARNING
from torch.cuda import nccl  # noqa: F401

_devices = None
_checked = False
_init_error = None

CUBIN_WARNING = """
{} with CUDA capability sm_{} is not compatible with the current PyTorch installation.
The current PyTorch install supports CUDA capabilities {}.
If you want to use the {} GPU with PyTorch, please check the instructions at https://pytorch.org/get-started/locally/
"""


class _DeviceProperties(object):
    def __init__(self, device):
        self.name = device["name"]
        self.major, self.minor = [int(part) for part in device["capability"].split(".")]
        self.total_memory = device["memory_total_mib"] * 1024 * 1024


def _driver_state():
    path = shutil.which("nvidia-smi")
    if not path:
        return None
    try:
        with open(os.path.join(os.path.dirname(path), DRIVER_STATE_FILE)) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def _visible(devices):
    wanted = os.environ.get("CUDA_VISIBLE_DEVICES")
    if wanted is None:
        return devices
    picked = []
    for item in wanted.split(","):
        item = item.strip()
        found = [d for d in devices
                 if (item.isdigit() and d["index"] == int(item)) or (item.startswith("GPU-") and d["uuid"].startswith(item))]
        # CUDA stops at the first entry it cannot resolve.
        if not found or found[0] in picked:
            break
        picked.append(found[0])
    return picked


def _discover():
    if SPEC["cuda"] is None:
        return []
    if SPEC["cuda_init"] == "warn":
        warnings.warn(SPEC["cuda_warning"])
        return []
    state = _driver_state()
    if state is None:
        return []
    if not state["usable"]:
        warnings.warn(UNKNOWN_ERROR_WARNING)
        return []
    if state.get("cuda_init_warning"):
        global _init_error
        warnings.warn(state["cuda_init_warning"])
        # torch.cuda.init() raises the same error without the warning's prefix and tail.
        _init_error = state["cuda_init_warning"].replace("CUDA initialization: ", "", 1).split(" (Triggered internally")[0]
        return []
    return _visible(state["devices"])


def device_count():
    global _devices
    if _devices is None:
        _devices = _discover()
    return len(_devices)


def is_available():
    if SPEC["cuda"] is None:
        return False
    return device_count() > 0


def get_arch_list():
    if not is_available():
        return []
    return list(SPEC["arch_list"])


def _lazy_init():
    global _checked
    if SPEC["cuda"] is None:
        raise AssertionError("Torch not compiled with CUDA enabled")
    if not is_available():
        raise RuntimeError(_init_error or "No CUDA GPUs are available")
    if _checked:
        return
    _checked = True
    supported = [int(arch.split("_")[1]) for arch in SPEC["arch_list"] if arch.startswith("sm_")]
    for device in _devices:
        major = int(device["capability"].split(".")[0])
        if not any(sm // 10 == major for sm in supported):
            capability = device["capability"].replace(".", "")
            warnings.warn(CUBIN_WARNING.format(device["name"], capability, " ".join(SPEC["arch_list"]), device["name"]))


def init():
    _lazy_init()


from torch._canary import Event, current_device, device, empty_cache, synchronize  # noqa: E402,F401


def get_device_properties(index):
    _lazy_init()
    if not 0 <= index < len(_devices):
        raise AssertionError("Invalid device id")
    return _DeviceProperties(_devices[index])


def get_device_name(index=0):
    return get_device_properties(index).name


def get_device_capability(index=0):
    props = get_device_properties(index)
    return props.major, props.minor
'''

_TORCH_CANARY = '''"""The GPU work of the --perf canary, timed by the figures the pod was given (CANARY).

Work queued on a device advances that device's clock by the time the figures imply; CUDA
events read that clock, so elapsed_time() reports GPU time as real events do.
"""
import threading

from torch._recorded import CANARY


class _Dtype(object):
    def __init__(self, name, itemsize):
        self.name, self.itemsize = name, itemsize

    def __repr__(self):
        return "torch." + self.name


bfloat16, float16, float32, uint8 = _Dtype("bfloat16", 2), _Dtype("float16", 2), _Dtype("float32", 4), _Dtype("uint8", 1)
_clock = {}
_state = threading.local()


def _figure(key, index):
    if not CANARY or CANARY.get(key) is None:
        raise RuntimeError("fake torch: this pod records no %s figure" % key)
    value = CANARY[key]
    return float(value[index] if isinstance(value, list) else value)


def _index(where):
    if where is None or where == "cpu":
        return None
    text = str(where)
    return int(text.split(":")[1]) if ":" in text else current_device()


def _advance(index, seconds):
    _clock[index] = _clock.get(index, 0.0) + seconds


class Tensor(object):
    def __init__(self, shape, dtype, index):
        self.shape, self.dtype, self.index = tuple(shape), dtype or float32, index

    def numel(self):
        count = 1
        for size in self.shape:
            count *= size
        return count

    def element_size(self):
        return self.dtype.itemsize

    def copy_(self, src, non_blocking=False):
        size = self.numel() * self.element_size()
        if self.index is None and src.index is not None:
            _advance(src.index, size / (_figure("d2h_gbps", src.index) * 1e9))
        elif self.index is not None and src.index is None:
            _advance(self.index, size / (_figure("h2d_gbps", self.index) * 1e9))
        elif self.index is not None and src.index != self.index:
            seconds = size / (_figure("p2p_gbps", self.index) * 1e9)
            _advance(self.index, seconds)
            _advance(src.index, seconds)
        return self


def _shape(size):
    return size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size


def empty(*size, **kwargs):
    return Tensor(_shape(size), kwargs.get("dtype"), _index(kwargs.get("device")))


def randn(*size, **kwargs):
    return empty(*size, **kwargs)


def matmul(a, b, out=None):
    flops = 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
    _advance(a.index, flops / (_figure("tflops", a.index) * 1e12))
    return out or Tensor((a.shape[0], b.shape[1]), a.dtype, a.index)


def all_reduce(tensors):
    if not CANARY or CANARY.get("allreduce_busbw_gbps") is None:
        raise RuntimeError("NCCL Error 2: unhandled system error (run with NCCL_DEBUG=INFO for details)")
    n = len(tensors)
    size = tensors[0].numel() * tensors[0].element_size()
    seconds = size * 2.0 * (n - 1) / n / (float(CANARY["allreduce_busbw_gbps"]) * 1e9)
    for tensor in tensors:
        _advance(tensor.index, seconds)


def current_device():
    return getattr(_state, "device", 0)


class device(object):
    def __init__(self, index):
        self.index = index

    def __enter__(self):
        self.previous = current_device()
        _state.device = self.index

    def __exit__(self, *exc):
        _state.device = self.previous


class Event(object):
    def __init__(self, enable_timing=False):
        self.at = None

    def record(self, stream=None):
        index = current_device()
        self.at = (index, _clock.get(index, 0.0))

    def elapsed_time(self, end):
        return (end.at[1] - self.at[1]) * 1000.0

    def synchronize(self):
        pass


def synchronize(device=None):
    pass


def empty_cache():
    pass
'''
