# ComputeFence probe: collects facts about the machine it runs on and prints one JSON
# document. It runs on pods with nothing but a bare python3, so: standard library only,
# Python 3.8 syntax, never raises, never writes or changes anything, and every collector
# runs under its own timeout. It judges nothing; the evaluator on the laptop does.
#
# Run by hand:  ssh pod python3 - < probe.py
# Parameters travel inside the script: EMBEDDED_PARAMS below is replaced by the caller
# (computefence.probe_payload) with a JSON string literal.

import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

PROBE_SCHEMA_VERSION = 1

EMBEDDED_PARAMS = "{}"

DEFAULT_PARAMS = {
    "python": "python3",
    "output_dir": None,
    "accelerate_config": None,
    "dataset": None,
    "input_column": None,
    "label_column": None,
    "extra_paths": [],
    "deadline_s": 30.0,
    "timeouts": {},
    # Injectable roots so tests can present a constructed pod.
    "roots": {"proc": "/proc", "etc": "/etc", "sys": "/sys", "dev": "/dev"},
    # About 48 bytes of the pod's memory per distinct row: 20M rows stay near 1 GB.
    "dataset_max_rows": 20000000,
    "dataset_max_seconds": 600.0,
}

# Per-collector timeouts in seconds; params["timeouts"] overrides.
DEFAULT_TIMEOUTS = {
    "identity": 5.0,
    "environment": 5.0,
    "storage": 8.0,
    "gpu": 10.0,
    "packages": 10.0,
    "torch": 25.0,
    "accelerate": 5.0,
    "dataset": 600.0,
}


def _load_params(embedded):
    params = dict(DEFAULT_PARAMS)
    try:
        given = json.loads(embedded) if embedded else {}
    except ValueError:
        given = {}
    if isinstance(given, dict):
        for key, value in given.items():
            if key == "roots" and isinstance(value, dict):
                roots = dict(DEFAULT_PARAMS["roots"])
                roots.update(value)
                params["roots"] = roots
            else:
                params[key] = value
    return params


def _root(params, name):
    return params["roots"].get(name) or DEFAULT_PARAMS["roots"][name]


# ---------------------------------------------------------------- collectors
# Each collector is collect_<name>(params) -> dict, registered in COLLECTORS.
# A collector may raise: the runner turns that into a captured error for that collector.


# ---------------------------------------------------------------- shared helpers

_TEXT_LIMIT = 4096


def _text(value, limit=_TEXT_LIMIT):
    """Text that is valid UTF-8 whatever the pod handed us, capped in length."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    elif not isinstance(value, str):
        value = str(value)
    else:
        # os.environ and os.listdir carry undecodable bytes as lone surrogates.
        try:
            value = value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        except UnicodeEncodeError:
            value = value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if len(value) > limit:
        value = value[:limit] + "...[truncated]"
    return value


def _first_lines(text, count=5, limit=800):
    kept = [line.rstrip() for line in _text(text, 1 << 16).splitlines() if line.strip()][:count]
    return _text("\n".join(kept), limit) or None


def _read_bytes(path, limit=1 << 20):
    with open(path, "rb") as handle:
        return handle.read(limit)


def _read_text(path, limit=1 << 20):
    return _read_bytes(path, limit).decode("utf-8", "replace")


def _number(value, default):
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _time_left(params, reserve=0.5):
    """Seconds a collector may still give a subprocess, keeping `reserve` to report back."""
    deadline = params.get("_deadline")
    if deadline is None:
        return 10.0
    return max(0.1, deadline - time.time() - reserve)


def _process_env():
    return dict((_text(k, 256), _text(v)) for k, v in os.environ.items())


def _cwd():
    try:
        return os.getcwd()
    except OSError:  # the directory was deleted under us
        return None


# Child processes run in their own process group so a timeout kills the whole tree, and
# the ones still running when the probe answers are killed on the way out.
_CHILDREN = {}
_CHILDREN_LOCK = threading.Lock()


def _kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def _kill_children():
    with _CHILDREN_LOCK:
        pids = list(_CHILDREN)
    for pid in pids:
        _kill_group(pid)


def _run_command(argv, timeout):
    """Run argv with a timeout; returns exit_code, stdout, stderr, timed_out, error. Never raises."""
    result = {"exit_code": None, "stdout": "", "stderr": "", "timed_out": False, "error": None,
              "missing": False}
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, close_fds=True, start_new_session=True)
    except OSError as exc:
        result["missing"] = isinstance(exc, FileNotFoundError)
        result["error"] = "%s: %s: %s" % (type(exc).__name__, exc.strerror or exc, argv[0])
        return result
    with _CHILDREN_LOCK:
        _CHILDREN[proc.pid] = proc
    try:
        try:
            out, err = proc.communicate(timeout=max(0.1, timeout))
        except subprocess.TimeoutExpired:
            result["timed_out"] = True
            _kill_group(proc.pid)
            try:
                # A process stuck in the kernel (a wedged driver) can outlive SIGKILL for a
                # while; collect what it printed but do not wait on it.
                out, err = proc.communicate(timeout=1.0)
            except subprocess.TimeoutExpired:
                out, err = b"", b""
    finally:
        with _CHILDREN_LOCK:
            _CHILDREN.pop(proc.pid, None)
    result["exit_code"] = None if result["timed_out"] else proc.returncode
    result["stdout"] = (out or b"").decode("utf-8", "replace")
    result["stderr"] = (err or b"").decode("utf-8", "replace")
    return result


# ---------------------------------------------------------------- identity

# Provider markers worth reporting when present (values are ids, never credentials).
_PROVIDER_ENV_HINTS = ("RUNPOD_POD_ID", "RUNPOD_DC_ID", "RUNPOD_GPU_COUNT", "VAST_CONTAINERLABEL",
                       "CONTAINER_ID")
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
    return {"id": values.get("ID"), "version_id": values.get("VERSION_ID"),
            "pretty_name": values.get("PRETTY_NAME")}


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
    facts = {"hostname": _text(socket.gethostname(), 256), "kernel": platform.release() or None,
             "python_version": platform.python_version(), "python_executable": _text(sys.executable),
             "cwd": None, "home": _text(os.path.expanduser("~")), "provider_hints": {}}
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


# ---------------------------------------------------------------- environment

# Variables whose values matter to a training job; anything else is left out.
_ENV_NAMES = frozenset([
    "HOME", "USER", "PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "CONDA_PREFIX",
    "XDG_CACHE_HOME", "TRANSFORMERS_CACHE", "TORCH_HOME", "TMPDIR", "OMP_NUM_THREADS",
    "CONTAINER_ID", "WANDB_DIR", "WANDB_MODE", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE",
    "HUGGING_FACE_HUB_TOKEN",
])
_ENV_PREFIXES = ("HF_", "HUGGINGFACE_", "RUNPOD_", "VAST_", "CUDA_", "NVIDIA_", "NCCL_",
                 "ACCELERATE_", "PYTORCH_", "TORCH_", "WANDB_")
# Reported as present with no value, wherever they come from.
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|_KEY(_|$)|^KEY$|CREDENTIAL|PRIVATE", re.IGNORECASE)
_URL_CREDENTIALS = re.compile(r"://[^/@\s]+@")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _env_relevant(name):
    return name in _ENV_NAMES or name.startswith(_ENV_PREFIXES) or bool(_SECRET_NAME.search(name))


def _container_env(params):
    """(name, value) pairs of PID 1's environment: what `docker run -e` / the image's ENV set."""
    raw = _read_bytes(os.path.join(_root(params, "proc"), "1", "environ"), 1 << 20)
    pairs = []
    for item in raw.split(b"\0"):
        if b"=" in item:
            name, value = item.split(b"=", 1)
            pairs.append((_text(name, 256), _text(value)))
    return pairs


def _unquote_shell(value):
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        if value[0] == '"':
            return re.sub(r'\\(["\\$`])', r"\1", value[1:-1])
        return value[1:-1]
    return value


def _parse_env_file(text):
    """KEY=value lines as pam_env and RunPod's `export KEY="value"` write them."""
    pairs = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index].strip()
        index += 1
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].lstrip()
        if "=" not in line:
            continue
        name, value = line.split("=", 1)
        name = name.strip()
        value = value.strip()
        # A quoted value may span lines (RunPod's PUBLIC_KEY with several keys).
        if value[:1] in ("'", '"') and (len(value) < 2 or value[-1] != value[0] or value.endswith("\\" + value[0])):
            while index < len(lines):
                value += "\n" + lines[index].rstrip()
                index += 1
                if value.endswith(value[0]) and not value.endswith("\\" + value[0]):
                    break
        if _ENV_NAME.match(name):
            pairs.append((name, _unquote_shell(value)))
    return pairs


