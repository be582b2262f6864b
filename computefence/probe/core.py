# ComputeFence probe: collects facts about the machine it runs on and prints one JSON
# document. It runs on pods with nothing but a bare python3, so: standard library only,
# Python 3.8 syntax, never raises, never writes or changes anything, and every collector
# runs under its own timeout. It judges nothing; the evaluator on the laptop does.
#
# Run by hand:  ssh pod python3 - < probe.py
# Parameters travel inside the script: EMBEDDED_PARAMS below is replaced by the caller
# (computefence.probe.assemble.probe_payload) with a JSON string literal.
#
# This part, first in the assembled script: parameters, shared helpers, child processes,
# the collector runner and the output. See computefence/probe/__init__.py for the layout.

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import warnings

PROBE_SCHEMA_VERSION = 1

EMBEDDED_PARAMS = "{}"

DEFAULT_PARAMS = {  # type: ignore[var-annotated]
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
    # None: as many rows as a quarter of the pod's available memory holds (dataset._ds_row_budget).
    "dataset_max_rows": None,
    "dataset_max_seconds": 600.0,
    # --perf: run the GPU canary, unless a GPU holds more than this of other processes' memory.
    "perf": False,
    "perf_busy_mib": 1024,
}

# Per-collector timeouts in seconds; params["timeouts"] overrides.
DEFAULT_TIMEOUTS = {
    "identity": 5.0,
    "environment": 5.0,
    "storage": 8.0,
    "gpu": 15.0,
    "packages": 10.0,
    "torch": 25.0,
    "accelerate": 5.0,
    # Reads JSON and safetensors headers only: a few hundred KB for a 70B model.
    "model": 8.0,
    "dataset": 600.0,
    # The canary measures for 20 s at most; its own `import torch` comes on top.
    "perf": 30.0,
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
# Each collector is collect_<name>(params) -> dict, in its own part, listed in the
# collectors part's COLLECTORS. A collector may raise: the runner turns that into a
# captured error for that collector.


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
    return {_text(k, 256): _text(v) for k, v in os.environ.items()}


def _cwd():
    try:
        return os.getcwd()
    except OSError:  # the directory was deleted under us
        return None


# Child processes run in their own process group so a timeout kills the whole tree, and
# the ones still running when the probe answers are killed on the way out.
_CHILDREN = {}  # type: dict
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


def _spawn(argv):
    """argv started in a process group of its own, its output piped, and recorded as a child
    (killed with its group if the probe is stopped); OSError when it cannot start."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        close_fds=True,
        start_new_session=True,
    )
    with _CHILDREN_LOCK:
        _CHILDREN[proc.pid] = proc
    return proc


def _run_command(argv, timeout):
    """Run argv with a timeout; returns exit_code, stdout, stderr, timed_out, error. Never raises."""
    result = {"exit_code": None, "stdout": "", "stderr": "", "timed_out": False, "error": None, "missing": False}
    try:
        proc = _spawn(argv)
    except OSError as exc:
        result["missing"] = isinstance(exc, FileNotFoundError)
        result["error"] = "%s: %s: %s" % (type(exc).__name__, exc.strerror or exc, argv[0])
        return result
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


def _read_until(fd, deadline):
    """Everything `fd` gives until its end, or until `deadline` (time.time(); None: no limit).
    Returns (bytes, whether the end came)."""
    pieces = []
    while True:
        wait = None if deadline is None else deadline - time.time()
        if wait is not None and wait <= 0:
            return b"".join(pieces), False
        ready, _, _ = select.select([fd], [], [], wait)
        if ready:
            piece = os.read(fd, 1 << 16)
            if not piece:
                return b"".join(pieces), True
            pieces.append(piece)


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
        status = {
            "ok": False,
            "timed_out": True,
            "error": "timed out after %.1fs" % box["timeout"],
            "duration_s": round(time.time() - box["started"], 3),
        }
        return None, status
    status = {
        "ok": "error" not in box,
        "timed_out": False,
        "error": box.get("error"),
        "duration_s": round(box.get("duration", 0.0), 3),
    }
    return box.get("value"), status


def _run_collector(name, func, params, timeout):
    return _finish_collector(_start_collector(name, func, params, timeout))


def _in_child(func, timeout):
    """(func(), None) from a forked child killed after `timeout` seconds, else (None, why).
    A collector's thread cannot be stopped, and a regex that runs away holds the GIL, so
    the probe's own answer would wait on it: work on untrusted text runs here. func's
    value must be JSON. Without fork (a limit on processes) func runs in this thread."""
    try:
        read_end, write_end = os.pipe()
    except OSError:
        return func(), None
    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns that a threaded process forks; the child only computes.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return func(), None
    if pid == 0:
        code = 1
        try:
            os.close(read_end)
            data = memoryview(json.dumps(func()).encode("utf-8"))
            while data:
                data = data[os.write(write_end, data) :]
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    chunks, finished = [], False
    deadline = time.time() + timeout
    try:
        while True:
            left = deadline - time.time()
            if left <= 0 or not select.select([read_end], [], [], left)[0]:
                break
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                finished = True
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        if not finished:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        status = os.waitpid(pid, 0)[1]
    if not finished:
        return None, "stopped after %.1fs" % timeout
    if status != 0 or not chunks:
        return None, "failed (exit status %d)" % status
    return json.loads(b"".join(chunks).decode("utf-8")), None


_LATER = ("perf", "dataset")
# Collectors that wait on the training interpreter (its start, then `import torch`: seconds,
# the probe's longest path) start first, before the others' Python work holds the GIL.
_FIRST = ("torch", "packages")
# Collectors with nothing to do unless their parameter is set: then they answer None and leave
# no status, as when their part is not sent at all.
_ON_REQUEST = ("model",)


def run(params, collectors, section=None, timeouts=None):
    """Facts from each (name, collect) in `collectors`; "perf" and "dataset", when asked for,
    run after the others, one at a time, and see their facts as params["_facts"]. With
    `section` (the watch probe), each collector's facts go under facts[section][name];
    `timeouts` replaces DEFAULT_TIMEOUTS as the defaults params["timeouts"] overrides."""
    started = time.time()
    deadline_s = _number(params.get("deadline_s"), 0.0) or DEFAULT_PARAMS["deadline_s"]
    timeouts = dict(DEFAULT_TIMEOUTS if timeouts is None else timeouts)
    if isinstance(params.get("timeouts"), dict):
        for name, value in params["timeouts"].items():
            timeouts[name] = _number(value, timeouts.get(name, 10.0))
    facts = {"probe_schema_version": PROBE_SCHEMA_VERSION, "collectors": {}}
    out = facts.setdefault(section, {}) if section else facts
    # The machine collectors run side by side, so a hung nvidia-smi and a slow torch import
    # overlap instead of adding up; each stops at its own timeout or the total deadline.
    running = []
    for name, func in sorted(collectors, key=lambda c: _FIRST.index(c[0]) if c[0] in _FIRST else len(_FIRST)):
        if name not in _LATER:
            timeout = min(float(timeouts.get(name, 10.0)), deadline_s)
            running.append((name, _start_collector(name, func, params, timeout)))
    for name, box in running:
        value, status = _finish_collector(box)
        if value is None and status["ok"] and name in _ON_REQUEST:
            continue
        facts["collectors"][name] = status
        if value is not None:
            out[name] = value
    for name in _LATER:
        func = dict(collectors).get(name)
        if params.get(name) and func is not None:
            # Each has its own budget on top of the machine checks (the canary never overlaps them).
            value, status = _run_collector(name, func, dict(params, _facts=facts), float(timeouts[name]))
            facts["collectors"][name] = status
            if value is not None:
                facts[name] = value
    facts["probe_duration_s"] = round(time.time() - started, 3)
    return facts


def _exit_when_abandoned():
    """When the laptop cancels the run (Ctrl-C) or the connection dies, kill what the probe
    started and leave at once instead of running on to the deadline: on TERM or HUP (sent
    through the channel, passed on by `timeout`), and when sshd closes the other end of
    stdout (the channel was closed)."""

    def stop(*_):
        for pid in list(_CHILDREN):  # no lock: a signal handler may interrupt its holder
            _kill_group(pid)
        os._exit(143)

    for number in (signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(number, stop)
        except (ValueError, OSError):  # not the main thread
            pass

    def watch_stdout():
        try:
            poller = select.poll()
            poller.register(sys.stdout.fileno(), select.POLLERR | select.POLLHUP)
            while True:
                for _, event in poller.poll():
                    if event & select.POLLNVAL:  # stdout was closed: nothing to watch
                        return
                    if event & (select.POLLERR | select.POLLHUP):
                        stop()
        except (AttributeError, ValueError, OSError):  # no poll() here, or stdout is not a file
            return

    threading.Thread(target=watch_stdout, daemon=True).start()


def main(collectors, embedded=None, section=None, timeouts=None):
    """Print the facts as one JSON line and exit; `embedded` stands in for EMBEDDED_PARAMS;
    `section` and `timeouts` as for run()."""
    _exit_when_abandoned()
    try:
        params = _load_params(EMBEDDED_PARAMS if embedded is None else embedded)
        facts = run(params, collectors, section, timeouts)
        text = json.dumps(facts, default=str, sort_keys=True)
    except BaseException as exc:
        text = json.dumps(
            {"probe_schema_version": PROBE_SCHEMA_VERSION, "probe_error": "%s: %s" % (type(exc).__name__, exc)}
        )
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    finally:
        # Subprocesses of abandoned collectors die with the probe, and hung collector
        # threads (a wedged statvfs on a dead NFS mount) must not keep it alive.
        _kill_children()
        os._exit(0)
