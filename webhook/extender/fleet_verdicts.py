"""One Pod shape judged on every free shape of a fleet at once: ``Judge``'s verdict (kept or refused, the reason,
the score) for one row per free shape (``webhook.extender.fleet_rows``), instead of once per free shape in Python.

Why: a fleet whose NRTs count their Pods has about one free shape per node, so a Pod shape not seen before is
judged on thousands of them (5,000 nodes: about 4,900 free shapes, 180 ms of Python per ``filter``), while
kube-scheduler waits for the answer.

Nothing here models kubelet or scores: the fit is ``core.numafit.fit_rows`` and the score ``scorer.score``, the same
code ``Judge.judged`` calls with one row for one node; this module lays the rows out, asks both, and turns their
answers into verdicts (a refusal's reason once per machine, demand and ``alone``: the machines' empty nodes ride
along as rows of their own). Left to ``Judge.judged``: the rows ``fleet_rows`` does not model, and Pods with a
fractional byte count of memory or a request from ``EXACT`` milli-units on. Pure, no I/O.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from itertools import compress

import numpy as np

from webhook.core.demands import Demands
from webhook.core.numafit import NOT_PLACED, POD, Ask, Fits, fit_rows
from webhook.core.resourceblock import CPU
from webhook.extender.fleet_rows import Columns, Free, Ints, Tables
from webhook.extender.scorer import amounts, held, score
from webhook.extender.verdicts import Judge, Verdict


def judge_rows(judge: Judge, keys: list[int], by_key: Mapping[int, Free], columns: Columns) -> list[int]:
    """Judge the free shapes ``keys`` (of ``by_key``) the arrays model, writing each verdict into ``judge.verdicts``
    under its key (as ``Judge.judged`` does); the keys it left to ``Judge.judged``."""
    wants = judge.wants
    assert wants is not None
    if wants.fractional_memory or not all(Ask.of(d).exact for d in (*wants.containers, wants.pod)):
        return keys
    rows = columns.of(keys, by_key)
    left = list(compress(keys, map(operator.not_, rows)))
    if len(left) == len(keys):
        return left
    if left:
        keys = list(compress(keys, rows))
    tables = columns.tables()
    count, zones, width = len(keys), columns.zones, len(columns.names)
    table = np.frombuffer(b"".join(rows), np.int64).reshape(count, 1 + zones * width)
    # The machines' empty nodes ride along as rows of their own: whether a refused Pod would fit there ever.
    machines = np.unique(table[:, 0])
    machine: Ints = np.concatenate([table[:, 0], machines])
    free: Ints = np.concatenate([table[:, 1:].reshape(count, zones, width), tables.total[machines]])
    across = [m.empty.policy if m.empty.across else None for m in tables.machines]
    fits = fit_rows(wants, free, machine, columns.column, tables, across)
    answers: list[Verdict] = []
    code = np.zeros(count, np.int64)
    _refused(judge, wants, fits, machine, count, columns, tables, answers, code)
    _scored(wants, fits, free, machine, count, columns, tables, answers, code)
    judge.verdicts.update(zip(keys, map(answers.__getitem__, code.tolist()), strict=True))
    return left


def _refused(judge: Judge, wants: Demands, fits: Fits, machine: Ints, count: int, columns: Columns,
             tables: Tables, answers: list[Verdict], code: Ints) -> None:
    """The first ``count`` rows that do not fit: refused with the reason (``Judge.refusal``: one object per
    machine, demand and alone; whether the empty machine, a row after ``count``, holds the Pod), or kept where
    the machine's policy admits across NUMA nodes."""
    failing = np.flatnonzero(fits.failed[:count] != NOT_PLACED)
    if not failing.size:
        return
    # On restricted and best-effort machines a row fails only where kubelet refuses it all the same (``Fits.refused``,
    # with its reason, once per machine, demand and reason); the others are admitted across NUMA nodes, or whether
    # they are is not known, and kept either way (unknown never refuses a node).
    across = np.array([m.empty.across for m in tables.machines], np.bool_)[machine[failing]]
    if across.any():
        for r in failing[across].tolist():
            m = int(machine[r])
            empty = tables.machines[m].empty
            if r not in fits.refused:
                answers.append(Verdict(empty.name, True))
            else:
                failed = int(fits.failed[r])
                need = wants.pod if failed == POD else wants.containers[failed]
                answers.append(judge.allocation_refusal(empty, need, fits.reason[r], bool(fits.alone[r])))
            code[r] = len(answers) - 1
        failing = failing[~across]
        if not failing.size:
            return
    span = len(wants.containers) + 2  # a failed index from POD up
    kinds, which = np.unique((machine[failing] * span + fits.failed[failing] + 2) * 2 + fits.alone[failing],
                             return_inverse=True)
    ever = {m: i for i, m in enumerate(machine[count:].tolist())}
    ever_fits = (fits.failed[count:] == NOT_PLACED).tolist()
    ever_alone = fits.alone[count:].tolist()
    for kind in kinds.tolist():
        m, failed, alone = kind // (2 * span), kind // 2 % span - 2, bool(kind % 2)
        machine_ = tables.machines[m]
        empty = machine_.empty
        if not empty.refuses:
            answers.append(Verdict(empty.name, True))  # restricted or best-effort: admitted across NUMA nodes
            continue
        need = wants.pod if failed == POD else wants.containers[failed]
        e = ever[m]
        answers.append(judge.refusal(empty, need, alone, ever=(ever_fits[e], ever_alone[e]),
                                     empty_key=(columns.token, m), named=machine_.named))
    code[failing] = len(answers) - len(kinds) + which.reshape(-1)


def _scored(wants: Demands, fits: Fits, free: Ints, machine: Ints, count: int, columns: Columns, tables: Tables,
            answers: list[Verdict], code: Ints) -> None:
    """The first ``count`` rows that fit, each with its score (``scorer``: what the Pod holds of each zone where
    it went, against the zones' allocatable and free amounts)."""
    fitting = np.flatnonzero(fits.failed[:count] == NOT_PLACED)
    if not fitting.size:
        return
    rows, m = fitting, machine[fitting]
    pod_scope = tables.pod_scope[m]
    # A slot per demand placed: the Pod's (``pod`` scope rows) or a container's, its zone per row (or none).
    slots = [(np.where(pod_scope, fits.pod_zone[rows], NOT_PLACED), wants.pod)]
    slots += [(np.where(pod_scope, NOT_PLACED, fits.placed[rows, i]), d) for i, d in enumerate(wants.containers)]
    # Only the resources the Pod takes: the fleet's other columns hold nothing of it.
    names = sorted({res for _, d in slots for res in amounts(d) if res in columns.column})
    cols = [columns.column[res] for res in names]
    now = free[:, :, cols][rows]
    taken, present = held(slots, {res: i for i, res in enumerate(names)}, now)
    if CPU in names:  # CPU Manager none: the Pod's CPUs come from the shared pool, held on no zone (``score_node``)
        shared = ~tables.cpu_hints[m]
        taken[shared, :, names.index(CPU)] = 0
        present[shared, :, names.index(CPU)] = False
    scores = score(tables.total[:, :, cols][m], now, taken, present)
    low = int(scores.min())
    span = int(scores.max()) - low + 1
    kinds, which = np.unique(m * span + (scores - low), return_inverse=True)
    for kind in kinds.tolist():
        answers.append(Verdict(tables.machines[kind // span].empty.name, True, score=kind % span + low))
    code[fitting] = len(answers) - len(kinds) + which.reshape(-1)
