# Watch probe part: the training processes, from /proc. A launcher (torchrun, accelerate,
# deepspeed), a python running a train script or module, or what the policy's job.process
# matches; for each, its pid, age and the CPU its process tree used over about a second;
# and for each rank under it (a worker with RANK or LOCAL_RANK in its environment or
# --local_rank on its command line), its state, CPU time and rank, so the evaluator can tell
# which rank holds the others up. Command lines go through the environment part's secret
# rules before they leave the pod; of an environment only the rank variables are read.

import os
import re
import shutil
import threading
import time

from .core import _in_child, _number, _read_bytes, _root, _text
from .environment import _SECRET_NAME, _secret_value, _without_credentials

_LAUNCHER_NAMES = ("torchrun", "accelerate", "deepspeed")
_LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch", "accelerate.commands.launch", "deepspeed")
_PYTHON_NAME = re.compile(r"^python[0-9.]*$")
_TRAIN_WORD = re.compile(r"train", re.IGNORECASE)
_OUTPUT_FLAGS = ("--output_dir", "--output-dir", "--default_root_dir", "--default-root-dir")
_ARGV_MAX = 128
_ARG_CHARS = 512
# How many matching processes are described: a pod runs one job, perhaps with a few workers.
_JOBS_MAX = 16
_WORKERS_MAX = 64
# Seconds job.process may take over every command line of the pod.
_PATTERN_SECONDS = 2.0
_RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")
_ENVIRON_BYTES = 256 << 10
_LOCAL_RANK_ARG = re.compile(r"^--local[_-]rank(?:=(\d+))?$")
_MAPS_BYTES = 4 << 20
# The packages whose version says how the job logs its loss, read from the dist-info beside
# the torch a rank has loaded.
_VERSIONED = ("torch", "transformers", "accelerate", "deepspeed")
_DIST_INFO = re.compile(r"^([A-Za-z0-9_.\-]+?)-(\d[^-]*)\.dist-info$")


def _argv(proc, pid):
    raw = _read_bytes(os.path.join(proc, pid, "cmdline"), 1 << 16)
    return [_text(arg, _ARG_CHARS) for arg in raw.split(b"\0") if arg][:_ARGV_MAX]


def _stat(proc, pid):
    """(ppid, utime + stime in ticks, start time in ticks, state letter) from /proc/PID/stat."""
    text = _read_bytes(os.path.join(proc, pid, "stat"), 4096).decode("ascii", "replace")
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[19]), fields[0][:1]


def _rank_of(proc, pid, argv):
    """RANK, LOCAL_RANK, WORLD_SIZE and LOCAL_WORLD_SIZE of a process (its environment, else
    torch.distributed.launch's --local_rank argument); {} when it is not a rank."""
    found = {}
    try:
        raw = _read_bytes(os.path.join(proc, str(pid), "environ"), _ENVIRON_BYTES)
    except OSError:
        raw = b""
    for item in raw.split(b"\0"):
        name, _, value = item.partition(b"=")
        if name.decode("ascii", "replace") in _RANK_VARIABLES and value.isdigit() and len(value) < 10:
            found[name.decode("ascii").lower()] = int(value)
    if "local_rank" not in found:
        for index, arg in enumerate(argv):
            match = _LOCAL_RANK_ARG.match(arg)
            if match:
                value = match.group(1) or (argv[index + 1] if index + 1 < len(argv) else "")
                if value.isdigit() and len(value) < 10:
                    found["local_rank"] = int(value)
                break
    return found


def _versions_beside_torch(proc, pid):
    """Versions of torch, transformers, accelerate and deepspeed in the site-packages whose
    torch the process has mapped; {} when it has none mapped."""
    try:
        maps = _read_bytes(os.path.join(proc, str(pid), "maps"), _MAPS_BYTES).decode("utf-8", "replace")
    except OSError:
        return {}
    marker = "/torch/lib/"
    at = maps.find(marker)
    if at < 0:
        return {}
    site = maps[maps.rfind(" ", 0, at) + 1 : at]
    try:
        names = os.listdir(site)
    except OSError:
        return {}
    versions = {}
    for name in names:
        match = _DIST_INFO.match(name)
        if match and match.group(1).lower() in _VERSIONED:
            versions[match.group(1).lower()] = _text(match.group(2), 64)
    return versions


