# Probe part: what `import torch` says in the training interpreter (a subprocess of
# params["python"], like the packages part, whose helpers it uses).

import shutil

from .core import _text, _time_left
from .gpu import _device_nodes
from .packages import _MARK, _ask_python, _python_of

_TORCH_SCRIPT = r"""
import sys
sys.path = [p for p in sys.path if p not in ("", ".")]
import json
import warnings
out = {"python_executable": sys.executable,
       "python_version": "%d.%d.%d" % tuple(sys.version_info[:3])}
def emit():
    sys.stdout.write("\n" + MARK + json.dumps(out, default=str) + "\n")
    sys.stdout.flush()
def failure(exc):
    lines = [line for line in ("%s: %s" % (type(exc).__name__, exc)).splitlines() if line.strip()]
    return lines[-1][:1000] if lines else type(exc).__name__
def attempt(func, default=None):
    try:
        return func()
    except Exception:
        return default
try:
    import torch
except BaseException as exc:
    out["importable"] = False
    out["import_error"] = failure(exc)
    emit()
    sys.exit(0)
out["importable"] = True
out["version"] = attempt(lambda: str(torch.__version__))
out["cuda_build"] = attempt(lambda: torch.version.cuda)
out["hip_build"] = attempt(lambda: torch.version.hip)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        available = bool(torch.cuda.is_available())
    except Exception as exc:
        available = False
        out["cuda_error"] = failure(exc)
    out["cuda_available"] = available
    if not available and caught and "cuda_error" not in out:
        out["cuda_error"] = " ".join(str(w.message).strip() for w in caught)[:2000]
    if not available and "cuda_error" not in out and out["cuda_build"] and sys.argv[1:] == ["gpu"]:
        # No device is no warning (CUDA error 100); init() says it, on a machine with a GPU.
        try:
            torch.cuda.init()
        except Exception as exc:
            out["cuda_error"] = failure(exc)
    out["device_count"] = attempt(lambda: int(torch.cuda.device_count()))
    devices = []
    if available:
        for index in range(out["device_count"] or 0):
            device = {"index": index}
            props = attempt(lambda: torch.cuda.get_device_properties(index))
            if props is not None:
                device["name"] = attempt(lambda: str(props.name))
                device["capability"] = attempt(lambda: "%d.%d" % (props.major, props.minor))
                device["total_memory_bytes"] = attempt(lambda: int(props.total_memory))
            devices.append(device)
    out["devices"] = devices
    out["arch_list"] = attempt(lambda: [str(a) for a in torch.cuda.get_arch_list()], [])
    out["cudnn_version"] = attempt(lambda: int(torch.backends.cudnn.version()))
    if out["cuda_build"]:
        out["nccl_version"] = attempt(lambda: torch.cuda.nccl.version())
    out["warnings"] = [str(w.message).strip()[:2000] for w in caught][:10]
emit()
""".replace("MARK", repr(_MARK))


def _dotted_nccl(value):
    """torch.cuda.nccl.version(): a tuple on torch >= 1.11, an encoded int before."""
    if isinstance(value, (list, tuple)):
        return ".".join(str(part) for part in value) or None
    if isinstance(value, int) and value > 0:
        if value >= 10000:  # NCCL >= 2.9 encodes major*10000 + minor*100 + patch
            return "%d.%d.%d" % (value // 10000, value // 100 % 100, value % 100)
        return "%d.%d.%d" % (value // 1000, value // 100 % 10, value % 100)
    return None


def collect_torch(params):
    python = _python_of(params)
    facts = {"python": python, "python_found": False, "importable": False, "timed_out": False}
    seconds = _time_left(params)
    gpu_machine = bool(shutil.which("nvidia-smi") or _device_nodes(params))
    args = [_TORCH_SCRIPT] + (["gpu"] if gpu_machine else [])
    asked = _ask_python(python, args, seconds, "`import torch` did not finish")
    facts["python_found"], facts["timed_out"] = asked["found"], asked["timed_out"]
    answer = asked["answer"]
    if answer is None:
        facts["import_error"] = _text(asked["error"], 1000)
        return facts
    for key in (
        "python_executable",
        "python_version",
        "importable",
        "import_error",
        "version",
        "cuda_build",
        "hip_build",
        "cuda_available",
        "cuda_error",
        "device_count",
        "cudnn_version",
    ):
        if key in answer:
            value = answer[key]
            facts[key] = _text(value, 2000) if isinstance(value, str) else value
    facts["devices"] = [device for device in answer.get("devices") or [] if isinstance(device, dict)]
    facts["arch_list"] = [_text(arch, 32) for arch in answer.get("arch_list") or []]
    facts["nccl_version"] = _dotted_nccl(answer.get("nccl_version"))
    facts["warnings"] = [_text(w, 2000) for w in answer.get("warnings") or []]
    return facts
