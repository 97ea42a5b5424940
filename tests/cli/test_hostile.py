"""Hostile files against ``check`` and ``fix``: each is a named error for that
file (exit 2, the rest still checked), never a traceback, a hang or unbounded memory; ``fix`` never loses
a file. Every run here is bounded in time by the ``qos_guard`` fixture's timeout or its own."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from tests.cli.conftest import FIXTURES, Run
from webhook.manifests.documents import MAX_DOCUMENT_BYTES, MAX_FILE_BYTES

HOSTILE = FIXTURES / "hostile"
GOOD = ("apiVersion: v1\nkind: Pod\nmetadata: {name: after}\n"
        "spec: {containers: [{name: c, resources: {limits: {cpu: 500m, memory: 1Gi}}}]}\n")
FIXABLE = ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: c\n    resources:\n"
           "      requests: {{cpu: 1, memory: 1Gi}}\n      limits: {{cpu: 2, memory: 1Gi}}\n")


def _errors(out: subprocess.CompletedProcess[str]) -> dict[str, str]:
    report = json.loads(out.stdout)
    return {Path(e["file"]).name: e["message"] for e in report["errors"]}


def _names(out: subprocess.CompletedProcess[str]) -> set[str]:
    return {v["name"] for v in json.loads(out.stdout)["violations"]}


def test_alias_bomb_refused_quickly(qos_guard: Run, tmp_path: Path) -> None:
    """Nested List aliases grew memory without end; go-yaml's ratio rule refuses them."""
    (tmp_path / "zz.yaml").write_text(GOOD)
    shutil.copy(HOSTILE / "alias-bomb.yaml", tmp_path / "bomb.yaml")
    began = time.monotonic()
    out = qos_guard("check", str(tmp_path), "--format", "json")
    assert time.monotonic() - began < 30
    assert out.returncode == 1, out.stderr  # the good file's violation; the bomb is an error beside it
    assert _errors(out) == {"bomb.yaml": "YAML cannot be decoded: document contains excessive aliasing"}
    assert _names(out) == {"after"}


def test_alias_bomb_in_unjudged_field_does_not_stall_fix(qos_guard: Run, tmp_path: Path) -> None:
    """800 bytes of aliases in an annotation made ``fix`` take 36 s (x10 per line)."""
    path = tmp_path / "pod.yaml"
    shutil.copy(HOSTILE / "alias-fix.yaml", path)
    before = path.read_bytes()
    began = time.monotonic()
    out = qos_guard("fix", str(path))
    assert time.monotonic() - began < 30
    assert out.returncode == 2
    assert "excessive aliasing; not changed" in out.stdout
    assert path.read_bytes() == before


def test_moderate_aliasing_still_reads(qos_guard: Run, tmp_path: Path) -> None:
    """The ratio rule only refuses what go-yaml refuses: a few aliases are fine."""
    (tmp_path / "a.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: shared}\nspec:\n  containers:\n"
        "  - {name: a, resources: &r {limits: {cpu: 2, memory: 1Gi}}}\n"
        + "".join(f"  - {{name: c{i}, resources: *r}}\n" for i in range(50)))
    out = qos_guard("check", str(tmp_path / "a.yaml"))
    assert (out.returncode, out.stdout) == (0, ""), out.stdout + out.stderr


@pytest.mark.parametrize(("name", "content", "message"), [
    ("deep.json", '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "d"}, '
                  '"spec": {"containers": [{"name": "c", '
                  '"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2", "memory": "1Gi"}}, "x": '
                  + "[" * 900 + "]" * 900 + "}]}}", None),
    ("deep.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: d}\n"
                  "spec: {containers: [{name: c, resources: {requests: {cpu: 1}, "
                  "limits: {cpu: 2, memory: 1Gi}}, x: " + "[" * 600 + "]" * 600 + "}]}\n", None),
    ("deeper.yaml", "apiVersion: v1\nkind: Pod\nx: " + "[" * 1200 + "]" * 1200 + "\n", "YAML does not parse: "),
    ("bigint.json", '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b"}, "x": ' + "9" * 5001 + "}",
     "JSON cannot be decoded: an integer has more than 4,300 digits"),
])
def test_bad_file_is_a_named_error_and_the_rest_is_checked(qos_guard: Run, tmp_path: Path, name: str,
                                                           content: str, message: str | None) -> None:
    """RecursionError / ValueError ended the whole run with a traceback. Deep nesting in a field
    qos-guard does not read (``message`` None) is judged like any object: the engine copies only the path it
    changes, and the API server decodes far deeper JSON (sigs.k8s.io/json allows 10,000 levels)."""
    (tmp_path / name).write_text(content)
    (tmp_path / "zz.yaml").write_text(GOOD)
    for mode in ("enforce", "mutate"):
        out = qos_guard("check", str(tmp_path), "--format", "json", "--mode", mode)
        assert "Traceback" not in out.stderr
        assert out.returncode == 1  # the later file's violation is still found
        if message is None:
            assert name not in _errors(out) and "after" in _names(out)
        else:
            assert _errors(out)[name].startswith(message)
            assert _names(out) == {"after"}
    out = qos_guard("check", str(tmp_path / name))
    assert out.returncode == (1 if message is None else 2) and "Traceback" not in out.stderr
    fixed = qos_guard("fix", str(tmp_path))
    assert "Traceback" not in fixed.stderr
    # as check lays an error out: file:line: error: (fix said file: error: line N:)
    assert (re.search(rf"{re.escape(name)}(:\d+)?: error: ", fixed.stdout) is not None) is (message is not None)


