// Command dradriver is a test-only DRA driver for the node tests (tests/node): through the kubeletplugin helper
// of k8s.io/dynamic-resource-allocation it registers with kubelet (plugins_registry under the kubelet's
// --root-dir), publishes one ResourceSlice for its node whose devices carry the attributes given on the command
// line (the NUMA and PCIe locality a real GPU driver publishes, or none), and prepares claims without CDI
// devices, so a Pod with a claim runs as it would with a real GPU: the scheduler allocates, kubelet prepares,
// and nothing in kubelet aligns the device with the Pod's CPUs.
//
//	dradriver -driver gpu.qos-guard.test -node qos-guard-node -kubeconfig K -kubelet-root R \
//	  -device gpu-0,numaNode=0,pciBusID=0000:3b:00.0,pcieRoot=pci0000:3a -device gpu-1
//
// An attribute name without a domain (numaNode, pciBusID, pcieRoot) is resource.kubernetes.io's standard
// one; a name with a domain (dra.net/numaNode) is taken as it is. A value that is an integer is published as
// an int, anything else as a string. Started again with other attributes it updates its slice in place (the
// device keeps its name), as a real driver does after the hardware it reports changed. SIGTERM or SIGINT stops
// it; its slice stays, as a real driver's does across restarts.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// deviceFlags collects repeated -device NAME[,ATTR=VALUE...] flags.
type deviceFlags []resourceapi.Device

func (d *deviceFlags) String() string { return fmt.Sprint(len(*d), " devices") }

func (d *deviceFlags) Set(spec string) error {
	device, err := parseDevice(spec)
	if err != nil {
		return err
	}
	*d = append(*d, device)
	return nil
}

// parseDevice reads "name,attr=value,...": why a flag per device, not one list: pciBusID values contain ':'.
func parseDevice(spec string) (resourceapi.Device, error) {
	parts := strings.Split(spec, ",")
	device := resourceapi.Device{Name: parts[0]}
	if device.Name == "" {
		return device, fmt.Errorf("-device %q: no device name before the first ','", spec)
	}
	for _, part := range parts[1:] {
		name, value, ok := strings.Cut(part, "=")
		if !ok || name == "" || value == "" {
			return device, fmt.Errorf("-device %q: %q is not ATTRIBUTE=VALUE", spec, part)
		}
		if !strings.Contains(name, "/") {
			name = deviceattribute.StandardDeviceAttributePrefix + name
		}
		var attr resourceapi.DeviceAttribute
		if n, err := strconv.ParseInt(value, 10, 64); err == nil {
			attr.IntValue = &n
		} else {
			v := value
			attr.StringValue = &v
		}
		if device.Attributes == nil {
			device.Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
		}
		device.Attributes[resourceapi.QualifiedName(name)] = attr
	}
	return device, nil
}

type driver struct {
	name   string
	cancel context.CancelCauseFunc
}

// PrepareResourceClaims hands kubelet the allocated devices of this driver, without CDI devices: nothing is
// injected into the containers, which is all these tests need (kubelet records them in PodResources).
func (d *driver) PrepareResourceClaims(_ context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	result := map[types.UID]kubeletplugin.PrepareResult{}
	for _, claim := range claims {
		var prepared kubeletplugin.PrepareResult
		if claim.Status.Allocation == nil {
			prepared.Err = fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)
		} else {
			for _, r := range claim.Status.Allocation.Devices.Results {
				if r.Driver != d.name {
					continue
				}
				prepared.Devices = append(prepared.Devices, kubeletplugin.Device{
					Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device})
				log.Printf("prepare claim %s/%s (%s): request %s -> pool %s device %s",
					claim.Namespace, claim.Name, claim.UID, r.Request, r.Pool, r.Device)
			}
		}
		result[claim.UID] = prepared
	}
	return result, nil
}

func (d *driver) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	result := map[types.UID]error{}
	for _, claim := range claims {
		log.Printf("unprepare claim %s", claim)
		result[claim.UID] = nil
	}
	return result, nil
}

// HandleError logs background errors (slice publishing); a fatal one stops the driver, so a test sees it exit.
func (d *driver) HandleError(_ context.Context, err error, msg string) {
	log.Printf("%s: %v", msg, err)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.cancel(fmt.Errorf("%s: %w", msg, err))
	}
}

func main() {
	name := flag.String("driver", "gpu.qos-guard.test", "DRA driver name (a DNS subdomain)")
	node := flag.String("node", "", "the Node whose kubelet this driver serves (its ResourceSlice's pool and owner)")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig for the API server (publishing ResourceSlices, reading claims)")
	root := flag.String("kubelet-root", "/var/lib/kubelet", "the kubelet's --root-dir")
	var devices deviceFlags
	flag.Var(&devices, "device", "NAME[,ATTRIBUTE=VALUE...], repeated: a device of the slice and its attributes")
	flag.Parse()
	if *node == "" || *kubeconfig == "" || len(devices) == 0 {
		log.Fatal("-node, -kubeconfig and at least one -device are required")
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatalf("kubeconfig %s: %v", *kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		log.Fatalf("client: %v", err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-signals
		cancel(fmt.Errorf("signal %v", s))
	}()

	// kubelet makes plugins_registry when it starts; made here too, a driver started first waits for it there.
	pluginDir, registry := filepath.Join(*root, "plugins", *name), filepath.Join(*root, "plugins_registry")
	for _, dir := range []string{pluginDir, registry} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			log.Fatal(err)
		}
	}
	d := &driver{name: *name, cancel: cancel}
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(*name),
		kubeletplugin.KubeClient(client),
		kubeletplugin.NodeName(*node),
		kubeletplugin.RegistrarDirectoryPath(registry),
		kubeletplugin.PluginDataDirectoryPath(pluginDir),
	)
	if err != nil {
		log.Fatalf("start kubelet plugin: %v", err)
	}
	resources := resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		*node: {Slices: []resourceslice.Slice{{Devices: devices}}},
	}}
	if err := helper.PublishResources(ctx, resources); err != nil {
		log.Fatalf("publish: %v", err)
	}
	for _, dev := range devices {
		attrs := []string{}
		for k, v := range dev.Attributes {
			if v.IntValue != nil {
				attrs = append(attrs, fmt.Sprintf("%s=%d", k, *v.IntValue))
			} else {
				attrs = append(attrs, fmt.Sprintf("%s=%s", k, *v.StringValue))
			}
		}
		sort.Strings(attrs)
		if len(attrs) == 0 {
			attrs = []string{"(no attributes)"}
		}
		log.Printf("publishing device %s in pool %s: %s", dev.Name, *node, strings.Join(attrs, " "))
	}
	// Registration is kubelet's call back to us: say when it changed, so a test can wait for it.
	said := ""
	for ctx.Err() == nil {
		if s := helper.RegistrationStatus(); s != nil {
			line := fmt.Sprintf("kubelet refused the registration: %s", s.Error)
			if s.PluginRegistered {
				line = fmt.Sprintf("registered with kubelet as %s (%s)", *name, pluginDir)
			}
			if line != said {
				log.Print(line)
				said = line
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	helper.Stop()
	log.Printf("stopped: %v", context.Cause(ctx))
}
