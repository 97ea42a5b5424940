//go:build k8s_1_33 || k8s_1_34

// kubelet 1.33's and 1.34's resource-manager calls (no loggers in the Topology, device and CPU Managers), for
// admitOnMachine and the objects mode; the Memory Manager's, which differ (1.34's takes a context), are in
// kubelet_memory_k8s133.go and kubelet_memory_k8s134.go.

package main

import (
	_ "unsafe" // go:linkname, for devicemanager's constructor that takes a socket path (see newManagerImpl)

	cadvisorapi "github.com/google/cadvisor/info/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
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

// cpuProvider (and memoryProvider, per release) join a resource manager's policy to its state, as cpumanager.manager and
// memorymanager.manager do (see kubelet_k8s135_136.go).
type cpuProvider struct {
	policy cpumanager.Policy
	state  cpustate.State
}

func (p cpuProvider) GetTopologyHints(pod *v1.Pod, c *v1.Container) map[string][]topologymanager.TopologyHint {
	return p.policy.GetTopologyHints(p.state, pod, c)
}
func (p cpuProvider) GetPodTopologyHints(pod *v1.Pod) map[string][]topologymanager.TopologyHint {
	return p.policy.GetPodTopologyHints(p.state, pod)
}
func (p cpuProvider) Allocate(pod *v1.Pod, c *v1.Container) error {
	return p.policy.Allocate(p.state, pod, c)
}

// newManagerImpl: devicemanager's constructor with the socket path as a parameter (see kubelet_k8s135_136.go).
//
//go:linkname newManagerImpl k8s.io/kubernetes/pkg/kubelet/cm/devicemanager.newManagerImpl
func newManagerImpl(socketPath string, topology []cadvisorapi.Node,
	topologyAffinityStore topologymanager.Store) (*devicemanager.ManagerImpl, error)

func newTopologyManager(nodes []cadvisorapi.Node, policy, scope string) (topologymanager.Manager, error) {
	return topologymanager.NewManager(nodes, policy, scope, nil)
}

func fakeTopologyManager() topologymanager.Manager { return topologymanager.NewFakeManager() }

func newDeviceManager(socket string, nodes []cadvisorapi.Node, tm topologymanager.Manager) (*devicemanager.ManagerImpl, error) {
	return newManagerImpl(socket, nodes, tm)
}

func startDevices(dm *devicemanager.ManagerImpl, active func() []*v1.Pod) error {
	return dm.Start(active, sourcesReady{}, containermap.NewContainerMap(), sets.New[string]())
}

func stopDevices(dm *devicemanager.ManagerImpl) { _ = dm.Stop() }

func connectPlugin(dm *devicemanager.ManagerImpl, p fakePlugin, devs *pluginapi.ListAndWatchResponse) error {
	if err := dm.PluginConnected(p.resource, p); err != nil {
		return err
	}
	dm.PluginListAndWatchReceiver(p.resource, devs)
	return nil
}

func addDeviceHints(tm topologymanager.Manager, dm *devicemanager.ManagerImpl) {
	tm.AddHintProvider(dm)
}

func allocatableDevices(dm *devicemanager.ManagerImpl) devicemanager.ResourceDeviceInstances {
	return dm.GetAllocatableDevices()
}

func discoverCPUs(mi *cadvisorapi.MachineInfo) (*topology.CPUTopology, error) {
	return topology.Discover(mi)
}

// newStaticPolicy is the static CPU Manager policy with kubelet's cpuManagerPolicyOptions, started on an empty
// state.
func newStaticPolicy(topo *topology.CPUTopology, numReserved int, reserved cpuset.CPUSet,
	store topologymanager.Store, options map[string]string) (cpumanager.Policy, cpustate.State, error) {
	policy, err := cpumanager.NewStaticPolicy(topo, numReserved, reserved, store, options)
	if err != nil {
		return nil, nil, err
	}
	st := cpustate.NewMemoryState()
	return policy, st, policy.Start(st)
}

// newNonePolicy is the none CPU Manager policy (kubelet's default cpuManagerPolicy): no topology hints, no
// exclusive CPUs. kubelet refuses to start it with any cpuManagerPolicyOptions (NewNonePolicy's error).
func newNonePolicy(options map[string]string) (cpumanager.Policy, cpustate.State, error) {
	policy, err := cpumanager.NewNonePolicy(options)
	if err != nil {
		return nil, nil, err
	}
	st := cpustate.NewMemoryState()
	return policy, st, policy.Start(st)
}

func cpuHints(policy cpumanager.Policy, st cpustate.State, p *v1.Pod, c *v1.Container) map[string][]topologymanager.TopologyHint {
	return policy.GetTopologyHints(st, p, c)
}

func cpuAllocate(policy cpumanager.Policy, st cpustate.State, p *v1.Pod, c *v1.Container) error {
	return policy.Allocate(st, p, c)
}

func addCPUHints(tm topologymanager.Manager, policy cpumanager.Policy, st cpustate.State) {
	tm.AddHintProvider(cpuProvider{policy, st})
}

func addMemoryHints(tm topologymanager.Manager, policy memorymanager.Policy, st memstate.State) {
	tm.AddHintProvider(memoryProvider{policy, st})
}

func admit(tm topologymanager.Manager, p *v1.Pod) lifecycle.PodAdmitResult {
	return tm.Admit(&lifecycle.PodAdmitAttributes{Pod: p})
}

func affinity(tm topologymanager.Manager, podUID, container string) topologymanager.TopologyHint {
	return tm.GetAffinity(podUID, container)
}

// untoleratedTaint: whether a taint the filter keeps is not tolerated (v1helper.FindMatchingUntoleratedTaint;
// this release has no Lt/Gt toleration operators).
func untoleratedTaint(taints []v1.Taint, tolerations []v1.Toleration, filter func(*v1.Taint) bool) bool {
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(taints, tolerations, filter)
	return untolerated
}
