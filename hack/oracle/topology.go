// The `topology` mode: would kubelet's Topology Manager admit this Pod on an empty node of this machine, and on
// which NUMA node(s)?
//
// Each answer comes from a fresh kubelet resource-manager stack built as pkg/kubelet/cm/container_manager_linux.go
// builds it, in the same order: topologymanager.NewManager (policy and scope as asked), then as hint providers
// the device manager (devicemanager's own ManagerImpl, fed devices through its plugin-client callbacks), the
// CPU Manager policy (cpumanager.NewStaticPolicy, or NewNonePolicy where the case asks `none`) and the static
// Memory Manager policy
// (memorymanager.NewPolicyStatic). The machine is a cadvisor MachineInfo built as those packages' unit tests
// build one. The Pod is decoded, defaulted and created (PrepareForCreate, validation) as the API server would,
// then handed to the Topology Manager's Admit, which is what kubelet's admission calls.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	cadvisorapi "github.com/google/cadvisor/info/v1"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/topology"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	memstate "k8s.io/kubernetes/pkg/kubelet/cm/memorymanager/state"
	"k8s.io/kubernetes/pkg/registry/core/pod"
	"k8s.io/utils/cpuset"
)

// NUMASpec is one NUMA node of the simulated machine.
type NUMASpec struct {
	CPUs           int            `json:"cpus"`           // logical CPUs (a multiple of threadsPerCore)
	Memory         uint64         `json:"memory"`         // bytes, hugepages included (as cadvisor reports)
	ReservedMemory uint64         `json:"reservedMemory"` // reservedMemory[numaNode].limits.memory, bytes
	Hugepages2Mi   uint64         `json:"hugepages2Mi"`   // pages
	Hugepages1Gi   uint64         `json:"hugepages1Gi"`   // pages
	Devices        map[string]int `json:"devices"`        // device plugin resource -> devices on this node
}

// MachineSpec is the node: its NUMA nodes, SMT, and what kubelet reserves.
type MachineSpec struct {
	NUMA           []NUMASpec `json:"numa"`
	ThreadsPerCore int        `json:"threadsPerCore"` // 1 or 2
	NUMAPerSocket  int        `json:"numaPerSocket"`  // default 1
	ReservedCPUs   int        `json:"reservedCPUs"`   // ceil(systemReserved.cpu + kubeReserved.cpu): at least 1
	ReservedSet    []int      `json:"reservedSystemCPUs,omitempty"`
}

// TopologyCase is one question: this Pod, on an empty node of this machine, under this policy and scope.
type TopologyCase struct {
	Machine MachineSpec     `json:"machine"`
	Policy  string          `json:"policy"` // none | best-effort | restricted | single-numa-node
	Scope   string          `json:"scope"`  // container | pod
	Pod     json.RawMessage `json:"pod,omitempty"`
	// kubelet's cpuManagerPolicyOptions (e.g. {"full-pcpus-only": "true"}) and the CPU Manager option gates
	// (cpuoptions.go) the kubelet runs with.
	CPUOptions map[string]string `json:"cpuManagerPolicyOptions,omitempty"`
	// kubelet's cpuManagerPolicy: static (the default here: "" too) or none (cpumanager.NewNonePolicy: no
	// hints, no exclusive CPUs; it refuses any option).
	CPUPolicy    string          `json:"cpuManagerPolicy,omitempty"`
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
}

// Placement is where one container's resources ended up.
type Placement struct {
	Affinity []int            `json:"affinity"` // the Topology Manager's hint (null: no preference)
	CPUs     []int            `json:"cpus,omitempty"`
	CPUNUMA  []int            `json:"cpuNUMA,omitempty"`
	Memory   []int            `json:"memoryNUMA,omitempty"`
	Devices  map[string][]int `json:"devicesNUMA,omitempty"`
}

