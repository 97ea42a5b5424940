"""``make bench``: webhook throughput and latency, CLI speed against a floor and peers, and CLI scaling.

Every comparison is measured side by side in one run, interleaved and repeated, and reported as medians
and ratios (this machine is noisy). Results go to ``docs/performance/`` as a Markdown table and a PNG.
``--smoke`` runs every path for a few seconds without peers or plot, so ``make test`` keeps it working.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from bench import cli_speed, load
from bench.corpus import CORPUS, ROOT, admission_review, corpus_objects, replicate
from bench.results import REFERENCE, SMOKE, Results, Settings
from bench.server import Served, pin, serve, serve_reference

ENDPOINTS = ("/noop", "/validate", "/mutate")


def _checkout(rev: str, work: Path) -> Path:
    """``rev``'s tree, exported (not a worktree: nothing is left in the repository)."""
    target = work / f"baseline-{rev}"
    target.mkdir()
    # bench/ too: from the revision that moved the benchmark-only flags there, its bench.serve starts it.
    archive = subprocess.run(["git", "archive", rev, "webhook", "bench"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def bench_baseline(s: Settings, work: Path, res: Results, rev: str) -> None:
    """``/noop`` and ``/validate`` of this tree and of ``rev`` side by side, interleaved (before/after)."""
    bodies = work / "bodies.jsonl"
    old = serve(work / "baseline-server", 2, source=_checkout(rev, work))
    new = serve(work / "current-server")
    res.baseline = rev
    try:
        for srv in (old, new):
            load.run(srv.port, srv.ca, "/validate", bodies, min(s.seconds, 1.0), s.connections)
        for rep in range(s.repeats):
            order = [("before", old), ("after", new)]
            for name, srv in order if rep % 2 == 0 else order[::-1]:  # neither always goes first
                for endpoint in ("/noop", "/validate"):
                    r = load.run(srv.port, srv.ca, endpoint, bodies, s.seconds, s.connections)
                    res.baseline_saturation.setdefault(f"{name} {endpoint}", []).append(r.rate)
                r = load.run(srv.port, srv.ca, "/validate", bodies, s.seconds, s.connections, rate=500)
                res.baseline_latency.setdefault(f"{name} /validate", {}).setdefault(500, []).append(
                    {"p50": r.p50, "p99": r.p99, "p999": r.p999, "achieved": r.rate})
    finally:
        old.stop()
        new.stop()


def _saturate(s: Settings, bodies: Path, targets: list[tuple[str, Served, str]], rounds: int, key: str,
              res: Results, cpus: str | None = None) -> None:
    """Closed-loop rounds over every target, interleaved and rotated so none always goes first."""
    for rep in range(rounds):
        shift = rep % len(targets)
        for name, srv, endpoint in targets[shift:] + targets[:shift]:
            r = load.run(srv.port, srv.ca, endpoint, bodies, s.seconds, s.connections, cpus=cpus)
            getattr(res, key).setdefault(name, []).append(r.rate)
            res.errors[name] = res.errors.get(name, 0) + r.errors


def bench_webhook(s: Settings, work: Path, res: Results) -> None:
    """Shared: the load generator and the servers on both cores. Pinned: the load generator on core 0, the
    servers on core 1 (taskset), so the client cannot take the server's CPU."""
    bodies = work / "bodies.jsonl"
    load.loadgen()
    server = serve(work / "server")
    reference = serve_reference(work / "reference")
    cpus = _cpus()
    try:
        targets = [(ep, server, ep) for ep in ENDPOINTS] + [(REFERENCE, reference, "/noop")]
        for _, srv, endpoint in targets:  # warm up every worker and code path
            load.run(srv.port, srv.ca, endpoint, bodies, min(s.seconds, 1.0), s.connections)
        _saturate(s, bodies, targets, s.repeats, "saturation", res)
        for rate in s.rates:
            for _ in range(s.repeats):
                for endpoint in ENDPOINTS:
                    r = load.run(server.port, server.ca, endpoint, bodies, s.seconds, s.connections, rate=rate)
                    res.errors[endpoint] = res.errors.get(endpoint, 0) + r.errors
                    res.latency.setdefault(endpoint, {}).setdefault(rate, []).append(
                        {"p50": r.p50, "p99": r.p99, "p999": r.p999, "achieved": r.rate})
        if s.pinned and len(cpus) >= 2:
            client_cpu, server_cpu = str(cpus[0]), str(cpus[1])
            pin(server.tree() + reference.tree(), server_cpu)
            res.pinned = f"load generator on CPU {client_cpu}, servers on CPU {server_cpu}"
            _saturate(s, bodies, targets, s.repeats, "pinned_saturation", res, client_cpu)
            for _ in range(s.repeats):
                r = load.run(server.port, server.ca, "/validate", bodies, s.seconds, s.connections, rate=500,
                             cpus=client_cpu)
                res.pinned_latency.setdefault("/validate", {}).setdefault(500, []).append(
                    {"p50": r.p50, "p99": r.p99, "p999": r.p999, "achieved": r.rate})
            pin(server.tree() + reference.tree(), ",".join(map(str, cpus)))
        res.server_peak_mib = server.memory_mib("VmHWM")
    finally:
        server.stop()
        reference.stop()


def _checkov() -> str | None:
    exe = Path.home() / ".cache" / "qos-guard" / "checkov-3.3.30" / "bin" / "checkov"
    return str(exe) if exe.exists() else None


def _kube_score() -> str | None:
    """The cached Go build from hack/build-tools.sh (``make bench`` builds it first)."""
    import subprocess
    proc = subprocess.run(["bash", str(ROOT / "hack" / "build-tools.sh"), "kube-score"], capture_output=True,
                          text=True)
    return proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 and proc.stdout.strip() else None


def bench_cli(s: Settings, work: Path, res: Results, keep: list[str]) -> None:
    folder = work / "cli"
    res.cli_documents = replicate(folder, s.cli_documents)
    kube_score = _kube_score() if s.peers else None
    cmds = cli_speed.commands(folder, _checkov() if s.peers and "checkov" not in keep else None, kube_score)
    if kube_score:
        # kube-score gives up on the whole run at the first file it cannot read: compare on what it reads.
        readable = work / "cli-kube-score"
        for path in cli_speed.kube_score_readable(kube_score, folder):
            target = readable / Path(path).relative_to(folder)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(path, target)
        res.cli_subset_documents = sum(1 for _ in _documents(readable))
        subset = cli_speed.commands(readable, None, kube_score)
        cmds.pop("kube-score score")
        cmds |= {f"{name} (kube-score's files)": cmd for name, cmd in subset.items()}
    for i in range(s.cli_repeats):
        for name, cmd in cmds.items():
            if name.startswith("checkov") and i > 0:
                continue  # minutes per run: once is enough to show the order of magnitude
            t = cli_speed.timed(cmd, cwd=work)
            res.cli.setdefault(name, []).append({"seconds": t.seconds, "peak_mib": t.peak_mib,
                                                 "timed_out": float(t.timed_out), "returncode": t.returncode,
                                                 "output_bytes": t.output_bytes})


def bench_bodies(s: Settings, work: Path, res: Results, rev: str | None, old: dict[str, Any]) -> None:
    """Microseconds (CPU) and bytes per request for the small, inference (~35 KB), 1 MB and 3 MiB reviews; with
    ``rev``, that revision's webhook beside this one in alternating interpreters (before/after); without, the
    last run's "before" is kept with its revision."""
    from bench import bodies
    if rev:
        (work / "bodies").mkdir(exist_ok=True)
        both = bodies.before_after(_checkout(rev, work / "bodies"), s.body_rounds, s.body_iterations)
        res.bodies = {k: bodies.summary(v) for k, v in both.items()}
        res.bodies_baseline = rev
    else:
        after = bodies.in_tree(None, s.body_iterations, s.body_rounds)
        before = old.get("bodies", {}).get("before")
        res.bodies = {"after": bodies.summary(after), **({"before": before} if before else {})}
        res.bodies_baseline = old.get("bodies_baseline", "") if before else ""


def bench_plain(s: Settings, work: Path, res: Results) -> None:
    """``check`` and kube-score over the plain vendored corpus (the files kube-score reads), one invocation each
    per round, interleaved and rotated: where Python's start-up weighs most. ``check`` twice: as installed
    (bytecode compiled, as pip leaves it) and as an editable install under ``PYTHONDONTWRITEBYTECODE`` runs it
    (every module compiled on every run; what the earlier figure measured)."""
    import resource
    import shutil
    kube_score = _kube_score() if s.peers else None  # the smoke run builds no peer
    folder = work / "plain"
    files = cli_speed.files_under(CORPUS) if kube_score is None else cli_speed.kube_score_readable(kube_score, CORPUS)
    for path in files:
        target = folder / Path(path).relative_to(CORPUS)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(path, target)
    res.plain_files = len(files)
    cli_speed.compiled()
    source = work / "plain-source"  # the same package, without its bytecode
    shutil.copytree(ROOT / "webhook", source / "webhook", ignore=shutil.ignore_patterns("__pycache__"))
    check = [sys.executable, "-m", "webhook.cli", "check", str(folder)]
    cmds: dict[str, tuple[list[str], dict[str, str] | None, Path | None]] = {
        "qos-guard check": (check, None, ROOT),
        "qos-guard check (no bytecode)": (check, dict(os.environ, PYTHONDONTWRITEBYTECODE="1"), source)}
    if kube_score:
        cmds["kube-score score"] = ([kube_score, "score", "--output-format", "ci",
                                     *cli_speed.files_under(folder)], None, None)
    names = list(cmds)
    for rnd in range(s.plain_rounds):
        for name in names[rnd % len(names):] + names[:rnd % len(names)]:
            cmd, env, cwd = cmds[name]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd, timeout=600)
            wall = time.perf_counter() - started
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            res.plain.setdefault(name, []).append({"seconds": wall, "cpu_seconds": cpu})


def _documents(folder: Path) -> Any:
    from webhook.manifests.reader import read_documents
    for path in cli_speed.files_under(folder):
        yield from read_documents(path)


def bench_scaling(s: Settings, work: Path, res: Results) -> None:
    for n in s.scaling:
        folder = work / f"scale-{n}"
        docs = replicate(folder, n)
        check = cli_speed.timed(cli_speed.commands(folder, None, None)["qos-guard check"], cwd=work)
        floor = cli_speed.timed(cli_speed.commands(folder, None, None)["YAML floor (CSafeLoader)"], cwd=work)
        res.scaling.append({"documents": docs, "files": len(cli_speed.files_under(folder)),
                            "check_seconds": check.seconds, "check_peak_mib": check.peak_mib,
                            "floor_seconds": floor.seconds, "floor_peak_mib": floor.peak_mib})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench")
    parser.add_argument("--smoke", action="store_true", help="seconds-long run of every path, no peers or plot")
    parser.add_argument("--out", default=str(ROOT / "docs" / "performance"), help="where to write results")
    parser.add_argument("--only", choices=tuple(_PARTS), action="append")
    parser.add_argument("--keep", action="append", metavar="COMMAND",
                        help="with --only cli: keep the last run's rows of this command (e.g. checkov: 25 min)")
    parser.add_argument("--baseline", metavar="REV",
                        help="also measure the webhook of this git revision beside the current tree")
    parser.add_argument("--seconds", type=float, help="length of each webhook round (default 8)")
    parser.add_argument("--repeats", type=int, help="interleaved repetitions (default 3)")
    args = parser.parse_args(argv)
    s = SMOKE if args.smoke else Settings()
    if args.seconds or args.repeats:
        s = replace(s, seconds=args.seconds or s.seconds, repeats=args.repeats or s.repeats)
    parts = args.only or list(_PARTS)
    res = Results(machine={"python": platform.python_version(), "cpus": str(len(_cpus())),
                           "date": time.strftime("%Y-%m-%d")})
    previous = Path(args.out) / "results.json"
    old: dict[str, Any] = json.loads(previous.read_text()) if previous.exists() else {}
    if args.only and old:  # re-measure some parts, keep the rest of the last run
        for name in _PARTS:
            if name not in args.only:
                for key in _PARTS[name]:
                    setattr(res, key, _revive(key, old.get(key, False if key == "cli_memory_sampled" else
                                                           getattr(res, key))))
    with tempfile.TemporaryDirectory(prefix="qos-guard-bench-") as tmp:
        work = Path(tmp)
        (work / "bodies.jsonl").write_bytes(b"\n".join(admission_review(obj) for obj in corpus_objects()) + b"\n")
        if "webhook" in parts:
            bench_webhook(s, work, res)
        if args.baseline:
            bench_baseline(s, work, res, args.baseline)
        if "cli" in parts:
            kept = {k: v for k, v in old.get("cli", {}).items() if any(k.startswith(x) for x in args.keep or [])}
            bench_cli(s, work, res, args.keep or [])
            res.cli |= kept
        if "scaling" in parts:
            bench_scaling(s, work, res)
        if "bodies" in parts:
            bench_bodies(s, work, res, args.baseline, old)
        if "plain" in parts:
            bench_plain(s, work, res)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(asdict(res), indent=2) + "\n")
    from bench.report import write_markdown, write_plot
    write_markdown(res, s, out / "README.md")
    if s.plot:
        write_plot(res, out / "performance.png")
    print((out / "README.md").read_text())
    failed = sum(res.errors.values())
    return 1 if failed else 0


_PARTS = {"webhook": ("saturation", "errors", "latency", "server_peak_mib", "baseline", "baseline_saturation",
                       "baseline_latency", "pinned", "pinned_saturation", "pinned_latency"),
          "cli": ("cli", "cli_documents", "cli_subset_documents", "cli_memory_sampled"), "scaling": ("scaling",),
          "bodies": ("bodies", "bodies_baseline"), "plain": ("plain", "plain_files")}


def _revive(key: str, value: Any) -> Any:
    """JSON turned the integer rates of latency tables into strings; turn them back."""
    if key in ("latency", "baseline_latency", "pinned_latency"):
        return {ep: {int(rate): runs for rate, runs in by_rate.items()} for ep, by_rate in value.items()}
    return value


def _cpus() -> list[int]:
    import os
    return sorted(os.sched_getaffinity(0))


if __name__ == "__main__":
    raise SystemExit(main())
