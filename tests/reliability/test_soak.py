"""The real server under sustained concurrent keep-alive load: zero failed or wrong answers, resident memory
that levels off, a worker killed with SIGKILL replaced without a wrong verdict, and the certificate replaced
mid-load without a failure. ``QOS_GUARD_SOAK_SECONDS`` (default 20; 60 for the longer run) sets the length."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from tests.builders import container, guaranteed, pod, rl
from tests.helpers import admission_review
from tests.reliability.conftest import FIGURES
from tests.serving import Server, memory_mib, process_tree, rotate_certificate, start_server

SECONDS = float(os.environ.get("QOS_GUARD_SOAK_SECONDS", "20"))
CLIENTS = 4


def _review(obj: dict[str, Any], uid: str) -> bytes:
    return json.dumps(admission_review(obj, uid=uid, namespace="soak", username="soak")).encode()


# (object, path, expected allowed): a deny, an allow and a patch, so a crossed answer is seen.
CASES = [
    (pod(container("app", limits=rl("1500m", "1Gi"))), "/validate", False),
    (pod(guaranteed()), "/validate", True),
    (pod(container("app", rl("1", "1Gi"), rl("2", "1Gi"))), "/mutate", True),
    (pod(container("app", limits=rl("1500m", "1Gi"))), "/warn", True),
]


@dataclass
class Tally:
    answered: int = 0
    retried: int = 0
    failures: list[str] = field(default_factory=list)


def _client(server: Server, n: int, stop: Any, results: Any) -> None:
    """One client process (processes, not threads: the test's own loop must not wait on their GIL)."""
    tally = Tally()
    session = requests.Session()  # keep-alive
    i = 0
    while not stop.is_set():
        obj, path, allowed = CASES[i % len(CASES)]
        uid = f"c{n}-{i}"
        i += 1
        r: requests.Response | None = None
        for _attempt in range(5):
            try:
                r = session.post(server.url + path, data=_review(obj, uid), verify=server.ca, timeout=15,
                                 headers={"Content-Type": "application/json"})
                break
            except requests.Timeout:
                tally.failures.append(f"{uid}: timed out")
                break  # r stays None
            except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError):
                # A killed worker drops its connections; the API server would retry the same way.
                session.close()
                session = requests.Session()
                tally.retried += 1
        else:
            tally.failures.append(f"{uid}: no answer after 5 connections")
            continue
        if r is None:
            continue
        out = r.json() if r.status_code == 200 else {}
        resp = out.get("response", {})
        tally.answered += 1
        if r.status_code != 200 or resp.get("uid") != uid or resp.get("allowed") is not allowed:
            tally.failures.append(f"{uid} {path}: HTTP {r.status_code} {r.text[:200]}")
        elif path == "/mutate" and "patch" not in resp:
            tally.failures.append(f"{uid}: /mutate answered without its patch")
    session.close()
    results.put(tally)


def test_soak_with_worker_kill_and_certificate_rotation(tmp_path: Path) -> None:
    server = start_server(tmp_path)
    ctx = mp.get_context("fork")
    stop, results = ctx.Event(), ctx.Queue()
    clients = [ctx.Process(target=_client, args=(server, n, stop, results)) for n in range(CLIENTS)]
    tally = Tally()
    samples: list[tuple[float, float]] = []
    events: list[str] = []
    began = time.monotonic()
    try:
        for c in clients:
            c.start()
        killed = rotated = False
        while (elapsed := time.monotonic() - began) < SECONDS:
            samples.append((elapsed, memory_mib(process_tree(server.proc.pid), "VmRSS")))
            if not killed and elapsed > SECONDS * 0.4:
                worker = max(p for p in process_tree(server.proc.pid) if p != server.proc.pid)
                os.kill(worker, signal.SIGKILL)
                killed = True
                events.append(f"SIGKILL worker {worker} at {elapsed:.0f} s")
            if not rotated and elapsed > SECONDS * 0.6:
                rotate_certificate(server)
                rotated = True
                events.append(f"certificate replaced at {elapsed:.0f} s")
            time.sleep(1)
        stop.set()
        for _ in clients:
            part = results.get(timeout=60)
            tally.answered += part.answered
            tally.retried += part.retried
            tally.failures += part.failures
        for c in clients:
            c.join(timeout=10)
        workers = [p for p in process_tree(server.proc.pid) if p != server.proc.pid]
    finally:
        stop.set()
        for c in clients:
            if c.is_alive():
                c.kill()
        server.stop()
    # Steady state: after the first fifth (warm-up, imports, caches) memory must level off.
    steady = [rss for at, rss in samples if at > SECONDS * 0.2]
    first, last = steady[: max(len(steady) // 5, 1)], steady[-max(len(steady) // 5, 1):]
    growth = sum(last) / len(last) - sum(first) / len(first)
    FIGURES.append(f"soak: {SECONDS:.0f} s, {CLIENTS} keep-alive clients, {tally.answered} answers, "
                   f"{len(tally.failures)} failed or wrong, {tally.retried} retried connections; RSS "
                   f"{samples[0][1]:.0f} MiB at start, {sum(first) / len(first):.0f} -> {sum(last) / len(last):.0f} "
                   f"MiB in steady state; {'; '.join(events)}")
    assert tally.failures == [], tally.failures[:5]
    assert tally.answered > SECONDS * 20  # it really was under load
    assert len(workers) == 2  # the killed worker was replaced
    assert growth < 25, f"resident memory grew {growth:.1f} MiB in steady state: {samples}"
