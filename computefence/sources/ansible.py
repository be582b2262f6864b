"""Targets from an existing Ansible inventory (INI or YAML), `--ansible-inventory FILE|DIR`.

Where Ansible is installed, Ansible itself reads it: `ansible-inventory -i SRC --list`
(plugins, dynamic inventory scripts, ranges, precedence exactly as in a playbook run),
with --vault-password-file / --vault-id passed through. Otherwise the built-in reader:
groups, `[group:vars]`, `[group:children]` (YAML: all/hosts/vars/children), `#` and `;`
comments where Ansible's INI parser takes them, host ranges by Ansible's rules (`web[01:03]`,
`w[:2]`, `node-[a:c]`, `[0:10:2]`, several in one name), `host:port` and `[v6addr]:port`,
inventory folders (recursively, skipping what Ansible skips), and `group_vars/`, `host_vars/`
beside the inventory, with Ansible's precedence: inline group vars (by depth,
ansible_group_priority, name) < group_vars/all < group_vars/GROUP < inline host vars <
host_vars/HOST. An INI line Ansible refuses (a bad header, `host x=1 ; note`, a host range it
cannot expand) is an error naming FILE:LINE, as Ansible refuses the whole file for it; so is
a range of more than MAX_HOSTS_PER_PATTERN hosts.

Variables used: ansible_host, ansible_port, ansible_user (and their ansible_ssh_* names,
which win as in Ansible's ssh plugin), ansible_ssh_private_key_file,
ansible_python_interpreter, ansible_connection, and in ansible_ssh_common_args /
ansible_ssh_extra_args `-o ProxyCommand=`, `-o ProxyJump=`, `-J`, `-F`, `-p`, `-i`, `-l`
(first value wins, as on ssh's command line). Any other ssh option there is a warning
naming the hosts and the option. Of Jinja, only plain `{{ name }}` references are evaluated
in those variables (alone or within text; to the host's variables, group_vars and host_vars
included, inventory_hostname and inventory_hostname_short; through at most
MAX_TEMPLATE_DEPTH references), and `{{ lookup('env', 'NAME') }}` from this machine's
environment in ansible_ssh_private_key_file (a path here, never sent; no NAME that reads as
a secret). Any other template (filters, expressions, lookups,
statements, undefined names, loops) makes that one host not checkable, with a warning naming
the host and the variable: it is never rendered, since rendering could run anything.
sources/ansible_vars.py turns a host's variables into its target, for both readers.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import string
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from computefence.errors import ConfigError, InputLimitError
from computefence.files import read_config_bytes, read_config_text
from computefence.models import Target
from computefence.sources.ansible_vars import Variable, Vaulted, host_target, quoted
from computefence.sources.ssh_config import unhonoured_warnings
from computefence.sources.tools import ToolOverflow, ToolTimeout, run_tool
from computefence.yaml_lines import SAFE_LOADER, Marks, line_at, load_yaml_document, marks_at

READER_ANSIBLE = "ansible-inventory"
READER_BUILTIN = "built-in reader"
ANSIBLE_TIMEOUT_S = 120.0
# `--list` of 100,000 hosts with their variables stays well under this.
ANSIBLE_MAX_BYTES = 256 << 20
YAML_SUFFIXES = (".yaml", ".yml", ".json")
# `h[1:100000000]` would take minutes and gigabytes; no rented fleet comes near these.
MAX_HOSTS_PER_PATTERN = 100_000
MAX_HOSTS = 1_000_000
# What Ansible skips in an inventory folder (INVENTORY_IGNORE_EXTS, IGNORED_ALWAYS).
_IGNORED_SUFFIXES = ("~", ".orig", ".cfg", ".retry", ".pyc", ".pyo", ".swp", ".bak", ".rpm", ".md", ".txt", ".rst")
_IGNORED_NAMES = ("host_vars", "group_vars", "vars_plugins")
# How ansible-inventory says it skipped a source or a file of it.
_UNPARSED_RE = re.compile(r"(Unable|Failed) to parse")
_MESSAGE_LIMIT = 300


class _VarsLoader(SAFE_LOADER):  # type: ignore[valid-type,misc]  # libyaml's loader where it is built
    """YAML as Ansible writes it: `!vault` and `!unsafe` values are legal."""


_VarsLoader.add_constructor("!vault", lambda loader, node: Vaulted())
_VarsLoader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))
# What ast.literal_eval can only refuse: names (but True, False, None) and dotted numbers such as
# addresses. With plain integers, most values of a large inventory, read without compiling.
_LITERAL_EVAL_REFUSES_RE = re.compile(r"[A-Za-z_][\w.\-/:@]*|\d+(?:\.\d+){2,}")
# A host line without quotes, escapes or comments: shlex would split it at blanks only.
_PLAIN_HOST_LINE_RE = re.compile(r"[^\"'\\#]*")
# Ansible's INI section header and [group:children] line: after them only a `#` comment,
# never a `;` one (ansible/plugins/inventory/ini.py, _compile_patterns).
_SECTION_RE = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:#.*)?$")
_CHILD_RE = re.compile(r"^([^:\]\s]+)\s*(?:#.*)?$")
_SECTION_KINDS = ("hosts", "children", "vars")


@dataclass
class _Group:
    name: str
    vars: dict[str, Variable] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)
    hosts: dict[str, None] = field(default_factory=dict)  # an ordered set
    priority: int = 1
    # group_vars/NAME files: they beat every inline group var.
    file_vars: dict[str, Variable] = field(default_factory=dict)


@dataclass
class _Host:
    name: str
    where: str
    vars: dict[str, Variable] = field(default_factory=dict)
    file_vars: dict[str, Variable] = field(default_factory=dict)


class _Inventory:
    def __init__(self) -> None:
        self.groups: dict[str, _Group] = {"all": _Group("all"), "ungrouped": _Group("ungrouped")}
        self.hosts: dict[str, _Host] = {}
        self.warnings: list[str] = []

    def set_group_var(self, group: str, name: str, value: Variable) -> None:
        self.group(group).vars[name] = value
        if name == "ansible_group_priority":
            priority = value.value
            if isinstance(priority, bool) or not str(priority).lstrip("-").isdigit():
                raise ConfigError(f"{value.where}: ansible_group_priority must be a whole number, got {priority!r}")
            self.group(group).priority = int(priority)

    def group(self, name: str) -> _Group:
        return self.groups.setdefault(name, _Group(name))

    def add_host(self, name: str, group: str, where: str, variables: dict[str, Variable]) -> None:
        if name not in self.hosts and len(self.hosts) >= MAX_HOSTS:
            raise InputLimitError(
                f"{where}: more than {MAX_HOSTS:,} hosts in one Ansible inventory; split it or narrow it with --limit"
            )
        host = self.hosts.setdefault(name, _Host(name, where))
        host.vars.update(variables)
        self.group(group).hosts[name] = None

    def add_child(self, parent: str, child: str) -> None:
        self.group(child)
        children = self.group(parent).children
        if child not in children:
            children.append(child)


# ---------------------------------------------------------------- host patterns


class RefusedFileError(ConfigError):
    """A line Ansible's inventory parser refuses, for which it refuses the whole file
    (ansible-inventory warns and lists none of its hosts): an error naming the line, never a
    line skipped while the rest of the file counts, since no reading of it is Ansible's."""


