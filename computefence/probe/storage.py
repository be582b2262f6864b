# Probe part: storage: mounts, and the paths a training job reads and writes.
#
# Which mount a path lives on comes from the mountinfo text (under the injectable proc
# root), matched by path components; whether it exists, is writable and how much room it
# has comes from the real filesystem (os.path, os.access, os.statvfs). Tests build a pod by
# writing a mountinfo whose mount points are real temporary directories.

import functools
import os
import posixpath
import re
import threading

from .core import _cwd, _process_env, _read_text, _root, _text, _time_left

_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")
# Kernel and helper filesystems: never storage anyone keeps data on (the evaluator's mounts
# read this table too).
PSEUDO_FS = frozenset(
    [
        "proc",
        "sysfs",
        "devtmpfs",
        "devpts",
        "cgroup",
        "cgroup2",
        "mqueue",
        "securityfs",
        "debugfs",
        "tracefs",
        "pstore",
        "bpf",
        "configfs",
        "fusectl",
        "hugetlbfs",
        "autofs",
        "binfmt_misc",
        "nsfs",
        "rpc_pipefs",
        "efivarfs",
        "selinuxfs",
        "nfsd",
        "squashfs",
        "fuse.lxcfs",
        "fuse.gvfsd-fuse",
        "fuse.portal",
        "fuse.snapfuse",
        "overlay-proc",
    ]
)
# Nor is memory or the container's own layered root a volume whose paths are looked at.
_NOT_VOLUMES = PSEUDO_FS | frozenset(["tmpfs", "ramfs", "overlay", "aufs"])
_SYSTEM_TREES = ("/proc", "/sys", "/dev", "/run", "/etc", "/usr", "/boot", "/snap", "/var/lib/lxcfs")
_PATH_SECONDS = 2.0


def _unescape_mount(field):
    return _OCTAL_ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), field)


def _parse_mountinfo(text):
    """proc(5) mountinfo: id parent major:minor root mount-point options [optional...] - fstype source super-options."""
    mounts = []
    for line in text.splitlines():
        fields = line.split(" ")
        try:
            separator = fields.index("-", 6)
            mount = {
                "mount_id": int(fields[0]),
                "parent_id": int(fields[1]),
                "root": _unescape_mount(fields[3]),
                "mount_point": _unescape_mount(fields[4]),
                "options": fields[5].split(","),
                "fs_type": _unescape_mount(fields[separator + 1]),
                "source": _unescape_mount(fields[separator + 2]) if len(fields) > separator + 2 else None,
                "super_options": fields[separator + 3].split(",") if len(fields) > separator + 3 else [],
            }
        except (ValueError, IndexError):
            continue
        mounts.append(mount)
    return mounts


# Called for every path against every mount (of every pod, in the evaluator): cached.
@functools.lru_cache(maxsize=8192)
def normalize(path):
    """An absolute, normalised path ("" is "/"); the evaluator uses this one too."""
    return posixpath.normpath("/" + path.lstrip("/")) if path else "/"


def is_within(path, tree):
    """`path` is `tree` or below it, by whole components (/rootfs is not under /root)."""
    path, tree = normalize(path), normalize(tree)
    return tree == "/" or path == tree or path.startswith(tree + "/")


def mount_index(path, mount_points):
    """Index of the mount holding `path` in `mount_points` (mountinfo order): the deepest
    mount point containing it, compared by whole components after normalising (/rootfs is
    not inside /root; /data/../x is /x); of mounts stacked on one point, the last, which
    hides the others. None when none contains it. The evaluator's StorageMap.mount_of is this too."""
    path = normalize(path)
    best, best_length = None, -1
    for index, point in enumerate(mount_points):
        point = normalize(point)
        # is_within, inlined: this is the evaluator's hot loop at a thousand pods.
        if (point == "/" or path == point or path.startswith(point + "/")) and len(point) >= best_length:
            best, best_length = index, len(point)
    return best


def _mount_for(path, mounts):
    index = mount_index(path, [mount["mount_point"] for mount in mounts])
    return None if index is None else mounts[index]


def _looks_like_volume(mount):
    point = mount["mount_point"]
    if point == "/" or mount["fs_type"] in _NOT_VOLUMES:
        return False
    if any(is_within(point, tree) for tree in _SYSTEM_TREES):
        return False
    # Single files bind-mounted by the runtime are no volumes. A mount point that does not
    # answer (dead NFS) stays listed: its path facts will say it hung.
    finished, is_file = _with_timeout(lambda: os.path.isfile(point), 0.5)
    return not (finished and is_file is True)


def _hf_cache(env, home):
    """Where huggingface_hub puts downloads, resolved as huggingface_hub.constants does."""
    if "HF_HUB_CACHE" in env:
        return env["HF_HUB_CACHE"], "HF_HUB_CACHE"
    if "HUGGINGFACE_HUB_CACHE" in env:
        return env["HUGGINGFACE_HUB_CACHE"], "HUGGINGFACE_HUB_CACHE"
    if "HF_HOME" in env:
        return os.path.join(env["HF_HOME"], "hub"), "HF_HOME"
    if "XDG_CACHE_HOME" in env:
        return os.path.join(env["XDG_CACHE_HOME"], "huggingface", "hub"), "XDG_CACHE_HOME"
    return os.path.join(home, ".cache", "huggingface", "hub"), "default"


