# Probe part: environment variables that matter to a training job, from the process, the
# container's init environment, /etc/environment-like files and (for a GPU selection only)
# the login files and sshd SetEnv lines that set it. Only allow-listed names are collected,
# and secrets among them never leave the pod: redacted by name and by value here.

import os
import re

from .core import _process_env, _read_bytes, _read_text, _root, _text

# The only variables collected: what the checks read, and an allow-list of what a training
# job's behaviour depends on. Everything else in the environment stays on the pod.
_ENV_NAMES = frozenset(
    [
        "HOME",
        "USER",
        "PATH",
        "PYTHONPATH",
        "LD_LIBRARY_PATH",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "XDG_CACHE_HOME",
        "TMPDIR",
        "OMP_NUM_THREADS",
        "MASTER_ADDR",
        "MASTER_PORT",
        "WORLD_SIZE",
        "NVIDIA_VISIBLE_DEVICES",
        "CONTAINER_ID",
        "RUNPOD_POD_ID",
        "RUNPOD_DC_ID",
        "RUNPOD_GPU_COUNT",
        "WANDB_DIR",
        "WANDB_MODE",
    ]
)
_ENV_PREFIXES = ("HF_", "CUDA_", "NCCL_", "TORCH_", "PYTORCH_", "TRANSFORMERS_", "ACCELERATE_", "VAST_")
# Collected names that hold a secret are reported as present with no value.
_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASS|PWD|CREDENTIAL|AUTH", re.IGNORECASE)
# Values that are a credential whatever the name: known token prefixes and JWTs, as a word.
_SECRET_WORD = re.compile(
    r"^(?:(?:hf_|sk-|ghp_|gho_|ghs_|ghu_|github_pat_|xox|AKIA|ASIA|glpat-|rpa_)[A-Za-z0-9_\-]{6,}"
    r"|eyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]*)$"
)
_WORD_SPLIT = re.compile(r"[\s,;=\"']+")
# Userinfo in a URL (the password may hold `/`), or `user:pass@host` without a scheme.
# Linear in the text's length: a scheme is tried only where a run of scheme characters
# starts, and a userinfo scan stops at the next "://" (the URL credentials) or ":" (the bare
# ones), so no stretch of text is scanned again from every place a match could start.
_URL_CREDENTIALS = re.compile(r"(?<![A-Za-z0-9+.\-])([A-Za-z][A-Za-z0-9+.\-]*://)(?:[^\s:]|:(?!//))*@")
_BARE_CREDENTIALS = re.compile(r"(^|[\s,;=])[^\s:/@,;=]+:(?!//)[^\s@:]+@(?=[A-Za-z0-9\[])")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _env_relevant(name):
    return name in _ENV_NAMES or name.startswith(_ENV_PREFIXES)


def _secret_value(value):
    return any(_SECRET_WORD.match(word) for word in _WORD_SPLIT.split(value) if word)


def _without_credentials(value):
    return _BARE_CREDENTIALS.sub(r"\1***@", _URL_CREDENTIALS.sub(r"\1***@", value))


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
            line = line[len("export ") :].lstrip()
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


# Login files that can set a GPU selection for every session; reported as source "file:<path>".
_STARTUP_NAMES = ("CUDA_VISIBLE_DEVICES",)
_STARTUP_FILES_MAX = 64


def _startup_files(params):
    home = _process_env().get("HOME") or os.path.expanduser("~")
    etc = _root(params, "etc")
    files = [os.path.join(home, name) for name in (".bashrc", ".bash_profile", ".profile")]
    files += [os.path.join(etc, "bash.bashrc"), os.path.join(etc, "profile")]
    for folder, suffix in (("profile.d", ".sh"), (os.path.join("ssh", "sshd_config.d"), ".conf")):
        try:
            names = sorted(name for name in os.listdir(os.path.join(etc, folder)) if name.endswith(suffix))
        except OSError:
            names = []
        files += [os.path.join(etc, folder, name) for name in names]
    return files[:_STARTUP_FILES_MAX] + [os.path.join(etc, "ssh", "sshd_config")]


