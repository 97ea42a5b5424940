"""qos-guard: keep latency-critical Pods Guaranteed with whole CPUs, so kubelet pins them."""

__version__ = "0.1.0"
