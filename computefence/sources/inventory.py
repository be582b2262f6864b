"""ComputeFence YAML inventories (`-i pods.yaml`, default `inventory/*.yaml`).

```yaml
known_hosts: ~/.ssh/known_hosts        # or a list
defaults: {user: root, port: 22, identity_file: ~/.ssh/id_ed25519, python: python3,
           proxy_jump: bastion, checks: {output_dir: /workspace/checkpoints}}
# instead of proxy_jump, an ssh ProxyCommand: proxy_command: "ssh -W %h:%p bastion"
# identity_file: none, as ssh_config's IdentityFile none: no ~/.ssh/id_* key, the agent's only
hosts:
  - {name: pod-a, host: 203.0.113.10, port: 22022, tags: [sweep-7], checks: {output_dir: ./out}}
```

Every problem is a ConfigError naming the file and the line, raised before anything
connects.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from computefence.errors import ConfigError
from computefence.files import read_config_text
from computefence.models import CheckOptions, Target
from computefence.yaml_lines import line_at, load_yaml_document, marks_at

if TYPE_CHECKING:
    # pydantic's own dependency, for the type of an error entry only.
    from pydantic_core import ErrorDetails

INVENTORY_SUFFIXES = (".yaml", ".yml")
# Target names end up in `Host` lines, --limit patterns, JUnit suites and Prometheus labels.
NAME_RE = re.compile(r"^[\w.@:+=/-]+$")
NAME_RULE = "letters, digits and . _ - @ : + = / only"


# ---------------------------------------------------------------- locations


def format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# ---------------------------------------------------------------- the schema


def _one_or_many(value: Any) -> Any:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return value
    raise ValueError("expected a string or a list of strings")


def _word(what: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if isinstance(value, str) and value.split() != [value]:  # empty, or a space anywhere
            raise ValueError(f"{what} must be a non-empty string without spaces")
        return value

    return check


def _identifier(value: Any) -> Any:
    if isinstance(value, str) and not NAME_RE.match(value):
        raise ValueError(f"{value!r}: use {NAME_RULE}")
    return value


Port = Annotated[int, Field(ge=1, le=65535)]
Word = Annotated[str, BeforeValidator(_word("value"))]
Identifier = Annotated[str, BeforeValidator(_identifier)]
PathList = Annotated[list[str], BeforeValidator(_one_or_many)]
ProxyCommand = Annotated[str, Field(min_length=1, pattern=r"^[^\n\r\x00]+$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class InventoryChecks(CheckOptions):
    """CheckOptions as written in an inventory: strict types, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", strict=True)


class InventoryDefaults(_Strict):
    user: Word | None = None
    port: Port | None = None
    identity_file: PathList | None = None
    python: Word | None = None
    proxy_jump: Word | None = None
    proxy_command: ProxyCommand | None = None
    checks: InventoryChecks = Field(default_factory=InventoryChecks)


class InventoryHost(_Strict):
    name: Identifier | None = None
    host: Word
    port: Port | None = None
    user: Word | None = None
    identity_file: PathList | None = None
    python: Word | None = None
    proxy_jump: Word | None = None
    proxy_command: ProxyCommand | None = None
    tags: list[Identifier] = Field(default_factory=list)
    checks: InventoryChecks = Field(default_factory=InventoryChecks)

    @field_validator("host", mode="before")
    @classmethod
    def _host(cls, value: Any) -> Any:
        return _word("host")(value)


class InventoryFile(_Strict):
    known_hosts: PathList = Field(default_factory=list)
    defaults: InventoryDefaults = Field(default_factory=InventoryDefaults)
    hosts: list[InventoryHost] = Field(min_length=1)


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The schema model that holds the last key of `loc` (for listing the allowed keys)."""
    model: type[BaseModel] | None = InventoryFile
    for part in loc[:-1]:
        if isinstance(part, int) or model is None:
            continue
        field = model.model_fields.get(part)
        model = _find_model(field.annotation) if field else None
    return model


def _find_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _find_model(arg)
        if found:
            return found
    return None


def _describe(error: ErrorDetails) -> tuple[tuple[Any, ...], str, bool]:
    """(location, message, points at the key) for one pydantic error."""
    loc = tuple(error["loc"])
    kind = error["type"]
    if kind == "extra_forbidden":
        model = _model_at(loc)
        allowed = ", ".join(model.model_fields) if model else ""
        return loc, f"unknown key {loc[-1]!r}" + (f" (allowed: {allowed})" if allowed else ""), True
    if kind == "missing":
        return loc[:-1], f"missing required key {loc[-1]!r}", False
    if loc == ("hosts",) and kind == "too_short":
        return loc, "no hosts listed; add at least one", False
    if loc and loc[-1] == "port" and kind in ("greater_than_equal", "less_than_equal"):
        return loc, f"must be between 1 and 65535 (got {error.get('input')!r})", False
    msg = {"model_type": "expected a mapping", "dict_type": "expected a mapping", "list_type": "expected a list"}.get(
        kind
    )
    if msg is None:
        msg = error["msg"].removeprefix("Value error, ")
        msg = msg[:1].lower() + msg[1:]
    value = error.get("input")
    if kind != "value_error" and not isinstance(value, (dict, list)):
        msg += f" (got {value!r})"
    return loc, msg, False


# ---------------------------------------------------------------- loading


def safe_name(name: str) -> str:
    """A name that satisfies the inventory's name rule (for exporting other sources' targets)."""
    cleaned = re.sub(r"[^\w.@:+=/-]+", "-", name.strip()).strip("-")
    return cleaned or "host"


def _says_none(values: list[str] | None) -> bool:
    """`identity_file: none`, as ssh_config's `IdentityFile none`: no ~/.ssh/id_* key."""
    return any(value.lower() == "none" for value in values or [])