class HostRangeError(RefusedFileError):
    """A host range Ansible cannot expand."""


def host_pattern(pattern: str, where: str) -> tuple[list[str], int | None]:
    """The hosts and port of an inventory host pattern, as Ansible's inventory plugins read
    it: a `:port` only where what precedes it is a hostname, IPv4 or bracketed IPv6 address
    (ranges allowed), then every `[begin:end(:step)]` expanded. `h[1:3]:2222` is h1..h3 on
    2222, but `h[:3]:2222` (no valid address) is the names h0:2222..h3:2222, as in Ansible."""
    name, port = _split_port(pattern)
    return expand_host_pattern(name, where), port


def expand_host_pattern(pattern: str, where: str) -> list[str]:
    """`web[01:03].example` -> web01.example, web02.example, web03.example, with Ansible's
    rules: the first `[` and the first `]` delimit a range, an empty begin is 0, a begin with
    a leading 0 sets the width (the end must be as wide), letters run through a-z then A-Z,
    numbers are read as Python's int() reads them, a range that runs backwards gives no hosts
    (letters: an error), and whatever follows is expanded likewise. More than
    MAX_HOSTS_PER_PATTERN names is an InputLimitError before any is made."""
    levels: list[tuple[str, list[str]]] = []
    count = 1
    rest = pattern
    while "[" in rest:
        pieces = rest.replace("[", "|", 1).replace("]", "|", 1).split("|")
        if len(pieces) != 3:
            why = "no closing ']'" if len(pieces) < 3 else "'|' or another range bracket in it"
            raise HostRangeError(f"{where}: bad host range in {quoted(pattern)}: {why}")
        head, spec, rest = pieces
        size, make = _range_values(spec, pattern, where)
        if size == 0:
            return []  # Ansible makes no host of it, and reads no further
        count *= size
        if count > MAX_HOSTS_PER_PATTERN:
            raise InputLimitError(
                f"{where}: host pattern {quoted(pattern)} expands to more than {MAX_HOSTS_PER_PATTERN:,} hosts"
            )
        levels.append((head, make()))
    names = [""]
    for head, values in levels:
        names = [name + head + value for name in names for value in values]
    return [name + rest for name in names]


