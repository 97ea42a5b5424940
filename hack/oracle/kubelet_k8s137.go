//go:build k8s_1_37 || k8s_1_38

// kubelet 1.37's and 1.38's resource-manager calls (hint providers take the admission's lifecycle.Operation, the
// Topology Manager a logger and Admit a context), for admitOnMachine and the objects mode. 1.38 (v1.38.0-beta.0)
// changes none of these signatures.

package main

import (
	"context"
	_ "unsafe" // go:linkname, for devicemanager's constructor that takes a socket path (see newManagerImpl)

	"github.com/go-logr/logr"
	cadvisorapi "github.com/google/cadvisor/info/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
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

// cpuProvider and memoryProvider join a resource manager's policy to its state, as cpumanager.manager and
// memorymanager.manager do (their methods call the policy with their state after removeStaleState, a no-op
// here: the only active Pod is the one being admitted). The managers themselves are not used because their
// Start writes a checkpoint file and the CPU manager's starts a reconcile loop that never stops.
type cpuProvider struct {
	policy cpumanager.Policy
	state  cpustate.State
}

func (p cpuProvider) GetTopologyHints(logger klog.Logger, pod *v1.Pod, c *v1.Container, op lifecycle.Operation) map[string][]topologymanager.TopologyHint {
	return p.policy.GetTopologyHints(logger, p.state, pod, c, op)
}
func (p cpuProvider) GetPodTopologyHints(logger klog.Logger, pod *v1.Pod, op lifecycle.Operation) map[string][]topologymanager.TopologyHint {
	return p.policy.GetPodTopologyHints(logger, p.state, pod, op)
}
func (p cpuProvider) Allocate(ctx context.Context, pod *v1.Pod, c *v1.Container, op lifecycle.Operation) error {
	return p.policy.Allocate(klog.FromContext(ctx), p.state, pod, c, op)
}
func (p cpuProvider) AllocatePod(logger klog.Logger, pod *v1.Pod, op lifecycle.Operation) error {
	return p.policy.AllocatePod(logger, p.state, pod, op)
}

type memoryProvider struct {
	policy memorymanager.Policy
	state  memstate.State
}

func (p memoryProvider) GetTopologyHints(logger klog.Logger, pod *v1.Pod, c *v1.Container, op lifecycle.Operation) map[string][]topologymanager.TopologyHint {
	return p.policy.GetTopologyHints(logger, p.state, pod, c, op)
}
func (p memoryProvider) GetPodTopologyHints(logger klog.Logger, pod *v1.Pod, op lifecycle.Operation) map[string][]topologymanager.TopologyHint {
	return p.policy.GetPodTopologyHints(logger, p.state, pod, op)
}
func (p memoryProvider) Allocate(ctx context.Context, pod *v1.Pod, c *v1.Container, op lifecycle.Operation) error {
	return p.policy.Allocate(ctx, p.state, pod, c, op)
}
func (p memoryProvider) AllocatePod(logger klog.Logger, pod *v1.Pod, op lifecycle.Operation) error {
	return p.policy.AllocatePod(logger, p.state, pod, op)
}

// newManagerImpl is devicemanager's constructor with the socket path as a parameter, the one its own unit tests
// call. The exported NewManagerImpl fixes the path to /var/lib/kubelet/device-plugins/kubelet.sock, where it
// would write its checkpoint and, on Start, delete other sockets: on a machine with a real kubelet (tests/node)
// that would damage it. Nothing else is reached this way.
//
//go:linkname newManagerImpl k8s.io/kubernetes/pkg/kubelet/cm/devicemanager.newManagerImpl
func newManagerImpl(logger klog.Logger, socketPath string, topology []cadvisorapi.Node,
	topologyAffinityStore topologymanager.Store) (*devicemanager.ManagerImpl, error)

func newTopologyManager(nodes []cadvisorapi.Node, policy, scope string) (topologymanager.Manager, error) {
	return topologymanager.NewManager(klog.Background(), nodes, policy, scope, nil)
}

func fakeTopologyManager() topologymanager.Manager {
	return topologymanager.NewFakeManager(logr.Discard())
}

func newDeviceManager(socket string, nodes []cadvisorapi.Node, tm topologymanager.Manager) (*devicemanager.ManagerImpl, error) {
	return newManagerImpl(klog.Background(), socket, nodes, tm)
}

func startDevices(dm *devicemanager.ManagerImpl, active func() []*v1.Pod) error {
	return dm.Start(klog.Background(), active, sourcesReady{}, containermap.NewContainerMap(), sets.New[string]())
}

func stopDevices(dm *devicemanager.ManagerImpl) { _ = dm.Stop(klog.Background()) }

func connectPlugin(dm *devicemanager.ManagerImpl, p fakePlugin, devs *pluginapi.ListAndWatchResponse) error {
	if err := dm.PluginConnected(context.Background(), p.resource, p); err != nil {
		return err
	}
	dm.PluginListAndWatchReceiver(klog.Background(), p.resource, devs)
	return nil
}

func addDeviceHints(tm topologymanager.Manager, dm *devicemanager.ManagerImpl) {
	tm.AddHintProvider(klog.Background(), dm)
}

func allocatableDevices(dm *devicemanager.ManagerImpl) devicemanager.ResourceDeviceInstances {
	return dm.GetAllocatableDevices(klog.Background())
}

func discoverCPUs(mi *cadvisorapi.MachineInfo) (*topology.CPUTopology, error) {
	return topology.Discover(logr.Discard(), mi)
}

// newStaticPolicy is the static CPU Manager policy with kubelet's cpuManagerPolicyOptions, started on an empty
// state.
func newStaticPolicy(topo *topology.CPUTopology, numReserved int, reserved cpuset.CPUSet,
	store topologymanager.Store, options map[string]string) (cpumanager.Policy, cpustate.State, error) {
	log := logr.Discard()
	policy, err := cpumanager.NewStaticPolicy(log, topo, numReserved, reserved, store, options)
	if err != nil {
		return nil, nil, err
	}
	st := cpustate.NewMemoryState(log)
	return policy, st, policy.Start(log, st)
}

// newNonePolicy is the none CPU Manager policy (kubelet's default cpuManagerPolicy): no topology hints, no
// exclusive CPUs. kubelet refuses to start it with any cpuManagerPolicyOptions (NewNonePolicy's error).
func newNonePolicy(options map[string]string) (cpumanager.Policy, cpustate.State, error) {
	policy, err := cpumanager.NewNonePolicy(options)
	if err != nil {
		return nil, nil, err
	}
	log := logr.Discard()
	st := cpustate.NewMemoryState(log)
	return policy, st, policy.Start(log, st)
}

func cpuHints(policy cpumanager.Policy, st cpustate.State, p *v1.Pod, c *v1.Container) map[string][]topologymanager.TopologyHint {
	return policy.GetTopologyHints(logr.Discard(), st, p, c, lifecycle.AddOperation)
}

func cpuAllocate(policy cpumanager.Policy, st cpustate.State, p *v1.Pod, c *v1.Container) error {
	return policy.Allocate(logr.Discard(), st, p, c, lifecycle.AddOperation)
}

func addCPUHints(tm topologymanager.Manager, policy cpumanager.Policy, st cpustate.State) {
	tm.AddHintProvider(klog.Background(), cpuProvider{policy, st})
}

// newMemoryPolicy is the static Memory Manager policy, started on an empty state.
func newMemoryPolicy(mi *cadvisorapi.MachineInfo, reserved map[int]map[v1.ResourceName]uint64,
	store topologymanager.Store) (memorymanager.Policy, memstate.State, error) {
	policy, err := memorymanager.NewPolicyStatic(klog.Background(), mi, reserved, store)
	if err != nil {
		return nil, nil, err
	}
	st := memstate.NewMemoryState(klog.Background())
	return policy, st, policy.Start(klog.Background(), st)
}

func addMemoryHints(tm topologymanager.Manager, policy memorymanager.Policy, st memstate.State) {
	tm.AddHintProvider(klog.Background(), memoryProvider{policy, st})
}

func allocatableMemory(policy memorymanager.Policy, st memstate.State) []memstate.Block {
	return policy.GetAllocatableMemory(st)
}

func admit(tm topologymanager.Manager, p *v1.Pod) lifecycle.PodAdmitResult {
	return tm.Admit(context.Background(), &lifecycle.PodAdmitAttributes{Pod: p, Operation: lifecycle.AddOperation})
}

func affinity(tm topologymanager.Manager, podUID, container string) topologymanager.TopologyHint {
	return tm.GetAffinity(klog.Background(), podUID, container)
}

// untoleratedTaint: whether a taint the filter keeps is not tolerated (v1helper.FindMatchingUntoleratedTaint),
// with comparison operators on: the API server accepts Lt/Gt tolerations only where the
// TaintTolerationComparisonOperators gate is on, so a Pod carrying one was admitted with it.
func untoleratedTaint(taints []v1.Taint, tolerations []v1.Toleration, filter func(*v1.Taint) bool) bool {
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), taints, tolerations, filter, true)
	return untolerated
}
