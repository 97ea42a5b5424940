"""kube-scheduler's extender protocol over the NUMA fit: which nodes a Pod fits one NUMA node of now, and which
of them it packs best (``qos-guard extender``)."""
