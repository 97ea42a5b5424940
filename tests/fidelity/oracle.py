"""A client for the oracle (hack/oracle): Kubernetes' own code answering what the API server and kubelet do.

One process per mode serves any number of batches, so 20,000 objects cost one start::

    with Oracle("objects") as oracle:
        answers = oracle.ask([pod1, pod2])   # one answer dict per object, in order

Modes (see hack/oracle/main.go): ``objects`` (manifests as dicts), ``quantities`` (strings, or numbers as
they would appear in JSON), ``read`` (a file's text; answers the documents kubectl's reader yields),
``readfile`` (a file's bytes; answers the documents kubectl yields for a file or stdin, after FileVisitor's
decoding: UTF-16 on a BOM, U+FFFD for bytes that are not UTF-8),
``reserved`` (a kubelet configuration's reserved CPU settings; answers the static CPU Manager's count),
``topology`` (a machine, a Topology Manager policy and scope, a Pod: kubelet's admission) and ``placement``
(a pod spec and nodes: where the scheduler lets it land).
"""

from __future__ import annotations

import base64
import json
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Any

from tests.binaries import binary
from webhook.core.kubeversion import resolve

MODES = ("objects", "quantities", "read", "readfile", "reserved", "topology", "placement")


class OracleError(RuntimeError):
    """The oracle process failed or answered out of step; its stderr is in the message."""


class Oracle:
    """A running ``oracle MODE`` process: JSON lines in, JSON lines out, in order."""

    def __init__(self, mode: str, path: str | None = None, version: str | None = None) -> None:
        """``version``: the k8s.io/kubernetes release to build it against (v1.37.2), else the default's."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        self.mode = mode
        path = path or binary("oracle", version)
        # The release it answers for, as the binary says it (its module's version), and that minor's semantics:
        # qos-guard is judged with the same minor.
        self.release = subprocess.run([path, "version"], capture_output=True, text=True, timeout=60,
                                      check=True).stdout.strip()
        self.kube = resolve(self.release)
        # stderr goes to a file: a pipe nobody reads could fill and stall the process.
        self._errors = tempfile.TemporaryFile(mode="w+", encoding="utf-8")  # noqa: SIM115 (closed in close())
        self._proc = subprocess.Popen([path, mode], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self._errors, text=True,
                                      encoding="utf-8", bufsize=1 << 20)

    def ask(self, items: Iterable[Any]) -> list[dict[str, Any]]:
        """Send every item, return the answers. The writer runs in a thread so a large batch cannot fill
        both pipes and stall."""
        lines = [self._encode(item) for item in items]
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        failure: list[BaseException] = []

        def write() -> None:
            try:
                assert proc.stdin is not None
                for line in lines:
                    proc.stdin.write(line)
                proc.stdin.flush()
            except BaseException as exc:  # reported below with the process's stderr
                failure.append(exc)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        answers = []
        for _ in lines:
            out = proc.stdout.readline()
            if not out:
                break
            answers.append(json.loads(out))
        writer.join()
        if failure or len(answers) != len(lines):
            raise OracleError(f"oracle {self.mode} answered {len(answers)} of {len(lines)} lines"
                              f" ({failure[0] if failure else 'no error'}): {self._stderr()}")
        return answers

    def _encode(self, item: Any) -> str:
        """One input line. ``quantities`` passes a pre-encoded JSON number through as ``RawNumber``."""
        if isinstance(item, RawNumber):
            return item.text + "\n"
        if isinstance(item, bytes):  # readfile: any bytes, as base64 (Go's []byte in JSON)
            return json.dumps(base64.b64encode(item).decode("ascii")) + "\n"
        return json.dumps(item, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"

    def _stderr(self) -> str:
        self._errors.seek(0)
        return self._errors.read()[-2000:] or "(nothing on stderr)"

    def close(self) -> None:
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._errors.close()

    def __enter__(self) -> Oracle:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class RawNumber:
    """A JSON number sent exactly as written (``1e3``, ``0.10``), as a manifest would carry it."""

    def __init__(self, text: str) -> None:
        self.text = text


def ask_once(mode: str, items: Sequence[Any]) -> list[dict[str, Any]]:
    """One batch through a fresh process (for a handful of items)."""
    with Oracle(mode) as oracle:
        return oracle.ask(items)