def _range_values(spec: str, pattern: str, where: str) -> tuple[int, Callable[[], list[str]]]:
    """How many names one range gives, and a way to make them (after the count is checked)."""

    def bad(why: str) -> HostRangeError:
        return HostRangeError(f"{where}: bad host range [{spec[:50]}] in {quoted(pattern)}: {why}")

    bounds = spec.split(":")
    if len(bounds) not in (2, 3):
        raise bad("expected begin:end or begin:end:step")
    begin, end = bounds[0] or "0", bounds[1]
    step_text = bounds[2] if len(bounds) == 3 else "1"
    if not end:
        raise bad("no end value")
    width = 0
    if begin[0] == "0" and len(begin) > 1:
        if len(begin) != len(end):
            raise bad(f"a zero-padded begin ({begin}) needs an end of the same width ({end})")
        width = len(begin)
    # As Ansible: a begin and end found in a-zA-Z (as substrings) are letters, anything else a number.
    letters = string.ascii_letters
    if begin in letters and end in letters:
        first, last = letters.index(begin), letters.index(end)
        if first > last:
            raise bad("letters must run forwards")
        try:
            chosen = letters[first : last + 1 : int(step_text)]
        except ValueError:
            pass  # a step of 0 or not a number: Ansible then reads the bounds as numbers, and fails
        else:
            return len(chosen), lambda: list(chosen)
    try:
        numbers = range(int(begin), int(end) + 1, int(step_text))
    except ValueError as exc:
        raise bad("the step is 0" if "must not be zero" in str(exc) else str(exc)[:120]) from None
    try:
        size = len(numbers)
    except OverflowError:
        size = MAX_HOSTS_PER_PATTERN + 1
    return size, lambda: [str(n).zfill(width) for n in numbers]


# Host addresses a `:port` may follow, in the grammar Ansible's parse_address accepts, ranges
# included: a hostname's labels, an IPv4 address, an IPv6 address (bracketed before a port).
_NUMERIC_RANGE = r"\[[0-9]+:[0-9]+(?::[0-9]+)?\]"
_HEX_RANGE = r"\[[0-9a-f]+:[0-9a-f]+(?::[0-9]+)?\]"
_LABEL_RANGE = r"\[(?:[a-z]:[a-z]|[0-9]+:[0-9]+)(?::[0-9]+)?\]"
_LABEL = rf"(?:\w|{_LABEL_RANGE})(?:[\w-]|{_LABEL_RANGE})*(?<![_-])"
_HOSTNAME_RE = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$", re.I)
_OCTET = rf"(?:[01]?[0-9]{{1,2}}|2[0-4][0-9]|25[0-5]|{_NUMERIC_RANGE})"
_IPV4_RE = re.compile(rf"^(?:{_OCTET}\.){{3}}{_OCTET}$", re.I)
_H = rf"(?:[0-9a-f]{{1,4}}|{_HEX_RANGE})"
_V4 = rf"(?:{_H}\.){{3}}{_H}"
_IPV6_RE = re.compile(
    "^(?:"
    + "|".join(
        [
            rf"(?:{_H}:){{7}}{_H}",
            rf"(?:{_H}:){{1,6}}:",
            *(rf"(?:{_H}:){{{left}}}(?::{_H}){{1,{7 - left}}}" for left in range(1, 7)),
            rf":(?::{_H}){{1,6}}",
            rf"{_H}?::",
            rf"(?:0:){{6}}{_V4}",
            rf"::(?:ffff:)?{_V4}",
            rf"(?:0:){{5}}ffff:{_V4}",
        ]
    )
    + ")$",
    re.I,
)
_BRACKETED_PORT_RE = re.compile(r"^\[(.+)\]:([0-9]+)$")
# Anything but `:` and brackets, or whole bracketed ranges, then `:port`.
_HOST_PORT_RE = re.compile(r"^((?:[^:\[\]]|\[[^\]]*\])*):([0-9]+)$")


