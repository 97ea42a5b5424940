"""webhook/node (the agent, verify, the sysfs and cgroup readers, the topology publisher, DRA locality) in-process,
against fixture trees and a PodResources server of real gRPC: part of make test-fast. tests/node runs the same
code against a real kubelet."""
