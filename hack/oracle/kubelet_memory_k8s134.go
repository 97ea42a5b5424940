//go:build k8s_1_34

// kubelet 1.34's Memory Manager calls (its policy takes a context), for admitOnMachine.

package main

import (
	"context"

	cadvisorapi "github.com/google/cadvisor/info/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm/memorymanager"
	memstate "k8s.io/kubernetes/pkg/kubelet/cm/memorymanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
)

type memoryProvider struct {
	policy memorymanager.Policy
	state  memstate.State
}

func (p memoryProvider) GetTopologyHints(pod *v1.Pod, c *v1.Container) map[string][]topologymanager.TopologyHint {
	return p.policy.GetTopologyHints(context.Background(), p.state, pod, c)
}
func (p memoryProvider) GetPodTopologyHints(pod *v1.Pod) map[string][]topologymanager.TopologyHint {
	return p.policy.GetPodTopologyHints(context.Background(), p.state, pod)
}
func (p memoryProvider) Allocate(pod *v1.Pod, c *v1.Container) error {
	return p.policy.Allocate(context.Background(), p.state, pod, c)
}

// newMemoryPolicy is the static Memory Manager policy, started on an empty state.
func newMemoryPolicy(mi *cadvisorapi.MachineInfo, reserved map[int]map[v1.ResourceName]uint64,
	store topologymanager.Store) (memorymanager.Policy, memstate.State, error) {
	policy, err := memorymanager.NewPolicyStatic(context.Background(), mi, reserved, store)
	if err != nil {
		return nil, nil, err
	}
	st := memstate.NewMemoryState(klog.Background())
	return policy, st, policy.Start(context.Background(), st)
}

func allocatableMemory(policy memorymanager.Policy, st memstate.State) []memstate.Block {
	return policy.GetAllocatableMemory(context.Background(), st)
}