def _split_port(pattern: str) -> tuple[str, int | None]:
    """`host:2222` -> ("host", 2222), `[2001:db8::1]:2222` -> ("2001:db8::1", 2222), a bare
    IPv6 address keeps its colons; what is no address keeps its `:port` in the name."""
    address, port = pattern, None
    for port_re in (_BRACKETED_PORT_RE, _HOST_PORT_RE):  # in turn, as Ansible: `[h:1]:2` is h, port 1
        found = port_re.match(address)
        if found:
            try:
                address, port = found.group(1), int(found.group(2))
            except ValueError:  # past int()'s digit limit: Ansible keeps the pattern whole
                return pattern, None
    if any(address_re.match(address) for address_re in (_IPV4_RE, _IPV6_RE, _HOSTNAME_RE)):
        return address, port
    return pattern, None


def _ini_value(text: str) -> Any:
    """Ansible reads INI values as Python literals when they are one, else as strings."""
    # Ports and counts without compiling; longer runs of digits are left to ast, since int()
    # refuses past its digit limit (640 at the lowest) what ast reads or refuses its own way.
    if len(text) <= 18 and text.isascii() and text.isdigit() and (text[0] != "0" or not text.strip("0")):
        return int(text)
    if _LITERAL_EVAL_REFUSES_RE.fullmatch(text) and text not in ("True", "False", "None"):
        return text
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


# ---------------------------------------------------------------- INI


def _parse_ini(path: Path, inventory: _Inventory, text: str) -> None:
    section = "ungrouped"
    kind = "hosts"
    # As Ansible: a group named by [g:vars] or under [p:children] must be declared in this file
    # by [g] or [g:children], or exist already; else Ansible refuses the file.
    existing, declared = set(inventory.groups), set()
    undeclared: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        where = f"{path}:{number}"
        if not line or line[0] in "#;":
            continue
        try:
            header = _SECTION_RE.match(line)
            if header and (header.group(2) or "hosts") in _SECTION_KINDS:
                section, kind = header.group(1), header.group(2) or "hosts"
                if kind != "vars":
                    declared.add(section)
                elif section not in existing:
                    undeclared.setdefault(section, f"{where}: [{section}:vars] is for a group this file never declares")
                inventory.group(section)
                continue
            bracketed = line.startswith("[") and (line.endswith("]") or "]" not in line)
            if header or bracketed or _SECTION_RE.match(line.split()[0]):
                # `[g:hosts]` is a header; `[g:other]`, `[g`, `[g x]` and `[g] ; note` (Ansible reads
                # no `;` comment there) are not, and Ansible refuses the file. A line such as
                # `[1:3]web` or `[::1]:2222` is a host.
                raise ConfigError(f"{where}: bad section header {line!r}")
            _ini_line(line, where, section, kind, inventory)
            child = _CHILD_RE.match(line) if kind == "children" else None
            if child and child.group(1) not in existing:
                undeclared.setdefault(
                    child.group(1),
                    f"{where}: [{section}:children] names {child.group(1)!r}, a group this file never declares",
                )
        except (InputLimitError, RefusedFileError):
            raise
        except ConfigError as exc:
            raise RefusedFileError(f"{exc}: Ansible refuses the whole file for it") from None
    for group, message in undeclared.items():
        if group not in declared:
            raise RefusedFileError(f"{message}: Ansible refuses the whole file for it")


