"""Files ComputeFence writes (reports, exports, history) and config-like files it reads.

Writing: a regular file (or a missing one) is replaced atomically, keeping its mode and owner;
a symlink is written through to the file it points at (what `>` does), the link itself stays;
a character device or FIFO (`/dev/null`, `/dev/stdout`, a named pipe) and `-` are streamed to,
never replaced; anything else (a directory, a block device, a socket) is refused.

Reading: only regular files, checked with stat before the open so a FIFO can never block,
read in bounded chunks up to a cap so `/dev/zero` or a 5 GB file cannot fill memory.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from computefence.errors import ConfigError, InputLimitError

# Inventories, ssh_config, Ansible inventories: real ones are kilobytes.
MAX_CONFIG_BYTES = 16 * 2**20
_CHUNK = 2**20
# Temporary files are named .<target>.<pid>.<random>.tmp so a later write can tell whose they are.
_TMP_SUFFIX = ".tmp"


# ---------------------------------------------------------------- writing


def write_output(text: str | Iterable[str], path: str | os.PathLike[str], *, flag: str = "--output") -> None:
    """Write `text` (a string, or its pieces in order) to `path`: atomically for files (readers
    such as a CI step or node_exporter see the old file or the new one, never half of one),
    streamed to devices, FIFOs and `-`.

    Every refusal is a ConfigError naming `flag` (exit 2)."""
    data = _encoded([text] if isinstance(text, str) else text)
    if str(path) == "-":
        _stream_to_stdout(data, flag)
        return
    target = Path(path)
    try:
        info = os.stat(target)  # follows symlinks: the kind of what would be written
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise ConfigError(f"{flag} {target}: {exc.strerror or exc}") from None
    if info is None:
        if os.path.islink(target):
            raise ConfigError(f"{flag} {target}: a symlink to a missing file; write to its target instead")
        _replace_atomically(target, data, None, flag)
    elif stat.S_ISREG(info.st_mode):
        # Through a symlink, replace the file it points at and keep the link.
        _replace_atomically(Path(os.path.realpath(target)), data, info, flag, shown=target)
    elif stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{flag} {target} is a directory")
    elif stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode):
        _stream(target, data, flag)
    else:
        raise ConfigError(f"{flag} {target}: not a regular file, character device or FIFO; refusing to write")


def _encoded(pieces: Iterable[str]) -> Iterator[bytes]:
    for piece in pieces:
        yield piece.encode("utf-8", "replace")


def _stream_to_stdout(data: Iterable[bytes], flag: str) -> None:
    sys.stdout.flush()
    try:
        for chunk in data:
            sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError as exc:
        raise ConfigError(f"{flag} -: {exc.strerror or exc}") from None


def _stream(target: Path, data: Iterable[bytes], flag: str) -> None:
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NOCTTY)
    except OSError as exc:
        raise ConfigError(f"{flag} {target}: {exc.strerror or exc}") from None
    try:
        for chunk in data:
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view) :]
    except BrokenPipeError:
        pass  # the reader of a FIFO left: as with `cmd > fifo`, not our error
    except OSError as exc:
        raise ConfigError(f"{flag} {target}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _replace_atomically(
    target: Path, data: Iterable[bytes], old: os.stat_result | None, flag: str, shown: Path | None = None
) -> None:
    shown = shown or target
    directory = target.parent
    if not directory.is_dir():
        raise ConfigError(f"{flag} {shown}: directory {directory} does not exist")
    remove_stale_temporaries(target)
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{target.name}.{os.getpid()}.", suffix=_TMP_SUFFIX)
    except OSError as exc:
        raise ConfigError(f"{flag} {shown}: cannot write in {directory}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            for chunk in data:
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
            _keep_mode_and_owner(handle.fileno(), old)
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise ConfigError(f"{flag} {shown}: {exc.strerror or exc}") from None
        raise
    _sync_directory(directory)


def _keep_mode_and_owner(fd: int, old: os.stat_result | None) -> None:
    if old is None:
        # mkstemp creates 0600; a new report is for other readers too (node_exporter's user).
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        return
    if (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
        try:
            os.fchown(fd, old.st_uid, old.st_gid)
        except PermissionError:
            # Not root: keep the group if we may, the owner becomes us (as with `sed -i`).
            try:
                os.fchown(fd, -1, old.st_gid)
            except PermissionError:
                pass
    # After chown, which clears setuid/setgid bits.
    os.fchmod(fd, stat.S_IMODE(old.st_mode))


def _sync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on a directory; the rename is done either way
    finally:
        os.close(fd)


def remove_stale_temporaries(target: Path) -> None:
    """Delete temporaries of earlier writes to `target` whose writer is gone (killed with -9)."""
    prefix = f".{target.name}."
    try:
        names = [n for n in os.listdir(target.parent) if n.startswith(prefix) and n.endswith(_TMP_SUFFIX)]
    except OSError:
        return
    for name in names:
        pid_text = name[len(prefix) :].split(".", 1)[0]
        if not pid_text.isdigit() or _alive(int(pid_text)):
            continue
        candidate = target.parent / name
        try:
            if stat.S_ISREG(candidate.lstat().st_mode) and candidate.lstat().st_uid == os.geteuid():
                candidate.unlink()
        except OSError:
            pass


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


# ---------------------------------------------------------------- reading


def read_config_bytes(path: Path, what: str, *, limit: int | None = None) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, or a one-line ConfigError.

    stat comes first and the open is non-blocking, so a FIFO or a device is refused
    without ever waiting on it; the read is chunked and stops just past the cap
    (MAX_CONFIG_BYTES unless given)."""
    limit = MAX_CONFIG_BYTES if limit is None else limit
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such {what}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{path}: is a directory; the {what} must be a regular file")
    if not stat.S_ISREG(info.st_mode):
        raise InputLimitError(
            f"{path}: not a regular file (a FIFO, device or socket); the {what} must be a regular file"
        )
    if info.st_size > limit:
        raise InputLimitError(f"{path}: {what} is over {_size(limit)}; refusing to read it")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    chunks: list[bytes] = []
    total = 0
    try:
        # Swapped for something else between stat and open: check what was opened.
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputLimitError(f"{path}: not a regular file; the {what} must be a regular file")
        while True:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                break
            total += len(chunk)
            if total > limit:  # the file grew since stat
                raise InputLimitError(f"{path}: {what} is over {_size(limit)}; refusing to read it")
            chunks.append(chunk)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def read_config_text(path: Path, what: str, *, limit: int | None = None) -> str:
    """`read_config_bytes` decoded as UTF-8 text; binary content is a ConfigError."""
    raw = read_config_bytes(path, what, limit=limit)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a UTF-8 text file") from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # as open() in text mode reads it
    if "\x00" in text:  # valid UTF-8, but binary: an INI parse would make hosts of its bytes
        raise ConfigError(f"{path}: not a text file")
    return text


