# Probe part: the policy's custom checks. Each `run` goes to `sh -c` exactly as the user
# wrote it (nothing from the pod is spliced in), in its own process group, killed with its
# group past its timeout; at most 64 KiB of each output stream is kept, the rest is read and
# dropped so a chatty command never blocks on a full pipe. The checks run side by side.
# `stdout_matches` is matched here, on the pod: only the verdict and a short tail of the
# output leave it (a check's output may hold a token), never the whole of it.

import re
import subprocess
import threading
import time

from .core import _CHILDREN, _CHILDREN_LOCK, _kill_group, _number, _spawn, _text, _time_left

_CUSTOM_OUTPUT_CAP = 64 * 1024
_CUSTOM_DEFAULT_TIMEOUT = 10.0
# What of each stream goes back for the finding's message: its last characters.
_CUSTOM_TAIL = 512


def _drain_capped(stream, box, key):
    kept = []
    size = 0
    try:
        while True:
            chunk = stream.read1(65536)
            if not chunk:
                break
            if size < _CUSTOM_OUTPUT_CAP:
                kept.append(chunk[: _CUSTOM_OUTPUT_CAP - size])
            size += len(chunk)
    except (OSError, ValueError):
        pass
    box[key] = b"".join(kept)
    box[key + "_over"] = size > _CUSTOM_OUTPUT_CAP


def _run_custom_check(check, budget):
    timeout = min(_number(check.get("timeout"), _CUSTOM_DEFAULT_TIMEOUT), budget)
    result = {"id": _text(check.get("id"), 100), "timeout_s": round(timeout, 3)}
    command = check.get("run")
    if not isinstance(command, str) or not command:
        result["error"] = "no command to run"
        return result
    started = time.time()
    try:
        proc = _spawn(["/bin/sh", "-c", command])
    except OSError as exc:
        result["error"] = "%s: %s" % (type(exc).__name__, exc.strerror or exc)
        return result
    box = {}
    readers = [
        threading.Thread(target=_drain_capped, args=(proc.stdout, box, "stdout")),
        threading.Thread(target=_drain_capped, args=(proc.stderr, box, "stderr")),
    ]
    for reader in readers:
        reader.daemon = True
        reader.start()
    timed_out = False
    try:
        proc.wait(timeout=max(0.1, timeout))
    except subprocess.TimeoutExpired:
        timed_out = True
    # The group goes either way: a background child still holding the pipes open would keep
    # the readers, and the probe, waiting.
    _kill_group(proc.pid)
    try:
        proc.wait(timeout=2.0)
    except subprocess.TimeoutExpired:
        pass
    for reader in readers:
        reader.join(2.0)
    with _CHILDREN_LOCK:
        _CHILDREN.pop(proc.pid, None)
    code = proc.returncode
    result["timed_out"] = timed_out
    if code is not None and code < 0:
        result["signal"] = -code
    elif code is not None and not timed_out:
        result["exit_code"] = code
    stdout = _text(box.get("stdout", b""), _CUSTOM_OUTPUT_CAP)
    pattern = check.get("stdout_matches")
    if isinstance(pattern, str):
        try:
            # ^ and $ at every line, as grep reads a pattern.
            result["stdout_matched"] = re.search(pattern, stdout, re.MULTILINE) is not None
        except re.error as exc:
            result["error"] = "stdout_matches %r is not a pattern this Python reads: %s" % (pattern, exc)
    result["stdout"] = stdout[-_CUSTOM_TAIL:]
    result["stderr"] = _text(box.get("stderr", b""), _CUSTOM_OUTPUT_CAP)[-_CUSTOM_TAIL:]
    result["output_truncated"] = bool(box.get("stdout_over") or box.get("stderr_over"))
    result["duration_s"] = round(time.time() - started, 3)
    return result


def collect_custom(params):
    checks = [c for c in (params.get("custom") or []) if isinstance(c, dict)]
    budget = _time_left(params)
    results = [None] * len(checks)

    def one(index, check):
        try:
            results[index] = _run_custom_check(check, budget)
        except Exception as exc:  # e.g. no thread left for its output readers: this check only
            results[index] = {"id": _text(check.get("id"), 100), "error": "%s: %s" % (type(exc).__name__, exc)}

    threads = []
    for index, check in enumerate(checks):
        thread = threading.Thread(target=one, args=(index, check))
        thread.daemon = True
        try:
            thread.start()
            threads.append(thread)
        except RuntimeError:  # the pod's thread limit: run this one here instead
            one(index, check)
    for thread in threads:
        thread.join()
    return [r for r in results if r is not None]
