"""qos-guard beside what an operator would deploy instead for this job, on one real API server (``make bench``
only; results in ``docs/performance/peers.md`` and ``peers.json``).

One etcd + kube-apiserver (the e2e control plane), one namespace per contender, each selected only by its own
admission: ``peer-none`` (no admission), ``peer-webhook`` (``qos-guard serve``, enforce), ``peer-vap``
(qos-guard's generated ValidatingAdmissionPolicy, enforce), ``peer-map`` (its MutatingAdmissionPolicy and the
mutate-mode ValidatingAdmissionPolicy) and ``peer-kyverno`` (Kyverno's admission controller, built from the
Go module proxy at ``KYVERNO_VERSION`` by ``hack/build-tools.sh kyverno``, with the policy library's "Require
QoS Guaranteed" and the whole-CPU check in bench/kyverno/).

Measured, interleaved in one run (every rate step visits every contender, in rotated order):

- latency of a compliant Pod CREATE through the API server (``dryRun=All``: admission runs in full, nothing is
  stored, so etcd and its growing size weigh the same on every row), p50/p99 at fixed offered rates (open
  loop, bench/loadgen), and the highest rate each holds with p99 <= 100 ms;
- memory (PSS: pages shared by a gunicorn master and its worker counted once) of each contender's processes at
  idle and the peak under that load (the policies run inside kube-apiserver: its own figures are given for
  them); qos-guard's replica runs as the chart runs it (its default workers);
- correctness: ``qos-guard check`` and the Kyverno CLI over the same objects from the differential generator
  (tests/fidelity/grammar.py) that Kubernetes' own code judged (the oracle): the share each gets right, where
  right is "allowed" exactly when the API server stores the object Guaranteed and kubelet's static CPU
  Manager pins every container.

When Kyverno cannot be built or run here, its rows stay, holding the exact error.

Kyverno is set up in ``kyverno_server.py``, the latency and memory measured in ``peer_latency.py``, the
correctness in ``peer_correctness.py``; this module runs them and writes the report.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench.corpus import ROOT
from bench.peer_correctness import correctness
from bench.peer_latency import P99_BOUND_MS, RATES, latency


def write(result: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "peers.json").write_text(json.dumps(result, indent=2) + "\n")
    lat, corr = result["latency"], result["correctness"]
    lines = ["# qos-guard and its peers on one API server", "",
             f"`python -m bench.peers` (part of `make bench`), {result['date']}, {result['machine']}. One etcd + "
             "kube-apiserver on loopback; a compliant Pod created (`dryRun=All`: admitted in full, not stored) in "
             "each contender's namespace at fixed offered rates, open loop, "
             f"{result['seconds']:.0f} s per step, {result.get('repeats', 1)} rounds over every rate and contender in "
             "rotated order; medians over the rounds. Milliseconds from the scheduled send time to the API server's "
             "answer; held rate: the highest offered rate with p99 ≤ 100 ms, no error and ≥ 95 % of it achieved.",
             "",
             "| contender | held rate/s (p99 ≤ 100 ms) | " + " | ".join(f"p50 / p99 @ {r}/s" for r in result["rates"])
             + " | memory idle MiB (PSS) | memory under load MiB (PSS) |",
             "| --- | ---: | " + " | ".join("---:" for _ in result["rates"]) + " | ---: | ---: |"]
    mem_key = {"peer-webhook": "peer-webhook", "peer-kyverno": "peer-kyverno"}
    for ns, row in lat["rows"].items():
        if "error" in row:
            lines.append(f"| {row['label']} | — | " + " | ".join("—" for _ in result["rates"])
                         + f" | — | — |\n| | *not measured: {row['error'][:600].replace('|', '/')}* |")
            continue
        by_rate = {int(k): v for k, v in row.get("by_rate", {}).items()}
        cells = [f"{by_rate[r]['p50']:.1f} / {by_rate[r]['p99']:.1f}" if r in by_rate else "—" for r in result["rates"]]
        key = mem_key.get(ns)
        idle = f"{lat['idle_mib'][key]:.0f}" if key else "in kube-apiserver"
        peak = f"{lat['load_peak_mib'][key]:.0f}" if key else "in kube-apiserver"
        lines.append(f"| {row['label']} | {row.get('held_rate', 0)} | " + " | ".join(cells) + f" | {idle} | {peak} |")
    lines += ["", "The same CPUs run the load generator, etcd and kube-apiserver too: "
              "where even `no admission` passes 100 ms at p99, the step measured the machine, not admission. "
              "Compare rows within a column (taken in the same rounds), and the held rates with that in mind."]
    lines += ["", f"kube-apiserver (which runs the admission policies itself, and every request of every row): "
              f"{lat['idle_mib']['kube-apiserver']:.0f} MiB idle, {lat['load_peak_mib']['kube-apiserver']:.0f} MiB "
              "peak under the load.", "",
              "## Correctness", "",
              f"{corr['objects']} Pods and workloads from the differential generator (seed {corr['seed']}); "
              f"{corr['accepted_by_api_server']} of them the API server accepts, and Kubernetes' own code (the "
              f"oracle) stores {corr['should_allow']} of those Guaranteed with every container pinned. Right = "
              "allowed exactly those. Each tool reads the same JSON the oracle judged, one file per object. The "
              "last column counts the misses on objects where qos-guard deliberately differs (values beyond "
              "kubelet's int64 arithmetic, a forged `status.qosClass: Guaranteed`; tests/fidelity/divergences.py).",
              "",
              "| tool | right | share | allowed wrongly | denied wrongly | misses on qos-guard's documented "
              "divergences |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for tool in ("qos-guard check", "Kyverno CLI"):
        r = corr[tool]
        if "error" in r:
            lines.append(f"| {tool} | — | — | — | — | — |\n| | *not measured: {r['error'][:600].replace('|', '/')}* |")
        else:
            lines.append(f"| {tool} | {r['right']} | {r['share']:.1%} | {r['allowed_wrongly']} | "
                         f"{r['denied_wrongly']} | {r['misses_on_documented_divergences']} |")
    lines += ["", "The Kyverno policies: bench/kyverno/require-qos-guaranteed.yaml (the policy library's, as "
              "published, Apache-2.0; set to Enforce) and bench/kyverno/require-whole-cpus.yaml (the whole-CPU "
              "check as a Kyverno user writes it).", ""]
    (out / "peers.md").write_text("\n".join(lines))


def write_plot(result: dict[str, Any], path: Path) -> None:
    """p50 and p99 against the offered rate for each contender, and each tool's share right."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (lat, corr) = plt.subplots(1, 2, figsize=(13, 4.5), gridspec_kw={"width_ratios": [2, 1]})
    for row in result["latency"]["rows"].values():
        by_rate = sorted((int(k), v) for k, v in row.get("by_rate", {}).items())
        if not by_rate:
            continue
        rates = [r for r, _ in by_rate]
        line = lat.plot(rates, [m["p99"] for _, m in by_rate], marker="o", label=f"{row['label']} p99")
        lat.plot(rates, [m["p50"] for _, m in by_rate], marker=".", linestyle="--", color=line[0].get_color())
    lat.axhline(P99_BOUND_MS, color="grey", linewidth=0.8)
    lat.set(xlabel="offered Pod creates/s", ylabel="ms (dashed: p50)", title="Pod CREATE through kube-apiserver",
            xscale="log", yscale="log")
    lat.legend(fontsize=7)
    tools = [t for t in ("qos-guard check", "Kyverno CLI") if "share" in result["correctness"][t]]
    corr.bar(tools, [100 * result["correctness"][t]["share"] for t in tools])
    corr.set(ylabel="% of objects judged as Kubernetes does", ylim=(0, 100), title="Correctness against the oracle")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.peers")
    parser.add_argument("--seconds", type=float, default=6.0, help="length of each rate step per contender")
    parser.add_argument("--rates", default=",".join(map(str, RATES)))
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2, help="rounds over every rate and contender")
    parser.add_argument("--objects", type=int, default=2000, help="objects for the correctness comparison")
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--no-kyverno", action="store_true", help="qos-guard's rows only (no Kyverno build)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "performance"))
    args = parser.parse_args(argv)
    rates = tuple(int(r) for r in args.rates.split(","))
    import platform
    result = {"date": time.strftime("%Y-%m-%d"), "seconds": args.seconds, "rates": list(rates),
              "machine": f"{len(os.sched_getaffinity(0))} CPUs (1-minute load average {os.getloadavg()[0]:.2f} "
                         f"before the run), Python {platform.python_version()}, kube-apiserver v1.36.3",
              "repeats": args.repeats,
              "latency": latency(args.seconds, rates, args.connections, args.repeats, not args.no_kyverno),
              "correctness": correctness(args.objects, args.seed, not args.no_kyverno)}
    write(result, Path(args.out))
    write_plot(result, Path(args.out) / "peers.png")
    print((Path(args.out) / "peers.md").read_text())
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
