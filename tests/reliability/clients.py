"""Many TLS clients at once from one thread (asyncio: its poller is epoll, so thousands of descriptors are fine),
and the one legitimate client that times each answer: what the serving-fault tests and their soak hold against a
real server. Loopback only; every wait bounded."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import resource
import ssl
import statistics
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import requests

HOST = "127.0.0.1"
T = TypeVar("T")


def raise_open_files(wanted: int) -> int:
    """The soft limit on open files raised to ``wanted`` (at most the hard limit), for this process and the
    servers it starts (they inherit it): the limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def context(ca: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=ca)
    ctx.check_hostname = False
    return ctx


def request(path: str, body: bytes, length: int | None = None) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body) if length is None else length}\r\n\r\n").encode() + body


async def read_status(reader: asyncio.StreamReader) -> int:
    """One answer read whole (head and Content-Length body): its status, 0 when the connection ended first."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
        return 0
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    try:
        await reader.readexactly(length)
    except (asyncio.IncompleteReadError, OSError):
        return 0
    return int(head.split(b" ", 2)[1])


@dataclass
class Crowd:
    """Connections held open: each answered once (``answered``, by status) or sent a partial request."""

    writers: list[asyncio.StreamWriter] = field(default_factory=list)
    answered: collections.Counter[int] = field(default_factory=collections.Counter)
    failed: collections.Counter[str] = field(default_factory=collections.Counter)

    async def close(self) -> None:
        for writer in self.writers:
            writer.transport.abort()
        self.writers.clear()
        await asyncio.sleep(0)  # the aborts' callbacks run: the descriptors are closed


class Background:
    """An asyncio loop on a thread of its own, for connections held while the test does other things."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="clients", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 120.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


async def crowd(port: int, ca: str, n: int, first: bytes, answer: bool, concurrency: int = 32,
                timeout: float = 20.0) -> Crowd:
    """``n`` TLS connections, each sending ``first``; when ``answer``, its answer is read (then the connection
    idles as a keep-alive one): all held open until ``Crowd.close``."""
    ctx = context(ca)
    out = Crowd()
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(HOST, port, ssl=ctx, server_hostname="localhost"), timeout)
            except (OSError, TimeoutError, ssl.SSLError) as exc:
                out.failed[type(exc).__name__] += 1
                return
            out.writers.append(writer)
            writer.write(first)
            if answer:
                try:
                    out.answered[await asyncio.wait_for(read_status(reader), timeout)] += 1
                except TimeoutError:
                    out.failed["no answer"] += 1

    await asyncio.gather(*(one() for _ in range(n)))
    return out


@dataclass
class Timed:
    """What the legitimate client saw: each answer's status and seconds."""

    statuses: collections.Counter[str] = field(default_factory=collections.Counter)
    seconds: list[float] = field(default_factory=list)
    began: list[float] = field(default_factory=list)  # time.monotonic() at each request's start
    order: list[str] = field(default_factory=list)  # each request's status, in order

    def outside(self, windows: list[tuple[float, float]]) -> Timed:
        """The requests that overlapped none of ``windows`` (start, end): what the server alone is answerable for
        when the test itself stops its workers in those windows."""
        kept = Timed()
        for began, took, status in zip(self.began, self.seconds, self.order, strict=True):
            if not any(began < end and began + took > start for start, end in windows):
                kept.began.append(began)
                kept.seconds.append(took)
                kept.order.append(status)
                kept.statuses[status] += 1
        return kept

    @property
    def worst(self) -> float:
        return max(self.seconds, default=0.0)

    def summary(self) -> str:
        median = statistics.median(self.seconds) if self.seconds else 0.0
        return (f"{len(self.seconds)} requests, {dict(sorted(self.statuses.items()))}, median "
                f"{median * 1000:.0f} ms, max {self.worst * 1000:.0f} ms")


def legitimate(url: str, ca: str, body: bytes, stop: threading.Event, out: Timed, every: float = 0.1,
               path: str = "/validate", timeout: float = 10.0) -> None:
    """Until ``stop``: one POST on a new connection every ``every`` seconds (as the API server opens them under
    churn), each answer timed; a failure is counted by its exception's name."""
    while not stop.is_set():
        started = time.monotonic()
        try:
            r = requests.post(url + path, data=body, verify=ca, timeout=timeout,
                              headers={"Content-Type": "application/json"})
            what = str(r.status_code)
        except requests.RequestException as exc:
            what = type(exc).__name__
        out.began.append(started)
        out.seconds.append(time.monotonic() - started)
        out.order.append(what)
        out.statuses[what] += 1
        stop.wait(every)