// TopologyAnswer is the Topology Manager's verdict, plus the machine as a NodeResourceTopology exporter (NFD's
// topology-updater, resource-topology-exporter) reads it from kubelet: per NUMA node, capacity and allocatable
// (cpumanager GetAllocatableCPUs, memorymanager GetAllocatableMemory, devicemanager GetAllocatableDevices).
type TopologyAnswer struct {
	Error       string                         `json:"error,omitempty"`
	DecodeError string                         `json:"decodeError,omitempty"`
	PodErrors   []FieldError                   `json:"podErrors,omitempty"`
	QOSClass    string                         `json:"qosClass,omitempty"`
	Admitted    bool                           `json:"admitted"`
	Reason      string                         `json:"reason,omitempty"`
	Message     string                         `json:"message,omitempty"`
	Placement   map[string]Placement           `json:"placement,omitempty"`
	Capacity    []map[string]resource.Quantity `json:"capacity"`
	Allocatable []map[string]resource.Quantity `json:"allocatable"`
	ReservedCPU []int                          `json:"reservedCPUs,omitempty"`
	// Why kubelet would not start with this configuration on this machine (the static policy's constructor
	// refuses the options: an unknown or gated option, two that exclude each other, align-by-socket under
	// single-numa-node or with more sockets than NUMA nodes); nothing else is answered then.
	KubeletError string `json:"kubeletError,omitempty"`
}

func topologyMode(line []byte) any {
	var c TopologyCase
	if err := json.Unmarshal(line, &c); err != nil {
		return TopologyAnswer{Error: "oracle: input is not a topology case: " + err.Error()}
	}
	ans, err := admitOnMachine(c)
	if err != nil {
		ans.Error = err.Error()
	}
	return ans
}

// machineInfo builds cadvisor's view of the machine as the kubelet unit tests do (cpumanager's topoDualSocketHT,
// memorymanager's machineInfo): NUMA nodes with cores, threads, memory and hugepages.
func machineInfo(m MachineSpec) (*cadvisorapi.MachineInfo, error) {
	tpc := m.ThreadsPerCore
	if tpc == 0 {
		tpc = 1
	}
	per := m.NUMAPerSocket
	if per == 0 {
		per = 1
	}
	mi := &cadvisorapi.MachineInfo{}
	cpu := 0
	for id, n := range m.NUMA {
		if n.CPUs <= 0 || n.CPUs%tpc != 0 {
			return nil, fmt.Errorf("NUMA node %d: %d CPUs is not a positive multiple of %d threads per core", id, n.CPUs, tpc)
		}
		node := cadvisorapi.Node{Id: id, Memory: n.Memory}
		for core := 0; core < n.CPUs/tpc; core++ {
			threads := make([]int, tpc)
			for t := range threads {
				threads[t] = cpu + t
			}
			node.Cores = append(node.Cores, cadvisorapi.Core{Id: core, Threads: threads, SocketID: id / per})
			cpu += tpc
		}
		node.HugePages = []cadvisorapi.HugePagesInfo{{PageSize: 2048, NumPages: n.Hugepages2Mi},
			{PageSize: 1048576, NumPages: n.Hugepages1Gi}}
		mi.Topology = append(mi.Topology, node)
		mi.MemoryCapacity += n.Memory
	}
	mi.NumCores = cpu
	mi.NumPhysicalCores = cpu / tpc
	mi.NumSockets = (len(m.NUMA) + per - 1) / per
	return mi, nil
}

// fakePlugin is a device plugin as the device manager's client sees one (plugin.DevicePlugin): its API answers
// the calls kubelet makes at allocation time, in memory.
type fakePlugin struct {
	resource string
	socket   string
}

func (p fakePlugin) API() pluginapi.DevicePluginClient { return pluginClient{} }
func (p fakePlugin) Resource() string                  { return p.resource }
func (p fakePlugin) SocketPath() string                { return p.socket }

type pluginClient struct{}

func (pluginClient) GetDevicePluginOptions(context.Context, *pluginapi.Empty, ...grpc.CallOption) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}
func (pluginClient) ListAndWatch(context.Context, *pluginapi.Empty, ...grpc.CallOption) (pluginapi.DevicePlugin_ListAndWatchClient, error) {
	return nil, fmt.Errorf("oracle: ListAndWatch is not used: devices are sent through PluginListAndWatchReceiver")
}
func (pluginClient) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest, ...grpc.CallOption) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{}, nil
}
func (pluginClient) Allocate(_ context.Context, in *pluginapi.AllocateRequest, _ ...grpc.CallOption) (*pluginapi.AllocateResponse, error) {
	out := &pluginapi.AllocateResponse{}
	for range in.ContainerRequests {
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerAllocateResponse{})
	}
	return out, nil
}
func (pluginClient) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest, ...grpc.CallOption) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