def _identity_paths(values: list[str], base: Path) -> list[str]:
    return _paths([value for value in values if value.lower() != "none"], base)


def _paths(values: list[str], base: Path) -> list[str]:
    out = []
    for value in values:
        path = Path(value).expanduser()
        out.append(str(path if path.is_absolute() else base / path))
    return out


_INI_SECTION_RE = re.compile(r"^\[[^\]\s]+\]\s*$", re.MULTILINE)


def _ansible_hint(path: Path, data: Any = None, text: str | None = None) -> None:
    """`-i` given an Ansible inventory: say which option reads it instead of a YAML error."""
    looks_ini = text is not None and _INI_SECTION_RE.search(text) is not None
    looks_yaml = (
        isinstance(data, dict)
        and not isinstance(data.get("hosts"), list)
        and any(
            isinstance(body, dict) and body and set(body) <= {"hosts", "vars", "children"} for body in data.values()
        )
    )
    if looks_ini or looks_yaml:
        raise ConfigError(f"{path}: this looks like an Ansible inventory: use --ansible-inventory {path}")


def load_inventory(path: str | Path) -> list[Target]:
    """The targets of one ComputeFence inventory file; ConfigError("FILE:LINE: ...") on any problem."""
    path = Path(path)
    try:
        data, root = load_yaml_document(path, "inventory file")
    except ConfigError:
        _ansible_hint(path, text=read_config_text(path, "inventory file"))
        raise
    _ansible_hint(path, data=data)
    if root is None:
        raise ConfigError(f"{path}:1: the inventory is empty; it needs a 'hosts:' list")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:{line_at(root)}: expected a mapping with a 'hosts:' list at the top")
    try:
        inventory = InventoryFile.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            loc, msg, on_key = _describe(error)
            problems.append((line_at(root, loc, key=on_key), loc, msg))
        problems.sort(key=lambda p: p[0])
        line, loc, msg = problems[0]
        where = f"{format_loc(loc)}: " if loc else ""
        more = f" (and {len(problems) - 1} more problem{'s' if len(problems) > 2 else ''})" if len(problems) > 1 else ""
        raise ConfigError(f"{path}:{line}: {where}{msg}{more}") from None

    base = path.absolute().parent
    defaults = inventory.defaults
    known_hosts = _paths(inventory.known_hosts, base)
    default_checks = defaults.checks.model_dump(exclude_unset=True)
    # Built once for every host that keeps the defaults (checks are never changed in place).
    shared_checks = CheckOptions(**default_checks)
    default_identities = _identity_paths(defaults.identity_file or [], base)
    defaults_none = _says_none(defaults.identity_file)
    hosts_marks = marks_at(root, ("hosts",))
    targets: list[Target] = []
    first_line: dict[str, int] = {}
    for i, host in enumerate(inventory.hosts):
        line = line_at(hosts_marks, (i,))
        name = host.name or host.host
        if name in first_line:
            hint = "" if host.name else "; give each host a 'name'"
            raise ConfigError(f"{path}:{line}: duplicate host name {name!r} (first at line {first_line[name]}){hint}")
        first_line[name] = line
        # A host's own proxy replaces the default's, whichever kind either is.
        own_proxy = host.proxy_jump or host.proxy_command
        if own_proxy and host.proxy_jump and host.proxy_command:
            raise ConfigError(f"{path}:{line}: give proxy_jump or proxy_command, not both")
        proxy = (host.proxy_jump, host.proxy_command) if own_proxy else (defaults.proxy_jump, defaults.proxy_command)
        if all(proxy):
            raise ConfigError(f"{path}:{line_at(root, ('defaults',))}: give proxy_jump or proxy_command, not both")
        checks = shared_checks
        if host.checks.model_fields_set:
            checks = CheckOptions(**{**default_checks, **host.checks.model_dump(exclude_unset=True)})
        identities = default_identities if host.identity_file is None else _identity_paths(host.identity_file, base)
        no_defaults = defaults_none if host.identity_file is None else _says_none(host.identity_file)
        targets.append(
            Target(
                name=name,
                host=host.host,
                port=host.port or defaults.port or 22,
                user=host.user or defaults.user,
                identity_files=list(identities),
                default_identities=not no_defaults,
                proxy_jump=proxy[0],
                proxy_command=proxy[1],
                known_hosts=list(known_hosts),
                python=host.python or defaults.python or "python3",
                tags=list(host.tags),
                checks=checks,
                source=f"{path}:{line}",
            )
        )
    return targets


def inventory_files(path: str | Path) -> list[Path]:
    """`-i PATH`: the file itself, or the *.yaml/*.yml files of a directory."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in INVENTORY_SUFFIXES and p.is_file())
        if not files:
            raise ConfigError(f"{path}: no *.yaml inventory files in this directory")
        return files
    return [path]


class InventorySource:
    """One ComputeFence inventory file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.name = str(path)

    def targets(self) -> list[Target]:
        return load_inventory(self.path)
