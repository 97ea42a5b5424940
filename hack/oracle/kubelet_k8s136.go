//go:build !(k8s_1_33 || k8s_1_34 || k8s_1_35 || k8s_1_37 || k8s_1_38)

// kubelet 1.36's hint providers also allocate per Pod (the pod scope's AllocatePod, absent in 1.35).

package main

import (
	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

func (p cpuProvider) AllocatePod(pod *v1.Pod) error {
	return p.policy.AllocatePod(logr.Discard(), p.state, pod)
}

func (p memoryProvider) AllocatePod(pod *v1.Pod) error {
	return p.policy.AllocatePod(klog.Background(), p.state, pod)
}
