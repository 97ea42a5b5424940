"""Interpreter-wide settings, made once where a qos-guard process starts and never per document: the recursion
limit and the cyclic collector are the whole process's, so changing them around one document would also change
them for every thread and greenlet running beside it, and a ``gc.freeze`` per document kept whatever was alive at
that moment (not only the document) out of the collector for good.

Called by the CLI's ``main`` (every command, the servers and the agent run through it; gunicorn's workers are
forked from it and inherit both), by ``serve``, ``serve_extender`` and ``run_agent`` for callers that start them
without the CLI (bench/, in-process tests), and by the test suite's conftest for what it reads in process.
Calling it again changes nothing."""

from __future__ import annotations

import gc
import sys

# libyaml refuses nesting deeper than 1,000 levels; building the value (manifests.goyaml.construct) takes up to
# three Python frames a level, so the limit must be above 3,000 for every document libyaml accepts to be read.
# Python frames do not use the C stack on 3.11+, and a document deeper still is a RecursionError every reader
# turns into "nested too deeply", never a traceback.
RECURSION_LIMIT = 4000

# A one-shot command (check, fix, audit, ...) builds documents of millions of new, acyclic objects (freed by
# reference counting): with the default thresholds (700, 10, 10) the collector walks them again and again while
# they are built and judged (a 4 MiB List: 4.0 s of CPU, 1.7 s with the collector off per document, 2.0 s with
# these). A young generation of 100,000 objects is a few MiB of garbage at most before it is collected; the
# oldest generation is rarely looked at, which a process that ends after one run can afford.
BATCH_GC_THRESHOLDS = (100_000, 50, 100)


def configure(*, batch: bool) -> None:
    """Set the process's recursion limit, and with ``batch`` (a command that reads documents and exits) the
    collector's thresholds. Long-running processes (``serve``, ``extender``, ``agent``) keep the default
    thresholds: a full collection now and then is what bounds the cyclic garbage of weeks of requests."""
    if sys.getrecursionlimit() < RECURSION_LIMIT:
        sys.setrecursionlimit(RECURSION_LIMIT)
    if batch:
        gc.set_threshold(*BATCH_GC_THRESHOLDS)