# Root reads any folder through these two capabilities alone; without them it is held to the mode bits.
_NO_DAC = "-dac_override,-dac_read_search"


def _without_dac_override(*args: str) -> subprocess.CompletedProcess[str]:
    """``qos-guard`` held to the permission bits: as root, the same user without the two capabilities that let
    root read any folder (not another user, who could not enter a checkout in a private folder and import
    the package from it)."""
    prefix = ["setpriv", f"--inh-caps={_NO_DAC}", f"--bounding-set={_NO_DAC}"] if os.geteuid() == 0 else []
    return subprocess.run([*prefix, sys.executable, "-m", "webhook.cli", *args], capture_output=True, text=True,
                          timeout=60, check=False, cwd=Path(__file__).resolve().parents[2])


@pytest.mark.skipif(os.geteuid() == 0 and not shutil.which("setpriv"), reason="root without setpriv")
def test_unlistable_folder_is_an_error(tmp_path: Path) -> None:
    """A folder that cannot be listed gave exit 0 and "0 objects checked"."""
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "a.yaml").write_text(GOOD)
    (tmp_path / "zz.yaml").write_text(GOOD)
    shut = tmp_path / "shut"
    (shut / "private").mkdir(parents=True)
    locked.chmod(0)
    shut.chmod(0)
    try:
        out = _without_dac_override("check", str(tmp_path))
        assert out.returncode == 1, out.stdout + out.stderr  # zz.yaml's violation, and the errors
        assert f"{locked}: error: cannot list folder: Permission denied" in out.stdout
        assert "Pod/after" in out.stdout
        # a path that cannot even be looked at is named too
        out = _without_dac_override("check", str(shut / "private"))
        assert out.returncode == 2 and "Traceback" not in out.stderr
        assert f"{shut / 'private'}: error: cannot read: Permission denied" in out.stdout
    finally:
        locked.chmod(0o755)
        shut.chmod(0o755)


