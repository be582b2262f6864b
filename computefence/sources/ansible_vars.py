"""What Ansible's ssh connection would reach for one host, from its merged variables: the
connection variables, the Jinja subset evaluated in them, and the ssh options in
ansible_ssh_common_args / ansible_ssh_extra_args (computefence/sources/ansible.py lists them).
Both readers use it: the built-in one and `ansible-inventory --list`'s JSON."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from computefence.errors import ConfigError
from computefence.models import Fix, Target
from computefence.sources.ssh_config import SshConfig, ssh_available, ssh_g, target_from_ssh_g


class Vaulted:
    """A `!vault` value: only Ansible with the vault password can read it."""


def quoted(text: str) -> str:
    """Inventory text quoted for a message, cut at 200 characters."""
    return repr(text if len(text) <= 200 else text[:200] + "...")


@dataclass
class Variable:
    value: Any
    where: str  # "path:line"


_VAULT_HELP = "pass --vault-password-file or --vault-id with Ansible installed, or set the value unencrypted"


def _plain(key: str, value: Variable) -> Any:
    if isinstance(value.value, Vaulted) or (isinstance(value.value, dict) and "__ansible_vault" in value.value):
        raise ConfigError(f"{value.where}: {key} is vault-encrypted and cannot be read here: {_VAULT_HELP}")
    return value.value


# ---------------------------------------------------------------- Jinja values

# The one Jinja form evaluated: a plain variable reference, `{{ name }}`, alone (the value keeps
# its type, as Ansible's single-expression templates do) or within text. Filters, expressions,
# lookups, statements and comments are never evaluated: they could run anything.
_JINJA_RE = re.compile(r"\{\{|\{%|\{#")
# `{{ name }}`, or `{{ lookup('env', 'NAME') }}`: Ansible's env lookup of the machine it runs
# on (ComputeFence's), '' where the variable is unset.
_ENV_LOOKUP = r"""lookup\(\s*(?P<q1>['"])env(?P=q1)\s*,\s*(?P<q2>['"])(?P<env>[A-Za-z_][A-Za-z0-9_]*)(?P=q2)\s*\)"""
_REFERENCE_RE = re.compile(r"\{\{\s*(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)|" + _ENV_LOOKUP + r")\s*\}\}")
# Where an env lookup is evaluated: a key file is a path on this machine, never sent anywhere.
# Elsewhere (ansible_host, ansible_user) the value would go to a name server or a pod, so an
# inventory could carry this machine's environment out: refused, as any other template.
_ENV_LOOKUP_KEYS = ("ansible_ssh_private_key_file", "ansible_private_key_file")
# Variables that read as secrets by their name are never read, even into a key file's path.
_SECRET_NAME_RE = re.compile(r"TOKEN|KEY|SECRET|PASS|PWD|CREDENTIAL|AUTH", re.IGNORECASE)
# References followed through other variables before giving up (Ansible has no such limit).
MAX_TEMPLATE_DEPTH = 10


class _TemplateRefused(Exception):
    """A Jinja value ComputeFence will not evaluate: that one host is not checked."""

    def __init__(self, key: str, value: Variable, why: str):
        super().__init__(f"{key} {why}")
        self.key, self.where = key, value.where


def _evaluated(
    key: str, value: Variable, variables: dict[str, Variable], host: str, chain: tuple[str, ...] = ()
) -> Any:
    """A variable's value as Ansible templates it, where that needs no more than plain
    `{{ name }}` references (to the host's own variables, inventory_hostname and
    inventory_hostname_short); _TemplateRefused for anything else."""
    raw = _plain(key, value)
    if not isinstance(raw, str) or not _JINJA_RE.search(raw):
        return raw
    shown = quoted(raw)
    if len(chain) >= MAX_TEMPLATE_DEPTH:
        raise _TemplateRefused(chain[0], value, f"refers through more than {MAX_TEMPLATE_DEPTH} variables (at {key})")
    if _JINJA_RE.search(_REFERENCE_RE.sub("", raw)):
        raise _TemplateRefused(
            chain[0] if chain else key,
            value,
            f"is a Jinja template beyond a plain {{{{ variable }}}} reference ({key} = {shown}); "
            "ComputeFence does not evaluate it",
        )

    def resolve(reference: re.Match[str]) -> Any:
        name = reference["name"]
        if name is None:
            return environment(reference["env"])
        if name == "inventory_hostname":
            return host
        if name == "inventory_hostname_short":
            return host.split(".")[0]
        if name in chain or name == key:
            raise _TemplateRefused(chain[0] if chain else key, value, f"refers to itself through {name}")
        found = variables.get(name)
        if found is None:
            raise _TemplateRefused(chain[0] if chain else key, value, f"refers to {name}, which is not defined")
        return _evaluated(name, found, variables, host, (*chain, key))

    def environment(name: str) -> str:
        root = chain[0] if chain else key
        if root not in _ENV_LOOKUP_KEYS:
            why = f"reads the environment ({name}); ComputeFence evaluates lookup('env', ...) only in a key file's path"
            raise _TemplateRefused(root, value, why)
        if _SECRET_NAME_RE.search(name):
            raise _TemplateRefused(root, value, f"reads {name}, a secret by its name; ComputeFence does not read it")
        return os.environ.get(name, "")

    whole = _REFERENCE_RE.fullmatch(raw)
    if whole:
        return resolve(whole)

    def text(match: re.Match[str]) -> str:
        found = resolve(match)
        if isinstance(found, bool) or not isinstance(found, (str, int)):
            raise _TemplateRefused(
                chain[0] if chain else key,
                value,
                f"puts {match['name'] or match['env']} (a {type(found).__name__}) into text; "
                "ComputeFence does not evaluate that",
            )
        return str(found)

    return _REFERENCE_RE.sub(text, raw)


# ---------------------------------------------------------------- ssh arguments


@dataclass
class _SshArgs:
    """What ansible_ssh_common_args / ansible_ssh_extra_args say about where to connect."""

    # ssh options in command-line order: (keyword, value); the first of each keyword wins.
    options: list[tuple[str, str]] = field(default_factory=list)
    config: str | None = None
    # Options ComputeFence cannot honour, as written.
    ignored: list[str] = field(default_factory=list)


_OPTION_FLAGS = {"-p": "port", "-i": "identityfile", "-l": "user", "-J": "proxyjump"}
_HONOURED = ("proxycommand", "proxyjump", "port", "identityfile", "user", "hostname")
# Flags of ssh that take a value; any other flag stands alone.
_VALUE_FLAGS = set("BbcDEeFIiJLlmOoPpQRSWw")


def _ssh_args(text: str, result: _SshArgs, where: str, key: str) -> None:
    try:
        tokens = shlex.split(text)
    except ValueError as exc:
        raise ConfigError(f"{where}: {key}: {exc}") from None
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not token.startswith("-") or len(token) < 2:
            result.ignored.append(token)
            continue
        flag, value = token[:2], token[2:]
        if flag[1] in _VALUE_FLAGS and not value:
            if i >= len(tokens):
                result.ignored.append(token)
                continue
            value = tokens[i]
            i += 1
        if flag == "-o":
            name, _, option_value = re.sub(r"\s*=\s*|\s+", "=", value.strip(), count=1).partition("=")
            if name.lower() in _HONOURED and option_value:
                result.options.append((name.lower(), option_value))
            else:
                result.ignored.append(f"-o {value}")
        elif flag == "-F":
            result.config = result.config or value
        elif flag == "-i" and value.lower() == "none":
            # ssh's -i names a file, even one called `none` (it never means IdentityFile none).
            result.options.append(("identityfile", f"./{value}"))
        elif flag in _OPTION_FLAGS:
            result.options.append((_OPTION_FLAGS[flag], value))
        else:
            result.ignored.append(token if flag[1] not in _VALUE_FLAGS else f"{flag} {value}")


def _first(options: list[tuple[str, str]], key: str) -> str | None:
    return next((value for name, value in options if name == key), None)


def _hop_fields(options: list[tuple[str, str]]) -> dict[str, str | None]:
    """proxy_jump / proxy_command from the first ProxyJump or ProxyCommand option ("none": no hop)."""
    kind, value = next(((k, v) for k, v in options if k in ("proxyjump", "proxycommand")), ("", "none"))
    hop = None if value.lower() == "none" else value
    return {
        "proxy_jump": hop if kind == "proxyjump" else None,
        "proxy_command": hop if kind == "proxycommand" else None,
    }


def _identity_files(options: list[tuple[str, str]]) -> list[str]:
    # `none` (any case) names no file, as in ssh_config; _default_identities says what it means.
    return list(
        dict.fromkeys(str(Path(v).expanduser()) for k, v in options if k == "identityfile" and v.lower() != "none")
    )


def _default_identities(options: list[tuple[str, str]]) -> bool:
    """False where `-i none` or `-o IdentityFile=none` tells ssh to try no ~/.ssh/id_* key."""
    return not any(k == "identityfile" and v.lower() == "none" for k, v in options)


# ---------------------------------------------------------------- targets


def host_target(
    name: str,
    where: str,
    groups: list[str],
    variables: dict[str, Variable],
    ignored: dict[str, Any],
    warnings: list[str],
) -> Target:
    """The target Ansible's ssh connection would reach for one host's merged variables; a
    host with a Jinja value ComputeFence does not evaluate is not checkable, with a warning."""
    try:
        return _reached(name, where, groups, variables, ignored)
    except _TemplateRefused as refused:
        host = "" if refused.where.endswith(f": host {name}") else f"host {name}: "
        warnings.append(f"{refused.where}: {host}{refused}; the host is not checked")
        return Target(
            name=name,
            host=name,
            tags=groups,
            source=where,
            unreachable_reason=f"{refused.key} is a Jinja template ComputeFence does not evaluate",
            unreachable_fix=Fix(
                advice=f"set {refused.key} to a literal value, or to a plain {{{{ variable }}}} reference"
            ),
        )


def _reached(
    name: str, where: str, groups: list[str], variables: dict[str, Variable], ignored: dict[str, Any]
) -> Target:
    def var(*names: str) -> tuple[str, Any] | None:
        # As in Ansible's ssh plugin, the ansible_ssh_* spelling wins over the short one.
        for var_name in names:
            value = variables.get(var_name)
            if value is not None:
                return var_name, _evaluated(var_name, value, variables, name)
        return None

    # Ansible's ssh command line: -o Port=, -o IdentityFile=, -o User= from the variables,
    # then the common and extra args; ssh keeps the first value of each option.
    options: list[tuple[str, str]] = []
    found = var("ansible_ssh_port", "ansible_port")
    if found is not None:
        key, value = found
        if isinstance(value, bool) or not str(value).isdigit() or not 1 <= int(value) <= 65535:
            raise ConfigError(f"{variables[key].where}: {key} must be a port from 1 to 65535, got {value!r}")
        options.append(("port", str(int(value))))
    key_file = var("ansible_ssh_private_key_file", "ansible_private_key_file")
    if key_file:
        options.append(("identityfile", str(key_file[1])))
    user = var("ansible_ssh_user", "ansible_user")
    if user:
        options.append(("user", str(user[1])))
    args = _SshArgs()
    for arg_var in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        found = var(arg_var)
        if found and isinstance(found[1], str):
            _ssh_args(found[1], args, variables[arg_var].where, arg_var)
            for option in args.ignored:
                ignored.setdefault(f"{arg_var} `{option}`", []).append(name)
            args.ignored.clear()
    options.extend(args.options)
    address = var("ansible_ssh_host", "ansible_host")
    host = str(address[1]) if address else name
    python = var("ansible_python_interpreter")
    connection = var("ansible_connection")
    reason = fix = None
    if connection and str(connection[1]) not in ("ssh", "paramiko", "smart"):
        reason = f"ansible_connection={connection[1]}: ComputeFence checks hosts over SSH"
        fix = Fix(
            advice="run `computefence doctor` on that machine" if str(connection[1]) == "local" else "expose SSH on it"
        )
    interpreter = str(python[1]) if python else "python3"
    rest = dict(
        python="python3" if interpreter.startswith("auto") else interpreter,
        tags=groups,
        source=where,
        unreachable_reason=reason,
        unreachable_fix=fix,
    )
    if args.config:
        return _through_ssh_config(name, host, options, Path(args.config).expanduser()).model_copy(update=rest)
    port = _first(options, "port")
    return Target(
        name=name,
        host=host,
        port=int(port) if port else 22,
        user=_first(options, "user"),
        identity_files=_identity_files(options),
        default_identities=_default_identities(options),
        **_hop_fields(options),
        **rest,
    )


def _through_ssh_config(name: str, host: str, options: list[tuple[str, str]], config: Path) -> Target:
    """`-F FILE` in the ssh args: ssh resolves the host through that file, after the command line."""
    if not config.is_file():
        raise ConfigError(f"{name}: ansible_ssh_common_args names -F {config}, which is not a file")
    if ssh_available():
        flags = [arg for key, value in options for arg in ("-o", f"{key}={value}")]
        target = target_from_ssh_g(host, ssh_g(host, config=config, options=flags), source=name, ssh_config=str(config))
    else:
        target = SshConfig(config).resolve(host, user=_first(options, "user"))
        port = _first(options, "port")
        target = target.model_copy(
            update=dict(
                port=int(port) if port else target.port,
                identity_files=list(dict.fromkeys(_identity_files(options) + target.identity_files)),
                default_identities=_default_identities(options) and target.default_identities,
                **(_hop_fields(options) if _first(options, "proxyjump") or _first(options, "proxycommand") else {}),
            )
        )
    return target.model_copy(update=dict(name=name))