def _ini_line(line: str, where: str, section: str, kind: str, inventory: _Inventory) -> None:
    if kind == "vars":
        name, eq, value = line.partition("=")
        if not eq or not name.strip():
            raise ConfigError(f"{where}: expected key=value in [{section}:vars], got {line!r}")
        inventory.set_group_var(section, name.strip(), Variable(_ini_value(value.strip()), where))
    elif kind == "children":
        child = _CHILD_RE.match(line)
        if not child and "[" in line:
            raise HostRangeError(
                f"{where}: [{section}:children] takes group names, and Ansible expands no host range there: {line!r}"
            )
        if not child:
            raise ConfigError(f"{where}: expected one group name in [{section}:children], got {line!r}")
        inventory.add_child(section, child.group(1))
    else:
        if _PLAIN_HOST_LINE_RE.fullmatch(line):
            tokens = re.split(r"[ \t]+", line)
        else:
            try:
                tokens = shlex.split(line, comments=True)
            except ValueError as exc:
                raise ConfigError(f"{where}: {exc}") from None
        # The name first, as Ansible: a bad range in it is the error, whatever follows.
        names, port = host_pattern(tokens[0], where)
        if port is None and tokens[0].endswith(":"):
            raise ConfigError(f"{where}: host pattern {quoted(tokens[0])} ends in ':', which Ansible keeps for a port")
        variables: dict[str, Variable] = {}
        for token in tokens[1:]:
            key, eq, value = token.partition("=")
            if not eq or not key:
                raise ConfigError(f"{where}: expected key=value after the host name, got {token!r}")
            variables[key] = Variable(_ini_value(value), where)
        if port is not None:
            variables.setdefault("ansible_port", Variable(port, where))
        for name in names:
            inventory.add_host(name, section, where, variables)


# ---------------------------------------------------------------- YAML


def _mapping(value: Any, root: Marks | None, loc: tuple[Any, ...], path: Path, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{path}:{line_at(root, loc)}: {what} must be a mapping, got {type(value).__name__}")
    return value


def _parse_yaml(path: Path, inventory: _Inventory, data: Any, root: Marks | None) -> None:
    if root is None:
        return
    top = _mapping(data, root, (), path, "the inventory")

    def group(name: str, body: Any, marks: Marks | None, parent: str | None) -> None:
        inventory.group(name)
        if parent is not None:
            inventory.add_child(parent, name)
        body = _mapping(body, marks, (), path, f"group {name!r}")
        for key in body:
            if key not in ("hosts", "vars", "children"):
                line = line_at(marks, (key,), key=True)
                raise ConfigError(
                    f"{path}:{line}: group {name!r}: unknown key {key!r} (allowed: hosts, vars, children)"
                )
        vars_marks = marks_at(marks, ("vars",))
        for var, value in _mapping(body.get("vars"), vars_marks, (), path, "vars").items():
            inventory.set_group_var(name, str(var), Variable(value, f"{path}:{line_at(vars_marks, (var,))}"))
        hosts_marks = marks_at(marks, ("hosts",))
        for pattern, host_vars in _mapping(body.get("hosts"), hosts_marks, (), path, "hosts").items():
            where = f"{path}:{line_at(hosts_marks, (pattern,), key=True)}"
            host_marks = marks_at(hosts_marks, (pattern,))
            variables = {
                str(k): Variable(v, f"{path}:{line_at(host_marks, (k,))}")
                for k, v in _mapping(host_vars, host_marks, (), path, f"host {pattern!r}").items()
            }
            hosts, port = host_pattern(str(pattern), where)
            if port is not None:
                variables.setdefault("ansible_port", Variable(port, where))
            for host in hosts:
                inventory.add_host(host, name, where, variables)
        children_marks = marks_at(marks, ("children",))
        for child, child_body in _mapping(body.get("children"), children_marks, (), path, "children").items():
            group(str(child), child_body, marks_at(children_marks, (child,)), name)

    for name, body in top.items():
        group(str(name), body, marks_at(root, (name,)), None if name == "all" else "all")


# ---------------------------------------------------------------- group_vars / host_vars


def _vars_files(directory: Path, name: str, listed: set[str]) -> list[Path]:
    """NAME, NAME.yaml, .yml, .json and the files under NAME/ in `directory`, whose entries are
    `listed` (one listing, not five stat calls for each of 100,000 hosts)."""
    names = [name + suffix for suffix in ("",) + YAML_SUFFIXES]
    if not any(n.split("/")[0] in listed for n in names):
        return []
    found = [directory / n for n in names if (directory / n).is_file()]
    folder = directory / name
    if folder.is_dir():
        found.extend(sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in ("",) + YAML_SUFFIXES))
    return found


