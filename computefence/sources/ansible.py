"""Targets from an existing Ansible inventory (INI or YAML), `--ansible-inventory FILE|DIR`.

Reads groups, `[group:vars]`, `[group:children]` (YAML: all/hosts/vars/children), host
ranges (`web[01:03]`, `node-[a:c]`), `host:port`, and the `group_vars/` and `host_vars/`
files next to the inventory. Variable precedence follows Ansible: `all` < parent groups
< child groups (deeper first, then by name) < host; group_vars/host_vars files over the
inventory's own values. Groups become tags. Variables used:
ansible_host, ansible_port, ansible_user, ansible_ssh_private_key_file,
ansible_python_interpreter, ansible_connection, and `-J`/`ProxyJump` in
ansible_ssh_common_args / ansible_ssh_extra_args. Jinja templates are not evaluated:
a template in one of those variables is an error naming where it is.
"""

from __future__ import annotations

import ast
import re
import shlex
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from computefence.errors import ConfigError
from computefence.models import Target
from computefence.sources.inventory import load_yaml_document, node_line, read_text

YAML_SUFFIXES = (".yaml", ".yml", ".json")
# Files in an inventory directory that Ansible itself skips.
_IGNORED_SUFFIXES = ("~", ".orig", ".cfg", ".retry", ".pyc", ".pyo")
_RANGE_RE = re.compile(r"\[([0-9a-zA-Z]+):([0-9a-zA-Z]+)(?::([0-9]+))?\]")
_SECTION_RE = re.compile(r"^\[([^\]:\s]+)(?::(vars|children))?\]\s*(?:[#;].*)?$")


@dataclass
class _Value:
    value: Any
    where: str  # "path:line"


@dataclass
class _Group:
    name: str
    vars: dict[str, _Value] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)


@dataclass
class _Host:
    name: str
    where: str
    vars: dict[str, _Value] = field(default_factory=dict)


class _Inventory:
    def __init__(self) -> None:
        self.groups: dict[str, _Group] = {"all": _Group("all"), "ungrouped": _Group("ungrouped")}
        self.hosts: dict[str, _Host] = {}

    def group(self, name: str) -> _Group:
        return self.groups.setdefault(name, _Group(name))

    def add_host(self, name: str, group: str, where: str, variables: dict[str, _Value]) -> None:
        host = self.hosts.setdefault(name, _Host(name, where))
        host.vars.update(variables)
        members = self.group(group).hosts
        if name not in members:
            members.append(name)

    def add_child(self, parent: str, child: str) -> None:
        self.group(child)
        children = self.group(parent).children
        if child not in children:
            children.append(child)


# ---------------------------------------------------------------- host patterns


def expand_host_pattern(pattern: str, where: str) -> list[str]:
    """`web[01:03].example` -> web01.example, web02.example, web03.example (as Ansible)."""
    match = _RANGE_RE.search(pattern)
    if not match:
        return [pattern]
    start, end, step = match.group(1), match.group(2), int(match.group(3) or 1)
    head, tail = pattern[: match.start()], pattern[match.end() :]
    if start.isdigit() and end.isdigit():
        width = len(start) if start.startswith("0") else 0
        values = [str(i).zfill(width) for i in range(int(start), int(end) + 1, step)]
    elif len(start) == 1 and len(end) == 1 and start in string.ascii_letters and end in string.ascii_letters:
        values = [chr(i) for i in range(ord(start), ord(end) + 1, step)]
    else:
        raise ConfigError(f"{where}: bad host range [{match.group(0)[1:-1]}] in {pattern!r}")
    if not values or step < 1:
        raise ConfigError(f"{where}: host range [{match.group(0)[1:-1]}] in {pattern!r} is empty")
    return [name for value in values for name in expand_host_pattern(head + value + tail, where)]


def _split_port(pattern: str) -> tuple[str, int | None]:
    """`host:2222` -> ("host", 2222); a bare IPv6 address keeps its colons."""
    if pattern.count(":") == 1:
        name, _, port = pattern.partition(":")
        if port.isdigit():
            return name, int(port)
    return pattern, None


