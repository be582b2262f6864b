"""Which mount a path lives on, and how long that storage lives.

Matching is by mount and by whole path components, never by string prefix: /rootfs is not
inside /root. Lifetimes come from the mount's filesystem type, refined by the provider's
profile and by what the provider's API said about the pod.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from enum import IntEnum
from functools import lru_cache
from typing import Any

from computefence.evaluate.profiles import Profile, StorageClass
from computefence.models import MountFacts, PathFacts, ProviderInfo
from computefence.probe.storage import PSEUDO_FS, is_within, mount_index, normalize

MEMORY_FS = frozenset({"tmpfs", "ramfs"})
CONTAINER_FS = frozenset({"overlay", "overlayfs", "aufs", "fuse-overlayfs", "fuse.fuse-overlayfs"})
NETWORK_FS = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "virtiofs",
        "9p",
        "ceph",
        "cephfs",
        "lustre",
        "glusterfs",
        "beegfs",
        "gpfs",
        "wekafs",
        "afs",
        "ocfs2",
        "gfs2",
        "fuse",
    }
)
# Mounts below these are the container runtime's plumbing (bind-mounted /etc/hosts,
# driver libraries, sockets), not data volumes.
SYSTEM_DIRS = (
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/var/run",
    "/etc",
    "/usr",
    "/boot",
    "/lib",
    "/lib32",
    "/lib64",
    "/bin",
    "/sbin",
    "/snap",
    "/var/lib/docker",
)


# Called for every path against every mount of every pod: cached, it stops dominating a fleet's evaluation.
@lru_cache(maxsize=8192)
def is_network(fs_type: str) -> bool:
    fs = fs_type.lower()
    if fs in PSEUDO_FS or fs in CONTAINER_FS:
        return False
    return fs in NETWORK_FS or fs.startswith("fuse.")


class Level(IntEnum):
    EPHEMERAL = 0  # gone on the next stop or restart
    INSTANCE = 1  # survives a stop, gone with the pod or instance
    PERSISTENT = 2  # outlives the pod


@dataclass(frozen=True)
class Storage:
    """How long the data on one mount lives, in the provider's words."""

    level: Level
    label: str  # e.g. "container disk", "volume disk"
    fate: str  # e.g. "wiped when the pod stops"
    mount: MountFacts

    @property
    def where(self) -> str:
        """'container disk (overlay at /)' and the like."""
        source = self.mount.source
        device = f" on {source}" if source and source.startswith("/dev/") else ""
        return f"{self.label} ({self.mount.fs_type}{device} at {self.mount.mount_point})"


def _same(a: MountFacts | None, b: MountFacts | None) -> bool:
    return a is not None and b is not None and normalize(a.mount_point) == normalize(b.mount_point)


def _level(storage_class: StorageClass) -> Level:
    if not storage_class.survives_stop:
        return Level.EPHEMERAL
    return Level.PERSISTENT if storage_class.survives_terminate else Level.INSTANCE


# A pool's pods share one mount table, and the rules ask where the same few paths live on
# each: the answer is worked out once per run for all the pods that give that table.
@lru_cache(maxsize=4096)
def _mount_index(path: str, points: tuple[str, ...]) -> int | None:
    index: int | None = mount_index(path, points)
    return index


