"""The recursion limit and the cyclic collector are the process's, set once at start-up (webhook/interpreter.py):
reading a document, however large or deep, leaves them as it found them."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

from webhook import interpreter
from webhook.manifests.documents import ReadError, read_text_documents

_ROOT = Path(__file__).resolve().parents[2]
_BIG_YAML = "apiVersion: v1\nkind: List\nitems:\n" + "".join(
    f"- {{apiVersion: v1, kind: ConfigMap, metadata: {{name: c{i}}}, data: {{k: v}}}}\n" for i in range(30_000))
_BIG_JSON = '{"apiVersion": "v1", "kind": "List", "items": [' + ", ".join(
    f'{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "c{i}"}}}}' for i in range(30_000)) + "]}"


def _state() -> tuple[int, bool, tuple[int, ...], int]:
    return sys.getrecursionlimit(), gc.isenabled(), gc.get_threshold(), gc.get_freeze_count()


def read_and_compare() -> None:
    """Read each document and assert the interpreter's state is as before it (run alone in a fresh process)."""
    before = _state()
    for name, text in (("big.yaml", _BIG_YAML), ("big.json", _BIG_JSON),
                       ("deep.yaml", "x: " + "[" * 900 + "]" * 900 + "\n")):
        docs = list(read_text_documents(name, text))
        assert docs and not any(isinstance(d, ReadError) for d in docs), docs[:1]
        assert _state() == before, (name, before, _state())


def test_reading_documents_changes_no_interpreter_state() -> None:
    """The reader turned the collector off, froze what was alive after a large document (for good) and changed
    the recursion limit around each one: state of the whole process, changed per document.

    In a process of its own, configured as the CLI configures one: in the test worker another test may start a
    server whose start-up (or the extender cache's first load, in a thread) calls ``gc.freeze()`` while the
    documents are read, and the freeze count would move for a reason that is not the reader's."""
    code = ("from webhook import interpreter; interpreter.configure(batch=True); "
            "from tests.unit.test_interpreter import read_and_compare; read_and_compare(); print('same')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=_ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "same", out.stderr[-2000:]


def test_too_deep_is_still_a_named_error() -> None:
    """Deeper than the limit set at start-up: a ReadError naming it, never a RecursionError out of the reader
    (YAML deeper than 1,000 levels is libyaml's own refusal)."""
    (doc,) = read_text_documents("deep.json", '{"a": ' + "[" * 10_000 + "]" * 10_000 + "}")
    assert isinstance(doc, ReadError) and doc.reason == "JSON is nested too deeply to be read", doc
    (doc,) = read_text_documents("deep.yaml", "x: " + "[" * 1500 + "]" * 1500 + "\n")
    assert isinstance(doc, ReadError) and doc.reason.startswith("YAML does not parse: "), doc
    assert sys.getrecursionlimit() == interpreter.RECURSION_LIMIT


def test_configure_is_once_and_idempotent() -> None:
    """A fresh process: the limit raised, the batch thresholds set, and a second call changes nothing."""
    code = ("import gc, sys; from webhook import interpreter as i; i.configure(batch=True); a = "
            "(sys.getrecursionlimit(), gc.get_threshold()); i.configure(batch=True); "
            "assert a == (sys.getrecursionlimit(), gc.get_threshold()), a; print(a)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str((interpreter.RECURSION_LIMIT, interpreter.BATCH_GC_THRESHOLDS))
