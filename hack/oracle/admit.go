// admitOnMachine: kubelet's resource managers for one machine (Topology, device, CPU and Memory Managers) and
// the Topology Manager's admission of one Pod on it. The calls whose signatures change between releases are
// the small functions of kubelet_k8s1MINOR.go (one file per release, picked by the k8s_1_MINOR build tag);
// everything else is here once.

package main

import (
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	cpustate "k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	"k8s.io/utils/cpuset"
)

// admitOnMachine builds the managers for the machine and asks the Topology Manager to admit the Pod.
func admitOnMachine(c TopologyCase) (ans TopologyAnswer, err error) {
	mi, err := machineInfo(c.Machine)
	if err != nil {
		return ans, err
	}
	policy, scope := c.Policy, c.Scope
	if scope == "" {
		scope = "container" // the Topology Manager's default scope (its constant is unexported before 1.36)
	}
	tm, err := newTopologyManager(mi.Topology, policy, scope)
	if err != nil {
		return ans, fmt.Errorf("topologymanager.NewManager: %w", err)
	}

	// Devices: the device manager, listening on a socket in a private folder, fed each resource's devices as its
	// plugin client would (PluginConnected, then a ListAndWatch response), each device on its NUMA node.
	dir, err := os.MkdirTemp(scratch, "oracle-devices-")
	if err != nil {
		return ans, err
	}
	defer os.RemoveAll(dir)
	dm, err := newDeviceManager(dir+"/kubelet.sock", mi.Topology, tm)
	if err != nil {
		return ans, fmt.Errorf("devicemanager: %w", err)
	}
	var thePod *v1.Pod
	active := func() []*v1.Pod {
		if thePod == nil {
			return nil
		}
		return []*v1.Pod{thePod}
	}
	if err := startDevices(dm, active); err != nil {
		return ans, fmt.Errorf("devicemanager Start: %w", err)
	}
	defer stopDevices(dm)
	devices := map[string][]*pluginapi.Device{}
	for numa, n := range c.Machine.NUMA {
		for res, count := range n.Devices {
			for i := 0; i < count; i++ {
				devices[res] = append(devices[res], &pluginapi.Device{ID: deviceID(res, numa, i), Health: pluginapi.Healthy,
					Topology: &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(numa)}}}})
			}
		}
	}
	for res, devs := range devices {
		if err := connectPlugin(dm, fakePlugin{res, dir + "/" + res}, &pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return ans, fmt.Errorf("devicemanager PluginConnected %s: %w", res, err)
		}
	}
	addDeviceHints(tm, dm)

	// CPUs: the static policy, with ceil(reserved cpu) CPUs (or reservedSystemCPUs) kept back; or the none policy.
	topo, err := discoverCPUs(mi)
	if err != nil {
		return ans, fmt.Errorf("cpumanager topology.Discover: %w", err)
	}
	reservedSet := cpuset.New(c.Machine.ReservedSet...)
	numReserved := c.Machine.ReservedCPUs
	if reservedSet.Size() > 0 {
		numReserved = reservedSet.Size()
	}
	if err := setOptionGates(c.FeatureGates); err != nil {
		return ans, err
	}
	var cpuPolicy cpumanager.Policy
	var cpuState cpustate.State
	switch c.CPUPolicy {
	case "", "static":
		cpuPolicy, cpuState, err = newStaticPolicy(topo, numReserved, reservedSet, tm, c.CPUOptions)
	case "none":
		cpuPolicy, cpuState, err = newNonePolicy(c.CPUOptions)
	default:
		return ans, fmt.Errorf("cpuManagerPolicy %q: static or none", c.CPUPolicy)
	}
	if err != nil {
		if len(c.CPUOptions) > 0 { // kubelet's NewStaticPolicy refuses these options here: it would not start
			ans.KubeletError = err.Error()
			return ans, nil
		}
		return ans, err
	}
	addCPUHints(tm, cpuPolicy, cpuState)

	// Memory: the static policy, with reservedMemory per NUMA node.
	reserved := map[int]map[v1.ResourceName]uint64{}
	for id, n := range c.Machine.NUMA {
		reserved[id] = map[v1.ResourceName]uint64{v1.ResourceMemory: n.ReservedMemory}
	}
	memPolicy, memState, err := newMemoryPolicy(mi, reserved, tm)
	if err != nil {
		return ans, err
	}
	addMemoryHints(tm, memPolicy, memState)

	if c.CPUPolicy != "none" { // the none policy hands out no CPU: none is reserved from its pool
		ans.ReservedCPU = cpuset.New(topo.CPUDetails.CPUs().Difference(cpuPolicy.GetAllocatableCPUs(cpuState)).List()...).List()
	}
	ans.Capacity, ans.Allocatable = describe(c.Machine, topo, cpuPolicy.GetAllocatableCPUs(cpuState),
		allocatableMemory(memPolicy, memState), allocatableDevices(dm))
	if len(c.Pod) == 0 {
		return ans, nil
	}

	p, answer := storedPod(c.Pod)
	if p == nil {
		answer.Capacity, answer.Allocatable, answer.ReservedCPU = ans.Capacity, ans.Allocatable, ans.ReservedCPU
		return answer, nil
	}
	ans.QOSClass = string(p.Status.QOSClass)
	thePod = p
	result := admit(tm, p)
	ans.Admitted, ans.Reason, ans.Message = result.Admit, result.Reason, result.Message
	ans.Placement = map[string]Placement{}
	for _, ctr := range append(append([]v1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		pl := Placement{Devices: map[string][]int{}}
		if hint := affinity(tm, string(p.UID), ctr.Name); hint.NUMANodeAffinity != nil {
			pl.Affinity = hint.NUMANodeAffinity.GetBits()
		}
		if set, ok := cpuState.GetCPUSet(string(p.UID), ctr.Name); ok {
			pl.CPUs = set.List()
			nodes := sets.New[int]()
			for _, id := range pl.CPUs {
				nodes.Insert(topo.CPUDetails[id].NUMANodeID)
			}
			pl.CPUNUMA = sets.List(nodes)
		}
		nodes := sets.New[int]()
		for _, b := range memState.GetMemoryBlocks(string(p.UID), ctr.Name) {
			nodes.Insert(b.NUMAAffinity...)
		}
		pl.Memory = sets.List(nodes)
		for res, byID := range dm.GetDevices(string(p.UID), ctr.Name) {
			numa := sets.New[int]()
			for _, dev := range byID {
				for _, node := range dev.Topology.GetNodes() {
					numa.Insert(int(node.ID))
				}
			}
			pl.Devices[res] = sets.List(numa)
		}
		ans.Placement[ctr.Name] = pl
	}
	return ans, nil
}