def _listed(directory: Path) -> set[str]:
    try:
        return {entry.name for entry in os.scandir(directory)}
    except (NotADirectoryError, FileNotFoundError):
        return set()
    except OSError as exc:  # no permission, a symlink loop: what Ansible's own reader refuses too
        raise ConfigError(f"{directory}: cannot list it: {exc.strerror or exc}") from None


def _load_vars(directory: Path, name: str, listed: set[str]) -> dict[str, Variable]:
    merged: dict[str, Variable] = {}
    for path in _vars_files(directory, name, listed):
        data, root = load_yaml_document(path, "Ansible vars file", loader_class=_VarsLoader)
        for key, value in _mapping(data, root, (), path, "a vars file").items():
            merged[str(key)] = Variable(value, f"{path}:{line_at(root, (key,))}")
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


# ---------------------------------------------------------------- the built-in reader


def _inventory_files(path: Path) -> list[Path]:
    """The files Ansible reads for a source: the file itself, or a folder's files, recursively
    and in name order, without the names and extensions Ansible ignores."""
    if not path.is_dir():
        return [path]
    files: list[Path] = []
    for entry in sorted(path.iterdir()):
        if entry.name.startswith(".") or entry.name in _IGNORED_NAMES or entry.name.endswith(_IGNORED_SUFFIXES):
            continue
        if entry.is_dir():
            files.extend(_inventory_files(entry))
        elif entry.is_file():
            files.append(entry)
    return files


def _read_file(file: Path, inventory: _Inventory) -> None:
    """One inventory file: YAML by extension, or when a file without one holds a YAML mapping
    (as Ansible's yaml plugin tries it first), else INI."""
    try:
        text = read_config_text(file, "Ansible inventory")
    except InputLimitError:
        raise
    except ConfigError:
        if file.suffix in YAML_SUFFIXES:
            raise
        text = _ini_text_with_binary_comments(file)
        _parse_ini(file, inventory, text)
        return
    if file.suffix in YAML_SUFFIXES:
        data, root = load_yaml_document(file, "Ansible inventory", loader_class=_VarsLoader, text=text)
        _parse_yaml(file, inventory, data, root)
        return
    if not file.suffix:
        try:
            data, root = load_yaml_document(file, "Ansible inventory", loader_class=_VarsLoader, text=text)
        except InputLimitError:
            raise
        except ConfigError:
            data, root = None, None
        if isinstance(data, dict) and all(isinstance(v, dict) or v is None for v in data.values()):
            _parse_yaml(file, inventory, data, root)
            return
    _parse_ini(file, inventory, text)


def _ini_text_with_binary_comments(file: Path) -> str:
    """As Ansible's INI reader: comment lines may hold bytes that are not UTF-8 (they are read
    as blank lines); any other line must be UTF-8 text."""
    lines = []
    for number, raw in enumerate(read_config_bytes(file, "Ansible inventory").splitlines(), 1):
        if raw.strip()[:1] in (b"#", b";"):
            lines.append("")
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"{file}:{number}: not UTF-8 text") from None
        if "\x00" in line:
            raise ConfigError(f"{file}: not a text file")
        lines.append(line)
    return "\n".join(lines)


def _with_ancestors(groups: Iterable[str], parent_of: dict[str, list[str]]) -> set[str]:
    """The groups and every group above them."""
    member = set(groups)
    stack = list(member)
    while stack:
        for parent in parent_of.get(stack.pop(), []):
            if parent not in member:
                member.add(parent)
                stack.append(parent)
    return member


def _read_inventory(path: Path) -> _Inventory:
    """The files of an inventory file or folder, and the group_vars/ and host_vars/ beside it,
    read within the readers' limits."""
    if not path.exists():
        raise ConfigError(f"{path}: no such Ansible inventory")
    inventory = _Inventory()
    for file in _inventory_files(path):
        _read_file(file, inventory)
    if not inventory.hosts:
        more = f" ({inventory.warnings[0]})" if inventory.warnings else ""
        raise ConfigError(f"{path}: the Ansible inventory lists no hosts{more}")
    base = path if path.is_dir() else path.parent
    for directory, owners in ((base / "group_vars", inventory.groups), (base / "host_vars", inventory.hosts)):
        listed = _listed(directory)
        for name, owner in owners.items() if listed else ():
            owner.file_vars = _load_vars(directory, name, listed)
    return inventory