def _launch_kind(argv, pattern):
    """How a command line is recognised as training, or None."""
    if not argv:
        return None
    if pattern is not None and pattern.search(" ".join(argv)):
        return "job.process"
    exe = os.path.basename(argv[0])
    if exe in _LAUNCHER_NAMES:
        return None if exe == "accelerate" and "launch" not in argv[1:3] else exe
    if not _PYTHON_NAME.match(exe):
        return None
    args = argv[1:]
    for index, arg in enumerate(args):
        if arg == "-m" and index + 1 < len(args):
            module = args[index + 1]
            if module in _LAUNCHER_MODULES:
                return module.split(".")[0] if module != "deepspeed" else "deepspeed"
            return "python -m" if _TRAIN_WORD.search(module) else None
        if arg == "-c":
            return None
        if not arg.startswith("-"):
            # The script python runs: a launcher's entry point (pip's /usr/local/bin/torchrun
            # runs as `python3 /usr/local/bin/torchrun ...`), or train.py, scripts/train_lora.py.
            name = os.path.basename(arg)
            if name in _LAUNCHER_NAMES:
                return None if name == "accelerate" and "launch" not in args[index + 1 : index + 3] else name
            return "python" if _TRAIN_WORD.search(name) else None
    return None


def _redact_argv(argv):
    """The command line with secret values replaced by ***: a `--hub_token hf_...` (either
    form), a token-looking word anywhere, URL userinfo."""
    out = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append("***")
            hide_next = False
            continue
        if arg.startswith("-") and "=" in arg:
            name, value = arg.split("=", 1)
            if _SECRET_NAME.search(name) or _secret_value(value):
                out.append(name + "=***")
                continue
        elif arg.startswith("-") and _SECRET_NAME.search(arg):
            out.append(arg)
            hide_next = True
            continue
        out.append("***" if _secret_value(arg) else _without_credentials(arg))
    return out


def _output_dir_arg(argv, cwd):
    for index, arg in enumerate(argv):
        for flag in _OUTPUT_FLAGS:
            value = None
            if arg == flag and index + 1 < len(argv):
                value = argv[index + 1]
            elif arg.startswith(flag + "="):
                value = arg.split("=", 1)[1]
            if value:
                if not os.path.isabs(value) and cwd:
                    value = os.path.join(cwd, value)
                return os.path.normpath(value)
    return None


def _link(path):
    try:
        return os.readlink(path)
    except OSError:
        return None


def _job_pattern(params):
    text = params.get("job_process")
    if not text:
        return None
    try:
        return re.compile(str(text))
    except re.error:
        return None


_SCAN_LOCK = threading.Lock()
_SCAN = {}  # type: dict


def _scan_processes(params):
    """Every process's (ppid, cpu ticks, start ticks, argv, state) and the training ones, once per
    probe run: the outputs and log collectors read the same scan as the processes one."""
    with _SCAN_LOCK:
        if "result" in _SCAN:
            return _SCAN["result"]
        proc = _root(params, "proc")
        pattern = _job_pattern(params)
        own = {str(os.getpid()), str(os.getppid())}
        table = {}
        try:
            names = [name for name in os.listdir(proc) if name.isdigit()]
        except OSError:
            names = []
        for pid in names:
            try:
                ppid, ticks, start, state = _stat(proc, pid)
                argv = _argv(proc, pid)
            except (OSError, ValueError, IndexError):
                continue  # gone since the listing, or not ours to read
            table[int(pid)] = (ppid, ticks, start, argv, state)
        error = None
        kinds = None
        if pattern is not None:
            # job.process is the policy author's regex, matched against every command line: in
            # a child, so one that backtracks without end costs the pattern, not the answer.
            kinds, why = _in_child(
                lambda: [[pid, _launch_kind(entry[3], pattern)] for pid, entry in table.items()], _PATTERN_SECONDS
            )
            if kinds is None:
                error = "job.process %s; training processes recognised by name only" % why
        if kinds is None:
            kinds = [[pid, _launch_kind(entry[3], None)] for pid, entry in table.items()]
        training = {pid: kind for pid, kind in kinds if kind is not None and str(pid) not in own}
        _SCAN["result"] = (table, training, error)
        return _SCAN["result"]


def _tree(table, root):
    children = {}
    for pid, entry in table.items():
        children.setdefault(entry[0], []).append(pid)
    found, stack = [], [root]
    while stack and len(found) < 4096:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, ()))
    return found