type sourcesReady struct{}

func (sourcesReady) AddSource(string) {}
func (sourcesReady) AllReady() bool   { return true }

// scratch holds the device manager's socket and checkpoint: memory-backed where the system has /dev/shm, as
// its checkpoint writes end in fsync.
var scratch = func() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}()

// deviceID names device i of a resource on a NUMA node; the ID carries the node only for reading answers back.
func deviceID(resourceName string, numa, i int) string {
	return fmt.Sprintf("%s-numa%d-%d", strings.ReplaceAll(resourceName, "/", "_"), numa, i)
}

// describe is the machine per NUMA node as an exporter publishes it: capacity from the hardware, allocatable
// from what the resource managers hand out.
func describe(m MachineSpec, topo *topology.CPUTopology, cpus cpuset.CPUSet, mem []memstate.Block,
	devs devicemanager.ResourceDeviceInstances) ([]map[string]resource.Quantity, []map[string]resource.Quantity) {
	capacity := make([]map[string]resource.Quantity, len(m.NUMA))
	allocatable := make([]map[string]resource.Quantity, len(m.NUMA))
	for id, n := range m.NUMA {
		capacity[id] = map[string]resource.Quantity{
			"cpu":           *resource.NewQuantity(int64(topo.CPUDetails.CPUsInNUMANodes(id).Size()), resource.DecimalSI),
			"memory":        *resource.NewQuantity(int64(n.Memory-(n.Hugepages2Mi<<21)-(n.Hugepages1Gi<<30)), resource.BinarySI),
			"hugepages-2Mi": *resource.NewQuantity(int64(n.Hugepages2Mi<<21), resource.BinarySI),
			"hugepages-1Gi": *resource.NewQuantity(int64(n.Hugepages1Gi<<30), resource.BinarySI),
		}
		allocatable[id] = map[string]resource.Quantity{
			"cpu": *resource.NewQuantity(int64(topo.CPUDetails.CPUsInNUMANodes(id).Intersection(cpus).Size()), resource.DecimalSI),
		}
		for res, count := range n.Devices {
			capacity[id][res] = *resource.NewQuantity(int64(count), resource.DecimalSI)
		}
	}
	for _, b := range mem {
		for _, id := range b.NUMAAffinity {
			allocatable[id][string(b.Type)] = *resource.NewQuantity(int64(b.Size), resource.BinarySI)
		}
	}
	for res, byID := range devs {
		for _, dev := range byID {
			for _, node := range dev.Topology.GetNodes() {
				q := allocatable[node.ID][res]
				q.Add(*resource.NewQuantity(1, resource.DecimalSI))
				allocatable[node.ID][res] = q
			}
		}
	}
	return capacity, allocatable
}

// storedPod is the Pod as kubelet receives it from the API server: decoded, defaulted, created
// (PrepareForCreate sets status.qosClass) and validated. nil with the reason when the API server refuses it.
func storedPod(raw []byte) (*v1.Pod, TopologyAnswer) {
	obj, gvk, err := decoder.Decode(raw, nil, nil)
	if err != nil || gvk.Kind != "Pod" {
		if err == nil {
			err = fmt.Errorf("kind %s is not Pod", gvk.Kind)
		}
		return nil, TopologyAnswer{DecodeError: err.Error()}
	}
	legacyscheme.Scheme.Default(obj)
	internal, err := legacyscheme.Scheme.ConvertToVersion(obj, schema.GroupVersion{Group: "", Version: "__internal"})
	if err != nil {
		return nil, TopologyAnswer{DecodeError: "conversion: " + err.Error()}
	}
	if errs := create(pod.Strategy, v1.SchemeGroupVersion.WithKind("Pod"), "pods", internal); len(errs) > 0 {
		return nil, TopologyAnswer{PodErrors: errs}
	}
	out := &v1.Pod{}
	if err := legacyscheme.Scheme.Convert(internal.(*api.Pod), out, nil); err != nil {
		return nil, TopologyAnswer{DecodeError: "conversion: " + err.Error()}
	}
	out.UID = types.UID("oracle-topology")
	return out, TopologyAnswer{}
}
