"""A keep-alive HTTPS load generator in processes (so the GIL of one does not cap the other).

Two shapes: closed-loop saturation (each connection sends as soon as its answer arrives) and open-loop
fixed rate, where latency counts from the *scheduled* send time so a slow server cannot hide its queueing
(no coordinated omission).
"""

from __future__ import annotations

import http.client
import multiprocessing as mp
import ssl
import time
from dataclasses import dataclass


@dataclass
class Result:
    requests: int
    errors: int
    seconds: float
    latencies_ms: list[float]

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def percentile(self, q: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def _connect(port: int, ca: str) -> http.client.HTTPSConnection:
    ctx = ssl.create_default_context(cafile=ca)
    conn = http.client.HTTPSConnection("localhost", port, context=ctx, timeout=30)
    conn.connect()
    return conn


def _worker(port: int, ca: str, path: str, bodies: list[bytes], start: float, stop: float, interval: float,
            offset: int, stride: int, out: mp.Queue) -> None:  # type: ignore[type-arg]
    conn = _connect(port, ca)
    headers = {"Content-Type": "application/json", "Connection": "keep-alive"}
    latencies, errors, sent, i = [], 0, 0, offset
    while time.time() < start:
        time.sleep(0.0005)
    while True:
        if interval:  # open loop: request i is due at start + i * interval
            due = start + i * interval
            now = time.time()
            if due >= stop:
                break
            if due > now:
                time.sleep(due - now)
            began = due
        else:
            began = time.time()
            if began >= stop:
                break
        try:
            conn.request("POST", path, body=bodies[i % len(bodies)], headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200 or b'"allowed"' not in data:
                errors += 1
        except (OSError, http.client.HTTPException):
            errors += 1
            conn.close()
            conn = _connect(port, ca)
        latencies.append((time.time() - began) * 1000)
        sent += 1
        i += stride
    conn.close()
    out.put((sent, errors, latencies))


def run(port: int, ca: str, path: str, bodies: list[bytes], seconds: float, connections: int,
        rate: float | None = None) -> Result:
    """Saturate with ``connections`` (rate None) or send ``rate`` requests/s spread over them."""
    ctx = mp.get_context("fork")
    out: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    start = time.time() + 0.5
    stop = start + seconds
    interval = 1 / rate if rate else 0.0  # request i is due at start + i * interval, on connection i % n
    procs = [ctx.Process(target=_worker, args=(port, ca, path, bodies, start, stop, interval, k, connections, out))
             for k in range(connections)]
    for p in procs:
        p.start()
    results = [out.get(timeout=seconds + 120) for _ in procs]
    for p in procs:
        p.join()
    latencies = [ms for _, _, lat in results for ms in lat]
    return Result(sum(r[0] for r in results), sum(r[1] for r in results), seconds, latencies)
