"""The serving faults of docs/reliability.md at once against one real server (``--connections 2000`` as the
chart's values.yaml example sets it, its two workers, TLS), loopback only, bounded in time
(``QOS_GUARD_FAULT_SOAK_SECONDS``, 30 by default): 2,000 keep-alive connections held (descriptors past 1,024), 250
connections promising 100,000 bytes and sending one (reopened as the deadline closes them), the log's reader
stopped, and every few seconds every worker stopped (SIGSTOP) and continued just before the readiness probe's
timeout, as the health port wedged. Meanwhile a legitimate client sends a /validate on a new connection every
0.1 s, and another a 99 KiB review every 0.4 s: every answer 200, within 1 s (one that overlapped a stall the
test made: within 1 s plus the stall); the probes: no 500 and no unanswered probe, /healthz always 200, /readyz
200 again within 2 s after each stall.

This machine may be shared (load averages of 20 on 2 cores were seen): when the 1 s bound is missed, the same
client without any fault says how much of it the machine itself takes, and the faults may add no more than the
bound to that (as tests/reliability/test_hostile_clients.py does)."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import ssl
import threading
import time
from pathlib import Path

import pytest
import requests

from tests.reliability import clients
from tests.reliability.conftest import FIGURES
from tests.reliability.test_serving_faults import BODY, NAMED, PipeReader, large_review, metric
from tests.serving import Server, process_tree, start_server

SECONDS = float(os.environ.get("QOS_GUARD_FAULT_SOAK_SECONDS", "30"))
HELD = 2000
PROMISED = 250


async def promise_forever(srv: Server, n: int, stop: asyncio.Event, opened: list[int]) -> None:
    """``n`` connections each promising 100,000 bytes and sending one, reopened as the server closes them."""
    ctx = clients.context(srv.ca)

    async def one() -> None:
        while not stop.is_set():
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(
                    clients.HOST, srv.port, ssl=ctx, server_hostname="localhost"), 10)
            except (OSError, TimeoutError, ssl.SSLError):
                await asyncio.sleep(0.2)
                continue
            opened[0] += 1
            try:
                writer.write(clients.request("/validate", b"{", length=100_000))
                stopping = asyncio.ensure_future(stop.wait())
                reading = asyncio.ensure_future(reader.read(1))
                await asyncio.wait([stopping, reading], return_when=asyncio.FIRST_COMPLETED)
                stopping.cancel()
                reading.cancel()
            except (OSError, ssl.SSLError):
                pass
            finally:
                writer.transport.abort()

    await asyncio.gather(*(one() for _ in range(n)))


def probe(srv: Server, path: str) -> str:
    try:
        return str(requests.get(srv.metrics + path, timeout=2).status_code)
    except requests.RequestException as exc:
        return type(exc).__name__


@pytest.fixture
def many_files() -> None:
    if clients.raise_open_files(8192) < 4200:
        pytest.skip("the hard limit on open files cannot hold 2,000 connections and their other ends here")


def test_every_fault_at_once_while_a_legitimate_client_measures(tmp_path: Path, many_files: None) -> None:
    pipe = PipeReader()
    try:
        srv = start_server(tmp_path, "--connections", "2000", output=pipe.write_end)
    finally:
        os.close(pipe.write_end)
    bg = clients.Background()
    stop_async = asyncio.Event()
    opened = [0]
    legit, stop = clients.Timed(), threading.Event()
    large = clients.Timed()
    probes: dict[str, dict[str, int]] = {"/readyz": {}, "/healthz": {}}
    slow_to_ready: list[float] = []
    windows: list[tuple[float, float]] = []
    try:
        pipe.stall()  # before the 2,000 connections' requests: their decision lines fill the pipe
        held = bg.run(clients.crowd(srv.port, srv.ca, HELD, clients.request("/validate", NAMED), answer=True),
                      timeout=300)
        promising = bg.start(promise_forever(srv, PROMISED, stop_async, opened))
        big = large_review(99 * 1024)
        threads = [threading.Thread(target=clients.legitimate, args=(srv.url, srv.ca, BODY, stop, legit)),
                   threading.Thread(target=clients.legitimate, args=(srv.url, srv.ca, big, stop, large),
                                    kwargs={"every": 0.4})]
        for t in threads:
            t.start()

        def probing() -> None:
            while not stop.is_set():
                for path in probes:
                    said = probe(srv, path)
                    probes[path][said] = probes[path].get(said, 0) + 1
                stop.wait(0.25)

        prober = threading.Thread(target=probing)
        prober.start()
        began = time.monotonic()
        while time.monotonic() - began < SECONDS:
            time.sleep(2.5)
            workers = process_tree(srv.proc.pid)[1:]
            asked = threading.Thread(target=probe, args=(srv, "/readyz"))
            stalled = time.monotonic()
            for pid in workers:
                os.kill(pid, signal.SIGSTOP)
            asked.start()
            time.sleep(random.uniform(0.78, 0.80))  # continued as the probe's 0.8 s timeout lands
            for pid in workers:
                os.kill(pid, signal.SIGCONT)
            windows.append((stalled, time.monotonic()))
            asked.join()
            started = time.monotonic()
            while probe(srv, "/readyz") != "200" and time.monotonic() - started < 10:
                time.sleep(0.05)
            slow_to_ready.append(time.monotonic() - started)
        stop.set()
        for t in [*threads, prober]:
            t.join(30)
        dropped = metric(srv, "qos_guard_log_lines_dropped_total")
        errors = metric(srv, 'qos_guard_http_server_errors_total{code="500"}')
        probe_errors = metric(srv, "qos_guard_health_probe_errors_total")
        answered = dict(held.answered)
        bg.loop.call_soon_threadsafe(stop_async.set)
        promising.result(30)
        bg.run(held.close())
        control = None
        calm, calm_large = legit.outside(windows), large.outside(windows)
        if max(calm.worst, calm_large.worst) >= 1.0:  # the machine's own share, measured without any fault
            control, control_large, quiet = clients.Timed(), clients.Timed(), threading.Event()
            pipe.reading.set()
            threads = [threading.Thread(target=clients.legitimate, args=(srv.url, srv.ca, BODY, quiet, control)),
                       threading.Thread(target=clients.legitimate, args=(srv.url, srv.ca, big, quiet,
                                                                         control_large), kwargs={"every": 0.4})]
            for t in threads:
                t.start()
            time.sleep(SECONDS / 3)
            quiet.set()
            for t in threads:
                t.join(30)
    finally:
        stop.set()
        bg.loop.call_soon_threadsafe(stop_async.set)
        bg.close()
        pipe.reading.set()
        srv.stop()
        pipe.close()
    FIGURES.append(f"fault soak ({SECONDS:.0f} s, --connections 2000): {HELD} keep-alive connections held (answers "
                   f"{answered}), {PROMISED} promising 100,000 bytes ({opened[0]} opened in all), log reader "
                   f"stopped ({dropped:.0f} lines dropped and counted), {len(windows)} stalls of every worker for "
                   f"0.78-0.80 s; legitimate small: {legit.summary()} (outside the stalls: {calm.summary()}); "
                   f"legitimate 99 KiB: {large.summary()} (outside the stalls: {calm_large.summary()}); "
                   f"probes {probes}, /readyz 200 again at most {max(slow_to_ready, default=0) * 1000:.0f} ms after "
                   f"a stall; 5xx counted {errors:.0f}, probe errors {probe_errors:.0f}"
                   + (f"; no fault, same clients: {control.summary()}, {control_large.summary()}" if control else ""))
    assert answered == {200: HELD}, answered
    assert set(legit.statuses) == {"200"} and set(large.statuses) == {"200"}, (legit.statuses, large.statuses)
    machine = max(control.worst, control_large.worst) if control else 0.0
    stall = max(end - start for start, end in windows)
    assert max(calm.worst, calm_large.worst) < 1.0 + machine, (calm.summary(), calm_large.summary(), machine)
    assert max(legit.worst, large.worst) < 1.0 + stall + machine, (legit.summary(), large.summary(), machine)
    assert set(probes["/healthz"]) == {"200"}, probes
    assert set(probes["/readyz"]) <= {"200", "503"}, probes
    assert max(slow_to_ready) < 2.0, slow_to_ready
    assert errors == 0 and probe_errors == 0 and dropped > 0
