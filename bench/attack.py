"""Slow and idle clients against a loopback webhook, with a well-behaved probe timing ``/validate`` meanwhile.

Each kind holds ``n`` connections for ``seconds`` (reopening any the server closes, as an attacker would),
then closes them all. Loopback only; bounded in count and time. ``python -m bench.attack --help``.

- ``handshake``: 3 bytes of a TLS ClientHello, then nothing;
- ``headers``: a TLS connection sending two header bytes, then two more a minute;
- ``body``: complete headers, then the body one byte a second;
- ``short-body``: a Content-Length larger than what is sent, then nothing;
- ``zero``: a TCP connection that sends nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import ssl
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

KINDS = ("handshake", "headers", "body", "short-body", "zero")
HOST = "127.0.0.1"


def client_context(ca: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=ca)
    ctx.check_hostname = False
    return ctx


@dataclass
class Held:
    opened: int = 0        # connections opened, reopenings included
    open_now: int = 0
    peak: int = 0
    closed_by_server: int = 0


async def _stall(kind: str, port: int, ctx: ssl.SSLContext, stop: float, held: Held) -> None:
    """One attacker slot: open a connection of ``kind``, hold it, reopen when the server closes it."""
    head = ("POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            "Content-Length: {}\r\n\r\n")
    while time.monotonic() < stop:
        writer = None
        try:
            tls = ctx if kind in ("headers", "body", "short-body") else None
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(HOST, port, ssl=tls, server_hostname="localhost" if tls else None),
                timeout=max(0.1, stop - time.monotonic()))
            held.opened += 1
            held.open_now += 1
            held.peak = max(held.peak, held.open_now)
            try:
                if kind == "handshake":
                    writer.write(b"\x16\x03\x01")
                elif kind == "headers":
                    writer.write(b"PO")
                elif kind == "body":
                    writer.write(head.format(1000).encode())
                elif kind == "short-body":
                    writer.write(head.format(5000).encode() + b'{"kind": "AdmissionReview"')
                await writer.drain()
                every = 60.0 if kind == "headers" else 1.0
                while time.monotonic() < stop:
                    try:
                        data = await asyncio.wait_for(reader.read(4096), timeout=min(every, stop - time.monotonic()))
                    except TimeoutError:
                        if kind == "headers":
                            writer.write(b"ST")
                        elif kind == "body":
                            writer.write(b" ")
                        await writer.drain()
                        continue
                    if not data:  # the server closed it
                        held.closed_by_server += 1
                        break
            finally:
                held.open_now -= 1
        except (OSError, TimeoutError, ssl.SSLError):
            await asyncio.sleep(0.05)
        finally:
            if writer is not None:
                writer.close()


async def _hold(kinds: list[str], n: int, port: int, ca: str, seconds: float) -> dict[str, Held]:
    ctx = client_context(ca)
    stop = time.monotonic() + seconds
    held = {kind: Held() for kind in kinds}
    tasks = [asyncio.create_task(_stall(kind, port, ctx, stop, held[kind])) for kind in kinds for _ in range(n)]
    await asyncio.gather(*tasks)
    return held


def hold(kinds: list[str], n: int, port: int, ca: str, seconds: float) -> dict[str, Held]:
    """Hold ``n`` connections of each kind for ``seconds``; blocks until they are all closed."""
    return asyncio.run(_hold(kinds, n, port, ca, seconds))


@dataclass
class Probe:
    latencies: list[float] = field(default_factory=list)  # seconds; a failure counts as its timeout
    failures: int = 0

    def summary(self) -> dict[str, float]:
        lat = sorted(self.latencies) or [float("nan")]
        return {"probes": len(self.latencies), "failures": self.failures, "max_s": lat[-1],
                "median_s": statistics.median(lat)}


def probe(port: int, ca: str, body: bytes, stop: threading.Event, every: float = 0.25,
          timeout: float = 5.0) -> Probe:
    """A legitimate client: a new TLS connection and one ``/validate`` every ``every`` s until ``stop``."""
    result = Probe()
    ctx = client_context(ca)
    while not stop.is_set():
        started = time.monotonic()
        try:
            conn = http.client.HTTPSConnection(HOST, port, context=ctx, timeout=timeout)
            conn.request("POST", "/validate", body, {"Content-Type": "application/json"})
            answer = conn.getresponse()
            answer.read()
            conn.close()
            if answer.status != 200:
                result.failures += 1
            result.latencies.append(time.monotonic() - started)
        except (OSError, http.client.HTTPException):
            result.failures += 1
            result.latencies.append(max(time.monotonic() - started, timeout))
        stop.wait(every)
    return result


def attack(port: int, ca: str, body: bytes, kinds: list[str], n: int, seconds: float) -> dict[str, object]:
    """Hold the connections from another process (so the attacker's own TLS work cannot delay the probe
    through this process's GIL) and probe from this one, after a ramp-up of a third of ``seconds``."""
    holder = subprocess.Popen([sys.executable, "-m", "bench.attack", "--hold", "--port", str(port), "--ca", ca,
                               *(f"--kind={k}" for k in kinds), "-n", str(n), "--seconds", str(seconds)],
                              stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parent.parent)
    stop = threading.Event()
    try:
        time.sleep(seconds / 3)
        timer = threading.Timer(seconds * 2 / 3 - 0.5, stop.set)
        timer.start()
        probed = probe(port, ca, body, stop)
        out, _ = holder.communicate(timeout=seconds + 60)
    finally:
        stop.set()
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    return {"kinds": json.loads(out), "probe": probed.summary()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.attack", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True, help="the webhook's TLS port on 127.0.0.1")
    parser.add_argument("--ca", required=True, help="CA bundle that signed the webhook's certificate")
    parser.add_argument("--body", help="an AdmissionReview for the probe (required without --hold)")
    parser.add_argument("--hold", action="store_true", help="only hold the connections; print what was held")
    parser.add_argument("--kind", choices=(*KINDS, "all"), action="append", required=True)
    parser.add_argument("-n", type=int, default=256, help="connections per kind (at most 1024)")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long to hold them (at most 120)")
    args = parser.parse_args(argv)
    kinds = list(KINDS) if "all" in args.kind else args.kind
    n, seconds = min(args.n, 1024), min(args.seconds, 120.0)
    if args.hold:
        print(json.dumps({k: vars(h) for k, h in hold(kinds, n, args.port, args.ca, seconds).items()}))
    elif not args.body:
        parser.error("--body is required without --hold")
    else:
        print(json.dumps(attack(args.port, args.ca, Path(args.body).read_bytes(), kinds, n, seconds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