def _absolute(path, cwd):
    path = os.path.expanduser(path)
    if not os.path.isabs(path):
        # Relative paths resolve against the working directory, as the job's would.
        path = os.path.join(cwd or "/", path)
    return os.path.normpath(path)


def _inspect_path(absolute):
    out = {}
    resolved = os.path.realpath(absolute)
    out["resolved"] = _text(resolved)
    exists = os.path.exists(resolved)
    out["exists"] = exists
    ancestor = resolved
    while not os.path.exists(ancestor):
        parent = os.path.dirname(ancestor)
        if parent == ancestor:
            break
        ancestor = parent
    if not exists:
        out["existing_ancestor"] = _text(ancestor)
    else:
        out["is_dir"] = os.path.isdir(resolved)
    out["parent_exists"] = os.path.isdir(os.path.dirname(resolved))
    # Creating below a directory needs write and search permission on it.
    mode = os.W_OK | (os.X_OK if os.path.isdir(ancestor) else 0)
    out["writable"] = os.access(ancestor, mode)
    try:
        stats = os.statvfs(ancestor)
        out["free_bytes"] = stats.f_bavail * stats.f_frsize
        out["total_bytes"] = stats.f_blocks * stats.f_frsize
        if stats.f_flag & getattr(os, "ST_RDONLY", 1):
            out["writable"] = False
            out["read_only"] = True
    except OSError as exc:
        out["error"] = _text("statvfs %s: %s" % (ancestor, exc), 300)
    return out


def _with_timeout(func, seconds):
    """func() in a daemon thread; (finished, result). A hung network mount blocks only that thread."""
    box = {}

    def target():
        try:
            box["value"] = func()
        except BaseException as exc:
            box["error"] = "%s: %s" % (type(exc).__name__, exc)

    thread = threading.Thread(target=target, name="inspect-path")
    thread.daemon = True
    thread.start()
    thread.join(max(0.0, seconds))
    if thread.is_alive():
        return False, None
    if "error" in box:
        return True, {"error": _text(box["error"], 300)}
    return True, box["value"]


def _paths_of_interest(params, mounts, env, home):
    wanted = [("root", "/", None), ("home", home, "HOME" if env.get("HOME") else "passwd")]
    hf_path, hf_origin = _hf_cache(env, home)
    wanted.append(("hf_cache", hf_path, hf_origin))
    if params.get("output_dir"):
        wanted.append(("output_dir", str(params["output_dir"]), "--output-dir"))
    wanted.append(("workspace", "/workspace", None))
    seen = {"/workspace"}
    for mount in mounts:
        if _looks_like_volume(mount) and mount["mount_point"] not in seen:
            seen.add(mount["mount_point"])
            wanted.append(("volume", mount["mount_point"], "mountinfo"))
    wanted.append(("shm", "/dev/shm", None))
    wanted.append(("tmp", "/tmp", None))
    extra = params.get("extra_paths") or []
    for path in extra if isinstance(extra, list) else [extra]:
        wanted.append(("extra", str(path), "--path"))
    return wanted


def collect_storage(params):
    facts = {"mounts": [], "paths": []}
    try:
        text = _read_text(os.path.join(_root(params, "proc"), "self", "mountinfo"), 8 << 20)
        facts["mounts"] = _parse_mountinfo(text)
    except OSError as exc:
        facts["error"] = _text("mountinfo: %s" % exc, 300)
    mounts = facts["mounts"]
    env = _process_env()
    home = env.get("HOME") or os.path.expanduser("~")
    cwd = _cwd()
    hung = set()
    for role, path, origin in _paths_of_interest(params, mounts, env, home):
        entry = {"role": role, "path": _text(path), "origin": origin}
        absolute = _absolute(path, cwd)
        mount = _mount_for(absolute, mounts)
        budget = min(_PATH_SECONDS, _time_left(params))
        if mount is not None and mount["mount_point"] in hung:
            entry["error"] = "skipped: %s did not answer" % mount["mount_point"]
        elif budget <= 0.2:
            entry["error"] = "skipped: storage time budget spent"
        else:
            finished, found = _with_timeout(lambda path=absolute: _inspect_path(path), budget)
            if finished:
                entry.update(found)
                mount = _mount_for(found.get("resolved") or absolute, mounts)
            else:
                entry["error"] = "no answer within %.1fs (hung network mount?)" % budget
                if mount is not None:
                    hung.add(mount["mount_point"])
        if mount is not None:
            entry.update(mount_point=mount["mount_point"], fs_type=mount["fs_type"], mount_source=mount["source"])
        facts["paths"].append(entry)
    return facts
