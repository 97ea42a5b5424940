"""Files and stdin read as kubectl's ``FileVisitor`` reads them (UTF-16 after a BOM, U+FFFD for bytes that are not
UTF-8), and ``fix`` writing them back in their own encoding, run as the real command."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from tests import inprocess
from tests.cli.conftest import Run

POD = """# owner: team ©
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: app
    image: i
    resources:
      requests: {cpu: "1", memory: 1Gi}
      limits: {cpu: "2", memory: 1Gi}
"""
FIXED = POD.replace('requests: {cpu: "1"', 'requests: {cpu: "2"')  # what fix makes of the UTF-8 text


def test_utf16_with_a_bom_is_read_as_kubectl_reads_it(qos_guard: Run, tmp_path: Path) -> None:
    """PowerShell's ``>`` writes UTF-16LE with a BOM; kubectl's FileVisitor decodes it (BOMOverride). It was
    ``not UTF-8 text (byte 0xff)``, exit 2."""
    for bom, codec in ((b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")):
        path = tmp_path / f"{codec}.yaml"
        path.write_bytes(bom + POD.encode(codec))
        out = qos_guard("check", str(path))
        assert out.returncode == 1, out.stdout + out.stderr
        assert "not UTF-8" not in out.stdout + out.stderr
        assert f"{path}:11:" in out.stdout and "requests-not-equal-limits" in out.stdout, out.stdout
        out = qos_guard("check", "-", stdin=bom + POD.encode(codec))
        assert out.returncode == 1 and "requests-not-equal-limits" in out.stdout, out.stdout + out.stderr


def test_latin1_bytes_read_as_u_fffd(qos_guard: Run, tmp_path: Path) -> None:
    """A Latin-1 ``©`` (0xa9) in a comment: kubectl reads it as U+FFFD and applies the file."""
    data = POD.encode("latin-1")
    path = tmp_path / "latin1.yaml"
    path.write_bytes(data)
    for args, stdin in (((str(path),), None), (("-",), data)):
        out = qos_guard("check", *args, stdin=stdin)
        assert out.returncode == 1, out.stdout + out.stderr
        assert "not UTF-8" not in out.stdout + out.stderr and "requests-not-equal-limits" in out.stdout


def test_a_utf8_bom_then_bytes_that_are_not_utf8_are_still_refused(qos_guard: Run, tmp_path: Path) -> None:
    """After a UTF-8 BOM kubectl passes the bytes on unchanged (transform.Nop) and its YAML decoder refuses
    them: so do we."""
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + POD.encode("latin-1"))
    out = qos_guard("check", str(path))
    assert out.returncode == 2 and "not UTF-8 text (byte 0xa9)" in out.stdout + out.stderr, out.stdout + out.stderr


def test_fix_keeps_utf16_and_its_bom(qos_guard: Run, tmp_path: Path) -> None:
    """``fix`` writes a UTF-16 file back in UTF-16 with the same BOM (a PowerShell user's tools expect it)."""
    plain = tmp_path / "plain.yaml"
    plain.write_text(POD, encoding="utf-8")
    assert qos_guard("fix", str(plain)).returncode == 0 and plain.read_text(encoding="utf-8") == FIXED
    for bom, codec in ((b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")):
        path = tmp_path / f"{codec}.yaml"
        path.write_bytes(bom + POD.encode(codec))
        out = qos_guard("fix", str(path))
        assert out.returncode == 0, out.stdout + out.stderr
        data = path.read_bytes()
        assert data == bom + FIXED.encode(codec), data
        assert qos_guard("check", str(path)).returncode == 0
        piped = inprocess.run(["fix", "-"], stdin=bom + POD.encode(codec), text=False)
        assert piped.returncode == 0, piped.stderr
        assert cast(bytes, piped.stdout) == data  # text=False: bytes


def test_fix_keeps_latin1_bytes_it_does_not_touch(qos_guard: Run, tmp_path: Path) -> None:
    """The ``©`` byte stays 0xa9 (not U+FFFD) after ``fix``; only the edited value changes."""
    path = tmp_path / "latin1.yaml"
    path.write_bytes(POD.encode("latin-1"))
    out = qos_guard("fix", str(path))
    assert out.returncode == 0, out.stdout + out.stderr
    data = path.read_bytes()
    assert data.startswith(b"# owner: team \xa9\n"), data[:40]
    assert qos_guard("check", str(path)).returncode == 0


def test_fix_refuses_invalid_utf16(qos_guard: Run, tmp_path: Path) -> None:
    """An unpaired surrogate would come back as U+FFFD: ``fix`` says so and leaves the file as it was."""
    path = tmp_path / "bad.yaml"
    data = b"\xff\xfe" + POD.encode("utf-16-le") + b"\x00\xd8"
    path.write_bytes(data)
    out = qos_guard("fix", str(path))
    assert out.returncode == 2, out.stdout + out.stderr
    assert "not valid UTF-16LE text" in out.stdout + out.stderr and "not changed" in out.stdout + out.stderr
    assert path.read_bytes() == data