def _tree_ticks(proc, pids):
    total = 0
    for pid in pids:
        try:
            total += _stat(proc, str(pid))[1]
        except (OSError, ValueError, IndexError):
            pass  # exited: its time went to the parent's cutime, not counted here
    return total


def training_jobs(params):
    """The training processes that are not children of another one (a torchrun and its
    workers are one job), with their cwd, output dir argument and stdout file."""
    table, training, _ = _scan_processes(params)
    proc = _root(params, "proc")
    jobs = []
    for pid in sorted(training):
        parent = table[pid][0]
        if parent in training:
            continue
        cwd = _link(os.path.join(proc, str(pid), "cwd"))
        stdout = _link(os.path.join(proc, str(pid), "fd", "1"))
        jobs.append(
            {
                "pid": pid,
                "kind": training[pid],
                "cwd": cwd,
                "output_dir": _output_dir_arg(table[pid][3], cwd),
                "stdout": stdout if stdout and stdout.startswith("/") and os.path.isfile(stdout) else None,
            }
        )
    return jobs[:_JOBS_MAX]


def _uptime(proc):
    return float(_read_bytes(os.path.join(proc, "uptime"), 256).split()[0])


def _ranks(proc, table, tree):
    """The ranks in a job's process tree: the processes with a rank whose parent has none
    (a rank's DataLoader workers inherit its RANK)."""
    ranked = {}
    for pid in tree:
        found = _rank_of(proc, pid, table[pid][3]) if pid in table else {}
        if found:
            ranked[pid] = found
    return [(pid, ranked[pid]) for pid in tree if pid in ranked and table[pid][0] not in ranked][:_WORKERS_MAX]


def _own_ticks(proc, pid):
    try:
        return _stat(proc, str(pid))[1]
    except (OSError, ValueError, IndexError):
        return None


def collect_watch_processes(params):
    table, _, error = _scan_processes(params)
    proc = _root(params, "proc")
    facts = {"processes": [], "scanned": len(table), "py_spy": shutil.which("py-spy"), "job_process_error": error}
    jobs = training_jobs(params)
    if not jobs:
        return facts
    tick = float(os.sysconf("SC_CLK_TCK"))
    trees = {job["pid"]: _tree(table, job["pid"]) for job in jobs}
    ranks = {pid: _ranks(proc, table, tree) for pid, tree in trees.items()}
    first = {pid: _tree_ticks(proc, tree) for pid, tree in trees.items()}
    first_own = {worker: _own_ticks(proc, worker) for found in ranks.values() for worker, _ in found}
    started = time.time()
    time.sleep(max(0.1, min(_number(params.get("cpu_window_s"), 1.0), 5.0)))
    elapsed = time.time() - started
    try:
        uptime = _uptime(proc)
    except (OSError, ValueError, IndexError):
        uptime = None
    for job in jobs:
        pid = job["pid"]
        ppid, _, start, argv, _ = table[pid]
        busy = _tree_ticks(proc, trees[pid]) - first[pid]
        workers = []
        for worker, rank in ranks[pid]:
            try:
                _, ticks, _, state = _stat(proc, str(worker))
            except (OSError, ValueError, IndexError):
                # Exited within the window: its state is what it was at the scan.
                ticks, state = None, "X"
            before = first_own.get(worker)
            workers.append(
                dict(
                    rank,
                    pid=worker,
                    state=state,
                    cpu_s=round(ticks / tick, 2) if ticks is not None else None,
                    cpu_cores=round(max(0, ticks - before) / tick / elapsed, 2)
                    if ticks is not None and before is not None
                    else None,
                )
            )
        facts["processes"].append(
            {
                "pid": pid,
                "ppid": ppid,
                "matched_by": job["kind"],
                "argv": [_text(arg, _ARG_CHARS) for arg in _redact_argv(argv)],
                "elapsed_s": round(uptime - start / tick, 1) if uptime is not None else None,
                "cpu_cores": round(max(0, busy) / tick / elapsed, 2),
                "processes": len(trees[pid]),
                "cwd": _text(job["cwd"], 1024) if job["cwd"] else None,
                "output_dir": _text(_without_credentials(job["output_dir"]), 1024) if job["output_dir"] else None,
                "stdout": _text(job["stdout"], 1024) if job["stdout"] else None,
                "ranks": workers,
                "versions": _versions_beside_torch(proc, workers[0]["pid"] if workers else pid),
            }
        )
    facts["cpu_window_s"] = round(elapsed, 3)
    return facts
