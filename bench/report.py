"""The benchmark's Markdown table (with each goal met or missed) and its plot."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bench.results import REFERENCE, Results, Settings, median


def _med(values: list[float]) -> float:
    return median(values)


def _fmt(x: float, digits: int = 1) -> str:
    return "—" if math.isnan(x) else f"{x:,.{digits}f}"


def _goal(ok: bool) -> str:
    return "met" if ok else "**missed**"


def write_markdown(res: Results, s: Settings, path: Path) -> None:
    lines = ["# Performance", "",
             f"Measured by `make bench` on {res.machine.get('date')}: Python {res.machine.get('python')}, "
             f"{res.machine.get('cpus')} CPUs, the load generator on the same machine as the server. Medians of "
             f"{s.repeats} interleaved repetitions of {s.seconds:.0f} s; see `results.json` for every run.", "",
             "qos-guard beside Kyverno and its own generated admission policies on one API server (latency, "
             "memory, correctness against Kubernetes' own code): [peers.md](peers.md) (`python -m bench.peers`, "
             "part of `make bench`).", "",
             "The second scheduler: the real kube-scheduler's Pods per second with and without `qos-guard "
             "extender`, and both containers' memory at 5,000 nodes: [scheduler.md](scheduler.md) (`python -m "
             "bench.scheduler`, part of `make bench`). The extender in process at 1,000 to 10,000 nodes: "
             "[extender.md](extender.md) (`python -m bench.extender`); its memory at 5,000 nodes and 100,000 bound "
             "Pods through a relist: [extender-memory.json](extender-memory.json) (`python -m bench.extender_memory`).",
             ""]
    if res.saturation:
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
    lines += _bodies_section(res) + _plain_section(res)
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


MIB = 1024 * 1024


def _size(n: float) -> str:
    return f"{n / MIB:.1f} MiB" if n >= MIB else f"{n / 1000:.1f} KB" if n >= 1000 else f"{n:.0f} B"


def _bodies_section(res: Results) -> list[str]:
    """Per request, by body: CPU µs and peak bytes, before and after, and the footprint goal."""
    after = res.bodies.get("after")
    if not after:
        return []
    before = res.bodies.get("before", {})
    lines = ["## Per request, by body", "",
             "Each review through the admission application's WSGI entry point in-process (body read from the request "
             "stream, decoded, judged, answered; no TLS or network): CPU microseconds per request (median of "
             "interleaved rounds, spread in brackets) and the peak of memory allocated while one request is "
             "handled (tracemalloc), body buffer included. `small` is examples/admission-review.json; `inference` "
             "an LLM inference Pod (three containers with a hundred environment variables each, thirty volumes, "
             "annotations, managedFields); `1 MB` and `3 MiB` the same Pod with a large last-applied annotation. "
             + (f"*Before*: `{res.bodies_baseline}`, measured in the same run in alternating interpreters."
                if before else ""), "",
             "| body | size | endpoint | µs before | µs after | bytes before | bytes after | after ÷ body |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, by_path in after.items():
        for path, a in by_path.items():
            b = before.get(name, {}).get(path, {})

            def us(e: dict[str, Any]) -> str:
                if not e.get("us"):
                    return "—"
                lo, hi = e["us_spread"]
                return f"{e['us']:,.0f} ({lo:,.0f}–{hi:,.0f})"

            lines.append(f"| {name} | {_size(a['size'])} | `{path}` | {us(b)} | {us(a)} | "
                         f"{_size(b['bytes']) if b else '—'} | {_size(a['bytes'])} | {a['bytes'] / a['size']:.2f} |")
    lines += ["", "Goal: memory per in-flight request ≤ 1× its body, read as what a request holds beyond its own "
              "body bytes (decoding, judging, answering; the body itself must be held once), and as the whole "
              "peak:", ""]
    for name in ("small", "inference", "3 MiB"):
        a = after.get(name, {}).get("/validate")
        if a:
            beyond = (a["bytes"] - a["size"]) / a["size"]
            lines.append(f"- {name} ({_size(a['size'])}): beyond the body {max(beyond, 0):.2f}× — "
                         f"{_goal(beyond <= 1)}; whole peak {a['bytes'] / a['size']:.2f}× — "
                         f"{_goal(a['bytes'] <= a['size'])}")
    return [*lines, ""]


def _plain_section(res: Results) -> list[str]:
    if not res.plain:
        return []
    lines = ["## `check` on many small files", "",
             f"The vendored corpus as it is ({res.plain_files} files kube-score reads), one invocation per tool per "
             "round, interleaved and rotated; wall seconds median (min–max) and CPU seconds (user + system, all "
             "threads) median.", "", "| command | wall s | CPU s |", "| --- | ---: | ---: |"]
    for name, runs in res.plain.items():
        walls = [r["seconds"] for r in runs]
        lines.append(f"| {name} | {_med(walls):.3f} ({min(walls):.3f}–{max(walls):.3f}) | "
                     f"{_med([r['cpu_seconds'] for r in runs]):.3f} |")
    if "kube-score score" in res.plain:
        ks = _med([r["seconds"] for r in res.plain["kube-score score"]])
        qc = _med([r["seconds"] for r in res.plain["qos-guard check"]])
        lines += ["", f"- Goal: `check` at least level with kube-score here (wall): {ks / qc:.2f}× — {_goal(qc <= ks)}"]
    return [*lines, ""]


def write_plot(res: Results, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(20, 4.5))
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
    ax = axes[3]
    after = res.bodies.get("after", {})
    names = [n for n in after if after[n]["/validate"].get("us")]
    for offset, (label, table) in enumerate((("before", res.bodies.get("before", {})), ("after", after))):
        values = [table.get(n, {}).get("/validate", {}).get("us") or 0 for n in names]
        ax.bar([i + 0.4 * offset for i in range(len(names))], values, width=0.4, label=f"{label} µs CPU")
    ax.set_xticks([i + 0.2 for i in range(len(names))], names)
    ax.set(ylabel="µs per /validate request", title="Per request by body (in-process)", yscale="log")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