def _ini_value(text: str) -> Any:
    """Ansible reads INI values as Python literals when they are one, else as strings."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


# ---------------------------------------------------------------- INI


def _parse_ini(path: Path, inventory: _Inventory) -> None:
    section, kind = "ungrouped", "hosts"
    for number, raw in enumerate(read_text(path, "Ansible inventory").splitlines(), 1):
        line = raw.strip()
        where = f"{path}:{number}"
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            match = _SECTION_RE.match(line)
            if not match:
                raise ConfigError(f"{where}: bad section header {line!r}")
            section, kind = match.group(1), match.group(2) or "hosts"
            inventory.group(section)
            continue
        if kind == "vars":
            name, eq, value = line.partition("=")
            if not eq or not name.strip():
                raise ConfigError(f"{where}: expected key=value in [{section}:vars], got {line!r}")
            inventory.group(section).vars[name.strip()] = _Value(_ini_value(value.strip()), where)
        elif kind == "children":
            child = line.split("#")[0].split(";")[0].strip()
            if not child or any(c.isspace() for c in child):
                raise ConfigError(f"{where}: expected one group name in [{section}:children], got {line!r}")
            inventory.add_child(section, child)
        else:
            try:
                tokens = shlex.split(line, comments=True)
            except ValueError as exc:
                raise ConfigError(f"{where}: {exc}") from None
            variables: dict[str, _Value] = {}
            for token in tokens[1:]:
                key, eq, value = token.partition("=")
                if not eq or not key:
                    raise ConfigError(f"{where}: expected key=value after the host name, got {token!r}")
                variables[key] = _Value(_ini_value(value), where)
            name_pattern, port = _split_port(tokens[0])
            if port is not None:
                variables.setdefault("ansible_port", _Value(port, where))
            for name in expand_host_pattern(name_pattern, where):
                inventory.add_host(name, section, where, variables)


# ---------------------------------------------------------------- YAML


def _mapping(value: Any, root: yaml.Node | None, loc: tuple[Any, ...], path: Path, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{path}:{node_line(root, loc)}: {what} must be a mapping, got {type(value).__name__}")
    return value


def _parse_yaml(path: Path, inventory: _Inventory) -> None:
    data, root = load_yaml_document(path, "Ansible inventory")
    if root is None:
        return
    top = _mapping(data, root, (), path, "the inventory")

    def group(name: str, body: Any, loc: tuple[Any, ...], parent: str | None) -> None:
        inventory.group(name)
        if parent is not None:
            inventory.add_child(parent, name)
        body = _mapping(body, root, loc, path, f"group {name!r}")
        for key in body:
            if key not in ("hosts", "vars", "children"):
                line = node_line(root, (*loc, key), key=True)
                raise ConfigError(f"{path}:{line}: group {name!r}: unknown key {key!r} (allowed: hosts, vars, children)")
        for var, value in _mapping(body.get("vars"), root, (*loc, "vars"), path, "vars").items():
            inventory.group(name).vars[str(var)] = _Value(value, f"{path}:{node_line(root, (*loc, 'vars', var))}")
        for pattern, host_vars in _mapping(body.get("hosts"), root, (*loc, "hosts"), path, "hosts").items():
            hloc = (*loc, "hosts", pattern)
            where = f"{path}:{node_line(root, hloc, key=True)}"
            variables = {
                str(k): _Value(v, f"{path}:{node_line(root, (*hloc, k))}")
                for k, v in _mapping(host_vars, root, hloc, path, f"host {pattern!r}").items()
            }
            name_pattern, port = _split_port(str(pattern))
            if port is not None:
                variables.setdefault("ansible_port", _Value(port, where))
            for host in expand_host_pattern(name_pattern, where):
                inventory.add_host(host, name, where, variables)
        for child, child_body in _mapping(body.get("children"), root, (*loc, "children"), path, "children").items():
            group(str(child), child_body, (*loc, "children", child), name)

    for name, body in top.items():
        group(str(name), body, (name,), None if name == "all" else "all")


# ---------------------------------------------------------------- group_vars / host_vars


def _vars_files(directory: Path, name: str) -> list[Path]:
    files = [directory / (name + suffix) for suffix in ("",) + YAML_SUFFIXES]
    found = [f for f in files if f.is_file()]
    folder = directory / name
    if folder.is_dir():
        found.extend(sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in ("",) + YAML_SUFFIXES))
    return found


def _load_vars(directory: Path, name: str) -> dict[str, _Value]:
    merged: dict[str, _Value] = {}
    for path in _vars_files(directory, name):
        data, root = load_yaml_document(path, "Ansible vars file")
        for key, value in _mapping(data, root, (), path, "a vars file").items():
            merged[str(key)] = _Value(value, f"{path}:{node_line(root, (key,))}")
    return merged


# ---------------------------------------------------------------- resolving hosts


def _depths(inventory: _Inventory) -> dict[str, int]:
    depth = {"all": 0}
    frontier = ["all"]
    while frontier:  # longest path from `all`, as Ansible's group depth
        nxt = []
        for name in frontier:
            for child in inventory.groups[name].children:
                if depth.get(child, -1) < depth[name] + 1 and depth[name] < len(inventory.groups):
                    depth[child] = depth[name] + 1
                    nxt.append(child)
        frontier = nxt
    return depth


def _template_free(key: str, value: _Value) -> Any:
    if isinstance(value.value, str) and ("{{" in value.value or "{%" in value.value):
        raise ConfigError(f"{value.where}: {key} uses a Jinja template, which ComputeFence does not evaluate; set a literal value")
    return value.value


def _proxy_jump(args: str) -> str | None:
    try:
        tokens = shlex.split(args)
    except ValueError:
        return None
    for i, token in enumerate(tokens):
        following = tokens[i + 1] if i + 1 < len(tokens) else ""
        if token.startswith("-J"):
            return token[2:] or following or None
        option = following if token == "-o" else token[2:] if token.startswith("-o") else ""
        key, _, value = re.sub(r"\s*=\s*|\s+", "=", option.strip(), count=1).partition("=")
        if key.lower() == "proxyjump" and value:
            return value
    return None


def _target(host: _Host, groups: list[str], variables: dict[str, _Value]) -> Target:
    def var(*names: str) -> tuple[str, Any] | None:
        for name in names:
            if name in variables:
                return name, _template_free(name, variables[name])
        return None

    address = var("ansible_host", "ansible_ssh_host")
    port = 22
    found = var("ansible_port", "ansible_ssh_port")
    if found is not None:
        key, value = found
        if isinstance(value, bool) or not str(value).isdigit() or not 1 <= int(value) <= 65535:
            raise ConfigError(f"{variables[key].where}: {key} must be a port from 1 to 65535, got {value!r}")
        port = int(value)
    user = var("ansible_user", "ansible_ssh_user")
    key_file = var("ansible_ssh_private_key_file", "ansible_private_key_file")
    python = var("ansible_python_interpreter")
    jump = None
    for name in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        found = var(name)
        if found and isinstance(found[1], str):
            jump = jump or _proxy_jump(found[1])
    connection = var("ansible_connection")
    reason = fix = None
    if connection and str(connection[1]) not in ("ssh", "paramiko", "smart"):
        reason = f"ansible_connection={connection[1]}: ComputeFence checks hosts over SSH"
        fix = "run `computefence doctor` on that machine" if str(connection[1]) == "local" else "expose SSH on it"
    interpreter = str(python[1]) if python else "python3"
    return Target(
        name=host.name,
        host=str(address[1]) if address else host.name,
        port=port,
        user=str(user[1]) if user else None,
        identity_files=[str(Path(str(key_file[1])).expanduser())] if key_file else [],
        proxy_jump=jump,
        python="python3" if interpreter.startswith("auto") else interpreter,
        tags=groups,
        source=host.where,
        unreachable_reason=reason,
        unreachable_fix=fix,
    )


def _inventory_files(path: Path) -> list[Path]:
    if not path.is_dir():
        return [path]
    return sorted(
        p
        for p in path.iterdir()
        if p.is_file() and not p.name.startswith(".") and not p.name.endswith(_IGNORED_SUFFIXES)
    )


def load_ansible_inventory(path: str | Path) -> list[Target]:
    """The hosts of an Ansible inventory file or directory, as targets tagged with their groups."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: no such Ansible inventory")
    inventory = _Inventory()
    for file in _inventory_files(path):
        if file.suffix in YAML_SUFFIXES:
            _parse_yaml(file, inventory)
        else:
            _parse_ini(file, inventory)
    if not inventory.hosts:
        raise ConfigError(f"{path}: the Ansible inventory lists no hosts")

    base = path if path.is_dir() else path.parent
    for name, group in inventory.groups.items():
        group.vars.update(_load_vars(base / "group_vars", name))
    for name, host in inventory.hosts.items():
        host.vars.update(_load_vars(base / "host_vars", name))
    # Groups listed under no parent hang off `all`; hosts in no group are `ungrouped`.
    parents = {child for g in inventory.groups.values() for child in g.children}
    for name in inventory.groups:
        if name != "all" and name not in parents:
            inventory.add_child("all", name)
    depth = _depths(inventory)
    parent_of: dict[str, list[str]] = {}
    for group in inventory.groups.values():
        for child in group.children:
            parent_of.setdefault(child, []).append(group.name)

    targets = []
    for host in inventory.hosts.values():
        member = {g.name for g in inventory.groups.values() if host.name in g.hosts}
        stack = list(member)
        while stack:
            for parent in parent_of.get(stack.pop(), []):
                if parent not in member:
                    member.add(parent)
                    stack.append(parent)
        member.add("all")
        variables: dict[str, _Value] = {}
        for name in sorted(member, key=lambda g: (depth.get(g, 0), g)):
            variables.update(inventory.groups[name].vars)
        variables.update(host.vars)
        tags = sorted(member - {"all", "ungrouped"})
        targets.append(_target(host, tags, variables))
    return targets


class AnsibleSource:
    """An Ansible inventory file or directory."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.name = f"ansible {path}"

    def targets(self) -> list[Target]:
        return load_ansible_inventory(self.path)
