//go:build k8s_1_35

// The Topology Manager stack of kubelet 1.35: as 1.36's, but its hint providers have no AllocatePod (kubelet
// allocates per container there), for admitOnMachine.

package main

import (
	"context"
	"fmt"
	"os"
	_ "unsafe" // go:linkname, for devicemanager's constructor that takes a socket path (see newDeviceManager)

	"github.com/go-logr/logr"
	cadvisorapi "github.com/google/cadvisor/info/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	cpustate "k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/topology"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/memorymanager"
	memstate "k8s.io/kubernetes/pkg/kubelet/cm/memorymanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/utils/cpuset"
)

// hintProvider joins a resource manager's policy to its state, as cpumanager.manager and memorymanager.manager
// do (their methods call the policy with their state after removeStaleState, which is a no-op here: the only
// active Pod is the one being admitted). The managers themselves are not used because their Start writes a
// checkpoint file and the CPU manager's starts a reconcile loop that never stops.
type cpuProvider struct {
	policy cpumanager.Policy
	state  cpustate.State
}

func (p cpuProvider) GetTopologyHints(pod *v1.Pod, c *v1.Container) map[string][]topologymanager.TopologyHint {
	return p.policy.GetTopologyHints(logr.Discard(), p.state, pod, c)
}
func (p cpuProvider) GetPodTopologyHints(pod *v1.Pod) map[string][]topologymanager.TopologyHint {
	return p.policy.GetPodTopologyHints(logr.Discard(), p.state, pod)
}
func (p cpuProvider) Allocate(pod *v1.Pod, c *v1.Container) error {
	return p.policy.Allocate(logr.Discard(), p.state, pod, c)
}

type memoryProvider struct {
	policy memorymanager.Policy
	state  memstate.State
}

func (p memoryProvider) GetTopologyHints(pod *v1.Pod, c *v1.Container) map[string][]topologymanager.TopologyHint {
	return p.policy.GetTopologyHints(klog.Background(), p.state, pod, c)
}
func (p memoryProvider) GetPodTopologyHints(pod *v1.Pod) map[string][]topologymanager.TopologyHint {
	return p.policy.GetPodTopologyHints(klog.Background(), p.state, pod)
}
func (p memoryProvider) Allocate(pod *v1.Pod, c *v1.Container) error {
	return p.policy.Allocate(klog.Background(), p.state, pod, c)
}

// newManagerImpl is devicemanager's constructor with the socket path as a parameter, the one its own unit tests
// call. The exported NewManagerImpl fixes the path to /var/lib/kubelet/device-plugins/kubelet.sock, where it
// would write its checkpoint and, on Start, delete other sockets: on a machine with a real kubelet (tests/node)
// that would damage it. Nothing else is reached this way.
//
//go:linkname newManagerImpl k8s.io/kubernetes/pkg/kubelet/cm/devicemanager.newManagerImpl
func newManagerImpl(logger klog.Logger, socketPath string, topology []cadvisorapi.Node,
	topologyAffinityStore topologymanager.Store) (*devicemanager.ManagerImpl, error)


// admitOnMachine builds the managers for the machine and asks the Topology Manager to admit the Pod.
func admitOnMachine(c TopologyCase) (ans TopologyAnswer, err error) {
	mi, err := machineInfo(c.Machine)
	if err != nil {
		return ans, err
	}
	log := logr.Discard()
	policy, scope := c.Policy, c.Scope
	if scope == "" {
		scope = "container" // the Topology Manager's default scope (its constant is unexported before 1.36)
	}
	tm, err := topologymanager.NewManager(mi.Topology, policy, scope, nil)
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
	dm, err := newManagerImpl(klog.Background(), dir+"/kubelet.sock", mi.Topology, tm)
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
	if err := dm.Start(klog.Background(), active, sourcesReady{}, containermap.NewContainerMap(), sets.New[string]()); err != nil {
		return ans, fmt.Errorf("devicemanager Start: %w", err)
	}
	defer func() { _ = dm.Stop(klog.Background()) }()
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
		if err := dm.PluginConnected(context.Background(), res, fakePlugin{res, dir + "/" + res}); err != nil {
			return ans, fmt.Errorf("devicemanager PluginConnected %s: %w", res, err)
		}
		dm.PluginListAndWatchReceiver(klog.Background(), res, &pluginapi.ListAndWatchResponse{Devices: devs})
	}
	tm.AddHintProvider(klog.Background(), dm)

	// CPUs: the static policy, with ceil(reserved cpu) CPUs (or reservedSystemCPUs) kept back.
	topo, err := topology.Discover(log, mi)
	if err != nil {
		return ans, fmt.Errorf("cpumanager topology.Discover: %w", err)
	}
	reservedSet := cpuset.New(c.Machine.ReservedSet...)
	numReserved := c.Machine.ReservedCPUs
	if reservedSet.Size() > 0 {
		numReserved = reservedSet.Size()
	}
	cpuPolicy, err := cpumanager.NewStaticPolicy(log, topo, numReserved, reservedSet, tm, nil)
	if err != nil {
		return ans, fmt.Errorf("cpumanager.NewStaticPolicy: %w", err)
	}
	cpuState := cpustate.NewMemoryState(log)
	if err := cpuPolicy.Start(log, cpuState); err != nil {
		return ans, fmt.Errorf("cpumanager static policy Start: %w", err)
	}
	tm.AddHintProvider(klog.Background(), cpuProvider{cpuPolicy, cpuState})

	// Memory: the static policy, with reservedMemory per NUMA node.
	reserved := map[int]map[v1.ResourceName]uint64{}
	for id, n := range c.Machine.NUMA {
		reserved[id] = map[v1.ResourceName]uint64{v1.ResourceMemory: n.ReservedMemory}
	}
	memPolicy, err := memorymanager.NewPolicyStatic(klog.Background(), mi, reserved, tm)
	if err != nil {
		return ans, fmt.Errorf("memorymanager.NewPolicyStatic: %w", err)
	}
	memState := memstate.NewMemoryState(klog.Background())
	if err := memPolicy.Start(klog.Background(), memState); err != nil {
		return ans, fmt.Errorf("memorymanager static policy Start: %w", err)
	}
	tm.AddHintProvider(klog.Background(), memoryProvider{memPolicy, memState})

	ans.ReservedCPU = cpuset.New(topo.CPUDetails.CPUs().Difference(cpuPolicy.GetAllocatableCPUs(cpuState)).List()...).List()
	ans.Capacity, ans.Allocatable = describe(c.Machine, topo, cpuPolicy.GetAllocatableCPUs(cpuState),
		memPolicy.GetAllocatableMemory(memState), dm.GetAllocatableDevices())
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
	result := tm.Admit(&lifecycle.PodAdmitAttributes{Pod: p})
	ans.Admitted, ans.Reason, ans.Message = result.Admit, result.Reason, result.Message
	ans.Placement = map[string]Placement{}
	for _, ctr := range append(append([]v1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		pl := Placement{Devices: map[string][]int{}}
		if hint := tm.GetAffinity(string(p.UID), ctr.Name); hint.NUMANodeAffinity != nil {
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