class StorageMap:
    """The machine's mounts, classified with its provider's profile."""

    def __init__(self, mounts: list[MountFacts], profile: Profile, provider: ProviderInfo | None):
        self.mounts = mounts
        self.profile = profile
        self.provider = provider
        self._points = tuple(mount.mount_point for mount in mounts)
        self._found: dict[str, MountFacts | None] = {}
        self._data_mounts: list[MountFacts] | None = None
        self._volumes: dict[Level, list[Storage]] = {}

    def mount_of(self, path: str) -> MountFacts | None:
        """The mount `path` lives on, by the probe's own rule (computefence.probe.storage.mount_index)."""
        if path not in self._found:
            index = _mount_index(path, self._points)
            self._found[path] = None if index is None else self.mounts[index]
        return self._found[path]

    # ------------------------------------------------------------ lookups

    def mount_for_path(self, facts: PathFacts) -> MountFacts | None:
        """The mount a probed path lives on, from the mount table, else from what the probe
        recorded for that path."""
        where = facts.resolved or facts.path
        if not facts.exists and facts.existing_ancestor:
            where = facts.existing_ancestor
        mount = self.mount_of(where) if self.mounts else None
        if mount is None and facts.mount_point and facts.fs_type:
            mount = MountFacts(mount_point=facts.mount_point, fs_type=facts.fs_type, source=facts.mount_source)
        return mount

    def dedicated_mount(self, path: str) -> MountFacts | None:
        """The mount serving `path` if it is a mount of its own (not the root filesystem)."""
        mount = self.mount_of(path)
        if mount is None or normalize(mount.mount_point) == "/":
            return None
        return mount

    def provider_volume_path(self) -> str | None:
        if self.provider is not None and self.provider.volume_mount_path:
            return self.provider.volume_mount_path
        if self.provider is not None and self.provider.volume_gb == 0:
            return None
        return self.profile.storage.volume_mount_paths[0] if self.profile.storage.volume_mount_paths else None

    def provider_says_no_volume(self) -> bool:
        return self.provider is not None and self.provider.volume_gb is not None and self.provider.volume_gb <= 0

    # ------------------------------------------------------------ classification

    def classify(self, mount: MountFacts) -> Storage:
        layout = self.profile.storage
        fs = mount.fs_type.lower()
        point = normalize(mount.mount_point)
        if fs in MEMORY_FS:
            return Storage(Level.EPHEMERAL, "memory (tmpfs)", "lost on every restart", mount)
        if self._is_provider_volume(mount):
            network = is_network(fs) or bool(self.provider and self.provider.network_volume)
            storage_class = layout.network if network else layout.volume
            return Storage(_level(storage_class), storage_class.label, storage_class.fate, mount)
        if self._is_declared_persistent(mount) or is_network(fs):
            return Storage(_level(layout.network), layout.network.label, layout.network.fate, mount)
        if fs in CONTAINER_FS:
            return Storage(_level(layout.container), layout.container.label, layout.container.fate, mount)
        if point == "/":
            return Storage(_level(layout.root_disk), layout.root_disk.label, layout.root_disk.fate, mount)
        if self.provider_says_no_volume():
            # The API says the pod has no volume: a local mount here is part of the container
            # disk (a bind mount of it), not a volume that outlives a stop.
            return Storage(_level(layout.container), layout.container.label, layout.container.fate, mount)
        return Storage(_level(layout.volume), layout.volume.label, layout.volume.fate, mount)

    def classify_path(self, facts: PathFacts) -> Storage | None:
        mount = self.mount_for_path(facts)
        if mount is None:
            return None
        storage = self.classify(mount)
        # A folder under /tmp is cleared on reboot, unless a mount of its own below /tmp serves it.
        point = normalize(mount.mount_point)
        in_tmp = is_within(facts.resolved or facts.path, "/tmp") and not (is_within(point, "/tmp") and point != "/tmp")
        if in_tmp and storage.level > Level.EPHEMERAL:
            return Storage(Level.EPHEMERAL, f"{storage.label}, under /tmp", "cleared on reboot", mount)
        return storage

    def _is_provider_volume(self, mount: MountFacts) -> bool:
        if self.provider_says_no_volume():
            return False
        path = self.provider_volume_path()
        return path is not None and _same(self.dedicated_mount(path), mount)

    def _is_declared_persistent(self, mount: MountFacts) -> bool:
        point = normalize(mount.mount_point)
        if point == "/":
            return False
        declared = list(self.provider.persistent_paths) if self.provider else []
        if any(_same(self.dedicated_mount(path), mount) for path in declared):
            return True
        return any(
            normalize(posixpath.dirname(point)) == normalize(root)
            for root in self.profile.storage.persistent_mount_roots
        )

    # ------------------------------------------------------------ data volumes

    def data_mounts(self) -> list[MountFacts]:
        """Mounts that could hold a job's data: not the root, not kernel or runtime plumbing,
        not memory, not read-only. Of stacked mounts only the visible one counts."""
        if self._data_mounts is None:
            self._data_mounts = self._find_data_mounts()
        return list(self._data_mounts)

    def _find_data_mounts(self) -> list[MountFacts]:
        found: dict[str, MountFacts] = {}
        for mount in self.mounts:
            point = normalize(mount.mount_point)
            fs = mount.fs_type.lower()
            if point == "/" or fs in PSEUDO_FS or fs in MEMORY_FS:
                continue
            if any(is_within(point, folder) for folder in SYSTEM_DIRS):
                continue
            found[point] = mount
        return [m for m in found.values() if "ro" not in m.options]

    def volumes(self, at_least: Level = Level.INSTANCE) -> list[Storage]:
        """Data mounts that keep data at least as long as `at_least`, longest-lived first,
        the provider's own volume and persistent paths before other mounts."""

        def rank(storage: Storage) -> tuple[Any, ...]:
            mount = storage.mount
            preferred = self._is_provider_volume(mount) or self._is_declared_persistent(mount)
            return (not preferred, -storage.level, mount.mount_point)

        # Three of a pod's rules ask: sorted once.
        if at_least not in self._volumes:
            storages = [self.classify(m) for m in self.data_mounts()]
            self._volumes[at_least] = sorted((s for s in storages if s.level >= at_least), key=rank)
        return list(self._volumes[at_least])