def read_ansible_inventory(path: str | Path) -> tuple[list[Target], list[str]]:
    """The built-in reader: the hosts of an inventory file or folder as targets tagged with
    their groups, and the warnings for what it skipped."""
    path = Path(path)
    inventory = _read_inventory(path)
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
    ignored: dict[str, Any] = {}
    groups_of: dict[str, set[str]] = {}
    for group in inventory.groups.values():
        for name in group.hosts:
            groups_of.setdefault(name, set()).add(group.name)
    # Hosts in the same groups share their tags and group variables (most hosts of a big inventory).
    by_groups: dict[frozenset[str], tuple[list[str], dict[str, Variable]]] = {}
    for host in inventory.hosts.values():
        groups = frozenset(groups_of.get(host.name, ()))
        if groups not in by_groups:
            member = _with_ancestors(groups, parent_of)
            # Ansible's order: inline group vars, group_vars/all, group_vars/GROUP, inline host
            # vars, host_vars/HOST; groups by depth, then ansible_group_priority, then name.
            ordered = sorted(member - {"all"}, key=lambda g: (depth.get(g, 0), inventory.groups[g].priority, g))
            group_variables: dict[str, Variable] = dict(inventory.groups["all"].vars)
            for name in ordered:
                group_variables.update(inventory.groups[name].vars)
            for name in ["all", *ordered]:
                group_variables.update(inventory.groups[name].file_vars)
            by_groups[groups] = (sorted(member - {"all", "ungrouped"}), group_variables)
        tags, group_variables = by_groups[groups]
        variables = {**group_variables, **host.vars, **host.file_vars}
        targets.append(host_target(host.name, host.where, list(tags), variables, ignored, inventory.warnings))
    return targets, inventory.warnings + unhonoured_warnings(str(path), ignored)


def load_ansible_inventory(path: str | Path) -> list[Target]:
    """The built-in reader's targets (see read_ansible_inventory)."""
    return read_ansible_inventory(path)[0]


# ---------------------------------------------------------------- ansible-inventory


def _refuse_what_would_hang_ansible(path: Path) -> None:
    """ansible-inventory blocks on a FIFO, reads /dev/zero until memory runs out, expands
    alias bombs and `h[1:100000000]`: the built-in reader meets each with a limit, so it reads
    the inventory first (without building targets); its other objections are left to Ansible,
    the better judge."""
    try:
        _read_inventory(path)
    except InputLimitError:
        raise
    except ConfigError:
        pass


def ansible_inventory_command() -> list[str] | None:
    """How to run Ansible's own inventory reader here, or None without Ansible."""
    found = shutil.which("ansible-inventory")
    if found:
        return [found]
    try:
        import ansible.cli.inventory  # noqa: F401
    except ImportError:
        return None
    return [sys.executable, "-m", "ansible.cli.inventory"]


def _ansible_list(command: list[str], path: Path, vault_args: list[str]) -> tuple[dict[str, Any], list[str]]:
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_LOCALHOST_WARNING": "0"}
    argv = [*command, "-i", str(path), "--list", *vault_args]
    try:
        returncode, stdout, stderr = run_tool(argv, ANSIBLE_TIMEOUT_S, ANSIBLE_MAX_BYTES, env)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot run ansible-inventory: {exc.strerror or exc}") from None
    except ToolOverflow:
        raise ConfigError(f"{path}: ansible-inventory printed over {ANSIBLE_MAX_BYTES:,} bytes") from None
    except ToolTimeout:
        raise ConfigError(f"{path}: ansible-inventory gave no answer within {ANSIBLE_TIMEOUT_S:g} s") from None
    messages = _ansible_messages(stderr.decode("utf-8", "replace"))
    if returncode != 0:
        errors = [m for m in messages if m.startswith("[ERROR]")] or messages
        why = errors[0].removeprefix("[ERROR]:").strip() if errors else f"exit status {returncode}"
        raise ConfigError(f"{path}: ansible-inventory: {why}")
    try:
        document = json.loads(stdout)
    except ValueError:
        raise ConfigError(f"{path}: ansible-inventory printed no JSON inventory") from None
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: ansible-inventory printed no JSON inventory")
    warnings = [
        f"{path}: ansible-inventory: {m.removeprefix('[WARNING]:').strip()}"[:_MESSAGE_LIMIT]
        for m in messages
        if m.startswith("[WARNING]")
    ]
    return document, warnings


