"""The job's own policy, `computefence.yaml`: requirements, expected hardware, thresholds,
severities, custom checks and per-tag overrides.

Loading is strict: every key is a pydantic model that forbids unknown keys, and every error
is one line `FILE:LINE: ...` raised as ConfigError (exit 2) before any pod is contacted.
Judging facts against a policy is the evaluator's job (computefence/evaluate/checks/policy_rules.py).
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import hashlib
import os
import re
import types
import typing
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, Literal, Union

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from computefence.errors import ConfigError
from computefence.files import read_config_bytes
from computefence.models import CheckOptions, JobParams, Target
from computefence.yaml_lines import DuplicateKeyError, Marks, YamlSyntaxError, line_at, load_yaml_document

POLICY_FILE = "computefence.yaml"
ENV_VAR = "COMPUTEFENCE_POLICY"
# A policy is a page of YAML; anything far larger is not one.
MAX_POLICY_BYTES = 1 << 20

# Requirement names that are not Python distributions.
SPECIAL_REQUIREMENTS = {
    "python": "Python",
    "torch-cuda": "torch CUDA build",
    "nvidia-driver": "NVIDIA driver",
    "driver-cuda": "driver CUDA",
    "glibc": "glibc",
}
_NAME = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)
_CHECK_ID = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_NUMBER_CLAUSE = re.compile(r"^\s*(>=|<=|==|!=|>|<)?\s*([0-9]+(?:\.[0-9]+)?)\s*$")

SeverityName = Literal["block", "warn", "ignore"]


@functools.lru_cache(maxsize=4096)
def normalize_name(name: str) -> str:
    """PEP 503: `Flash_Attn`, `flash-attn` and `flash.attn` are one distribution."""
    return canonicalize_name(name)


class _Strict(BaseModel):
    # A threshold of NaN or infinity compares false (or true) with everything: an error instead.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# ---------------------------------------------------------------- value types


class Requirement(_Strict):
    """A PEP 440 specifier; "*" (or "") means installed, any version."""

    spec: str

    @property
    def any_version(self) -> bool:
        return self.spec.strip() in ("", "*")

    def specifier(self) -> SpecifierSet:
        return _specifier_set("" if self.any_version else self.spec)


def _requirement(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str):
        # `python: 3.10` is the float 3.1 to YAML: make the user say what they mean.
        raise ValueError(f'must be a quoted specifier such as ">=1.2" (YAML read the unquoted {value!r})')
    if value.strip() in ("", "*"):
        return value.strip() or "*"
    example = '(e.g. ">=4.48", ">=2.4,<2.7", "==4.48.*" or "*")'
    # packaging drops empty parts (">=2.4,," reads as ">=2.4"); pip refuses them, so do we.
    if any(not part.strip() for part in value.split(",")):
        raise ValueError(f"{value!r} is not a PEP 440 specifier: a comma with no specifier beside it {example}")
    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        raise ValueError(f"{value!r} is not a PEP 440 specifier {example}") from None
    return value


@functools.lru_cache(maxsize=256)
def _requirement_specs(requirements: tuple[tuple[str, str], ...]) -> dict[str, Requirement]:
    # One policy serves every pod: parse its requirements once, not once per pod.
    return {normalize_name(name): Requirement(spec=spec) for name, spec in requirements}


@functools.lru_cache(maxsize=1024)
def _specifier_set(text: str) -> SpecifierSet:
    return SpecifierSet(text)


class NumberSpec(_Strict):
    """A number with an optional comparison: `8` (exact for counts, a minimum for sizes), ">=80"."""

    clauses: tuple[tuple[str, float], ...]
    text: str

    def satisfied_by(self, value: float) -> bool:
        value = float(value)  # int.__eq__(float) is NotImplemented, which is truthy
        ops = {
            ">=": value.__ge__,
            "<=": value.__le__,
            "==": value.__eq__,
            "!=": value.__ne__,
            ">": value.__gt__,
            "<": value.__lt__,
        }
        return all(ops[op](bound) for op, bound in self.clauses)


def _number_spec(value: Any, bare: str) -> NumberSpec:
    if isinstance(value, bool):
        raise ValueError(f'must be a number or a comparison such as ">=2", not {value!r}')
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"must not be negative ({value})")
        return NumberSpec(clauses=((bare, float(value)),), text=f"{bare}{value:g}" if bare != "==" else f"{value:g}")
    if not isinstance(value, str):
        raise ValueError(f'must be a number or a comparison such as ">=2", not {type(value).__name__}')
    clauses = []
    for part in value.split(","):
        match = _NUMBER_CLAUSE.match(part)
        if not match:
            raise ValueError(f'{value!r} is not a number or comparison (e.g. 8, ">=2", ">=80,<200")')
        clauses.append((match.group(1) or bare, float(match.group(2))))
    return NumberSpec(clauses=tuple(clauses), text=value.strip())


def _glob(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError('must be a non-empty glob such as "*H100*"')
    if value.count("[") != value.count("]"):
        raise ValueError(f"{value!r} is not a valid glob: unbalanced [ ]")
    try:
        re.compile(fnmatch.translate(value))
    except re.error as exc:
        raise ValueError(f"{value!r} is not a valid glob: {exc}") from None
    return value


# ---------------------------------------------------------------- sections


class Hardware(_Strict):
    gpu_model: str | None = None
    gpu_count: NumberSpec | None = None
    gpu_memory_gb: NumberSpec | None = None
    disk_free_gb: NumberSpec | None = None
    shm_gb: NumberSpec | None = None

    @field_validator("gpu_model", mode="before")
    @classmethod
    def _model_glob(cls, value: Any) -> Any:
        return None if value is None else _glob(value)

    @field_validator("gpu_count", mode="before")
    @classmethod
    def _count(cls, value: Any) -> Any:
        return value if value is None or isinstance(value, NumberSpec) else _number_spec(value, "==")

    @field_validator("gpu_memory_gb", "disk_free_gb", "shm_gb", mode="before")
    @classmethod
    def _minimum(cls, value: Any) -> Any:
        return value if value is None or isinstance(value, NumberSpec) else _number_spec(value, ">=")


class Thresholds(_Strict):
    """The built-in checks' limits, in GB (10^9 bytes)."""

    disk_warn_gb: float = Field(20.0, ge=0)
    disk_block_gb: float = Field(5.0, ge=0)
    shm_min_gb: float = Field(1.0, ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> Thresholds:
        if self.disk_block_gb > self.disk_warn_gb:
            raise ValueError(f"disk_block_gb ({self.disk_block_gb:g}) is above disk_warn_gb ({self.disk_warn_gb:g})")
        return self


class Checks(_Strict, JobParams):
    """Per-job check parameters; an inventory's or the command line's own values win."""

    # None: the policy leaves it to the inventory or the command line.
    expect_gpu: bool | None = None
    extra_paths: list[str] = Field(default_factory=list)


class Expect(_Strict):
    exit: int = 0
    stdout_matches: str | None = None

    @field_validator("stdout_matches")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"{value!r} is not a valid regular expression: {exc}") from None
        return value


