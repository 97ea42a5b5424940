"""What runs on a node: kubelet's PodResources API (generated stubs in ``podresources``), the NUMA layout from
sysfs, container cpusets from cgroups, the per-container verdict, and ``qos-guard agent``/``verify``."""
