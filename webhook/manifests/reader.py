"""Input files as ``kubectl apply -f`` takes them: files in command-line order, folders recursively, ``-`` for
stdin; only regular files are read (a FIFO or a link to a device is refused without opening it for a blocking
read), and each is read as a stream of documents (``documents.stream_documents``)."""

from __future__ import annotations

import fnmatch
import os
import stat
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO

from webhook.manifests.documents import MAX_FILE_BYTES, MIB, Document, ReadError, stream_documents

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "-"


def excluded(path: str, patterns: Sequence[str]) -> bool:
    """Is ``path``, or a folder it is in, matched by one of ``patterns`` (shell globs, ``fnmatch``: ``charts``,
    ``charts/*``, ``*.json``, ``deploy/generated``)? Paths are compared as given and without a leading ``./``."""
    if not patterns:
        return False
    parts = Path(os.path.normpath(path)).parts
    prefixes = [os.path.join(*parts[:i]) for i in range(1, len(parts) + 1)]
    # A pattern without a slash also matches a file or folder name anywhere (``kimi*``, ``.venv``), as
    # .gitignore's patterns and linters' excludes do.
    names = [pattern for pattern in patterns if "/" not in pattern.rstrip("/")]
    return any(fnmatch.fnmatchcase(p, pattern.rstrip("/") or "/") for p in prefixes for pattern in patterns) \
        or any(fnmatch.fnmatchcase(part, pattern.rstrip("/")) for part in parts for pattern in names)


def passed_over(folder: str, name: str) -> bool:
    """A folder ``check DIR`` does not go into: hidden ones (``.git``, ``.venv``, ``.terraform``) and Python
    virtual environments (a ``pyvenv.cfg`` inside), as linters leave them out; kubectl ``-R`` would read
    them, so a folder given by name is read whatever it is called."""
    return name.startswith(".") or os.path.isfile(os.path.join(folder, name, "pyvenv.cfg"))


def expand_paths(paths: Iterable[str], exclude: Sequence[str] = ()) -> Iterator[str | ReadError]:
    """Files in command-line order, folders recursively (sorted), ``-`` for stdin, leaving out what
    ``exclude`` matches (``excluded``). A folder (or a folder inside it) that cannot be listed is an error,
    never silently empty."""
    seen: set[str] = set()
    for raw in paths:
        if raw == STDIN:
            yield STDIN
            continue
        if excluded(raw, exclude):
            continue
        key = os.path.normpath(raw)
        if key in seen:  # the same path given twice is judged once
            continue
        seen.add(key)
        path = Path(raw)
        try:
            is_dir = stat.S_ISDIR(path.stat().st_mode)
        except FileNotFoundError:
            is_dir = False
        except OSError as exc:
            if not _is_link(path):
                yield ReadError(raw, 0, f"cannot read: {exc.strerror or exc}")
                continue
            is_dir = False  # a looping link: opening it names the problem
        if is_dir:
            problems: list[OSError] = []
            found = []
            for root, dirs, files in os.walk(path, onerror=problems.append):
                dirs[:] = [d for d in dirs if not excluded(os.path.join(root, d), exclude)
                           and not passed_over(root, d)]
                found += [os.path.join(root, name) for name in files if name.endswith(MANIFEST_SUFFIXES)
                          and not excluded(os.path.join(root, name), exclude)]
            found.sort()
            for problem in problems:
                yield ReadError(str(problem.filename or raw), 0, f"cannot list folder: {problem.strerror or problem}")
            for file in found:
                key = os.path.normpath(file)
                if key not in seen:
                    seen.add(key)
                    yield file
        elif path.exists() or _is_link(path):
            yield raw
        else:
            yield ReadError(raw, 0, "no such file or directory")


def _is_link(path: Path) -> bool:
    try:
        return path.is_symlink()
    except OSError:
        return False


def open_manifest(file: str) -> IO[bytes] | ReadError:
    """``file`` opened for reading if it is a regular file no larger than ``MAX_FILE_BYTES``; stdin for ``-``.

    The open does not block on a FIFO (``O_NONBLOCK``), and the type is checked on the open descriptor, so a
    ``.yaml`` that is a FIFO or a link to ``/dev/zero`` is refused, not read forever."""
    if file == STDIN:
        if sys.stdin is None:
            return ReadError(file, 0, "cannot read stdin: it is closed")
        try:
            return sys.stdin.buffer
        except AttributeError:
            return ReadError(file, 0, "cannot read stdin: it is not a byte stream")
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as exc:
        if _is_link(Path(file)):
            try:
                target = os.readlink(file)
            except OSError:
                target = "?"
            return ReadError(file, 0, f"cannot read: a symbolic link to {target}, which does not exist (a dangling "
                                      "link: fix or remove it, or leave it out with --exclude)")
        return ReadError(file, 0, f"cannot read: {exc.strerror or exc}")
    except OSError as exc:
        return ReadError(file, 0, f"cannot read: {exc.strerror or exc}")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            return ReadError(file, 0, f"not a regular file ({_file_type(info.st_mode)})", "not read")
        if info.st_size > MAX_FILE_BYTES:
            os.close(fd)
            return ReadError(file, 0, f"file is {info.st_size / MIB:.0f} MiB, over the "
                                      f"{MAX_FILE_BYTES // MIB} MiB limit", "not read")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except OSError as exc:
        os.close(fd)
        return ReadError(file, 0, f"cannot read: {exc.strerror or exc}")


def _file_type(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_documents(file: str) -> Iterator[Document | ReadError]:
    """Every document in ``file`` (``-`` for stdin), read as kubectl reads it."""
    stream = open_manifest(file)
    if isinstance(stream, ReadError):
        yield stream
        return
    try:
        yield from stream_documents(file, stream)
    except OSError as exc:
        yield ReadError(file, 0, f"cannot read: {exc.strerror or exc}")
    finally:
        if file != STDIN:
            stream.close()




__all__ = ["MANIFEST_SUFFIXES", "STDIN", "Document", "ReadError", "expand_paths", "open_manifest",
           "read_documents"]
