# Probe part: package versions in the training interpreter.
# Both run in a subprocess of the training interpreter (params["python"]), which may be a
# different Python than the probe's, with -B so nothing is written next to its modules.
# Their scripts keep to Python 3.6 syntax and print one marked JSON line last.

import json

from .core import _first_lines, _run_command, _text, _time_left

_MARK = "@@computefence@@"

_PACKAGES = (
    "transformers",
    "accelerate",
    "peft",
    "trl",
    "datasets",
    "deepspeed",
    "flash-attn",
    "bitsandbytes",
    "xformers",
    "vllm",
    "torch",
    "numpy",
)

# The most names a policy may add; each is one metadata lookup.
_PACKAGES_MAX = 200

_PACKAGES_SCRIPT = r"""
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
    found[name] = version(name, name.replace("-", "_"), name.replace("-", "."))
sys.stdout.write("\n" + MARK + json.dumps({"versions": found, "executable": sys.executable}) + "\n")
""".replace("MARK", repr(_MARK))


def _python_of(params):
    python = params.get("python") or "python3"
    return python if isinstance(python, str) else str(python)


def _marked_json(text):
    for line in reversed(text.splitlines()):
        if line.startswith(_MARK):
            try:
                value = json.loads(line[len(_MARK) :])
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def _interpreter_failure(result):
    return _first_lines(result["stderr"] or result["stdout"], 3, 500) or "exit status %s" % result["exit_code"]


def _ask_python(python, args, seconds, late, accept=lambda answer: True):
    """`python -B -c ARGS...` within `seconds`: a dict of `found` (the interpreter ran),
    `timed_out`, `answer` (its marked JSON object, when `accept` takes it; else None) and
    `error` (why there is none: no interpreter, `late` + " within Ns", or its own words)."""
    result = _run_command([python, "-B", "-c"] + list(args), seconds)
    asked = {"found": not result["error"], "timed_out": result["timed_out"], "answer": None, "error": result["error"]}
    if result["error"]:
        return asked
    if result["timed_out"]:
        asked["error"] = "%s within %.1fs" % (late, seconds)
        return asked
    answer = _marked_json(result["stdout"])
    if answer is None or not accept(answer):
        asked["error"] = _interpreter_failure(result)
    else:
        asked["answer"] = answer
    return asked


def _package_names(params):
    """The fixed list, then the packages the job's policy names (PEP 503 names, from the laptop)."""
    names = list(_PACKAGES)
    wanted = params.get("packages")
    for name in (wanted if isinstance(wanted, list) else [])[:_PACKAGES_MAX]:
        if isinstance(name, str) and 0 < len(name) <= 100 and name not in names:
            names.append(name)
    return names


def collect_packages(params):
    python = _python_of(params)
    facts = {"python": python, "python_found": False, "versions": {}, "timed_out": False}
    seconds = _time_left(params)
    asked = _ask_python(
        python,
        [_PACKAGES_SCRIPT, json.dumps(_package_names(params))],
        seconds,
        "%s did not answer" % python,
        lambda answer: isinstance(answer.get("versions"), dict),
    )
    facts["python_found"], facts["timed_out"] = asked["found"], asked["timed_out"]
    answer = asked["answer"]
    if answer is None:
        facts["error"] = _text(asked["error"], 500)
        return facts
    facts["versions"] = {
        name: None if value is None else _text(value, 100) for name, value in answer["versions"].items()
    }
    return facts
