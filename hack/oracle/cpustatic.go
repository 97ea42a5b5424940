// The static CPU Manager policy, for the objects mode: whether it pins a container and how many CPUs. Its
// release-specific calls are kubelet_k8s1MINOR.go's newStaticPolicy, cpuHints and cpuAllocate.

package main

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/topology"
	"k8s.io/utils/cpuset"
)

// maxNodeCPUs bounds the simulated node; a Pod asking more gets no CPU count (allocationError), though
// whether it asks for exclusive CPUs is still answered.
const maxNodeCPUs = 256

// staticPolicy is the kubelet's static CPU manager policy (cpumanager.NewStaticPolicy) on a node with
// `cpus` CPUs in one NUMA node, one of them reserved, and the topology manager's policy "none".
func staticPolicy(cpus int) (cpumanager.Policy, state.State, error) {
	topo := &topology.CPUTopology{NumCPUs: cpus, NumCores: cpus, NumUncoreCache: 1, NumSockets: 1, NumNUMANodes: 1,
		CPUDetails: topology.CPUDetails{}}
	for i := 0; i < cpus; i++ {
		topo.CPUDetails[i] = topology.CPUInfo{CoreID: i}
	}
	return newStaticPolicy(topo, 1, cpuset.New(), fakeTopologyManager(), nil)
}

// exclusive answers, per container, whether the static policy wants exclusive CPUs for it: its
// GetTopologyHints returns nil exactly when guaranteedCPUs (pkg/kubelet/cm/cpumanager/policy_static.go) is
// 0 or the Pod is skipped for its pod-level resources, the same two gates Allocate applies.
func exclusive(p *v1.Pod) map[string]bool {
	out := map[string]bool{}
	for _, c := range append(append([]v1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		policy, st, err := staticPolicy(2)
		if err != nil {
			return nil
		}
		out[c.Name] = cpuHints(policy, st, p, &c) != nil
	}
	return out
}

// allocate admits the Pod's containers, init containers first as kubelet does, to the static policy
// (Policy.Allocate) on a node just large enough for all of them, and returns each container's number of
// exclusive CPUs (0: the shared pool).
func allocate(p *v1.Pod) (map[string]int, string) {
	all := append(append([]v1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...)
	need := 1
	for _, c := range all {
		q := c.Resources.Requests[v1.ResourceCPU]
		if q.Cmp(*resource.NewQuantity(maxNodeCPUs, resource.DecimalSI)) > 0 {
			return nil, fmt.Sprintf("container %q asks more than %d CPUs", c.Name, maxNodeCPUs)
		}
		if q.Sign() > 0 {
			need += int(q.Value())
		}
	}
	if need > maxNodeCPUs {
		return nil, fmt.Sprintf("the Pod asks more than %d CPUs", maxNodeCPUs)
	}
	policy, st, err := staticPolicy(need)
	if err != nil {
		return nil, err.Error()
	}
	cpus := map[string]int{}
	for i := range all {
		if err := cpuAllocate(policy, st, p, &all[i]); err != nil {
			return cpus, fmt.Sprintf("container %q: %v", all[i].Name, err)
		}
		set, _ := st.GetCPUSet(string(p.UID), all[i].Name)
		cpus[all[i].Name] = set.Size()
	}
	return cpus, ""
}
