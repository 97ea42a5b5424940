"""``Facts``: what the cluster says at the moment of a judgement, an explicit input of ``evaluate`` and of every
rule's ``check``, so the configuration stays what someone wrote and nothing live is smuggled inside it.

Built by the caller (the webhook worker from its caches, ``check --kubeconfig`` and ``audit`` from one read of
the cluster); ``NO_FACTS`` when nothing is known, and a rule that needs a fact it lacks says nothing ("unknown"
is never "fits"). A new fact is a new field with a default (None: not known).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from webhook.core.dra_requests import DeviceClasses
from webhook.core.dracpu import DraFacts
from webhook.core.kubeversion import Semantics
from webhook.core.memo import Memo
from webhook.core.numatopology import Topology
from webhook.core.operators import NO_RELATED, Related


@dataclass(frozen=True)
class Facts:
    """What the cluster says at the moment of a judgement (built by the caller: webhook worker,
    check --kubeconfig, audit).

    ``memo``: where answers learnt from these facts are remembered, owned by the caller (one per snapshot or per
    run); None: nothing is remembered. A memo handed to other facts forgets what it knew about these.
    """

    topology: Topology | None = None  # NodeResourceTopology view for policy.numa: auto; None: not known
    # The cluster's DeviceClasses (policy.deviceClasses: true): which extended resources DRA serves; None: not
    # known (only the deviceclass.resource.kubernetes.io/ names count as DRA then).
    device_classes: DeviceClasses | None = None
    # The Kubernetes minor the API server reports (/version): its semantics judge the Pod, over the
    # configuration's kubernetesVersion; None: not read (``webhook.core.engine.kube_of``).
    kubernetes: Semantics | None = None
    # The objects were read from the API server (audit): a Pod's ``status.qosClass`` is the class it was
    # given at create, which kubelet reads back, kept whatever the minor judging it now (a Pod created on 1.36
    # and judged on 1.37 after an upgrade keeps 1.36's class).
    stored: bool = False
    # Other objects the operators' builders read (KServe's ServingRuntimes...): from the same input (``check``)
    # or the API server (``webhook.core.operators.Related``); NO_RELATED: none known (a builder says "unknown").
    related: Related = field(default=NO_RELATED, compare=False)
    # The cluster's ResourceSlices and the CPUs its claims ask through the DRA CPU driver (``check``: from its
    # input files too); None: not read (the DRA CPU rules say nothing then).
    dra: DraFacts | None = None
    # ``dra`` as an object of a namespace sees it: that namespace's claims, as the webhook's cache gives a request
    # (``check --kubeconfig`` and ``audit`` read the cluster's claims once for the run); None: ``dra`` for every
    # object. ``dra`` is then what an object of no namespace judges with. Applied by the batch runner.
    dra_of: Callable[[str], DraFacts | None] | None = field(default=None, compare=False, repr=False)
    memo: Memo | None = field(default=None, compare=False, repr=False)

    def remembering(self) -> Memo | None:
        """The memo, for answers about these facts: one last used with other facts forgets those first (a memo
        ``dataclasses.replace`` carried over never answers for facts it did not learn from)."""
        if self.memo is not None:
            self.memo.bind(self)
        return self.memo


NO_FACTS = Facts()

__all__ = ["NO_FACTS", "Facts", "Memo"]