def _ansible_messages(text: str) -> list[str]:
    """Ansible's stderr as one string per message (continuation lines joined)."""
    messages: list[str] = []
    for line in text.splitlines():
        if line.startswith("["):
            messages.append(line.strip())
        elif messages and line.strip():
            messages[-1] += " " + line.strip()
    return messages


def targets_from_ansible_list(document: dict[str, Any], source: str) -> tuple[list[Target], list[str]]:
    """Targets from `ansible-inventory --list` JSON: `_meta.hostvars` and the groups' members."""
    meta_value = document.get("_meta")
    meta: dict[str, Any] = meta_value if isinstance(meta_value, dict) else {}
    hostvars_value = meta.get("hostvars")
    hostvars: dict[str, Any] = hostvars_value if isinstance(hostvars_value, dict) else {}
    groups = {name: body for name, body in document.items() if name != "_meta" and isinstance(body, dict)}
    parent_of: dict[str, list[str]] = {}
    member_of: dict[str, list[str]] = {}
    order: dict[str, None] = {}  # an ordered set

    def visit(name: str, seen: set[str]) -> None:
        body = groups.get(name, {})
        for host in body.get("hosts") or []:
            member_of.setdefault(str(host), []).append(name)
            order[str(host)] = None
        for child in body.get("children") or []:
            parent_of.setdefault(str(child), []).append(name)
            if child not in seen:
                seen.add(child)
                visit(str(child), seen)

    visit("all", {"all"})
    for name in hostvars:
        order[str(name)] = None
    targets = []
    ignored: dict[str, Any] = {}
    refused: list[str] = []
    for host in order:
        member = _with_ancestors(member_of.get(host, []), parent_of)
        raw_value = hostvars.get(host)
        raw: dict[str, Any] = raw_value if isinstance(raw_value, dict) else {}
        variables = {str(k): Variable(v, f"{source}: host {host}") for k, v in raw.items()}
        tags = sorted(member - {"all", "ungrouped"})
        targets.append(host_target(host, f"{source} (ansible-inventory)", tags, variables, ignored, refused))
    return targets, refused + unhonoured_warnings(source, ignored)


class AnsibleSource:
    """An Ansible inventory file or folder, read by `ansible-inventory` where it is installed."""

    def __init__(
        self,
        path: str | Path,
        *,
        vault_password_files: tuple[str, ...] | list[str] = (),
        vault_ids: tuple[str, ...] | list[str] = (),
        use_ansible: bool | None = None,
    ):
        self.path = Path(path)
        self.name = f"ansible {path}"
        self.vault_args = [arg for f in vault_password_files for arg in ("--vault-password-file", f)]
        self.vault_args += [arg for v in vault_ids for arg in ("--vault-id", v)]
        self.command = ansible_inventory_command() if use_ansible in (None, True) else None
        if use_ansible and self.command is None:
            raise ConfigError("ansible-inventory is not installed")
        self.resolver = READER_ANSIBLE if self.command else READER_BUILTIN
        self.warnings: list[str] = []

    def targets(self) -> list[Target]:
        if self.command is None:
            if self.vault_args:
                raise ConfigError(f"{self.path}: vault options need Ansible installed (ansible-inventory)")
            targets, self.warnings = read_ansible_inventory(self.path)
            return targets
        if not self.path.exists():
            raise ConfigError(f"{self.path}: no such Ansible inventory")
        _refuse_what_would_hang_ansible(self.path)
        document, warnings = _ansible_list(self.command, self.path, self.vault_args)
        if any(_UNPARSED_RE.search(w) for w in warnings):
            # Ansible drops a whole file for one bad line: the built-in reader names the line.
            try:
                targets, own = read_ansible_inventory(self.path)
            except RefusedFileError:
                raise  # Ansible refused the file for it too: say where, not "no hosts"
            except ConfigError:
                pass
            else:
                self.resolver = f"{READER_BUILTIN} (ansible-inventory could not parse it)"
                self.warnings = own
                return targets
        targets, ignored = targets_from_ansible_list(document, str(self.path))
        self.warnings = warnings + ignored
        if not targets:
            more = f" ({warnings[0]})" if warnings else ""
            raise ConfigError(f"{self.path}: the Ansible inventory lists no hosts{more}")
        return targets
