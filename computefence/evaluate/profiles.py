"""Provider profiles: what each provider's storage keeps, and its SSH defaults.

One YAML file per provider in the top-level providers/ folder, shipped in the wheel as
computefence/_providers. The evaluator reads them to tell how long a filesystem lives and
to phrase fixes the provider's way.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from computefence.errors import ConfigError

GENERIC = "generic"
DataModel = TypeVar("DataModel", bound=BaseModel)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StorageClass(_Strict):
    """One kind of storage on a provider's machines and what happens to it."""

    label: str
    survives_stop: bool
    survives_terminate: bool
    # The profile's own words for it, e.g. "wiped when the pod stops".
    fate: str


class StorageLayout(_Strict):
    # A container's overlay root.
    container: StorageClass
    # A block-device root filesystem (a VM's or a bare machine's disk).
    root_disk: StorageClass
    # Any other block-device filesystem mounted for data.
    volume: StorageClass
    # Network and FUSE filesystems.
    network: StorageClass
    # Where the provider mounts its volume by default.
    volume_mount_paths: list[str] = []
    # Mounts directly below these folders are the provider's persistent filesystems.
    persistent_mount_roots: list[str] = []


class SshDefaults(_Strict):
    user: str | None = None
    port: int = 22


class Advice(_Strict):
    no_volume: str = ""
    grow_volume: str = ""
    # May name the variable as {var}.
    env_persist: str = ""
    auth: str = ""
    not_checkable: str = ""
    rediscover: str = ""
    # May name the pod as {pod_id}.
    restart: str = ""
    # How to find a machine whose driver runs CUDA {cuda}: a command, and words for the rest.
    driver_search: str = ""
    newer_driver: str = ""


class Profile(_Strict):
    name: str
    title: str
    # Keys of identity.provider_hints that mark a machine of this provider.
    hints: list[str] = []
    # The hint whose value is the machine's id at the provider, if any.
    pod_id_hint: str | None = None
    ssh: SshDefaults = SshDefaults()
    # False where SSH sessions do not inherit the container's environment (RunPod, Vast).
    container_env_visible_over_ssh: bool = True
    storage: StorageLayout
    advice: Advice = Advice()


# libyaml's parser where PyYAML has it: the profiles are read on every run's first pod
# (~10 ms in Python's parser, ~1 ms in libyaml's).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _parsed(path: Path) -> object:
    text = path.read_text(encoding="utf-8")
    try:
        return yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError:
        # Python's parser again, for its wording of the mistake (line and problem).
        return yaml.safe_load(text)


def profiles_dir() -> Path:
    """The installed profiles (computefence/_providers) or, in a source checkout, providers/."""
    package = Path(__file__).resolve().parent.parent
    installed = package / "_providers"
    if installed.is_dir():
        return installed
    return package.parent / "providers"


def read_data_file(path: Path, model: type[DataModel], what: str) -> DataModel:
    """A YAML data file shipped beside the profiles (hardware/*.yaml) as `model`; ConfigError
    naming `what`, the file and the first thing wrong in it."""
    try:
        return model.model_validate(_parsed(path))
    except OSError as exc:
        raise ConfigError(f"{what} {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError:
        raise ConfigError(f"{what} {path}: not valid YAML") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "(top level)"
        raise ConfigError(f"{what} {path}: {where}: {first.get('msg')}") from None


@cache
def load_profiles(directory: Path | None = None) -> dict[str, Profile]:
    """All profiles by name; a malformed one is a ConfigError naming the file."""
    folder = directory or profiles_dir()
    files = sorted(folder.glob("*.yaml"))
    if not files:
        raise ConfigError(f"no provider profiles found in {folder}")
    profiles: dict[str, Profile] = {}
    for path in files:
        profile = _load_profile(path)
        if profile.name != path.stem:
            raise ConfigError(f"provider profile {path}: name {profile.name!r} does not match the file name")
        profiles[profile.name] = profile
    if GENERIC not in profiles:
        raise ConfigError(f"provider profiles in {folder}: generic.yaml is missing")
    return profiles


def _load_profile(path: Path) -> Profile:
    try:
        document = _parsed(path)
    except OSError as exc:
        raise ConfigError(f"provider profile {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise ConfigError(f"provider profile {path}{where}: {problem}") from None
    if not isinstance(document, dict):
        raise ConfigError(f"provider profile {path}: expected a mapping at the top level")
    try:
        return Profile.model_validate(document)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "(top level)"
        raise ConfigError(f"provider profile {path}: {where}: {first.get('msg')}") from None


def get_profile(name: str | None) -> Profile:
    """The named profile; unknown or missing names get the generic one."""
    profiles = load_profiles()
    return profiles.get((name or GENERIC).lower(), profiles[GENERIC])


def detect_provider(hints: dict[str, str]) -> str:
    """The provider a machine's hints point to (identity.provider_hints), else generic."""
    keys = {key.lower() for key in hints}
    for profile in load_profiles().values():
        markers = {hint.lower() for hint in profile.hints}
        if profile.name != GENERIC and keys & (markers | {profile.name}):
            return profile.name
    return GENERIC
