# Probe part: the Accelerate config file in effect, read with a YAML-subset parser.

import json
import os
import re

from .core import _cwd, _process_env, _read_text, _text
from .storage import _absolute

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
        if raw[indent : indent + 1] == "\t":
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
