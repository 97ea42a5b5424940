"""Limits the server sets itself at start (webhook/serving/server.py): the open files its connections need."""

from __future__ import annotations

import resource

import pytest

from webhook.serving import server


@pytest.mark.parametrize("soft, hard, connections, raised, held, said", [
    (1024, 1_048_576, 2000, 2128, 2000, None),  # raised to what 2,000 connections need
    (1024, 1500, 2000, 1500, 1372, "serving up to 1372 connections per worker"),  # held under the hard limit
    (65536, 65536, 2000, None, 2000, None),  # enough already: left alone
])
def test_open_files_are_raised_or_the_connections_held_under_them(
        monkeypatch: pytest.MonkeyPatch, soft: int, hard: int, connections: int, raised: int | None, held: int,
        said: str | None) -> None:
    set_to: list[tuple[int, int]] = []
    monkeypatch.setattr(resource, "getrlimit", lambda which: (soft, hard))
    monkeypatch.setattr(resource, "setrlimit", lambda which, limits: set_to.append(limits))
    got, sentence = server.fit_open_files(connections)
    assert got == held
    assert set_to == ([] if raised is None else [(raised, hard)])
    assert (sentence is None) if said is None else (sentence is not None and said in sentence and "ulimit" in sentence)


def test_log_lines_to_a_reader_that_stopped_are_dropped_and_counted_never_waited_for() -> None:
    """A pipe nobody reads (64 KiB, then writes block): put never blocks; what the queue cannot hold is dropped
    and counted; once the reader reads again, lines are written again."""
    import os
    import time

    from webhook.serving.decisionlog import LineWriter

    read_end, write_end = os.pipe()
    counted: list[int] = []
    writer = LineWriter(write_end, interval=0.01, limit=16 * 1024, on_drop=lambda: counted.append(1))
    try:
        started = time.monotonic()
        for i in range(2000):
            writer.put(f"line {i} {'x' * 90}\n")  # 100 bytes: 200 KB, over the pipe and the queue
            if i % 100 == 0:
                time.sleep(0.01)  # the thread writes what it can meanwhile
        assert time.monotonic() - started < 2
        assert writer.dropped > 0 and len(counted) == writer.dropped
        os.set_blocking(read_end, False)
        while True:  # the reader catches up
            try:
                if not os.read(read_end, 1 << 16):
                    break
            except BlockingIOError:
                time.sleep(0.05)
                try:
                    os.read(read_end, 1 << 16)
                except BlockingIOError:
                    break
        writer.put("after\n")
        assert writer.close(timeout=5)
        os.set_blocking(read_end, True)
        os.close(write_end)
        write_end = -1
        tail = b""
        while chunk := os.read(read_end, 1 << 16):
            tail += chunk
        assert tail.endswith(b"after\n")
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


def test_a_large_body_waiting_to_be_judged_is_answered_503_past_the_judge_deadline() -> None:
    """The wait the request deadline does not cover: while a body is judged in the offload thread the
    client's deadline is off, and the replica judges one large body at a time. Waiting longer than the judge
    deadline (30 s: the API server waits no longer) is a 503 with Retry-After, and the thread then skips judging
    a Pod nobody waits for."""
    import threading
    import types

    from gevent.threadpool import ThreadPool

    from webhook.serving.worker import GuardedWorker

    slot = threading.Lock()
    judged: list[str] = []

    def app(environ: dict[str, object], start_response: object) -> list[bytes]:
        judged.append("judged")
        start_response("200 OK", [("Content-Type", "application/json")])  # type: ignore[operator]
        return [b"{}"]

    class Deadline:
        def __init__(self) -> None:
            self.events: list[str] = []

        def cancel(self) -> None:
            self.events.append("cancel")

        def start(self) -> None:
            self.events.append("start")

    class Resp:
        status: tuple[str, list[tuple[str, str]]] | None = None

        def start_response(self, status: str, headers: list[tuple[str, str]]) -> None:
            self.status = (status, headers)

    worker = types.SimpleNamespace(offload=ThreadPool(1), large=slot, judge_deadline=30.0, wsgi=app,
                                   log=types.SimpleNamespace(warning=lambda *a: None))
    worker._call_app = lambda *a: GuardedWorker._call_app(worker, *a)  # type: ignore[arg-type]
    try:
        resp, deadline = Resp(), Deadline()
        assert GuardedWorker._judged_off_the_hub(worker, {}, resp, deadline) == [b"{}"]  # type: ignore[arg-type]
        assert resp.status is not None and resp.status[0] == "200 OK" and deadline.events == ["cancel", "start"]
        slot.acquire()  # another worker of the replica judges a large body
        worker.judge_deadline = 0.3  # (30 s in a worker: the API server waits no longer)
        resp = Resp()
        body = GuardedWorker._judged_off_the_hub(worker, {}, resp, Deadline())  # type: ignore[arg-type]
        assert resp.status is not None and resp.status[0] == "503 Service Unavailable"
        assert ("Retry-After", "1") in resp.status[1] and b"busy" in body[0]
        slot.release()
        worker.offload.join()
        assert judged == ["judged"]  # the abandoned one was not judged
    finally:
        worker.offload.kill()
