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
    "dataset_max_rows": 50000000,
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


def collect_identity(params):
    return {}


def collect_environment(params):
    return {}


def collect_storage(params):
    return {}


def collect_gpu(params):
    return {}


def collect_packages(params):
    return {}


def collect_torch(params):
    return {}


def collect_accelerate(params):
    return {}


def collect_dataset(params):
    return None


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


def _run_collector(name, func, params, timeout):
    box = {}

    def target():
        started = time.time()
        try:
            box["value"] = func(params)
        except BaseException as exc:  # a collector must never take the probe down
            box["error"] = "%s: %s" % (type(exc).__name__, exc)
        box["duration"] = time.time() - started

    thread = threading.Thread(target=target, name="collect-" + name)
    thread.daemon = True
    started = time.time()
    thread.start()
    thread.join(max(0.0, timeout))
    if thread.is_alive():
        status = {"ok": False, "timed_out": True, "error": "timed out after %.1fs" % timeout,
                  "duration_s": round(time.time() - started, 3)}
        return None, status
    status = {"ok": "error" not in box, "timed_out": False, "error": box.get("error"),
              "duration_s": round(box.get("duration", 0.0), 3)}
    return box.get("value"), status


def run(params):
    started = time.time()
    deadline = started + float(params.get("deadline_s") or DEFAULT_PARAMS["deadline_s"])
    timeouts = dict(DEFAULT_TIMEOUTS)
    if isinstance(params.get("timeouts"), dict):
        timeouts.update(params["timeouts"])
    facts = {"probe_schema_version": PROBE_SCHEMA_VERSION, "collectors": {}}
    for name, func in COLLECTORS:
        if name == "dataset" and not params.get("dataset"):
            continue
        remaining = deadline - time.time()
        if name == "dataset":
            # The dataset scan has its own budget on top of the machine checks.
            remaining = float(timeouts.get("dataset", 600.0))
        timeout = min(float(timeouts.get(name, 10.0)), max(remaining, 0.0))
        value, status = _run_collector(name, func, params, timeout)
        facts["collectors"][name] = status
        if value is not None:
            facts[name] = value
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
        # Hung collector threads (a wedged statvfs on a dead NFS mount) must not keep
        # the process alive after the answer is out.
        os._exit(0)


if __name__ == "__main__":
    main()
