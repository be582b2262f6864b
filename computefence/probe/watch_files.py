# Watch probe parts: what the job leaves on disk. The newest checkpoints under its output
# dir (name, mtime, size) and the volume they are on (free space at the start and the end of
# the window), the newest trainer_state.json, and the tail of its log with the losses and
# the progress bar found there. Only reads; a hung mount costs that directory, not the probe.

import json
import math
import os
import re
import stat
import time

from .core import _in_child, _number, _read_text, _root, _text, _time_left
from .environment import _SECRET_NAME, _secret_value, _without_credentials
from .storage import _inspect_path, _mount_for, _parse_mountinfo, _with_timeout
from .watch_jobs import training_jobs

_CHECKPOINT_DIR = re.compile(r"^(?:checkpoint|ckpt|global_step|step)[-_=]?(\d+)$", re.IGNORECASE)
_CHECKPOINT_FILE = re.compile(r"\.(?:ckpt|pt|pth|safetensors)$", re.IGNORECASE)
_STEP_IN_NAME = re.compile(r"(?:step|checkpoint)[-_=]?(\d+)", re.IGNORECASE)
_DIRS_MAX = 4
_ENTRIES_MAX = 5000
_SIZE_FILES_MAX = 4000
_KEPT = 3
# Checkpoints sized (newest first), for the largest of them.
_SIZED = 10
_EXAMINED = 50
_HISTORY_KEPT = 60
_STATE_BYTES = 8 << 20


