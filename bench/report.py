"""The benchmark's Markdown table (with each goal met or missed) and its plot."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.run import Results, Settings


def _med(values: list[float]) -> float:
    from bench.run import median
    return median(values)


def _fmt(x: float, digits: int = 1) -> str:
    return "—" if math.isnan(x) else f"{x:,.{digits}f}"


def _goal(ok: bool) -> str:
    return "met" if ok else "**missed**"


def write_markdown(res: Results, s: Settings, path: Path) -> None:
    lines = ["# Performance", "",
             f"Measured by `make bench` on {res.machine.get('date')}: Python {res.machine.get('python')}, "
             f"{res.machine.get('cpus')} CPUs, the load generator on the same machine as the server. Medians of "
             f"{s.repeats} interleaved repetitions of {s.seconds:.0f} s; see `results.json` for every run.", ""]
    if res.saturation:
        from bench.run import REFERENCE
        floor = _med(res.saturation["/noop"])
        pinned = res.pinned_saturation
        pfloor = _med(pinned.get("/noop", []))
        lines += ["## Webhook", "",
                  f"One `qos-guard serve` (2 gevent workers, TLS, keep-alive; started as `python -m bench.serve "
                  "--enable-noop`, which adds `/noop`) answering AdmissionReviews of every "
                  f"Pod and workload in the corpus; {s.connections} client connections. `/noop` only parses "
                  "the review and allows it: what gunicorn, Flask and TLS cost alone in our stack. "
                  f"`{REFERENCE}` is bench/reference.py: a bare Flask app on gunicorn (2 gthread workers × 4 "
                  "threads, keep-alive) with TLS answering the same review, no qos-guard code. *Shared*: load "
                  f"generator and servers on both cores; *pinned*: {res.pinned or 'not measured (one CPU)'}. "
                  "The machine is shared with other work, so absolute figures are noisy: compare the ratios, "
                  "which are taken within one run from interleaved rounds.", "",
                  "| endpoint | req/s shared | × `/noop` | req/s pinned | × `/noop` | failed |",
                  "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for ep, rates in res.saturation.items():
            pr = _med(pinned.get(ep, []))
            lines.append(f"| `{ep}` | {_fmt(_med(rates), 0)} | {_med(rates) / floor:.2f} | {_fmt(pr, 0)} | "
                         f"{_fmt(pr / pfloor, 2)} | {res.errors.get(ep, 0)} |")
        lines += ["", "Latency at a fixed offered rate (open loop, measured from the scheduled send time), ms:", "",
                  "| endpoint | placement | rate/s | achieved/s | p50 | p99 | p99.9 |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        for placement, table in (("shared", res.latency), ("pinned", res.pinned_latency)):
            for ep, by_rate in table.items():
                for rate, runs in by_rate.items():
                    lines.append(f"| `{ep}` | {placement} | {rate} | {_fmt(_med([r['achieved'] for r in runs]), 0)} | "
                                 f"{_fmt(_med([r['p50'] for r in runs]), 2)} | "
                                 f"{_fmt(_med([r['p99'] for r in runs]), 2)} | "
                                 f"{_fmt(_med([r['p999'] for r in runs]), 2)} |")
        lines += ["", f"Peak resident memory of the server (master + workers): {res.server_peak_mib:.0f} MiB.", ""]
        lines += ["Goals (what bounds a missed one, with profiles: [profiling.md](profiling.md)):", ""]
        for placement, sat, lat in (("shared", res.saturation, res.latency),
                                    ("pinned", pinned, res.pinned_latency)):
            if not sat:
                continue
            noop = _med(sat["/noop"])
            for ep in ("/validate", "/mutate"):
                ratio = _med(sat[ep]) / noop
                lines.append(f"- {placement}: `{ep}` ≥ 0.9× `/noop` throughput: {ratio:.2f}× — {_goal(ratio >= 0.9)}")
            if REFERENCE in sat:
                ratio = noop / _med(sat[REFERENCE])
                lines.append(f"- {placement}: `/noop` ≥ 0.8× the bare Flask + gunicorn + TLS reference: {ratio:.2f}× — "
                             f"{_goal(ratio >= 0.8)}")
            runs = lat.get("/validate", {}).get(500, [])
            p99, p999 = _med([r["p99"] for r in runs]), _med([r["p999"] for r in runs])
            lines.append(f"- {placement}: `/validate` p99 ≤ 5 ms at 500 requests/s: {_fmt(p99, 2)} ms (p99.9 "
                         f"{_fmt(p999, 2)} ms) — {_goal(p99 <= 5) if not math.isnan(p99) else 'not measured'}")
        lines.append("")
    if res.baseline:
        lines += [f"### Before and after (against `{res.baseline}`, both servers in this run)", "",
                  "| server | `/noop` req/s | `/validate` req/s | `/validate` ÷ `/noop` "
                  "| `/validate` p99 ms at 500/s |",
                  "| --- | ---: | ---: | ---: | ---: |"]
        for name in ("before", "after"):
            noop = _med(res.baseline_saturation.get(f"{name} /noop", []))
            val = _med(res.baseline_saturation.get(f"{name} /validate", []))
            p99 = _med([r["p99"] for r in res.baseline_latency.get(f"{name} /validate", {}).get(500, [])])
            lines.append(f"| {name} | {_fmt(noop, 0)} | {_fmt(val, 0)} | {val / noop:.2f} | {_fmt(p99, 2)} |")
        lines.append("")
    if res.cli:
        floor_cmd = "YAML floor (CSafeLoader)"
        floor_s = _med([r["seconds"] for r in res.cli[floor_cmd]])
        lines += ["## CLI", "",
                  f"The corpus replicated to {res.cli_documents:,} documents; each command over the same files. "
                  "kube-score stops at the first file it cannot read (a field of an unexpected type), so it is "
                  f"compared on the {res.cli_subset_documents:,} documents of the files it reads, with the floor "
                  "and qos-guard re-run on those. Peak memory is the largest total over the process tree.", "",
                  "| command | seconds | × floor | peak MiB |", "| --- | ---: | ---: | ---: |"]
        for name, runs in res.cli.items():
            if "(kube-score's files)" in name:
                continue
            secs = _med([r["seconds"] for r in runs])
            note = " (timed out)" if any(r.get("timed_out") for r in runs) else ""
            peak = _fmt(_med([r["peak_mib"] for r in runs]), 0) if res.cli_memory_sampled else "—"
            lines.append(f"| {name}{note} | {_fmt(secs, 2)} | {secs / floor_s:.2f} | {peak} |")
        subset = {n.replace(" (kube-score's files)", ""): runs for n, runs in res.cli.items()
                  if "(kube-score's files)" in n}
        if subset:
            sub_floor = _med([r["seconds"] for r in subset[floor_cmd]])
            lines += ["", f"On kube-score's files ({res.cli_subset_documents:,} documents):", "",
                      "| command | seconds | × floor | peak MiB |", "| --- | ---: | ---: | ---: |"]
            for name, runs in subset.items():
                secs = _med([r["seconds"] for r in runs])
                lines.append(f"| {name} | {_fmt(secs, 2)} | {secs / sub_floor:.2f} | "
                             f"{_fmt(_med([r['peak_mib'] for r in runs]), 0)} |")
        check_s = _med([r["seconds"] for r in res.cli["qos-guard check"]])
        lines += ["", "Goals:", "",
                  f"- `check` within 1.5× the YAML-reading floor: {check_s / floor_s:.2f}× — "
                  f"{_goal(check_s <= 1.5 * floor_s)}"]
        if "checkov --framework kubernetes" in res.cli:
            ck = _med([r["seconds"] for r in res.cli["checkov --framework kubernetes"]])
            lines.append(f"- `check` at least 10× faster than checkov: {ck / check_s:.1f}× — "
                         f"{_goal(ck >= 10 * check_s)}")
        if "kube-score score" in subset and "qos-guard check" in subset:
            ks = _med([r["seconds"] for r in subset["kube-score score"]])
            qc = _med([r["seconds"] for r in subset["qos-guard check"]])
            lines.append(f"- `check` ≥ 2× faster than kube-score on the same files: {ks / qc:.2f}× — "
                         f"{_goal(ks >= 2 * qc)}")
        lines.append("")
    if res.scaling:
        lines += ["## Scaling", "", "| documents | files | check s | check peak MiB | floor s | floor peak MiB |",
                  "| ---: | ---: | ---: | ---: | ---: | ---: |"]
        for row in res.scaling:
            lines.append(f"| {row['documents']:,.0f} | {row['files']:,.0f} | {row['check_seconds']:.2f} | "
                         f"{row['check_peak_mib']:.0f} | {row['floor_seconds']:.2f} | {row['floor_peak_mib']:.0f} |")
        first, last = res.scaling[0], res.scaling[-1]
        growth = last["documents"] / first["documents"]
        lines += ["", f"From {first['documents']:,.0f} to {last['documents']:,.0f} documents ({growth:.0f}×): "
                  f"time × {last['check_seconds'] / first['check_seconds']:.1f}, "
                  f"peak memory × {last['check_peak_mib'] / first['check_peak_mib']:.2f}.", "",
                  f"- Goal: `check` memory flat in input size (peak × ≤ 1.5 over {growth:.0f}× the documents): "
                  f"{last['check_peak_mib'] / first['check_peak_mib']:.2f}× — "
                  f"{_goal(last['check_peak_mib'] <= 1.5 * first['check_peak_mib'])}", ""]
    path.write_text("\n".join(lines) + "\n")


def write_plot(res: Results, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    ax = axes[0]
    for ep, by_rate in res.latency.items():
        rates = sorted(by_rate)
        ax.plot(rates, [_med([r["p99"] for r in by_rate[x]]) for x in rates], marker="o", label=f"{ep} p99")
        ax.plot(rates, [_med([r["p50"] for r in by_rate[x]]) for x in rates], marker=".", linestyle="--",
                label=f"{ep} p50")
    ax.set(xlabel="offered requests/s", ylabel="latency ms", title="Webhook latency", yscale="log")
    ax.legend(fontsize=7)
    ax = axes[1]
    names = [n for n in res.cli if "(kube-score's files)" not in n]
    ax.barh(names, [_med([r["seconds"] for r in res.cli[n]]) for n in names])
    ax.set(xlabel="seconds", title=f"CLI over {res.cli_documents:,} documents", xscale="log")
    ax = axes[2]
    docs = [r["documents"] for r in res.scaling]
    ax.plot(docs, [r["check_seconds"] for r in res.scaling], marker="o", label="check s")
    ax.plot(docs, [r["floor_seconds"] for r in res.scaling], marker="o", label="floor s")
    ax2 = ax.twinx()
    ax2.plot(docs, [r["check_peak_mib"] for r in res.scaling], marker="s", color="grey", label="check peak MiB")
    ax.set(xlabel="documents", ylabel="seconds", title="check scaling", xscale="log", yscale="log")
    ax2.set_ylabel("peak MiB")
    ax.legend(loc="upper left", fontsize=7)
    ax2.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