def _etc_env(params, name):
    return _parse_env_file(_read_text(os.path.join(_root(params, "etc"), name), 1 << 20))


def _rp_environment_env(params):
    return _etc_env(params, "rp_environment")


def _env_entry(source, name, value):
    if _SECRET_NAME.search(name):
        return {"source": source, "value": None, "redacted": True}
    return {"source": source, "value": _URL_CREDENTIALS.sub("://***@", _text(value)), "redacted": False}


def collect_environment(params):
    variables = {}
    facts = {"variables": variables, "container_env_readable": False}

    def add(source, pairs):
        for name, value in pairs:
            if _env_relevant(name):
                variables.setdefault(name, []).append(_env_entry(source, name, value))

    add("process", sorted(_process_env().items()))
    readers = [
        ("container", lambda: _container_env(params)),
        ("etc_environment", lambda: _etc_env(params, "environment")),
        ("rp_environment", lambda: _rp_environment_env(params)),
    ]
    for source, reader in readers:
        try:
            pairs = reader()
        except OSError:  # absent (only RunPod writes rp_environment) or not ours to read
            continue
        if source == "container":
            facts["container_env_readable"] = True
        add(source, pairs)
    return facts


# ---------------------------------------------------------------- storage
#
# Which mount a path lives on comes from the mountinfo text (under the injectable proc
# root), matched by path components; whether it exists, is writable and how much room it
# has comes from the real filesystem (os.path, os.access, os.statvfs). Tests build a pod by
# writing a mountinfo whose mount points are real temporary directories.

_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")
_PSEUDO_FS = frozenset([
    "proc", "sysfs", "devpts", "devtmpfs", "tmpfs", "ramfs", "cgroup", "cgroup2", "mqueue",
    "securityfs", "debugfs", "tracefs", "pstore", "bpf", "configfs", "fusectl", "hugetlbfs",
    "autofs", "binfmt_misc", "nsfs", "rpc_pipefs", "selinuxfs", "efivarfs", "squashfs",
    "overlay", "aufs", "fuse.lxcfs", "nfsd",
])
_SYSTEM_TREES = ("/proc", "/sys", "/dev", "/run", "/etc", "/usr", "/boot", "/snap", "/var/lib/lxcfs")
_PATH_SECONDS = 2.0


def _unescape_mount(field):
    return _OCTAL_ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), field)


def _parse_mountinfo(text):
    """proc(5) mountinfo: id parent major:minor root mount-point options [optional...] - fstype source super-options."""
    mounts = []
    for line in text.splitlines():
        fields = line.split(" ")
        try:
            separator = fields.index("-", 6)
            mount = {
                "mount_id": int(fields[0]),
                "parent_id": int(fields[1]),
                "root": _unescape_mount(fields[3]),
                "mount_point": _unescape_mount(fields[4]),
                "options": fields[5].split(","),
                "fs_type": _unescape_mount(fields[separator + 1]),
                "source": _unescape_mount(fields[separator + 2]) if len(fields) > separator + 2 else None,
                "super_options": fields[separator + 3].split(",") if len(fields) > separator + 3 else [],
            }
        except (ValueError, IndexError):
            continue
        mounts.append(mount)
    return mounts


def _components(path):
    return [part for part in path.split("/") if part]


def _mount_for(path, mounts):
    """The mount holding `path`: longest mount point that is a component prefix (last one wins when stacked)."""
    target = _components(path)
    best, best_depth = None, -1
    for mount in mounts:
        parts = _components(mount["mount_point"])
        if target[:len(parts)] == parts and len(parts) >= best_depth:
            best, best_depth = mount, len(parts)
    return best


def _under(path, tree):
    parts = _components(tree)
    return _components(path)[:len(parts)] == parts


def _looks_like_volume(mount):
    point = mount["mount_point"]
    if point == "/" or mount["fs_type"] in _PSEUDO_FS:
        return False
    if any(_under(point, tree) for tree in _SYSTEM_TREES):
        return False
    # Single files bind-mounted by the runtime are no volumes. A mount point that does not
    # answer (dead NFS) stays listed: its path facts will say it hung.
    finished, is_file = _with_timeout(lambda: os.path.isfile(point), 0.5)
    return not (finished and is_file is True)


def _hf_cache(env, home):
    """Where huggingface_hub puts downloads, resolved as huggingface_hub.constants does."""
    if "HF_HUB_CACHE" in env:
        return env["HF_HUB_CACHE"], "HF_HUB_CACHE"
    if "HUGGINGFACE_HUB_CACHE" in env:
        return env["HUGGINGFACE_HUB_CACHE"], "HUGGINGFACE_HUB_CACHE"
    if "HF_HOME" in env:
        return os.path.join(env["HF_HOME"], "hub"), "HF_HOME"
    if "XDG_CACHE_HOME" in env:
        return os.path.join(env["XDG_CACHE_HOME"], "huggingface", "hub"), "XDG_CACHE_HOME"
    return os.path.join(home, ".cache", "huggingface", "hub"), "default"


def _absolute(path, cwd):
    path = os.path.expanduser(path)
    if not os.path.isabs(path):
        # Relative paths resolve against the working directory, as the job's would.
        path = os.path.join(cwd or "/", path)
    return os.path.normpath(path)


def _inspect_path(absolute):
    out = {}
    resolved = os.path.realpath(absolute)
    out["resolved"] = _text(resolved)
    exists = os.path.exists(resolved)
    out["exists"] = exists
    ancestor = resolved
    while not os.path.exists(ancestor):
        parent = os.path.dirname(ancestor)
        if parent == ancestor:
            break
        ancestor = parent
    if not exists:
        out["existing_ancestor"] = _text(ancestor)
    else:
        out["is_dir"] = os.path.isdir(resolved)
    out["parent_exists"] = os.path.isdir(os.path.dirname(resolved))
    # Creating below a directory needs write and search permission on it.
    mode = os.W_OK | (os.X_OK if os.path.isdir(ancestor) else 0)
    out["writable"] = os.access(ancestor, mode)
    try:
        stats = os.statvfs(ancestor)
        out["free_bytes"] = stats.f_bavail * stats.f_frsize
        out["total_bytes"] = stats.f_blocks * stats.f_frsize
        if stats.f_flag & getattr(os, "ST_RDONLY", 1):
            out["writable"] = False
            out["read_only"] = True
    except OSError as exc:
        out["error"] = _text("statvfs %s: %s" % (ancestor, exc), 300)
    return out


def _with_timeout(func, seconds):
    """func() in a daemon thread; (finished, result). A hung network mount blocks only that thread."""
    box = {}

    def target():
        try:
            box["value"] = func()
        except BaseException as exc:
            box["error"] = "%s: %s" % (type(exc).__name__, exc)

    thread = threading.Thread(target=target, name="inspect-path")
    thread.daemon = True
    thread.start()
    thread.join(max(0.0, seconds))
    if thread.is_alive():
        return False, None
    if "error" in box:
        return True, {"error": _text(box["error"], 300)}
    return True, box["value"]


def _paths_of_interest(params, mounts, env, home):
    wanted = [("root", "/", None), ("home", home, "HOME" if env.get("HOME") else "passwd")]
    hf_path, hf_origin = _hf_cache(env, home)
    wanted.append(("hf_cache", hf_path, hf_origin))
    if params.get("output_dir"):
        wanted.append(("output_dir", str(params["output_dir"]), "--output-dir"))
    wanted.append(("workspace", "/workspace", None))
    seen = set(["/workspace"])
    for mount in mounts:
        if _looks_like_volume(mount) and mount["mount_point"] not in seen:
            seen.add(mount["mount_point"])
            wanted.append(("volume", mount["mount_point"], "mountinfo"))
    wanted.append(("shm", "/dev/shm", None))
    wanted.append(("tmp", "/tmp", None))
    extra = params.get("extra_paths") or []
    for path in extra if isinstance(extra, list) else [extra]:
        wanted.append(("extra", str(path), "--path"))
    return wanted


