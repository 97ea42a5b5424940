"""Run the ``qos-guard`` command's ``main(argv)`` inside the test process, answering what ``subprocess.run`` would.

A fresh interpreter per command costs about 0.2 s of CPU for imports alone, and the CLI tests run several hundred
commands: in process, ``make test-fast`` stays under a minute. What a real process gives a command is recreated
for the one call and put back after it: argv, stdin, stdout and stderr as byte streams with the interpreter's
encodings, the environment and the working directory, the collector's thresholds (``interpreter.configure``),
warnings and log records as an interpreter prints them to stderr, ``SystemExit`` as the exit code and an
uncaught exception as a traceback on stderr with exit 1 (so a test that says "no traceback" can still fail).

Where the process itself is what is tested (the entry point, a closed pipe, signals, file descriptors, limits,
capabilities, a fresh interpreter's state) the tests keep spawning ``python -m webhook.cli``: ``subprocess_run``
here is that, with the same signature.
"""

from __future__ import annotations

import contextlib
import gc
import io
import logging
import os
import subprocess
import sys
import threading
import traceback
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from webhook.cli import main

# One command at a time per process: sys.stdout, os.environ and the working directory are the process's.
_LOCK = threading.Lock()
ENCODING = "utf-8"
SERVERS = frozenset({"serve", "extender", "agent"})


def _text(data: bytes) -> str:
    """Bytes as ``subprocess.run(text=True)`` decodes them: the locale's encoding, universal newlines."""
    return io.TextIOWrapper(io.BytesIO(data), encoding=ENCODING, newline=None).read()


class _Stream(io.TextIOWrapper):
    """A text stream over bytes that stays readable after the command closed it (as a pipe's far end does)."""

    def close(self) -> None:
        self.flush()


@contextlib.contextmanager
def _environment(env: Mapping[str, str] | None) -> Iterator[None]:
    if env is None:
        yield
        return
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _directory(cwd: Path | str | None) -> Iterator[None]:
    if cwd is None:
        yield
        return
    saved = os.getcwd()
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved)


def run(args: Sequence[str], *, stdin: str | bytes | None = None, cwd: Path | str | None = None,
        env: Mapping[str, str] | None = None, text: bool = True) -> subprocess.CompletedProcess[str]:
    """``qos-guard ARGS`` in process: the exit code, stdout and stderr a subprocess would give (``text``: as
    ``str``, universal newlines; else bytes). ``stdin`` None is an empty stdin. A server (``serve``,
    ``extender``, ``agent``, not their ``--help``) runs as a subprocess: one that wrongly started serving would
    serve inside the test process."""
    if args and args[0] in SERVERS and not {"-h", "--help"} & set(args):
        if not text:
            raise ValueError("a server's output is text")
        return subprocess_run(args, stdin=stdin if isinstance(stdin, str) else None, cwd=cwd, env=env)
    data = stdin.encode(ENCODING) if isinstance(stdin, str) else (stdin or b"")
    out, err = io.BytesIO(), io.BytesIO()
    fake_in = _Stream(io.BytesIO(data), encoding=ENCODING, errors="surrogateescape")
    fake_out = _Stream(out, encoding=ENCODING, errors="surrogateescape", write_through=True)
    fake_err = _Stream(err, encoding=ENCODING, errors="backslashreplace", write_through=True)
    printed = _LastResort(fake_err)
    with _LOCK, _environment(env), _directory(cwd), warnings.catch_warnings():
        warnings.simplefilter("default")

        def showwarning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                        file: TextIO | None = None, line: str | None = None) -> None:
            fake_err.write(warnings.formatwarning(message, category, filename, lineno, line))

        warnings.showwarning = showwarning
        saved = sys.argv, sys.stdin, sys.stdout, sys.stderr, gc.get_threshold(), sys.getrecursionlimit()
        std = sys.__stdin__, sys.__stdout__, sys.__stderr__
        sys.argv = [str(Path(sys.modules["webhook.cli"].__file__ or "").with_name("__main__.py")), *args]
        # sys.__stdout__ too: argparse wraps help to the terminal it finds there (80 columns for a pipe)
        # (typeshed declares the sys.__std*__ names Final: only a test swaps them, and puts them back below)
        sys.stdin, sys.stdout, sys.stderr = sys.__stdin__, sys.__stdout__, sys.__stderr__ = (  # type: ignore[misc]
            fake_in, fake_out, fake_err)
        logging.getLogger().addHandler(printed)
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = _exit_code(exc, fake_err)
        except Exception:  # the interpreter prints it and exits 1; so does this
            fake_err.write(traceback.format_exc())
            code = 1
        finally:
            logging.getLogger().removeHandler(printed)
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            sys.argv, sys.stdin, sys.stdout, sys.stderr = saved[:4]
            sys.__stdin__, sys.__stdout__, sys.__stderr__ = std  # type: ignore[misc]  # Final in typeshed; restored
            gc.set_threshold(*saved[4])
            sys.setrecursionlimit(saved[5])
    if not text:
        return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())  # type: ignore[arg-type]
    return subprocess.CompletedProcess(list(args), code, _text(out.getvalue()), _text(err.getvalue()))


class _LastResort(logging.StreamHandler):  # type: ignore[type-arg]
    """``logging.lastResort`` as a process without logging configured has it: WARNING and above, the message
    alone, and only for a record no handler below the root logger takes (urllib3's NullHandler takes its own);
    the root logger's handlers here are pytest's."""

    def __init__(self, stream: io.TextIOBase) -> None:
        super().__init__(stream)
        self.setLevel(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        logger: logging.Logger | None = logging.getLogger(record.name)
        while logger is not None and logger is not logging.getLogger():
            if logger.handlers:
                return
            if not logger.propagate:
                break
            logger = logger.parent
        super().emit(record)


def _exit_code(exc: SystemExit, stderr: io.TextIOBase) -> int:
    """``sys.exit(x)`` as the interpreter turns it into an exit status: None 0, an int itself, else printed, 1."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    stderr.write(f"{exc.code}\n")
    return 1


def subprocess_run(args: Sequence[str], *, stdin: str | None = None, cwd: Path | str | None = None,
                   env: Mapping[str, str] | None = None,
                   timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m webhook.cli ARGS`` in a real process, for the tests about the process itself."""
    return subprocess.run([sys.executable, "-m", "webhook.cli", *args], input=stdin, capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=timeout, check=False)