def test_fifo_and_device_are_refused_without_hanging(qos_guard: Run, tmp_path: Path) -> None:
    """A FIFO named .yaml hung; a .yaml link to /dev/zero ate memory without bound."""
    os.mkfifo(tmp_path / "fifo.yaml")
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    (tmp_path / "zz.yaml").write_text(GOOD)
    out = subprocess.run([sys.executable, "-m", "webhook.cli", "check", str(tmp_path), "--format", "json"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 1
    assert _errors(out) == {"fifo.yaml": "not a regular file (a FIFO); not read",
                            "zero.yaml": "not a regular file (a character device); not read"}
    assert _names(out) == {"after"}
    fixed = subprocess.run([sys.executable, "-m", "webhook.cli", "fix", str(tmp_path)],
                           capture_output=True, text=True, timeout=60, check=False)
    assert "fifo.yaml: error: not a regular file (a FIFO); not changed" in fixed.stdout


def test_oversized_file_and_document_are_refused(qos_guard: Run, tmp_path: Path) -> None:
    """A file over the size cap is refused with a clear error, without being read."""
    big = tmp_path / "big.yaml"
    with big.open("wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse: no disk space used
    out = qos_guard("check", str(big))
    assert out.returncode == 2
    assert f"over the {MAX_FILE_BYTES // (1 << 20)} MiB limit; not read" in out.stdout
    # one document over the document cap, from stdin (no size known in advance)
    doc = b"kind: ConfigMap\ndata:\n" + b"  k: " + b"x" * (MAX_DOCUMENT_BYTES + 10) + b"\n"
    proc = subprocess.run([sys.executable, "-m", "webhook.cli", "check", "-"], input=GOOD.encode() + b"---\n" + doc,
                          capture_output=True, timeout=120, check=False)
    assert proc.returncode == 1  # the first document's violation, and the error
    assert b"<stdin>:6: error: document is over the 8 MiB limit" in proc.stdout


def test_closed_stdin_is_a_named_error(tmp_path: Path) -> None:
    """A closed stdin was a traceback."""
    out = subprocess.run([sys.executable, "-m", "webhook.cli", "check", "-"], stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=60, check=False,
                         preexec_fn=lambda: os.close(0))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "<stdin>: error: cannot read stdin: it is closed" in out.stdout


def test_names_cannot_forge_lines_or_reach_the_terminal(qos_guard: Run) -> None:
    """A newline in metadata.name forged a text line; ESC reached the terminal; JUnit broke."""
    path = str(HOSTILE / "name-injection.yaml")
    text = qos_guard("check", path)
    assert text.returncode == 1
    assert len(text.stdout.splitlines()) == 1
    assert "\x1b" not in text.stdout and "\x07" not in text.stdout and "\u202e" not in text.stdout
    assert "Pod/evil\\nforged.yaml:1: Pod/ok: cpu-not-integer: forged\\x1b[2J\\x1b[31m\\u202e\\x07" in text.stdout
    github = qos_guard("check", path, "--format", "github").stdout
    assert len(github.splitlines()) == 1 and "\x1b" not in github and "%0A" in github
    junit = qos_guard("check", path, "--format", "junit").stdout
    root = ET.fromstring(junit)  # well-formed
    assert "\\x1b" in "".join(root.itertext()) + json.dumps([e.attrib for e in root.iter()])
    report = json.loads(qos_guard("check", path, "--format", "json").stdout)
    assert report["violations"][0]["name"].startswith("evil\nforged")  # JSON keeps the value exactly


def test_fix_output_is_escaped_too(qos_guard: Run, tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    shutil.copy(HOSTILE / "name-injection.yaml", path)
    out = qos_guard("fix", str(path))
    assert out.returncode == 1 and len(out.stdout.splitlines()) == 1 and "\x1b" not in out.stdout


def test_fix_refuses_links_out_of_the_folder(qos_guard: Run, tmp_path: Path) -> None:
    """``fix`` rewrote a file outside its folder through a link; with --output, a traceback."""
    folder, outside = tmp_path / "in", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    (outside / "target.yaml").write_text(FIXABLE.format(name="outside"))
    before = (outside / "target.yaml").read_bytes()
    (folder / "a-link.yaml").symlink_to("../outside/target.yaml")
    (folder / "b.yaml").write_text(FIXABLE.format(name="inside"))
    (folder / "c-inner.yaml").symlink_to("b.yaml")  # a link inside the folder is fine
    for extra in ([], ["--output", str(tmp_path / "out")]):
        out = qos_guard("fix", str(folder), *extra)
        assert "Traceback" not in out.stderr
        assert out.returncode == 2
        assert f"{folder / 'a-link.yaml'}: error: is a link to {outside / 'target.yaml'}, outside {folder}; " \
               "not changed" in out.stdout
        assert (outside / "target.yaml").read_bytes() == before
    assert "cpu: 2, memory: 1Gi" in (tmp_path / "out" / "b.yaml").read_text()  # later files still written
    assert not (tmp_path / "out" / "a-link.yaml").exists()
    assert (folder / "c-inner.yaml").is_symlink()  # written through, the link kept
    assert "requests: {cpu: 2, memory: 1Gi}" in (folder / "b.yaml").read_text()


def test_fix_keeps_crlf_and_bom(qos_guard: Run, tmp_path: Path) -> None:
    """``fix`` turned CRLF into LF and dropped a BOM."""
    lf = (FIXTURES / "manifests" / "workloads.yaml").read_text()
    crlf = tmp_path / "crlf.yaml"
    crlf.write_bytes(b"\xef\xbb\xbf" + lf.replace("\n", "\r\n").encode())
    plain = tmp_path / "lf.yaml"
    plain.write_text(lf)
    qos_guard("fix", str(crlf), str(plain))
    fixed, reference = crlf.read_bytes(), plain.read_bytes()
    assert reference != lf.encode()  # something was fixed, including inserted blocks
    assert fixed.startswith(b"\xef\xbb\xbf")
    assert fixed.count(b"\n") == fixed.count(b"\r\n")
    assert fixed[3:].replace(b"\r\n", b"\n") == reference
    json_file = tmp_path / "p.json"
    json_file.write_bytes(json.dumps(json.loads(json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j"},
        "spec": {"containers": [{"name": "c", "resources": {
            "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}}]}})),
        indent=2).replace("\n", "\r\n").encode() + b"\r\n")
    qos_guard("fix", str(json_file))
    data = json_file.read_bytes()
    assert data.count(b"\n") == data.count(b"\r\n") and json.loads(data)["spec"]["containers"][0][
        "resources"]["requests"]["cpu"] == "2"


def test_fix_keeps_mode(qos_guard: Run, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(FIXABLE.format(name="m"))
    path.chmod(0o640)
    assert qos_guard("fix", str(path)).returncode == 0
    assert (path.stat().st_mode & 0o777) == 0o640
    assert "requests: {cpu: 2, memory: 1Gi}" in path.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["p.yaml"]  # no temporary file left


def _large_fixable(path: Path, documents: int) -> None:
    """Fixable Pods with a 2 KiB annotation each: a large write for little judging."""
    padding = "x" * 2048
    with path.open("w") as f:
        for i in range(documents):
            f.write("---\n" + FIXABLE.format(name=f"p{i}").replace(
                "metadata:\n", f"metadata:\n  annotations: {{note: {padding}}}\n"))


def _signature(path: Path) -> tuple[int, int, int]:
    info = path.stat()
    return info.st_ino, info.st_size, info.st_mtime_ns


def _fix_and_kill(path: Path, when: object) -> None:
    """Start ``fix`` on ``path`` and SIGKILL it when ``when()`` (a float: after that many seconds)."""
    proc = subprocess.Popen([sys.executable, "-m", "webhook.cli", "fix", str(path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    began = time.monotonic()
    try:
        while proc.poll() is None and time.monotonic() - began < 120:
            if when() if callable(when) else time.monotonic() - began >= when:  # type: ignore[operator]
                break
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)


@pytest.mark.slow  # ten runs of a 2.7 MB file, killed: half of make test-fast's time, so in make test only
def test_fix_killed_at_any_moment_leaves_old_or_new(tmp_path: Path) -> None:
    """SIGKILL while writing left a 0-byte file. ``fix`` is killed the moment its temporary file
    appears (mid-write), the moment the target changes, and at moments spread over the run; the file is
    always exactly the old or the new content (bounded: 10 runs of a 2.7 MB file)."""
    work = tmp_path / "w"
    work.mkdir()
    path = work / "big.yaml"
    _large_fixable(path, 1200)
    old = path.read_bytes()
    reference = tmp_path / "ref.yaml"
    shutil.copy(path, reference)
    began = time.monotonic()
    subprocess.run([sys.executable, "-m", "webhook.cli", "fix", str(reference)], capture_output=True,
                   timeout=300, check=True)
    full = time.monotonic() - began
    new = reference.read_bytes()
    assert new != old and len(new) > 2_500_000
    initial = _signature(path)
    moments: list[object] = [
        lambda: any(work.glob(".big.yaml.*")),  # the temporary file exists: the write is under way
        lambda: _signature(path) != initial,  # the target changed: it must be whole
        lambda: any(work.glob(".big.yaml.*")),
        lambda: _signature(path) != initial,
    ] + [full * f for f in (0.5, 0.8, 0.9, 0.95, 1.0, 1.1)]
    for i, when in enumerate(moments):
        _fix_and_kill(path, when)
        content = path.read_bytes()
        assert content in (old, new), f"kill {i}: {len(content)} bytes, neither old nor new"
        if content == new:
            path.write_bytes(old)
        initial = _signature(path)
        for leftover in work.glob(".big.yaml.*"):
            leftover.unlink()  # a temporary file a kill left behind; never the target


def _peak_kib(*args: str) -> tuple[int, str]:
    """Run the CLI in a fresh interpreter and return its own peak resident memory (KiB) and stdout. VmHWM
    belongs to the new address space (ru_maxrss would carry the forking test process's peak over exec)."""
    code = ("import sys\nfrom webhook.cli import main\nrc = main(sys.argv[1:])\n"
            "hwm = [ln for ln in open('/proc/self/status') if ln.startswith('VmHWM:')][0]\n"
            "print(hwm.split()[1], file=sys.stderr)\n")
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                         check=False, cwd=Path(__file__).resolve().parents[2])
    return int(out.stderr.strip().splitlines()[-1]), out.stdout


def test_check_memory_stays_flat_over_a_long_file(tmp_path: Path) -> None:
    """A file was read whole (bytes, text and libyaml's copy). Now it is read a document at a
    time: 64 documents of 1 MiB each (mostly comment, cheap to parse) peak near one document, not 64
    (before: about 150 MiB)."""
    path = tmp_path / "long.yaml"
    comment = ("# " + "x" * 1021 + "\n") * 1024
    with path.open("w") as f:
        for i in range(64):
            f.write(f"---\n{comment}kind: ConfigMap\nmetadata: {{name: c{i}}}\n")
        f.write("---\n" + GOOD)
    peak, stdout = _peak_kib("check", str(path))
    assert "Pod/after" in stdout
    assert peak < 100 * 1024, f"peak {peak} KiB for a {path.stat().st_size >> 20} MiB file"