def collect_storage(params):
    facts = {"mounts": [], "paths": []}
    try:
        text = _read_text(os.path.join(_root(params, "proc"), "self", "mountinfo"), 8 << 20)
        facts["mounts"] = _parse_mountinfo(text)
    except OSError as exc:
        facts["error"] = _text("mountinfo: %s" % exc, 300)
    mounts = facts["mounts"]
    env = _process_env()
    home = env.get("HOME") or os.path.expanduser("~")
    cwd = _cwd()
    hung = set()
    for role, path, origin in _paths_of_interest(params, mounts, env, home):
        entry = {"role": role, "path": _text(path), "origin": origin}
        absolute = _absolute(path, cwd)
        mount = _mount_for(absolute, mounts)
        budget = min(_PATH_SECONDS, _time_left(params))
        if mount is not None and mount["mount_point"] in hung:
            entry["error"] = "skipped: %s did not answer" % mount["mount_point"]
        elif budget <= 0.2:
            entry["error"] = "skipped: storage time budget spent"
        else:
            finished, found = _with_timeout(lambda: _inspect_path(absolute), budget)
            if finished:
                entry.update(found)
                mount = _mount_for(found.get("resolved") or absolute, mounts)
            else:
                entry["error"] = "no answer within %.1fs (hung network mount?)" % budget
                if mount is not None:
                    hung.add(mount["mount_point"])
        if mount is not None:
            entry.update(mount_point=mount["mount_point"], fs_type=mount["fs_type"],
                         mount_source=mount["source"])
        facts["paths"].append(entry)
    return facts


# ---------------------------------------------------------------- gpu

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


# ---------------------------------------------------------------- packages and torch
# Both run in a subprocess of the training interpreter (params["python"]), which may be a
# different Python than the probe's, with -B so nothing is written next to its modules.
# Their scripts keep to Python 3.6 syntax and print one marked JSON line last.

_MARK = "@@computefence@@"

_PACKAGES = ("transformers", "accelerate", "peft", "trl", "datasets", "deepspeed", "flash-attn",
             "bitsandbytes", "xformers", "vllm", "torch", "numpy")

_PACKAGES_SCRIPT = r'''
import sys
sys.path = [p for p in sys.path if p not in ("", ".")]
import json
try:
    from importlib.metadata import version as _version
except ImportError:
    try:
        from importlib_metadata import version as _version
    except ImportError:
        import pkg_resources
        def _version(name):
            return pkg_resources.get_distribution(name).version
def version(*names):
    for name in names:
        try:
            return str(_version(name))
        except Exception:
            pass
    return None
names = json.loads(sys.argv[1])
found = {}
for name in names:
    found[name] = version(name, name.replace("-", "_"))
sys.stdout.write("\n" + MARK + json.dumps({"versions": found, "executable": sys.executable}) + "\n")
'''.replace("MARK", repr(_MARK))

_TORCH_SCRIPT = r'''
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
'''.replace("MARK", repr(_MARK))


def _python_of(params):
    python = params.get("python") or "python3"
    return python if isinstance(python, str) else str(python)


def _marked_json(text):
    for line in reversed(text.splitlines()):
        if line.startswith(_MARK):
            try:
                value = json.loads(line[len(_MARK):])
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def _interpreter_failure(result):
    return _first_lines(result["stderr"] or result["stdout"], 3, 500) or "exit status %s" % result["exit_code"]


def collect_packages(params):
    python = _python_of(params)
    facts = {"python": python, "python_found": False, "versions": {}}
    seconds = _time_left(params)
    result = _run_command([python, "-B", "-c", _PACKAGES_SCRIPT, json.dumps(list(_PACKAGES))], seconds)
    if result["error"]:
        facts["error"] = result["error"]
        return facts
    facts["python_found"] = True
    if result["timed_out"]:
        facts["error"] = "%s did not answer within %.1fs" % (python, seconds)
        return facts
    answer = _marked_json(result["stdout"])
    if answer is None or not isinstance(answer.get("versions"), dict):
        facts["error"] = _text(_interpreter_failure(result), 500)
        return facts
    facts["versions"] = dict((name, None if value is None else _text(value, 100))
                             for name, value in answer["versions"].items())
    return facts


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
    result = _run_command([python, "-B", "-c", _TORCH_SCRIPT], seconds)
    if result["error"]:
        facts["import_error"] = result["error"]
        return facts
    facts["python_found"] = True
    if result["timed_out"]:
        facts["timed_out"] = True
        facts["import_error"] = "`import torch` did not finish within %.1fs" % seconds
        return facts
    answer = _marked_json(result["stdout"])
    if answer is None:
        facts["import_error"] = _text(_interpreter_failure(result), 1000)
        return facts
    for key in ("python_executable", "python_version", "importable", "import_error", "version",
                "cuda_build", "hip_build", "cuda_available", "cuda_error", "device_count",
                "cudnn_version"):
        if key in answer:
            value = answer[key]
            facts[key] = _text(value, 2000) if isinstance(value, str) else value
    facts["devices"] = [device for device in answer.get("devices") or [] if isinstance(device, dict)]
    facts["arch_list"] = [_text(arch, 32) for arch in answer.get("arch_list") or []]
    facts["nccl_version"] = _dotted_nccl(answer.get("nccl_version"))
    facts["warnings"] = [_text(w, 2000) for w in answer.get("warnings") or []]
    return facts


# ---------------------------------------------------------------- accelerate

_YAML_SPECIAL = re.compile(r"^[&*!|>%@`]|^- |^-$")
_YAML_INT = re.compile(r"^[-+]?[0-9]+$")
_YAML_FLOAT = re.compile(r"^[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$")


class _YamlSubsetError(ValueError):
    pass


def _yaml_scalar(text, number):
    text = text.strip()
    if text.startswith("'"):
        if not text.endswith("'") or len(text) < 2:
            raise _YamlSubsetError("line %d: unterminated quoted string" % number)
        return text[1:-1].replace("''", "'")
    if text.startswith('"'):
        try:
            return json.loads(text)
        except ValueError:
            raise _YamlSubsetError("line %d: unsupported double-quoted string" % number)
    if " #" in text:
        text = text.split(" #", 1)[0].rstrip()
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text.lower() in ("true", "yes", "on"):
        return True
    if text.lower() in ("false", "no", "off"):
        return False
    if text == "[]":
        return []
    if text == "{}":
        return {}
    if text.startswith("[") and text.endswith("]"):
        return [_yaml_scalar(part, number) for part in text[1:-1].split(",")]
    if _YAML_SPECIAL.match(text) or text.startswith("{"):
        raise _YamlSubsetError("line %d: YAML beyond what accelerate writes" % number)
    if _YAML_INT.match(text):
        return int(text)
    if _YAML_FLOAT.match(text):
        return float(text)
    return text


def _parse_accelerate_yaml(text):
    """The YAML accelerate writes (yaml.safe_dump of a dict with mapping values), without PyYAML."""
    root = {}
    stack = [(0, root)]  # the mappings open at each indentation
    pending = None  # (indent, mapping, key) of a `key:` whose value is the block below
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#") or stripped in ("---", "..."):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        if raw[indent:indent + 1] == "\t":
            raise _YamlSubsetError("line %d: tab indentation" % number)
        if stripped == "-" or stripped.startswith("- "):
            if pending is None or indent < pending[0]:
                raise _YamlSubsetError("line %d: list item outside a key" % number)
            mapping, key = pending[1], pending[2]
            if mapping[key] is None:
                mapping[key] = []
            if not isinstance(mapping[key], list):
                raise _YamlSubsetError("line %d: list item inside a mapping" % number)
            mapping[key].append(_yaml_scalar(stripped[1:], number))
            continue
        if pending is not None and indent > pending[0] and pending[1][pending[2]] is None:
            child = {}
            pending[1][pending[2]] = child
            stack.append((indent, child))
        pending = None
        while len(stack) > 1 and indent < stack[-1][0]:
            stack.pop()
        if indent != stack[-1][0]:
            raise _YamlSubsetError("line %d: unexpected indentation" % number)
        key, colon, value = stripped.partition(":")
        if not colon or (value and not value.startswith(" ")):
            raise _YamlSubsetError("line %d: expected `key: value`" % number)
        key = _yaml_scalar(key, number)
        key = key if isinstance(key, str) else json.dumps(key)
        mapping = stack[-1][1]
        if value.strip() and not value.strip().startswith("#"):
            mapping[key] = _yaml_scalar(value, number)
        else:
            mapping[key] = None
            pending = (indent, mapping, key)
    return root


