"""How a write loop of the agent (its NodeResourceTopology, its reports, its Events) waits after a failed write:
exponential backoff with jitter, as client-go's ``wait.Backoff`` (``Duration`` doubled per ``Steps``, ``Cap``,
``Jitter``), with a server's ``Retry-After`` (429, and 503 from an overloaded API server or aggregated API)
honoured as a floor, as client-go's ``checkWait``/``RetryAfter`` reads it. A loop that keeps failing asks the API
server at most ``bound(seconds)`` times in ``seconds``, whatever its own polling period.

``Cause`` logs a lasting failure once per change of cause (its kind: the HTTP status and reason, not the whole
message, which may carry a changing resourceVersion), and says when it is over."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

BASE = 0.5  # seconds after the first failure (before jitter)
CAP = 30.0  # seconds: the longest wait between two attempts (before Retry-After)
RETRY_AFTER_CAP = 600.0  # seconds: a longer Retry-After is read as this (a broken proxy's header cannot stop us)
# The statuses worth retrying as the API server's load: client-go retries 429 and (with Retry-After) 5xx.
OVERLOADED = frozenset({429, 500, 502, 503, 504})


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """``Retry-After`` in seconds (the delta-seconds form the API server sends: ``apierrors`` ``RetryAfterSeconds``);
    None when absent or not a whole non-negative number (an HTTP date is not what the API server sends)."""
    if not headers:
        return None
    value = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    if value is None or not value.strip().isdigit():
        return None
    return min(float(value.strip()), RETRY_AFTER_CAP)


@dataclass(slots=True)
class Backoff:
    """When the next attempt may be made: ``ready(now)``; ``failed(now, retry_after)`` after a failed one (the wait
    doubles up to ``cap``, each drawn between half and all of it: "equal jitter", so a fleet of agents that failed
    together does not retry together, and no wait is shorter than half the nominal one), ``succeeded()`` after one
    that worked."""

    base: float = BASE
    cap: float = CAP
    rand: Callable[[], float] = field(default=random.random)
    failures: int = 0
    next_at: float = 0.0
    last_wait: float = 0.0

    def ready(self, now: float) -> bool:
        return now >= self.next_at

    def wait(self, now: float) -> float:
        """Seconds until the next attempt may be made (0: now)."""
        return max(0.0, self.next_at - now)

    def failed(self, now: float, server_wait: float | None = None) -> float:
        """Record a failure at ``now``; the seconds until the next attempt."""
        nominal = min(self.cap, self.base * (2.0 ** min(self.failures, 62)))
        self.failures += 1
        wait = nominal / 2 + self.rand() * nominal / 2
        if server_wait is not None:
            wait = max(wait, server_wait)
        self.last_wait = wait
        self.next_at = now + wait
        return wait

    def succeeded(self) -> None:
        self.failures, self.next_at, self.last_wait = 0, 0.0, 0.0

    def bound(self, seconds: float) -> int:
        """The most attempts a loop failing throughout ``seconds`` can make (no Retry-After): the first, then one
        per wait, each at least half its nominal length."""
        attempts, elapsed, failures = 1, 0.0, 0
        while True:  # ends: every wait is at least base / 2
            elapsed += min(self.cap, self.base * 2.0 ** min(failures, 62)) / 2
            failures += 1
            if elapsed > seconds:
                return attempts
            attempts += 1


@dataclass(slots=True)
class Cause:
    """A failure logged once per change of cause: ``failed(kind, message)`` says whether to log it, ``cleared()``
    whether the failure that was going on is over (log that once too)."""

    kind: str = ""

    def failed(self, kind: str) -> bool:
        changed = kind != self.kind
        self.kind = kind
        return changed

    def cleared(self) -> bool:
        was = bool(self.kind)
        self.kind = ""
        return was