def _sshd_setenv(text):
    """NAME=value pairs of sshd's SetEnv lines."""
    pairs = []
    for line in text.splitlines():
        words = line.split()
        if words and words[0].lower() == "setenv":
            pairs += [tuple(word.split("=", 1)) for word in words[1:] if "=" in word]
    return pairs


def _startup_env(params):
    """(source, pairs) of the login files that set a GPU selection."""
    found = []
    for path in _startup_files(params):
        try:
            text = _read_text(path, 1 << 20)
        except OSError:
            continue
        pairs = _sshd_setenv(text) if "sshd_config" in path else _parse_env_file(text)
        pairs = [(name, value) for name, value in pairs if name in _STARTUP_NAMES]
        if pairs:
            found.append(("file:" + _text(path, 512), pairs))
    return found


def _sshd_config_path(params):
    """The config file of the sshd serving this session: its -f FILE (the first ancestor that
    is an sshd listener), else /etc/ssh/sshd_config."""
    proc = _root(params, "proc")
    pid = os.getppid()
    for _ in range(8):
        try:
            argv = _read_bytes(os.path.join(proc, str(pid), "cmdline"), 1 << 16).split(b"\0")
            status = _read_text(os.path.join(proc, str(pid), "status"), 1 << 16)
        except OSError:
            break
        # A running sshd rewrites its title: "sshd: /usr/sbin/sshd -D -f FILE [listener] ...".
        words = [word for word in argv if word]
        if len(words) == 1:
            words = words[0].split()
        if words and words[0] == b"sshd:":
            words = words[1:]
        if words and os.path.basename(words[0]) == b"sshd":
            if b"-f" in words[:-1]:
                return _text(words[words.index(b"-f") + 1], 4096)
            break
        parent = re.search(r"^PPid:\s*(\d+)", status, re.MULTILINE)
        # PID 1 is looked at too: in a container sshd is often the init process.
        if parent is None or int(parent.group(1)) < 1 or pid == 1:
            break
        pid = int(parent.group(1))
    return os.path.join(_root(params, "etc"), "ssh", "sshd_config")


def _use_pam(params, config):
    """sshd's UsePAM: the first setting outside a Match block, in the Include'd drop-ins and the file."""
    texts = []
    folder = os.path.join(_root(params, "etc"), "ssh", "sshd_config.d")
    text = _read_text(config, 1 << 20)
    if re.search(r"^\s*include\s", text, re.IGNORECASE | re.MULTILINE):
        try:
            names = sorted(name for name in os.listdir(folder) if name.endswith(".conf"))
        except OSError:
            names = []
        for name in names[:_STARTUP_FILES_MAX]:
            try:
                texts.append(_read_text(os.path.join(folder, name), 1 << 20))
            except OSError:
                continue
    texts.append(text)
    for body in texts:
        for line in body.splitlines():
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            if words[0].lower() == "match":
                break
            if words[0].lower() == "usepam" and len(words) > 1:
                return words[1].lower() == "yes"
    return False  # OpenSSH's compiled-in default


def _ssh_pam_env(params):
    try:
        if not _use_pam(params, _sshd_config_path(params)):
            return False
        stack = _read_text(os.path.join(_root(params, "etc"), "pam.d", "sshd"), 1 << 20)
    except OSError:
        return None
    for line in stack.splitlines():
        words = line.split("#", 1)[0].split()
        modules = [word for word in words if word.endswith("pam_env.so")]
        if modules and not any(w.startswith("envfile=") or w == "readenv=0" for w in words):
            return True
    return False


def _env_entry(source, name, value):
    value = _text(value)
    if _SECRET_NAME.search(name) or _secret_value(value):
        return {"source": source, "value": None, "redacted": True}
    return {"source": source, "value": _without_credentials(value), "redacted": False}


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
    for source, pairs in _startup_env(params):
        add(source, pairs)
    facts["ssh_pam_env"] = _ssh_pam_env(params)
    return facts