def _accelerate_candidates(params, env, cwd):
    explicit = params.get("accelerate_config")
    if explicit:
        return [(_absolute(str(explicit), cwd), "--accelerate-config")], True
    candidates = []
    if env.get("ACCELERATE_CONFIG_FILE"):
        candidates.append((_absolute(env["ACCELERATE_CONFIG_FILE"], cwd), "ACCELERATE_CONFIG_FILE"))
    # accelerate.commands.config.config_args: $HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface.
    if "HF_HOME" in env:
        home = env["HF_HOME"]
    else:
        home = os.path.join(env.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    base = _absolute(os.path.join(home, "accelerate"), cwd)
    candidates.append((os.path.join(base, "default_config.yaml"), "default"))
    candidates.append((os.path.join(base, "default_config.json"), "default"))
    return candidates, False


def collect_accelerate(params):
    env = _process_env()
    candidates, explicit = _accelerate_candidates(params, env, _cwd())
    facts = {"found": False, "searched": [path for path, _ in candidates], "config": {}}
    for path, origin in candidates:
        if not os.path.isfile(path):
            continue
        facts.update(found=True, path=_text(path), origin=origin)
        try:
            text = _read_text(path, 1 << 20)
            if path.endswith(".json") or text.lstrip().startswith("{"):
                config = json.loads(text)
                if not isinstance(config, dict):
                    raise ValueError("not a JSON object")
            else:
                config = _parse_accelerate_yaml(text)
            facts["config"] = config
        except (OSError, ValueError) as exc:
            facts["error"] = _text("%s: %s" % (path, exc), 500)
        return facts
    if explicit:
        facts["error"] = _text("%s: no such file" % candidates[0][0], 500)
    return facts


# ---- dataset scan
# Reads a training file once and counts what poisons fine-tuning: unreadable rows, duplicate
# rows, inputs carrying several labels, missing values and the label distribution.
#
# Memory grows with the number of distinct rows, never with the file size: each row is
# reduced to 64-bit fingerprints (the interpreter's SipHash of the normalised value; two
# different rows collide with probability ~n^2/2^65, 1e-7 at two million rows), kept in flat
# open-addressing arrays at most 60% full: 24 bytes a slot per distinct input (its row and
# first label ride along), 8 per other distinct row. The input table starts sized for the
# row count estimated from the file size (at most 4M slots) and doubles as it fills.
#
# Definitions, so users can check the counts:
# - rows are compared after normalisation: JSON objects with key order ignored at every
#   depth, surrounding whitespace of every string stripped, other values compared with their
#   type (1, 1.0, true and "1" are four different values); CSV/TSV rows cell by cell,
#   each cell stripped. A duplicate row is identical to an earlier row: a row present three
#   times counts two.
# - an input or label is missing when its key or cell is absent, null or blank. A duplicate
#   input is a present input equal to an earlier row's; a conflicting input is a distinct
#   present input seen with more than one distinct present label.
# - unreadable: a line that is not a JSON object, is not UTF-8, is longer than 64 MiB, or a
#   CSV record with more cells than the header (pandas refuses those files).
# - line numbers are 1-based physical lines where the row starts (Parquet: row numbers).

import codecs
import csv
import gzip
import io
import re
import zlib
from array import array

_DS_LINE_CAP = 64 * 1024 * 1024
_DS_SAMPLE_BYTES = 65536
_DS_CHUNK = 1024 * 1024
_DS_EXAMPLES = 5
_DS_EXAMPLE_CHARS = 120
_DS_EXAMPLE_LINES = 10
_DS_UNREADABLE_LINES = 10
_DS_LABELS_REPORTED = 50
# Beyond this many distinct labels the column is free text: names are no longer kept (label
# identity falls back to a 24-bit fingerprint, enough to notice conflicts).
_DS_LABELS_TRACKED = 10000
# Columns of JSON rows: keys seen in this many first rows (they also decide the guesses).
_DS_COLUMNS_ROWS = 1000
_DS_COLUMNS_MAX = 200
_DS_CHECK_EVERY = 4096
# First match wins: "instruction" before "input", which instruction datasets use for optional context.
_DS_INPUT_NAMES = ("text", "prompt", "instruction", "sentence", "question", "input", "inputs", "content",
                   "review", "document", "query", "utterance")
_DS_LABEL_NAMES = ("label", "labels", "target", "class", "category", "sentiment", "y")
# Packed per-input value: (line << 24) | label id. Id 0 is "no label", the top id marks an
# input already counted as conflicting.
_DS_LID_MASK = 0xFFFFFF
_DS_CONFLICT = 0xFFFFFF
_DS_NO_LABEL = 0
_DS_JSON_WS = re.compile(r"[ \t\n\r]*")
_DS_BAD_CHAR = re.compile("[\udc80-\udcff]")
_DS_OTHER_MAGIC = (
    (b"BZh", "bzip2", "bunzip2 -k"),
    (b"\xfd7zXZ\x00", "xz", "unxz -k"),
    (b"\x28\xb5\x2f\xfd", "zstd", "zstd -d"),
    (b"PK\x03\x04", "zip", "unzip"),
)

# Undecodable bytes in text read through a TextIOWrapper become lone surrogates (as with
# surrogateescape) and are counted here, so the rows holding them can be found and reported.
_DS_BAD_BYTES = [0]


def _ds_count_bad_bytes(exc):
    if isinstance(exc, UnicodeDecodeError):
        _DS_BAD_BYTES[0] += exc.end - exc.start
    return codecs.lookup_error("surrogateescape")(exc)


codecs.register_error("computefence-dataset", _ds_count_bad_bytes)


class _DatasetProblem(Exception):
    """The file cannot be scanned at all; `kind` names the problem for the evaluator."""

    def __init__(self, kind, message):
        Exception.__init__(self, message)
        self.kind = kind


# Values are fingerprinted with hash(), which is SipHash for strings but structured for the
# rest (hash(0) == hash(""), hash(-1) == hash(-2)): other scalars enter as tagged strings.
_DS_TAG = "\x00"
_DS_SCALAR_TAGS = {int: _DS_TAG, float: _DS_TAG, bool: _DS_TAG, type(None): _DS_TAG}


def _ds_freeze(value):
    """A hashable form of a JSON value: strings stripped, other scalars as tagged reprs,
    objects as frozensets of items, arrays as tuples."""
    kind = value.__class__
    if kind is str:
        return value.strip()
    if kind is dict:
        return frozenset([(k, _ds_freeze(v)) for k, v in value.items()])
    if kind is list or kind is tuple:
        return tuple([_ds_freeze(v) for v in value])
    return _DS_TAG + repr(value)


def _ds_thaw(value):
    """The frozen value back as JSON-like data, for showing it."""
    kind = value.__class__
    if kind is frozenset:
        return dict((str(k), _ds_thaw(v)) for k, v in value)
    if kind is tuple:
        return [_ds_thaw(v) for v in value]
    if kind is str and value.startswith(_DS_TAG):
        text = value[1:]
        if text in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[text]
        for number in (int, float):
            try:
                return number(text)
            except ValueError:
                pass
        return text
    return value


def _ds_show(value, limit=None):
    """A frozen value as users wrote it (strings as is, anything else as JSON), optionally cut."""
    if value.__class__ is str and not value.startswith(_DS_TAG):
        text = value
    else:
        text = json.dumps(_ds_thaw(value), ensure_ascii=False, sort_keys=True, default=str)
    text = text.encode("utf-8", "replace").decode("utf-8")
    if limit is not None and len(text) > limit:
        text = text[:limit - 3] + "..."
    return text


class _DsFingerprints(object):
    """A growable set of nonzero 64-bit ints in one flat array (linear probing)."""

    def __init__(self, bits=10):
        self.keys = array("q", [0]) * (1 << bits)
        self.mask = (1 << bits) - 1
        self.used = 0

    def add(self, h):
        """True when h is new."""
        keys = self.keys
        mask = self.mask
        i = h & mask
        k = keys[i]
        while k:
            if k == h:
                return False
            i = (i + 1) & mask
            k = keys[i]
        keys[i] = h
        self.used += 1
        if self.used * 2 > mask:
            old = self.keys
            self.keys = array("q", [0]) * (2 * len(old))
            self.mask = 2 * len(old) - 1
            self.used = 0
            for k in old:
                if k:
                    self.add(k)
        return True


class _DatasetScan(object):
    """Counts over a stream of prepared rows (line, row fingerprint, input, label, raw)."""

    def __init__(self, path, input_column, label_column, max_rows, deadline):
        self.path = path
        self.given_input = input_column
        self.given_label = label_column
        self.max_rows = max_rows
        self.deadline = deadline
        self.facts = {
            "path": path, "exists": False, "format": None, "compression": None, "error": None,
            "error_kind": None, "columns": [], "input_column": None, "label_column": None,
            "input_column_guessed": False, "label_column_guessed": False, "absent_columns": [],
            "rows": 0, "unreadable_rows": 0, "unreadable_lines": [], "unreadable_reason": None,
            "duplicate_rows": 0, "duplicate_inputs": 0, "conflicting_inputs": 0,
            "conflict_examples": [], "missing_inputs": 0, "missing_labels": 0, "label_counts": {},
            "distinct_labels": 0, "distinct_labels_capped": False, "distinct_inputs": 0, "partial": False,
            "partial_reason": None, "duration_s": 0.0,
        }
        # Key-absent counts, bumped by the row preparers; a named column absent from every
        # row is reported as absent rather than as all-missing.
        self.absent = [0, 0]
        # label value -> id -> name and count; None (a missing label) is id 0, so the hot loop
        # needs no test for it.
        self.label_ids = {None: _DS_NO_LABEL}
        self.label_names = [None]
        self.label_counts = [0]
        self.examples = {}
        self.plain_rows = _DsFingerprints()
        self.extra_rows = _DsFingerprints()
        self.used = 0
        self._alloc(1 << 12)

    # -- the input table: per slot, three consecutive words (one cache line, which matters
    # more than anything else in the hot loop): the input's fingerprint, the fingerprint of
    # its first row, and (line of that row << 24) | its label id.

    def _alloc(self, cap):
        self.table = array("q", [0]) * (3 * cap)
        self.mask = cap - 1
        self.size = 3 * cap
        self.limit = int(cap * 0.6)

    def presize(self, estimated_rows):
        cap = 1 << 12
        while cap * 0.6 < estimated_rows and cap < (1 << 22):
            cap <<= 1
        if 3 * cap > self.size:
            self._alloc(cap)

    def _grow(self):
        old = self.table
        self._alloc(2 * (self.mask + 1))
        table, mask, size = self.table, self.mask, self.size
        for j in range(0, len(old), 3):
            h = old[j]
            if h:
                i = (h & mask) * 3
                while table[i]:
                    i += 3
                    if i == size:
                        i = 0
                table[i:i + 3] = old[j:j + 3]

    # -- columns

    def choose_columns(self, columns):
        facts = self.facts
        facts["columns"] = [c[:120] for c in columns[:_DS_COLUMNS_MAX]]
        lowered = dict((c.lower(), c) for c in reversed(columns))
        for slot, given, names in (("input", self.given_input, _DS_INPUT_NAMES),
                                   ("label", self.given_label, _DS_LABEL_NAMES)):
            if given:
                facts[slot + "_column"] = given
                continue
            for name in names:
                if name in lowered:
                    facts[slot + "_column"] = lowered[name]
                    facts[slot + "_column_guessed"] = True
                    break
        if facts["input_column"] is not None and facts["input_column"] == facts["label_column"]:
            facts["label_column"] = None
            facts["label_column_guessed"] = False
        return facts["input_column"], facts["label_column"]

    # -- per-row bookkeeping off the hot path

    def unreadable(self, line, reason):
        facts = self.facts
        facts["unreadable_rows"] += 1
        if len(facts["unreadable_lines"]) < _DS_UNREADABLE_LINES:
            facts["unreadable_lines"].append(line)
        if facts["unreadable_reason"] is None:
            facts["unreadable_reason"] = "line %d: %s" % (line, reason[:200])

    def fail(self, kind, message):
        if self.facts["error"] is None:
            self.facts["error"] = message
            self.facts["error_kind"] = kind

    def _new_label(self, value):
        if len(self.label_names) <= _DS_LABELS_TRACKED:
            lid = len(self.label_names)
            self.label_ids[value] = lid
            self.label_names.append(value)
            self.label_counts.append(1)
            return lid
        self.facts["distinct_labels_capped"] = True
        return _DS_LABELS_TRACKED + 1 + hash(value) % (_DS_CONFLICT - _DS_LABELS_TRACKED - 1)

    def _label_name(self, lid):
        if lid < len(self.label_names):
            return _ds_show(self.label_names[lid], _DS_EXAMPLE_CHARS)
        return "(one of more than %d labels)" % _DS_LABELS_TRACKED

    def _labels_differ(self, i, ih, iv, lv, lid, line):
        """The row's label differs from what the input table holds for its input (slot i)."""
        packed = self.table[i + 2]
        first = packed & _DS_LID_MASK
        if first == _DS_NO_LABEL:
            # The input's earlier rows had no label: this is its first label.
            self.table[i + 2] = (line << 24) | lid
            return
        if first != _DS_CONFLICT:
            self.facts["conflicting_inputs"] += 1
            self.table[i + 2] = packed | _DS_CONFLICT
            if len(self.examples) < _DS_EXAMPLES:
                self.examples[ih] = {"input": _ds_show(iv, _DS_EXAMPLE_CHARS),
                                     "labels": [self._label_name(first)], "lines": [packed >> 24]}
        example = self.examples.get(ih)
        if example is not None:
            name = _ds_show(lv, _DS_EXAMPLE_CHARS)
            if name not in example["labels"]:
                example["labels"].append(name)
            if len(example["lines"]) < _DS_EXAMPLE_LINES:
                example["lines"].append(line)

    # -- the hot loop

    def consume(self, rows, sink=None):
        """Count `rows`, an iterable of (line, row fingerprint, input, label, raw) where input
        and label are normalised hashable values, None when missing. `sink.row(raw, duplicate row,
        input fingerprint, input or label missing)` sees every readable row (dedupe uses it)."""
        facts = self.facts
        table, mask, size, limit = self.table, self.mask, self.size, self.limit
        used = self.used
        label_ids = self.label_ids
        label_counts = self.label_counts
        new_label = self._new_label
        has_input = facts["input_column"] is not None
        has_label = facts["label_column"] is not None
        plain_add = self.plain_rows.add
        extra_add = self.extra_rows.add
        max_rows = self.max_rows or (1 << 62)
        next_check = min(_DS_CHECK_EVERY, max_rows)
        n = dup_rows = dup_inputs = missing_inputs = 0
        # Per row this is the whole cost of the scan beyond parsing: keep it lean.
        for n, (line, rh, iv, lv, raw) in enumerate(rows, 1):
            try:
                lid = label_ids[lv]
            except KeyError:
                lid = new_label(lv)
            else:
                label_counts[lid] += 1
            if iv is None:
                missing_inputs += 1
                ih = None
                dup = not plain_add(rh or 1)
                if dup:
                    dup_rows += 1
            else:
                ih = hash(iv) or 1
                i = (ih & mask) * 3
                k = table[i]
                while k:
                    if k == ih:
                        break
                    i += 3
                    if i == size:
                        i = 0
                    k = table[i]
                if k:
                    dup_inputs += 1
                    dup = table[i + 1] == rh or not extra_add(rh or 1)
                    if dup:
                        dup_rows += 1
                    if lid and table[i + 2] & 0xFFFFFF != lid:
                        self._labels_differ(i, ih, iv, lv, lid, line)
                else:
                    table[i] = ih
                    table[i + 1] = rh
                    table[i + 2] = (line << 24) | lid
                    dup = False
                    used += 1
                    if used > limit:
                        self._grow()
                        table, mask, size, limit = self.table, self.mask, self.size, self.limit
            if sink is not None:
                sink.row(raw, dup, ih, (has_input and iv is None) or (has_label and lv is None))
            if n >= next_check:
                if n >= max_rows:
                    facts["partial"] = True
                    facts["partial_reason"] = "stopped at the row budget of %d rows" % max_rows
                    break
                if time.time() > self.deadline:
                    facts["partial"] = True
                    facts["partial_reason"] = "stopped at the time budget after %d rows" % n
                    break
                next_check = min(n + _DS_CHECK_EVERY, max_rows)
        self.used = used
        facts["rows"] += n
        facts["duplicate_rows"] += dup_rows
        facts["duplicate_inputs"] += dup_inputs
        if has_input:
            facts["missing_inputs"] += missing_inputs
        if has_label:
            facts["missing_labels"] = label_counts[_DS_NO_LABEL]

    def conflicting_input_fingerprints(self):
        """Fingerprints of the inputs seen with several labels (dedupe --drop-conflicts)."""
        table = self.table
        return set(table[j] for j in range(0, len(table), 3)
                   if table[j] and table[j + 2] & _DS_LID_MASK == _DS_CONFLICT)

    def finish(self):
        facts = self.facts
        rows = facts["rows"]
        for slot, absent in (("input", self.absent[0]), ("label", self.absent[1])):
            name = facts[slot + "_column"]
            if name is not None and rows and absent == rows and name not in facts["absent_columns"]:
                facts["absent_columns"].append(name)
            if name in facts["absent_columns"]:
                facts["missing_%ss" % slot] = 0
        names = {}  # labels shown alike (1 and "1") are counted together
        for lid in range(1, len(self.label_names)):
            name = _ds_show(self.label_names[lid], _DS_EXAMPLE_CHARS)
            names[name] = names.get(name, 0) + self.label_counts[lid]
        ranked = sorted(names.items(), key=lambda item: (-item[1], item[0]))
        facts["label_counts"] = dict(ranked[:_DS_LABELS_REPORTED])
        facts["distinct_labels"] = len(self.label_names) - 1
        facts["distinct_inputs"] = self.used
        facts["conflict_examples"] = list(self.examples.values())
        return facts


# -- readers: each turns a file into prepared rows for _DatasetScan.consume


def _ds_object_columns(objects):
    seen = {}
    for obj in objects:
        for key in obj:
            if key not in seen and len(seen) < _DS_COLUMNS_MAX:
                seen[key] = True
    return list(seen)


def _ds_stream_failed(scan, exc, line):
    """A read error (a truncated gzip, an I/O error) ends the scan where it happened."""
    if isinstance(exc, EOFError):
        scan.fail("truncated", "the gzip data ends early, after line %d: the file is truncated" % line)
        scan.unreadable(line + 1, "the file ends in the middle of this row")
    else:
        scan.fail("io", "reading stopped after line %d: %s: %s" % (line, type(exc).__name__, exc))


def _ds_jsonl_objects(scan, stream):
    """(line, object, raw) for each JSON Lines row; blank lines are skipped."""
    loads = json.loads
    readline = stream.readline
    cap = _DS_LINE_CAP
    line = 0
    while True:
        try:
            raw = readline(cap + 1)
            if len(raw) > cap:
                line += 1
                scan.unreadable(line, "line longer than %d MiB" % (cap >> 20))
                while raw and not raw.endswith(b"\n"):
                    raw = readline(cap)
                continue
        except (EOFError, OSError, zlib.error) as exc:
            _ds_stream_failed(scan, exc, line)
            return
        if not raw:
            return
        line += 1
        if line == 1 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[3:]
        try:
            obj = loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            scan.unreadable(line, "not UTF-8 (byte 0x%02x at column %d)" % (raw[exc.start], exc.start + 1))
            continue
        except ValueError as exc:
            if not raw.strip():
                continue
            reason = "not JSON: %s" % exc
            if not raw.endswith(b"\n"):
                reason = "the last line is cut off (%s)" % exc
            scan.unreadable(line, reason)
            continue
        if obj.__class__ is not dict:
            scan.unreadable(line, "a JSON %s, not an object" % type(obj).__name__)
            continue
        yield line, obj, raw


def _ds_array_objects(scan, stream, want_raw):
    """(line, object, raw text) for each element of a JSON array, streamed in chunks."""
    text = io.TextIOWrapper(stream, encoding="utf-8-sig", errors="computefence-dataset", newline="")
    decode = json.JSONDecoder().raw_decode
    skip_ws = _DS_JSON_WS.match
    bad = _DS_BAD_BYTES
    buf = ""
    pos = 0
    line = 1  # line number at buf[mark]
    mark = 0
    eof = False
    chunk = _DS_CHUNK
    started = False
    expect_value = True
    elements = 0
    while True:
        pos = skip_ws(buf, pos).end()
        if pos >= len(buf):
            if eof:
                break
            line += buf.count("\n", mark, pos)
            buf = ""
            pos = mark = 0
            try:
                more = text.read(chunk)
            except (EOFError, OSError, zlib.error) as exc:
                _ds_stream_failed(scan, exc, line + buf.count("\n", mark, pos))
                return
            if more:
                buf += more
            else:
                eof = True
            continue
        char = buf[pos]
        if not started:
            if char != "[":
                scan.fail("invalid_json", "the file starts with %r, not a JSON array" % char)
                return
            started = True
            pos += 1
            continue
        if not expect_value:
            if char == ",":
                expect_value = True
                pos += 1
                continue
            if char == "]":
                return
            line += buf.count("\n", mark, pos)
            mark = pos
            scan.unreadable(line, "expected ',' or ']' between array elements")
            scan.fail("invalid_json", "the JSON array is malformed at line %d" % line)
            return
        if char == "]" and elements == 0:
            return
        try:
            obj, end = decode(buf, pos)
        except ValueError as exc:
            line += buf.count("\n", mark, pos)
            mark = pos
            if not eof and len(buf) - pos <= _DS_LINE_CAP:
                # Most likely the element continues in the next chunk: keep only its start.
                buf = buf[pos:]
                pos = mark = 0
                more = None
                try:
                    more = text.read(chunk)
                except (EOFError, OSError, zlib.error):
                    pass
                if more:
                    buf += more
                    chunk = min(chunk * 2, _DS_LINE_CAP)
                    continue
                eof = True
                continue
            if not eof:
                scan.unreadable(line, "element larger than %d MiB" % (_DS_LINE_CAP >> 20))
                scan.fail("invalid_json", "a JSON array element at line %d is larger than %d MiB"
                          % (line, _DS_LINE_CAP >> 20))
            elif buf.rstrip().endswith("]"):
                scan.unreadable(line, "not JSON: %s" % exc)
                scan.fail("invalid_json", "the JSON array is malformed at line %d: %s" % (line, exc))
            else:
                scan.unreadable(line, "the file ends inside this element (%s)" % exc)
                scan.fail("truncated", "the JSON array is cut off at line %d: the file is truncated" % line)
            return
        chunk = _DS_CHUNK
        line += buf.count("\n", mark, pos)
        mark = pos
        expect_value = False
        elements += 1
        raw = buf[pos:end] if want_raw or bad[0] else None
        pos = end
        if bad[0]:
            found = len(_DS_BAD_CHAR.findall(raw))
            if found:
                bad[0] = max(0, bad[0] - found)
                scan.unreadable(line, "not UTF-8")
                continue
        if obj.__class__ is not dict:
            scan.unreadable(line, "a JSON %s, not an object" % type(obj).__name__)
            continue
        yield line, obj, raw
    if started:
        scan.fail("truncated", "the JSON array has no closing ']': the file is truncated")
    else:
        scan.fail("invalid_json", "the file holds no JSON array")


def _ds_object_rows(scan, head, objects, icol, lcol):
    """Prepared rows from (line, object, raw): the rows in `head`, then the rest."""
    freeze = _ds_freeze
    absent = scan.absent
    tags = _DS_SCALAR_TAGS
    for source in (head, objects):
        for line, obj, raw in source:
            try:
                # freeze(obj), inlined for flat rows
                rh = hash(frozenset([(k, v.strip() if v.__class__ is str else tags[v.__class__] + repr(v))
                                     for k, v in obj.items()]))
            except KeyError:  # nested lists or objects
                rh = hash(freeze(obj))
            iv = lv = None
            if icol is not None:
                try:
                    iv = obj[icol]
                except KeyError:
                    absent[0] += 1
                else:
                    if iv.__class__ is str:
                        iv = iv.strip() or None
                    elif iv is not None:
                        iv = freeze(iv)
            if lcol is not None:
                try:
                    lv = obj[lcol]
                except KeyError:
                    absent[1] += 1
                else:
                    if lv.__class__ is str:
                        lv = lv.strip() or None
                    elif lv is not None:
                        lv = freeze(lv)
            yield line, rh, iv, lv, raw


def _ds_delimiter(sample, suffix):
    header = sample.split("\n", 1)[0]
    if suffix == ".tsv" and "\t" in header:
        return "\t"
    cut = sample[:16384]
    if "\n" in cut:
        cut = cut[:cut.rindex("\n")]
    try:
        delimiter = csv.Sniffer().sniff(cut, delimiters=",\t;|").delimiter
    except csv.Error:
        delimiter = None
    if delimiter is None or delimiter not in header:
        counts = [(header.count(c), c) for c in ",\t;|"]
        best = max(counts)
        delimiter = best[1] if best[0] else ","
    return delimiter


class _DsLineCapture(object):
    """Hands lines to csv.reader and keeps them, so dedupe can copy records byte for byte."""

    def __init__(self, text):
        self.text = text
        self.lines = []

    def __iter__(self):
        for line in self.text:
            self.lines.append(line)
            yield line

    def take(self):
        record = "".join(self.lines)
        del self.lines[:]
        return record


def _ds_csv_rows(scan, stream, delimiter, sink):
    """Read the header, choose the columns, and yield prepared rows."""
    text = io.TextIOWrapper(stream, encoding="utf-8-sig", errors="computefence-dataset", newline="")
    capture = _DsLineCapture(text) if sink is not None else None
    reader = csv.reader(capture if capture is not None else text, delimiter=delimiter, quotechar='"',
                        doublequote=True, strict=False)
    csv.field_size_limit(_DS_LINE_CAP)
    header = []
    try:
        while not header:  # blank lines before the header are skipped, as pandas does
            header = next(reader)
    except StopIteration:
        scan.choose_columns([])
        return
    except csv.Error as exc:
        scan.fail("invalid_csv", "the header line cannot be read: %s" % exc)
        return
    except (EOFError, OSError, zlib.error) as exc:
        _ds_stream_failed(scan, exc, 0)
        return
    if _DS_BAD_BYTES[0]:
        _DS_BAD_BYTES[0] = max(0, _DS_BAD_BYTES[0] - len(_DS_BAD_CHAR.findall("".join(header))))
    header = [cell.strip().encode("utf-8", "replace").decode("utf-8") for cell in header]
    if capture is not None:
        sink.header(capture.take())
    icol, lcol = scan.choose_columns(header)
    ncols = len(header)
    ic = header.index(icol) if icol in header else 1 << 30
    lc = header.index(lcol) if lcol in header else 1 << 30
    for name in (icol, lcol):
        if name is not None and name not in header:
            scan.facts["absent_columns"].append(name)
    scan.consume(_ds_csv_prepared(scan, reader, capture, ncols, ic, lc), sink)


def _ds_csv_prepared(scan, reader, capture, ncols, ic, lc):
    strip = str.strip
    bad = _DS_BAD_BYTES
    prev = reader.line_num
    raw = None
    while True:
        try:
            for row in reader:
                line = prev + 1
                prev = reader.line_num
                if capture is not None:
                    raw = capture.take()
                m = len(row)
                if m > ncols or not m or bad[0]:
                    if not m or _ds_bad_record(scan, row, m, ncols, line):
                        continue
                t = tuple(map(strip, row))
                yield (line, hash(t), (t[ic] if ic < m else None) or None,
                       (t[lc] if lc < m else None) or None, raw)
            return
        except csv.Error as exc:
            line = prev + 1
            prev = reader.line_num
            if capture is not None:
                capture.take()
            scan.unreadable(line, "CSV: %s" % exc)
        except (EOFError, OSError, zlib.error) as exc:
            _ds_stream_failed(scan, exc, prev)
            return


def _ds_bad_record(scan, row, cells, ncols, line):
    """True (and counted) when a CSV record is unreadable."""
    bad = _DS_BAD_BYTES
    if bad[0]:
        found = len(_DS_BAD_CHAR.findall("".join(row)))
        if found:
            bad[0] = max(0, bad[0] - found)
            scan.unreadable(line, "not UTF-8")
            return True
    if cells > ncols:
        scan.unreadable(line, "%d cells, the header has %d (an unquoted delimiter in the text?)" % (cells, ncols))
        return True
    return False


# -- detection and the entry points


def _ds_read_sample(opener):
    """The first bytes of the (decompressed) content; a truncated gzip gives what it has."""
    pieces = []
    total = 0
    stream = opener()
    try:
        while total < _DS_SAMPLE_BYTES:
            try:
                piece = stream.read(8192)
            except (EOFError, OSError, zlib.error):
                break
            if not piece:
                break
            pieces.append(piece)
            total += len(piece)
    finally:
        stream.close()
    return b"".join(pieces)


def _ds_text_format(sample, ext):
    """jsonl, json-array, csv or tsv from the content, the suffix only breaking ties."""
    body = sample.lstrip()
    first = body[:1]
    if first == b"[":
        return "json-array"
    if first == b"{":
        if ext not in (".csv", ".tsv"):
            return "jsonl"
        try:
            json.loads(body.split(b"\n", 1)[0].decode("utf-8"))
            return "jsonl"
        except ValueError:
            pass
    if ext in (".json", ".jsonl", ".ndjson"):
        header = body.split(b"\n", 1)[0]
        if not any(c in header for c in (b",", b"\t", b";", b"|")):
            return "jsonl"
    return "csv"


def _ds_detect(scan, path):
    """Find the file, its compression and its format (recorded in scan.facts). Returns how
    to read it: {"full", "opener", "sample", "estimated_bytes", "delimiter"}, or None when
    there is nothing to read row by row (Parquet, an empty file)."""
    facts = scan.facts
    full = os.path.expanduser(path)
    if not os.path.exists(full):
        raise _DatasetProblem("not_found", "%s does not exist" % path)
    facts["exists"] = True
    if os.path.isdir(full):
        raise _DatasetProblem("not_a_file", "%s is a directory; name a data file in it" % path)
    try:
        with open(full, "rb") as handle:
            magic = handle.read(8)
            size = os.fstat(handle.fileno()).st_size
            if magic[:2] == b"\x1f\x8b" and size >= 18:
                handle.seek(-4, 2)
                isize = int.from_bytes(handle.read(4), "little")
            else:
                isize = 0
    except OSError as exc:
        raise _DatasetProblem("unreadable_file", "cannot read %s: %s" % (path, exc.strerror or exc))
    name = os.path.basename(full).lower()
    if name.endswith(".gz"):
        name = name[:-3]
    ext = os.path.splitext(name)[1]
    if magic[:4] == b"PAR1":
        facts["format"] = "parquet"
        return None
    for prefix, compression, command in _DS_OTHER_MAGIC:
        if magic.startswith(prefix):
            facts["compression"] = compression
            raise _DatasetProblem("compressed", "%s-compressed; decompress it first (%s)" % (compression, command))
    if magic[:2] == b"\x1f\x8b":
        facts["compression"] = "gzip"
        # The gzip trailer holds the uncompressed size modulo 4 GiB.
        estimated_bytes = isize if isize >= size else size * 4

        def opener():
            return gzip.open(full, "rb")
    else:
        estimated_bytes = size

        def opener():
            return open(full, "rb")

    sample = _ds_read_sample(opener)
    if sample.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):  # UTF-32's marks start the same way
        raise _DatasetProblem("utf16", "UTF-16/32 text; training loaders expect UTF-8 "
                                       "(iconv -f UTF-16 -t UTF-8 converts it)")
    if sample.startswith(codecs.BOM_UTF8):
        sample = sample[3:]
    if b"\x00" in sample:
        what = "an Arrow file (datasets' save_to_disk?)" if sample.startswith(b"ARROW1") else "binary data"
        raise _DatasetProblem("unknown_format", "%s holds %s, not JSON Lines, JSON, CSV, TSV or Parquet" % (path, what))
    if not sample.strip():
        facts["format"] = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "tsv"}.get(ext)
        return None
    fmt = _ds_text_format(sample, ext)
    delimiter = None
    if fmt == "csv":
        text = sample.decode("utf-8", "replace")
        if len(sample) >= _DS_SAMPLE_BYTES and "\n" in text:
            text = text[:text.rindex("\n")]
        delimiter = _ds_delimiter(text, ext)
        fmt = "tsv" if delimiter == "\t" else "csv"
    facts["format"] = fmt
    return {"full": full, "opener": opener, "sample": sample, "estimated_bytes": estimated_bytes,
            "delimiter": delimiter}


