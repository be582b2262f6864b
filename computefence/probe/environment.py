# Probe part: environment variables that matter to a training job, from the process, the
# container's init environment and /etc/environment-like files. Values of secret-looking
# names never leave the pod.

import os
import re

from .core import _process_env, _read_bytes, _read_text, _root, _text


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
