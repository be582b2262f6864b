# Probe part: who and what the machine is: hostname, OS, kernel, glibc, CPU and memory,
# user, provider markers.

import os
import platform
import socket
import sys

from .core import _cwd, _process_env, _read_text, _root, _text
from .environment import _container_env, _rp_environment_env

# Provider markers worth reporting when present (values are ids, never credentials).
_PROVIDER_ENV_HINTS = ("RUNPOD_POD_ID", "RUNPOD_DC_ID", "RUNPOD_GPU_COUNT", "VAST_CONTAINERLABEL", "CONTAINER_ID")
# Lambda Stack (preinstalled on Lambda Cloud instances) registers this apt repository.
_LAMBDA_MARKERS = ("apt/sources.list.d/lambda-repository.list",)


def _parse_os_release(text):
    values = {}
    for line in text.splitlines():
        if "=" not in line or line.lstrip().startswith("#"):
            continue
        key, value = line.split("=", 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        values[key.strip()] = _text(value, 256)
    return {"id": values.get("ID"), "version_id": values.get("VERSION_ID"), "pretty_name": values.get("PRETTY_NAME")}


def _glibc_version():
    try:
        found = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.35"
        if found and found.startswith("glibc "):
            return found.split(" ", 1)[1]
    except (AttributeError, ValueError, OSError):
        pass
    lib, version = platform.libc_ver()
    return version if lib == "glibc" and version else None


def _mem_total_bytes(proc_root):
    for line in _read_text(os.path.join(proc_root, "meminfo"), 65536).splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            return int(parts[1]) * (1024 if parts[-1] == "kB" else 1)
    return None


def _user_name(uid):
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return os.environ.get("USER") or os.environ.get("LOGNAME")


def collect_identity(params):
    facts = {
        "hostname": _text(socket.gethostname(), 256),
        "kernel": platform.release() or None,
        "python_version": platform.python_version(),
        "python_executable": _text(sys.executable),
        "cwd": None,
        "home": _text(os.path.expanduser("~")),
        "provider_hints": {},
    }
    etc_root = _root(params, "etc")
    proc_root = _root(params, "proc")
    try:
        facts["os_release"] = _parse_os_release(_read_text(os.path.join(etc_root, "os-release"), 65536))
    except OSError:
        pass
    facts["glibc"] = _glibc_version()
    try:
        facts["cpu_count"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        facts["cpu_count"] = os.cpu_count()
    try:
        facts["mem_total_bytes"] = _mem_total_bytes(proc_root)
    except (OSError, ValueError, IndexError):
        pass
    # The machine's own id (systemd, dbus): a re-probe that reads another one is another machine.
    try:
        facts["machine_id"] = _text(_read_text(os.path.join(etc_root, "machine-id"), 256).strip(), 64) or None
    except OSError:
        pass
    facts["uid"] = os.getuid()
    facts["user"] = _user_name(facts["uid"])
    cwd = _cwd()
    facts["cwd"] = _text(cwd) if cwd else None
    # The same ids may live only in the container env or RunPod's env file (see
    # collect_environment); any source counts as a hint.
    sources = [_process_env()]
    for reader in (_container_env, _rp_environment_env):
        try:
            sources.append(dict(reader(params)))
        except (OSError, ValueError):
            pass
    for name in _PROVIDER_ENV_HINTS:
        for env in sources:
            if env.get(name):
                facts["provider_hints"][name] = _text(env[name], 256)
                break
    for marker in _LAMBDA_MARKERS:
        path = os.path.join(etc_root, marker)
        if os.path.exists(path):
            facts["provider_hints"]["lambda"] = path
    return facts