def _ds_scan_file(scan, path, sink):
    facts = scan.facts
    source = _ds_detect(scan, path)
    if facts["format"] == "parquet":
        _ds_scan_parquet(scan, os.path.expanduser(path), sink)
        return
    if source is None:
        scan.choose_columns([])
        return
    sample = source["sample"]
    lines = sample.count(b"\n")
    if lines:
        scan.presize(source["estimated_bytes"] * lines // len(sample))
    fmt = facts["format"]
    stream = source["opener"]()
    try:
        if fmt in ("csv", "tsv"):
            _ds_csv_rows(scan, stream, source["delimiter"], sink)
            return
        if fmt == "jsonl":
            objects = _ds_jsonl_objects(scan, stream)
        else:
            objects = _ds_array_objects(scan, stream, sink is not None)
        head = []
        for item in objects:
            head.append(item)
            if len(head) >= _DS_COLUMNS_ROWS:
                break
        icol, lcol = scan.choose_columns(_ds_object_columns(obj for _, obj, _ in head))
        scan.consume(_ds_object_rows(scan, head, objects, icol, lcol), sink)
        if fmt == "jsonl" and not facts["rows"] and facts["unreadable_rows"]:
            scan.fail("invalid_json", "no line is a JSON object (a pretty-printed JSON document is not JSON Lines)")
    finally:
        stream.close()


def _ds_scan_parquet(scan, path, sink):
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise _DatasetProblem("needs_pyarrow", "parquet needs pyarrow on the pod (pip install pyarrow), "
                                               "or convert the file to JSON Lines")
    try:
        handle = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises its own error types for corrupt files
        raise _DatasetProblem("unknown_format", "not a readable Parquet file: %s" % exc)
    icol, lcol = scan.choose_columns(list(handle.schema_arrow.names))
    scan.presize(handle.metadata.num_rows)

    def objects():
        index = 0
        try:
            for batch in handle.iter_batches(batch_size=65536):
                for obj in batch.to_pylist():
                    index += 1
                    yield index, obj, index - 1
        except (OSError, ValueError) as exc:  # pyarrow's errors for corrupt data derive from these
            scan.fail("io", "reading stopped after row %d: %s" % (index, exc))

    scan.consume(_ds_object_rows(scan, [], objects(), icol, lcol), sink)


def run_dataset_scan(path, input_column=None, label_column=None, max_rows=None, max_seconds=None, sink=None):
    """Scan the dataset at `path`; returns the finished _DatasetScan (its .facts dict is
    shaped like models.DatasetFacts). Problems with the file end up in the facts."""
    started = time.time()
    deadline = started + float(max_seconds) if max_seconds else float("inf")
    scan = _DatasetScan(path, input_column or None, label_column or None, max_rows, deadline)
    _DS_BAD_BYTES[0] = 0
    try:
        _ds_scan_file(scan, path, sink)
    except _DatasetProblem as exc:
        scan.fail(exc.kind, str(exc))
    scan.finish()
    scan.facts["duration_s"] = round(time.time() - started, 3)
    return scan


def detect_dataset(path):
    """Where and what the dataset is, without reading its rows: the facts keys path, exists,
    format, compression, error and error_kind."""
    scan = _DatasetScan(path, None, None, None, float("inf"))
    try:
        _ds_detect(scan, path)
    except _DatasetProblem as exc:
        scan.fail(exc.kind, str(exc))
    return dict((key, scan.facts[key]) for key in ("path", "exists", "format", "compression", "error", "error_kind"))


def collect_dataset(params):
    path = params.get("dataset")
    if not path:
        return None
    timeouts = params.get("timeouts") if isinstance(params.get("timeouts"), dict) else {}
    collector_limit = float(timeouts.get("dataset", DEFAULT_TIMEOUTS["dataset"]))
    # Stop early enough to answer with a partial scan before the collector's own timeout.
    max_seconds = min(float(params.get("dataset_max_seconds") or collector_limit), collector_limit * 0.9)
    return run_dataset_scan(path, params.get("input_column"), params.get("label_column"),
                            max_rows=params.get("dataset_max_rows"), max_seconds=max_seconds).facts
# ---- end of dataset scan


COLLECTORS = [
    ("identity", collect_identity),
    ("environment", collect_environment),
    ("storage", collect_storage),
    ("gpu", collect_gpu),
    ("packages", collect_packages),
    ("torch", collect_torch),
    ("accelerate", collect_accelerate),
    ("dataset", collect_dataset),
]


# ---------------------------------------------------------------- runner


def _start_collector(name, func, params, timeout):
    """Run func in a daemon thread that must finish within `timeout`; see _finish_collector."""
    started = time.time()
    own = dict(params)
    # Collectors size their subprocess timeouts from this (see _time_left).
    own["_deadline"] = started + timeout
    box = {"timeout": timeout, "started": started}

    def target():
        try:
            box["value"] = func(own)
        except BaseException as exc:  # a collector must never take the probe down
            box["error"] = "%s: %s" % (type(exc).__name__, exc)
        box["duration"] = time.time() - started

    thread = threading.Thread(target=target, name="collect-" + name)
    thread.daemon = True
    thread.start()
    box["thread"] = thread
    return box


def _finish_collector(box):
    thread = box["thread"]
    thread.join(max(0.0, box["started"] + box["timeout"] - time.time()))
    if thread.is_alive():
        status = {"ok": False, "timed_out": True, "error": "timed out after %.1fs" % box["timeout"],
                  "duration_s": round(time.time() - box["started"], 3)}
        return None, status
    status = {"ok": "error" not in box, "timed_out": False, "error": box.get("error"),
              "duration_s": round(box.get("duration", 0.0), 3)}
    return box.get("value"), status


def _run_collector(name, func, params, timeout):
    return _finish_collector(_start_collector(name, func, params, timeout))


def run(params):
    started = time.time()
    deadline_s = _number(params.get("deadline_s"), 0.0) or DEFAULT_PARAMS["deadline_s"]
    timeouts = dict(DEFAULT_TIMEOUTS)
    if isinstance(params.get("timeouts"), dict):
        for name, value in params["timeouts"].items():
            timeouts[name] = _number(value, timeouts.get(name, 10.0))
    facts = {"probe_schema_version": PROBE_SCHEMA_VERSION, "collectors": {}}
    # The machine collectors run side by side, so a hung nvidia-smi and a slow torch import
    # overlap instead of adding up; each stops at its own timeout or the total deadline.
    running = []
    for name, func in COLLECTORS:
        if name != "dataset":
            timeout = min(float(timeouts.get(name, 10.0)), deadline_s)
            running.append((name, _start_collector(name, func, params, timeout)))
    for name, box in running:
        value, status = _finish_collector(box)
        facts["collectors"][name] = status
        if value is not None:
            facts[name] = value
    if params.get("dataset"):
        # The dataset scan has its own budget on top of the machine checks.
        value, status = _run_collector("dataset", collect_dataset, params, float(timeouts["dataset"]))
        facts["collectors"]["dataset"] = status
        if value is not None:
            facts["dataset"] = value
    facts["probe_duration_s"] = round(time.time() - started, 3)
    return facts


def main(embedded=None):
    try:
        params = _load_params(EMBEDDED_PARAMS if embedded is None else embedded)
        facts = run(params)
        text = json.dumps(facts, default=str, sort_keys=True)
    except BaseException as exc:
        text = json.dumps({"probe_schema_version": PROBE_SCHEMA_VERSION,
                           "probe_error": "%s: %s" % (type(exc).__name__, exc)})
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    finally:
        # Subprocesses of abandoned collectors die with the probe, and hung collector
        # threads (a wedged statvfs on a dead NFS mount) must not keep it alive.
        _kill_children()
        os._exit(0)


if __name__ == "__main__":
    main()