class CustomCheck(_Strict):
    id: str
    run: str
    expect: Expect = Field(default_factory=Expect)
    severity: Literal["block", "warn"] = "block"
    fix: str | None = None
    # Plain words for when no command helps; shown apart from `fix`.
    advice: str | None = None
    timeout: float = Field(10.0, gt=0, le=600)
    # What a failure calls for (the built-in checks' remedy classes): "replace" lets
    # `fleet release` give the pod back.
    remedy: Literal["fix", "config", "replace"] = "fix"

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not _CHECK_ID.match(value):
            raise ValueError(f"{value!r} is not a check id: lowercase letters, digits, '-' and '_'")
        return value

    @field_validator("run")
    @classmethod
    def _run(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is empty; give a shell command")
        return value

    @property
    def check(self) -> str:
        return f"custom.{self.id}"


_PARAMS = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)\s*([kKmMbBtT])?\s*$")
_PARAM_SCALE = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}
# Hugging Face repo ids: [ORG/]NAME of letters, digits, '-', '_', '.'; no '--' or '..' (the Hub refuses them).
_REPO_ID = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9._-]{0,95}/)?[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
# The largest published models are ~2e12 parameters; far past that is a typo.
MAX_PARAMS = 10**15


def _params(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f'must be a parameter count such as 8.03e9 or "8B", not {value!r}')
    if isinstance(value, (int, float)):
        count = float(value)
    elif isinstance(value, str):
        # YAML reads `8.03e9` (no sign in the exponent) as text, so text is the usual case.
        match = _PARAMS.match(value.replace("_", ""))
        if not match:
            raise ValueError(f'{value!r} is not a parameter count (e.g. 8.03e9, 8030261248, "8B", "350M")')
        count = float(match.group(1)) * _PARAM_SCALE[(match.group(2) or "").lower()]
    else:
        raise ValueError(f'must be a parameter count such as 8.03e9 or "8B", not {type(value).__name__}')
    if not 1 <= count <= MAX_PARAMS:
        raise ValueError(f"{value!r} is not a parameter count between 1 and 1e15")
    return round(count)


def _pod_text(value: Any, expected: str) -> str | None:
    """`value` as text that names something on the pod: None stays None; blank or not text
    is `must be {expected}`; a control character is refused."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be {expected}")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError(f"{value!r} has a control character")
    return value


def _model_ref(value: Any) -> Any:
    ref = _pod_text(value, "a Hugging Face repo id (ORG/NAME) or a path on the pod")
    if ref is None or ref.startswith(("/", "~", "./", "../")):
        return ref
    if _REPO_ID.match(ref) and "--" not in ref and ".." not in ref:
        return ref
    raise ValueError(
        f"{ref!r} is neither a Hugging Face repo id (ORG/NAME, e.g. meta-llama/Llama-3.1-8B) "
        "nor a path on the pod (/..., ~/..., ./...)"
    )


def _pod_path(value: Any) -> Any:
    return _pod_text(value, "a path on the pod")


def _regex(value: Any) -> Any:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ValueError("must be a non-empty regular expression")
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"{value!r} is not a valid regular expression: {exc}") from None
    return value


ParamCount = typing.Annotated[int | None, BeforeValidator(_params)]
ModelRef = typing.Annotated[str | None, BeforeValidator(_model_ref)]
PodPath = typing.Annotated[str | None, BeforeValidator(_pod_path)]
Regex = typing.Annotated[str | None, BeforeValidator(_regex)]


class Lora(_Strict):
    """The adapter: rank and the modules it wraps (PEFT's LoraConfig r and target_modules)."""

    r: int = Field(8, ge=1, le=65536)  # PEFT LoraConfig's default
    # None: PEFT's default for the architecture; "all-linear": every linear layer but the head.
    target_modules: list[str] | Literal["all-linear"] | None = None
    # Modules trained and saved whole beside the adapter (PEFT modules_to_save), e.g. embed_tokens.
    modules_to_save: list[str] = Field(default_factory=list)

    @field_validator("target_modules", "modules_to_save")
    @classmethod
    def _names(cls, value: Any) -> Any:
        if isinstance(value, list):
            if not value:
                raise ValueError("is empty; name the modules (e.g. [q_proj, v_proj]) or leave it out")
            for name in value:
                if not re.match(r"^[A-Za-z0-9_.]+$", name):
                    raise ValueError(f"{name!r} is not a module name (e.g. q_proj)")
        return value


class Job(_Strict):
    """`job:` what the run will train and save, so disk and GPU memory can be sized from it.

    The output dir is `checks.output_dir` (one key for the storage checks and the budget)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    model: ModelRef = None
    params: ParamCount = None
    method: Literal["full", "lora", "qlora"] = "full"
    precision: Literal["bf16", "fp16", "fp32", "bf16-pure"] = "bf16"
    optimizer: Literal["adamw", "adamw-8bit", "adafactor", "sgd"] = "adamw"
    sharding: Literal["none", "zero1", "zero2", "zero3", "fsdp"] = "none"
    # HF Trainer's defaults: keep every checkpoint, save every 500 steps.
    save_total_limit: int | None = Field(None, ge=1)
    save_steps: int | None = Field(500, ge=1)
    max_steps: int | None = Field(None, ge=1)
    save_only_model: bool = False
    lora: Lora | None = None
    # A non-default HF hub cache on the pod (from_pretrained's cache_dir); else HF_HUB_CACHE/HF_HOME.
    cache_dir: PodPath = None
    # An axolotl or LLaMA-Factory config on the pod to read the same fields from.
    from_: PodPath = Field(None, alias="from")
    # For `fleet watch`: the classification head's size, the training process, its log and loss line.
    num_labels: int | None = Field(None, ge=1)
    process: Regex = None
    log: PodPath = None
    loss_regex: Regex = None

    @property
    def checkpoints_written(self) -> int | None:
        """How many checkpoints the run writes (max_steps // save_steps), if both are known."""
        if self.max_steps is None or self.save_steps is None:
            return None
        return self.max_steps // self.save_steps


SpecifierText = typing.Annotated[str, BeforeValidator(_requirement)]
CheckPattern = typing.Annotated[str, AfterValidator(lambda key, info: _check_known(key, info))]


class _Rules(_Strict):
    """What a policy and an override both may set."""

    requirements: dict[str, SpecifierText] = Field(default_factory=dict)
    hardware: Hardware = Field(default_factory=Hardware)
    thresholds: Thresholds | None = None
    severity: dict[CheckPattern, SeverityName] = Field(default_factory=dict)
    skip: list[CheckPattern] = Field(default_factory=list)
    checks: Checks = Field(default_factory=Checks)
    job: Job | None = None
    # Each sends back at most a short tail of its output; 32 keep a probe's answer small.
    custom: list[CustomCheck] = Field(default_factory=list, max_length=32)

    @field_validator("requirements", mode="before")
    @classmethod
    def _requirement_names(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        seen: dict[str, str] = {}
        for name in value:
            if not isinstance(name, str) or not _NAME.match(name):
                raise ValueError(f"{name!r} is not a package name")
            if normalize_name(name) in seen:
                raise ValueError(f"{seen[normalize_name(name)]!r} and {name!r} name the same package")
            seen[normalize_name(name)] = name
        return value

    @field_validator("custom")
    @classmethod
    def _unique_ids(cls, value: list[CustomCheck]) -> list[CustomCheck]:
        seen = set()
        for check in value:
            if check.id in seen:
                raise ValueError(f"custom check id {check.id!r} is used twice")
            seen.add(check.id)
        return value

    def requirement_specs(self) -> dict[str, Requirement]:
        """Normalised name -> requirement; the special names keep their spelling."""
        return _requirement_specs(tuple(self.requirements.items()))


def matches(check: str, pattern: str) -> bool:
    """Whether a check id matches a pattern of --only/--skip or a policy's severity/skip: an
    exact id, an area ('gpu' matches every gpu.* check) or a glob ('storage.*')."""
    if check == pattern or check.split(".", 1)[0] == pattern:
        return True
    return any(ch in pattern for ch in "*?[") and fnmatch.fnmatchcase(check, pattern)


def _check_known(key: str, info: ValidationInfo) -> str:
    """A check id, area or glob the evaluator knows, `custom.<id>`, or `<check>.<subject>`
    (env.drift.torch-cuda, policy.requirement.transformers). The known ids come in the
    validation context ({"checks": ...}, from the evaluator's registry); without them a
    pattern is taken as written."""
    if key.startswith("custom.") and _CHECK_ID.match(key.removeprefix("custom.")):
        return key
    known = (info.context or {}).get("checks")
    if known is None:
        return key
    if any(matches(check, key) for check in known) or (".".join(key.split(".")[:2]) in known and key.count(".") >= 2):
        return key
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else " (`computefence doctor --format json` lists the check ids)"
    raise ValueError(f"{key!r} names no check{hint}")


class Match(_Strict):
    tag: str | None = None
    name: str | None = None

    @field_validator("name")
    @classmethod
    def _name_glob(cls, value: str | None) -> str | None:
        return None if value is None else _glob(value)

    @model_validator(mode="after")
    def _something(self) -> Match:
        if self.tag is None and self.name is None:
            raise ValueError("needs `tag` or `name`")
        return self

    def matches(self, name: str, tags: list[str]) -> bool:
        return (self.tag is None or self.tag in tags) and (self.name is None or fnmatch.fnmatchcase(name, self.name))


class Override(_Rules):
    match: Match


class NotifySettings(_Strict):
    """`notify:` for `fleet check`: webhook URLs (secrets: `policy show` never prints them),
    when to post and in which shape; `--notify*` options win over it."""

    url: list[str] = Field(default_factory=list)
    # `when`, not `on`: YAML reads a bare `on:` key as true.
    when: Literal["change", "always", "block"] | None = None
    format: Literal["slack", "json"] | None = None

    @field_validator("url", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("url")
    @classmethod
    def _posted_to(cls, urls: list[str]) -> list[str]:
        from computefence.http import url_problem  # httpx: loaded only when a policy names a URL

        for position, url in enumerate(urls, 1):
            problem = url_problem(url)
            if problem:
                raise ValueError(f"URL #{position} {problem}")
        return urls


class Policy(_Rules):
    overrides: list[Override] = Field(default_factory=list)
    baseline: str | None = None
    notify: NotifySettings | None = None

    def for_target(self, name: str, tags: list[str]) -> EffectivePolicy:
        """This policy with every override that matches the target merged over it, in order."""
        merged = EffectivePolicy(**{key: getattr(self, key) for key in _Rules.model_fields})
        for override in self.overrides:
            if override.match.matches(name, tags):
                merged = merged.merged_with(override)
        return merged


class EffectivePolicy(_Rules):
    """The rules that apply to one target."""

    def merged_with(self, over: _Rules) -> EffectivePolicy:
        set_fields = over.model_fields_set
        hardware = self.hardware.model_copy(
            update={k: getattr(over.hardware, k) for k in over.hardware.model_fields_set}
        )
        checks = self.checks.model_copy(update={k: getattr(over.checks, k) for k in over.checks.model_fields_set})
        thresholds = self.thresholds
        if "thresholds" in set_fields and over.thresholds is not None:
            base = thresholds or Thresholds()
            thresholds = Thresholds(
                **{**base.model_dump(), **{k: getattr(over.thresholds, k) for k in over.thresholds.model_fields_set}}
            )
        job = self.job
        if "job" in set_fields and over.job is not None:
            job = (
                over.job
                if job is None
                else job.model_copy(update={k: getattr(over.job, k) for k in over.job.model_fields_set})
            )
        custom = {check.id: check for check in self.custom}
        custom.update({check.id: check for check in over.custom})
        return EffectivePolicy(
            requirements={**self.requirements, **over.requirements},
            hardware=hardware,
            thresholds=thresholds,
            severity={**self.severity, **over.severity},
            skip=self.skip + [s for s in over.skip if s not in self.skip],
            checks=checks,
            job=job,
            custom=list(custom.values()),
        )

    def package_names(self) -> list[str]:
        """The Python distributions the policy names (for the probe to look up)."""
        return sorted(name for name in self.requirement_specs() if name not in SPECIAL_REQUIREMENTS)


class LoadedPolicy(BaseModel):
    """A policy and the file it came from."""

    model_config = ConfigDict(frozen=True)

    policy: Policy
    path: str
    sha256: str

    @property
    def baseline_path(self) -> Path | None:
        """`baseline:` resolved from the policy file's folder."""
        if not self.policy.baseline:
            return None
        return Path(self.path).parent / os.path.expanduser(self.policy.baseline)


# ---------------------------------------------------------------- loading


def parse_policy_text(text: str, filename: str, checks: Collection[str] | None = None) -> Policy:
    """The policy in `text`, or ConfigError `filename:LINE: ...`. `checks`: the check ids its
    severity and skip may name (evaluate.CHECKS); None takes their patterns as written."""
    try:
        # PyYAML's own parser, not libyaml's: its reader refuses control characters, and its
        # words are the ones policy errors have always said. A page of YAML needs no aliases.
        data, marks = load_yaml_document(
            filename, "policy", loader_class=yaml.SafeLoader, text=text, aliases=False, name_keys=True
        )
    except YamlSyntaxError as exc:
        raise ConfigError(f"{filename}:{exc.line or 1}: not valid YAML: {exc.problem or exc.context}") from None
    except DuplicateKeyError as exc:
        raise ConfigError(f"{filename}:{exc.line}: {exc.key!r} is given twice") from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(
            f"{filename}:1: a policy is a mapping of keys (requirements, hardware, ...), not {type(data).__name__}"
        )
    try:
        return Policy.model_validate(data, context={"checks": checks})
    except ValidationError as exc:
        raise ConfigError(_first_error(exc, marks, filename)) from None


def _first_error(exc: ValidationError, marks: Marks | None, filename: str) -> str:
    # An unknown key first: a misspelt key also makes its real one look missing.
    error = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")[0]
    loc = tuple(error.get("loc", ()))
    where = ".".join(str(part) for part in loc if part != "[key]") or "policy"
    line = line_at(marks, loc)
    if error["type"] == "extra_forbidden":
        line = line_at(marks, loc, key=True)
        valid = _valid_keys(loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), valid, n=1, cutoff=0.5)
        hint = f" (did you mean {close[0]!r}?)" if close else f" (valid keys: {', '.join(valid)})"
        parent = ".".join(str(p) for p in loc[:-1])
        return f"{filename}:{line}: unknown key {str(loc[-1])!r}{' in ' + parent if parent else ''}{hint}"
    message = " ".join(str(error["msg"]).split()).removeprefix("Value error, ")
    if error["type"] == "missing":
        message = "is required"
    elif error["type"] == "literal_error":
        message = f"must be one of {error['ctx']['expected']}, not {error.get('input')!r}"
    return f"{filename}:{line}: {where}: {message}"


def _valid_keys(loc: tuple[Any, ...]) -> list[str]:
    """The keys allowed at `loc` in the policy schema."""
    model: Any = Policy
    for part in loc:
        model = _field_type(model, part)
    model = _unwrap(model)
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return []
    return [field.alias or name for name, field in model.model_fields.items()]


def _unwrap(tp: Any) -> Any:
    if typing.get_origin(tp) in (Union, types.UnionType):
        inner = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        return inner[0] if inner else tp
    return tp


def _field_type(model: Any, part: Any) -> Any:
    model = _unwrap(model)
    origin = typing.get_origin(model)
    if origin in (list, tuple):
        return typing.get_args(model)[0]
    if origin is dict:
        return typing.get_args(model)[1]
    if isinstance(model, type) and issubclass(model, BaseModel):
        for name, field in model.model_fields.items():
            if part in (name, field.alias):
                return field.annotation
    return None


def load_policy(path: Path, checks: Collection[str] | None) -> LoadedPolicy:
    """Read and validate the policy file at `path` (ConfigError on any problem); `checks`
    as for parse_policy_text."""
    raw = read_config_bytes(path, "policy file", limit=MAX_POLICY_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text") from None
    policy = parse_policy_text(text, str(path), checks)
    return LoadedPolicy(policy=policy, path=str(path), sha256=hashlib.sha256(raw).hexdigest())


def find_policy(start: Path | None = None) -> Path | None:
    """computefence.yaml in `start` (the current folder) or a parent, stopping after the
    repository root (a folder with .git) or $HOME, whichever comes first."""
    here = (start or Path.cwd()).resolve()
    home = Path(os.path.expanduser("~")).resolve()
    for folder in (here, *here.parents):
        candidate = folder / POLICY_FILE
        if candidate.is_file():
            return candidate
        if (folder / ".git").exists() or folder == home:
            return None
    return None


def resolve_policy(path: Path | None, no_policy: bool, checks: Collection[str] | None) -> LoadedPolicy | None:
    """The policy a command applies: --policy (or $COMPUTEFENCE_POLICY), else the one found
    from the current folder up; none with --no-policy. `checks` as for parse_policy_text."""
    if no_policy:
        if path is not None:
            raise ConfigError("--policy and --no-policy exclude each other")
        return None
    if path is not None:
        if not Path(path).is_file():
            raise ConfigError(f"--policy {path}: no such file")
        return load_policy(Path(path), checks)
    found = find_policy()
    return load_policy(found, checks) if found is not None else None


# ---------------------------------------------------------------- the policy applied to targets


def merge_checks(checks: CheckOptions, policy: EffectivePolicy) -> CheckOptions:
    """The policy's `checks` where the inventory or command line left a value unset (None, or
    False for a switch); its extra paths are added to theirs."""
    update: dict[str, Any] = {}
    for key, wanted in policy.checks.model_dump(exclude_defaults=True).items():
        have = getattr(checks, key)
        if isinstance(have, list):
            update[key] = have + [item for item in wanted if item not in have]
        elif have is None or have is False:
            update[key] = wanted
    return checks.model_copy(update=update) if update else checks


def probe_extra(policy: EffectivePolicy) -> dict[str, Any]:
    """What the probe needs from the policy: the packages it names and its custom checks."""
    extra: dict[str, Any] = {}
    if policy.package_names():
        extra["packages"] = policy.package_names()
    if policy.job is not None and (policy.job.model or policy.job.from_):
        extra["job_model"] = {"ref": policy.job.model, "cache_dir": policy.job.cache_dir, "from": policy.job.from_}
    if policy.custom:
        extra["custom"] = [
            {"id": c.id, "run": c.run, "timeout": c.timeout, "stdout_matches": c.expect.stdout_matches}
            for c in policy.custom
        ]
    return extra


def apply_policy(
    targets: Sequence[Target], loaded: LoadedPolicy | None
) -> tuple[list[Target], dict[str, EffectivePolicy]]:
    """Targets with the policy's checks and probe parameters, and each one's effective policy."""
    if loaded is None:
        return list(targets), {}
    policies = {t.name: loaded.policy.for_target(t.name, t.tags) for t in targets}
    prepared = [
        t.model_copy(
            update={"checks": merge_checks(t.checks, policies[t.name]), "probe_extra": probe_extra(policies[t.name])}
        )
        for t in targets
    ]
    return prepared, policies
