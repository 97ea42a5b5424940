"""Writing files safely for ``fix``: atomically, never through a link that leads out of the folder given.

A rewrite goes to a temporary file in the target's own folder, is flushed to disk (``fsync``) and then
renamed over the target (``os.replace``, atomic on POSIX), so a crash, a kill or a full disk leaves either
the old file or the new one, never a truncated one. The new file keeps the old one's mode and, where the
process may set it, its owner and group.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

TEMP_SUFFIX = ".qos-guard-tmp"


class NotFixed(Exception):
    """Why ``fix`` left a file as it was: the reason and, where known, the line. ``runner.fix_paths`` renders
    it, the one place that says "not changed"."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.reason, self.line = reason, line

    def render(self, file: str) -> str:
        """As ``check`` shows an error: ``file:line: error: reason`` (no line: the file as a whole)."""
        return f"{file}:{self.line}: error: {self.reason}; not changed" if self.line else \
            f"{file}: error: {self.reason}; not changed"


class UnsafePath(NotFixed):
    """A path ``fix`` must not write (it leads outside the folder it was given)."""


class Unreadable(NotFixed):
    """The file cannot be read as kubectl reads it (opened, decoded as UTF-8, parsed, made of objects)."""


class Unjudgeable(NotFixed):
    """An object the engine cannot judge (a field of the wrong shape, nesting too deep)."""


class NotRewritable(NotFixed):
    """No rewrite keeps what kubectl reads from the file (JSON then YAML, a layout the round trip alters)."""


class Unwritable(NotFixed):
    """The fixed text could not be written."""


def inside(path: str, root: Path) -> Path:
    """The real file behind ``path``, which must lie inside ``root`` (both resolved through every link)."""
    real = Path(os.path.realpath(path))
    base = Path(os.path.realpath(root))
    if real != base and base not in real.parents:
        raise UnsafePath(f"is a link to {real}, outside {root}")
    return real


def atomic_write(target: Path, data: bytes, like: os.stat_result | None = None) -> None:
    """Replace ``target`` with ``data`` atomically; mode and owner from ``like`` (else 0666 less umask)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=TEMP_SUFFIX, dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if like is not None:
            os.chmod(tmp, stat.S_IMODE(like.st_mode))
            with contextlib.suppress(PermissionError):
                os.chown(tmp, like.st_uid, like.st_gid)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(target.parent)


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable (best effort: not every file system lets a folder be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