def _finite(value):
    """A number as JSON can carry it: NaN and infinities become their names."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if value != value else ("inf" if value > 0 else "-inf")
    return value


def _tree_size(path, deadline):
    total, files, partial = 0, 0, False
    stack = [path]
    while stack:
        if files >= _SIZE_FILES_MAX or time.time() > deadline:
            return total, True
        current = stack.pop()
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            total += entry.stat(follow_symlinks=False).st_size
                            files += 1
                    except OSError:
                        partial = True
        except OSError:
            partial = True
    return total, partial


def _find_checkpoints(root, deadline, elsewhere=()):
    """(path, name, is_dir, step) of checkpoints up to three levels under root (HF
    checkpoint-N folders, Lightning's lightning_logs/version_N/checkpoints/*.ckpt), leaving
    out the folders in `elsewhere` (described under their own name)."""
    found, seen = [], 0
    stack = [(root, 0)]
    while stack and seen < _ENTRIES_MAX and time.time() < deadline:
        current, depth = stack.pop()
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    seen += 1
                    if seen >= _ENTRIES_MAX:
                        break
                    name = entry.name
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)
                    except OSError:
                        continue
                    if is_dir and entry.path in elsewhere:
                        continue
                    match = _CHECKPOINT_DIR.match(name) if is_dir else None
                    if match:
                        found.append((entry.path, name, True, int(match.group(1))))
                    elif (
                        not is_dir
                        and _CHECKPOINT_FILE.search(name)
                        and (depth > 0 or _STEP_IN_NAME.search(name) or "epoch" in name)
                    ):
                        step = _STEP_IN_NAME.search(name)
                        found.append((entry.path, name, False, int(step.group(1)) if step else None))
                    elif is_dir and depth < 3 and not name.startswith("."):
                        stack.append((entry.path, depth + 1))
        except OSError:
            continue
    return found


def _log_entry(entry):
    kept = {}
    for key in ("step", "epoch", "loss", "learning_rate", "grad_norm", "eval_loss"):
        if key in entry:
            kept[key] = _finite(entry[key])
    return kept


def _trainer_state(path):
    state = {"path": _text(path, 1024)}
    try:
        info = os.stat(path)
        state["mtime"] = info.st_mtime
        if not stat.S_ISREG(info.st_mode):
            # A FIFO or device would block the read (or never end): only regular files are read.
            raise ValueError("not a regular file")
        document = json.loads(_read_text(path, _STATE_BYTES))
    except (OSError, ValueError) as exc:
        state["error"] = _text("%s: %s" % (type(exc).__name__, exc), 300)
        return state
    if not isinstance(document, dict):
        state["error"] = "not a JSON object"
        return state
    for key in ("global_step", "max_steps", "save_steps", "logging_steps", "train_batch_size", "num_train_epochs"):
        value = _finite(document.get(key))
        state[key] = value if isinstance(value, (int, float)) else None
    state["epoch"] = _finite(document.get("epoch"))
    history = document.get("log_history")
    if isinstance(history, list):
        entries = [_log_entry(item) for item in history if isinstance(item, dict)]
        state["log_history"] = [entry for entry in entries if entry][-_HISTORY_KEPT:]
    return state


def _candidate_dirs(params, jobs):
    wanted = []
    if params.get("output_dir"):
        wanted.append((str(params["output_dir"]), "output_dir"))
    for job in jobs:
        if job["output_dir"]:
            wanted.append((job["output_dir"], "--output_dir of pid %d" % job["pid"]))
    for job in jobs:
        if job["cwd"]:
            wanted.append((job["cwd"], "cwd of pid %d" % job["pid"]))
    seen, out = set(), []
    for path, origin in wanted:
        path = os.path.normpath(os.path.expanduser(path))
        if path not in seen:
            seen.add(path)
            out.append((path, origin))
    return out[:_DIRS_MAX]


def _describe_dir(path, origin, mounts, deadline, elsewhere=()):
    entry = {"path": _text(path, 1024), "origin": origin, "checkpoints": [], "checkpoint_count": 0}
    finished, found = _with_timeout(lambda: _inspect_path(path), min(2.0, max(0.1, deadline - time.time())))
    if not finished:
        entry["error"] = "no answer within 2s (hung network mount?)"
        return entry
    for key in ("resolved", "exists", "free_bytes", "total_bytes", "error"):
        if key in found:
            entry[key] = found[key]
    mount = _mount_for(found.get("resolved") or path, mounts)
    if mount is not None:
        entry.update(mount_point=mount["mount_point"], fs_type=mount["fs_type"], mount_source=mount["source"])
    if not found.get("exists"):
        return entry
    checkpoints = []
    for ckpt_path, name, is_dir, step in _find_checkpoints(found.get("resolved") or path, deadline, elsewhere):
        try:
            mtime = os.stat(ckpt_path).st_mtime
        except OSError:
            continue
        checkpoints.append((mtime, ckpt_path, name, is_dir, step))
    checkpoints.sort(reverse=True)
    entry["checkpoint_count"] = len(checkpoints)
    described = []
    # Newest first until _SIZED of them hold data: saves cut short by a full disk leave empty
    # folders behind the last one that was written whole.
    for mtime, ckpt_path, name, is_dir, step in checkpoints[:_EXAMINED]:
        if time.time() > deadline or sum(1 for c in described if c["size_bytes"]) >= _SIZED:
            break
        if is_dir:
            size, partial = _tree_size(ckpt_path, min(deadline, time.time() + 1.0))
        else:
            size, partial = os.stat(ckpt_path).st_size, False
        described.append(
            {
                "path": _text(ckpt_path, 1024),
                "name": _text(name, 256),
                "mtime": mtime,
                "size_bytes": size,
                "size_partial": partial,
                "step": step,
                "is_dir": is_dir,
            }
        )
    entry["checkpoints"] = described[:_KEPT]
    if described:
        # A save cut short (a full disk) leaves a small or empty folder: the largest of the
        # newest ones is what one checkpoint takes.
        entry["largest_checkpoint"] = max(described, key=lambda c: c["size_bytes"])
    states = [os.path.join(c[1], "trainer_state.json") for c in checkpoints[:_SIZED] if c[3]]
    states.append(os.path.join(found.get("resolved") or path, "trainer_state.json"))
    newest = None
    for candidate in states:
        try:
            mtime = os.stat(candidate).st_mtime
        except OSError:
            continue
        if newest is None or mtime > newest[0]:
            newest = (mtime, candidate)
    if newest is not None:
        entry["trainer_state"] = _trainer_state(newest[1])
    return entry


def collect_watch_outputs(params):
    started = time.time()
    facts = {"now": started, "dirs": [], "mounts": []}
    try:
        facts["mounts"] = _parse_mountinfo(
            _read_text(os.path.join(_root(params, "proc"), "self", "mountinfo"), 8 << 20)
        )
    except OSError as exc:
        facts["error"] = _text("mountinfo: %s" % exc, 300)
    deadline = time.time() + max(0.5, _time_left(params, reserve=1.0) - 1.0)
    jobs = training_jobs(params)
    # Each checkpoint once, under the place the job writes it: a working directory that holds
    # the output dir does not list the output dir's checkpoints again.
    described = set()
    for path, origin in _candidate_dirs(params, jobs):
        entry = _describe_dir(path, origin, facts["mounts"], deadline, described)
        described.update((path, entry.get("resolved") or path))
        if origin.startswith("cwd of") and not entry["checkpoints"]:
            continue  # the job's working directory counts only when checkpoints are there
        facts["dirs"].append(entry)
    # Free space again at the end of the window: a checkpoint being written shows as growth.
    window = _number(params.get("gpu_window_s"), 3.0)
    pause = started + window - time.time()
    if pause > 0 and pause < _time_left(params, reserve=1.5):
        time.sleep(pause)
    for entry in facts["dirs"]:
        if entry.get("free_bytes") is None:
            continue
        finished, stats = _with_timeout(lambda path=entry.get("resolved") or entry["path"]: os.statvfs(path), 1.0)
        if finished and not isinstance(stats, dict):
            entry["free_bytes_later"] = stats.f_bavail * stats.f_frsize
            entry["growth_window_s"] = round(time.time() - started, 3)
    return facts


# ---------------------------------------------------------------- the log

# HF Trainer prints {'loss': 0.6931, 'grad_norm': ..., 'learning_rate': ..., 'epoch': 0.1}
# (Transformers 5 quotes the values: {'loss': '0.6931', ...}); Lightning's progress bar
# carries loss=0.693 or train_loss(_step)=0.693.
_NUMBER = r"(nan|[-+]?inf|[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)"
_DEFAULT_LOSS_PATTERNS = (
    r"""['"]loss['"]\s*:\s*['"]?""" + _NUMBER,
    r"(?:^|[\s,\[|])(?:train_)?loss(?:_step)?=" + _NUMBER,
)
# Every pattern below that can start inside a run of its own characters starts only at the
# run's first one (the lookbehinds): a match is then tried once per run, not once per
# character, and each costs the run's length, so a line costs time linear in its length.
# tqdm: " 12%|█▏        | 120/1000 [01:00<07:20,  2.00it/s]" or "... 24.10s/it]".
_TQDM = re.compile(r"(?<!\d)(\d+)/(\d+) \[[^\]\[]*?(?<![\d.])([\d.]+)\s*(it/s|s/it)")
# The step a loss was logged at, where its own line says ("step 40 | loss 0.12").
_STEP_WORD = re.compile(r"(?<![A-Za-z0-9_])(?:global_)?step[\s:=]*(\d{1,12})(?!\d)", re.IGNORECASE)
_ERROR_LINE = re.compile(r"Traceback|Error|error:|Killed|CUDA out of memory|NCCL")
_LINE_BREAKS = re.compile(r"[\r\n]+")
_TAIL_BYTES = 256 << 10
# A log line is cut to this many characters before anything looks at it: a printed model
# config, tensor or base64 blob costs its first _LINE_MAX characters, however long it is.
_LINE_MAX = 2048
_LOSSES_KEPT = 200
_LINES_KEPT = 5
_SECRET_ASSIGNMENT = re.compile(r"(?<![A-Za-z0-9_.\-])([A-Za-z0-9_.\-]+['\"]?\s*[=:]\s*['\"]?)([^\s'\",}]+)")
_SECRET_CANDIDATE = re.compile(r"[^\s,;=\"']+")


def _redact_line(line):
    """A log line as it may leave the pod: NAME=value / 'name': value with a secret-looking
    name, token-looking words and URL userinfo replaced."""

    def assignment(match):
        name = match.group(1).rstrip("=: '\"")
        return match.group(1) + "***" if _SECRET_NAME.search(name) else match.group(0)

    line = _SECRET_ASSIGNMENT.sub(assignment, _without_credentials(line))
    return _SECRET_CANDIDATE.sub(lambda m: "***" if _secret_value(m.group(0)) else m.group(0), line)


def _loss_value(text):
    lowered = text.lower()
    if lowered in ("nan", "inf", "+inf", "-inf"):
        return "nan" if lowered == "nan" else ("-inf" if lowered.startswith("-") else "inf")
    try:
        value = float(text)
    except ValueError:
        return None
    return _finite(value)


def _loss_patterns(params):
    custom = params.get("loss_regex")
    if custom:
        try:
            return [re.compile(str(custom))], None
        except re.error as exc:
            return [re.compile(p) for p in _DEFAULT_LOSS_PATTERNS], _text("job.loss_regex: %s" % exc, 200)
    return [re.compile(p) for p in _DEFAULT_LOSS_PATTERNS], None


def _log_path(params, jobs):
    named = params.get("job_log")
    if named:
        path = os.path.expanduser(str(named))
        if not os.path.isabs(path) and jobs and jobs[0]["cwd"]:
            path = os.path.join(jobs[0]["cwd"], path)
        return path, "job.log"
    for job in jobs:
        if job["stdout"]:
            return job["stdout"], "stdout of pid %d" % job["pid"]
    return None, None


def _examine(raw, patterns):
    """The losses (and the step each was logged at, where known), the last progress bar, the
    last lines and the last error-looking line of a log's tail. Lines are cut to _LINE_MAX
    first; every pattern is linear in a line's length (the custom loss_regex is the policy
    author's own)."""
    losses, steps, progress, error_line, step = [], [], None, None, None
    lines = []
    cut = 0
    for line in _LINE_BREAKS.split(_text(raw, _TAIL_BYTES + 64)):
        if not line.strip():
            continue
        if len(line) > _LINE_MAX:
            line = line[:_LINE_MAX]
            cut += 1
        lines.append(line)
        bar = _TQDM.search(line)
        if bar:
            try:
                rate = float(bar.group(3))
            except ValueError:
                rate = 0.0  # "." or "1.2.3": no rate
            step = int(bar.group(1))
            progress = {
                "step": step,
                "total": int(bar.group(2)),
                "seconds_per_step": rate if bar.group(4) == "s/it" else (1.0 / rate if rate else None),
            }
        own = _STEP_WORD.search(line)
        for pattern in patterns:
            for match in pattern.finditer(line):
                value = _loss_value(match.group(1) if pattern.groups else match.group(0))
                if value is not None:
                    losses.append(value)
                    steps.append(int(own.group(1)) if own else step)
        if _ERROR_LINE.search(line):
            error_line = line
    return {
        "losses": losses[-_LOSSES_KEPT:],
        "loss_steps": steps[-_LOSSES_KEPT:],
        "progress": progress,
        "tail": [_text(_redact_line(line.strip()), 300) for line in lines[-_LINES_KEPT:]],
        "error_line": _text(_redact_line(error_line.strip()), 300) if error_line else None,
        "lines_cut": cut,
    }


def collect_watch_log(params):
    jobs = training_jobs(params)
    path, origin = _log_path(params, jobs)
    if path is None:
        return None
    facts = {"path": _text(path, 1024), "origin": origin, "exists": False, "losses": [], "tail": []}
    try:
        info = os.stat(path)
        facts.update(exists=True, mtime=info.st_mtime, size_bytes=info.st_size)
        if not stat.S_ISREG(info.st_mode):
            facts["error"] = "not a regular file"
            return facts
        with open(path, "rb") as handle:
            handle.seek(max(0, info.st_size - _TAIL_BYTES))
            raw = handle.read(_TAIL_BYTES)
    except OSError as exc:
        facts["error"] = _text("%s: %s" % (type(exc).__name__, exc.strerror or exc), 300)
        return facts
    patterns, facts["regex_error"] = _loss_patterns(params)
    # In a child of its own: whatever a line (or job.loss_regex) costs, the probe answers.
    found, why = _in_child(lambda: _examine(raw, patterns), _time_left(params, reserve=1.0))
    if found is None:
        facts["error"] = "reading its last %d KiB %s" % (len(raw) >> 10, why)
    else:
        facts.update(found)
    return facts
