"""Wall time and peak memory of whole commands over the same files: qos-guard check, the YAML-reading
floor, and the peers a user would run in CI instead (checkov, kube-score)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.server import memory_mib, process_tree

# The floor: only read every document of every file with PyYAML's libyaml loader, as check must at least do.
FLOOR = """
import os, sys, yaml
n = 0
for root, _, files in os.walk(sys.argv[1]):
    for f in sorted(files):
        if f.endswith(('.yaml', '.yml', '.json')):
            with open(os.path.join(root, f), encoding='utf-8') as fh:
                n += sum(1 for _ in yaml.load_all(fh, Loader=yaml.CSafeLoader))
print(n)
"""


@dataclass
class Timed:
    seconds: float
    peak_mib: float
    returncode: int
    timed_out: bool = False
    output_bytes: int = 0  # what it printed: a tool that gave up early prints (almost) nothing


def timed(cmd: list[str], timeout: float = 1800, cwd: Path | None = None) -> Timed:
    """Run ``cmd`` with output discarded. Peak memory is the largest sum of VmHWM over the command's process
    tree, sampled every 20 ms (rusage's ru_maxrss would count the benchmark's own pages from before exec)."""
    with tempfile.TemporaryFile() as out:
        began = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, cwd=cwd)
        deadline = began + timeout
        peak = 0.0
        timed_out = False
        while proc.poll() is None:
            peak = max(peak, memory_mib(process_tree(proc.pid), "VmHWM"))
            if time.perf_counter() > deadline:
                proc.kill()
                proc.wait()
                timed_out = True
                break
            time.sleep(0.02)
        seconds = timeout if timed_out else time.perf_counter() - began
        return Timed(seconds, peak, proc.returncode, timed_out=timed_out, output_bytes=out.seek(0, 2))


def kube_score_readable(kube_score: str, folder: Path) -> list[str]:
    """The files kube-score can read. It stops at the first file it cannot parse (any field of an unexpected
    type), so a fair comparison runs every tool on the files it accepts. Decided once per distinct file."""
    verdicts: dict[bytes, bool] = {}
    keep = []
    for path in files_under(folder):
        content = Path(path).read_bytes()
        if content not in verdicts:
            proc = subprocess.run([kube_score, "score", "--output-format", "ci", path], capture_output=True)
            verdicts[content] = b"Failed to score files" not in proc.stderr
        if verdicts[content]:
            keep.append(path)
    return keep


def files_under(folder: Path) -> list[str]:
    return sorted(str(p) for p in folder.rglob("*") if p.suffix in (".yaml", ".yml", ".json"))


def compiled() -> None:
    """qos-guard's bytecode, as ``pip install`` leaves it for a user. An editable install has none, and where
    ``PYTHONDONTWRITEBYTECODE`` is set (as in this benchmark's first runs) every ``check`` compiled every module
    again: about 40 ms of CPU per run, a sixth of ``check`` on the plain corpus."""
    import compileall
    compileall.compile_dir(str(Path(__file__).resolve().parents[1] / "webhook"), quiet=1)


def commands(folder: Path, checkov: str | None, kube_score: str | None) -> dict[str, list[str]]:
    compiled()
    cmds = {
        "YAML floor (CSafeLoader)": [sys.executable, "-c", FLOOR, str(folder)],
        # The default text format, which CI runs use and which streams its findings.
        "qos-guard check": [sys.executable, "-m", "webhook.cli", "check", str(folder)],
    }
    if checkov:
        cmds["checkov --framework kubernetes"] = [checkov, "-d", str(folder), "--framework", "kubernetes",
                                                  "--quiet", "--compact", "-o", "json", "--skip-download"]
    if kube_score:
        cmds["kube-score score"] = [kube_score, "score", "--output-format", "ci", *files_under(folder)]
    return cmds