def _size(limit: int) -> str:
    return f"{limit // 2**20} MiB" if limit >= 2**20 else f"{limit} bytes"


def check_output_path(path: Path | None, flag: str = "--output") -> None:
    """Before connecting: an output path that can never be written (a directory, or in a
    folder that does not exist or is not writable) is a ConfigError now, not after every pod
    was probed."""
    if path is None or str(path) == "-":
        return
    if path.is_dir():
        raise ConfigError(f"{flag} {path} is a directory")
    _check_folder(path, flag)


def check_output_dir(path: Path | None, flag: str) -> None:
    """The same for a folder written into after the run (created then, in a folder that exists)."""
    if path is None:
        return
    if path.exists():
        if not path.is_dir():
            raise ConfigError(f"{flag} {path}: not a directory")
        if not os.access(path, os.W_OK):
            raise ConfigError(f"{flag} {path}: not writable")
        return
    _check_folder(path, flag)


def _check_folder(path: Path, flag: str) -> None:
    parent = path.parent
    if not parent.is_dir():
        raise ConfigError(f"{flag} {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"{flag} {path}: directory {parent} is not writable")


# A file name's own characters (fleet fix's transcripts, --record's recordings); every other
# one is written as %XX (so `%` never stands for itself), and `~` only ever separates a run's
# number or a long name's digest.
_FILE_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.@")
_FILE_NAME_MAX = 200


def file_name_for(name: str) -> str:
    """A pod's name as one file name (never a folder, never hidden), a different one for every
    name (`gpu/a`, `gpu_a`, `gpu:a`, `gpu+a`, `.` and `..` are six files): letters, digits and `- _ . @` as they are, any other
    character (and a leading dot) as %XX of its UTF-8 bytes; a long name cut, with a digest
    of the whole name."""
    encoded = "".join(
        char
        if char in _FILE_NAME_CHARS and not (i == 0 and char == ".")
        else "".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
        for i, char in enumerate(name)
    )
    if len(encoded) > _FILE_NAME_MAX:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:20]
        encoded = f"{encoded[: _FILE_NAME_MAX - 21]}~{digest}"
    return encoded or "%"
