// Command deviceplugin is a test-only device plugin for the node tests (tests/node): it registers one extended
// resource (default example.com/gpu) with kubelet through the v1beta1 device plugin API of k8s.io/kubelet, and
// reports each device with the NUMA node given on the command line in its TopologyInfo, so kubelet's Topology
// Manager aligns (or refuses to align) CPUs with it as it does with a real GPU or NIC. It allocates nothing
// real: a container gets QOS_GUARD_TEST_DEVICES naming its devices.
//
//	deviceplugin -resource example.com/gpu -devices gpu-0=0,gpu-1=1
//
// kubelet's registration socket is always /var/lib/kubelet/device-plugins/kubelet.sock, whatever its
// --root-dir; a restarted kubelet empties that folder, so the plugin watches its own socket and registers
// again when it disappears. SIGTERM or SIGINT removes the socket and exits.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	devices []*pluginapi.Device
	stop    chan struct{}
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *plugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	log.Printf("ListAndWatch: sent %d devices", len(p.devices))
	select {
	case <-s.Context().Done():
	case <-p.stop:
	}
	return nil
}

func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		log.Printf("allocate %v", c.DevicesIds)
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"QOS_GUARD_TEST_DEVICES": strings.Join(c.DevicesIds, ",")},
		})
	}
	return resp, nil
}

func (p *plugin) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{}, nil
}

func (p *plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// parseDevices reads "id=numa,id=numa" (numa may be empty: a device without topology).
func parseDevices(spec string) ([]*pluginapi.Device, error) {
	var devices []*pluginapi.Device
	for _, part := range strings.Split(spec, ",") {
		id, numa, ok := strings.Cut(part, "=")
		if !ok || id == "" {
			return nil, fmt.Errorf("device %q is not ID=NUMA", part)
		}
		d := &pluginapi.Device{ID: id, Health: pluginapi.Healthy}
		if numa != "" {
			n, err := strconv.ParseInt(numa, 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("device %q: NUMA node %q is not a number", id, numa)
			}
			d.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: n}}}
		}
		devices = append(devices, d)
	}
	return devices, nil
}

func register(kubeletSocket, endpoint, resource string) error {
	conn, err := grpc.NewClient("unix://"+kubeletSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: endpoint, ResourceName: resource,
		Options: &pluginapi.DevicePluginOptions{},
	})
	return err
}

func main() {
	resource := flag.String("resource", "example.com/gpu", "extended resource name to register")
	spec := flag.String("devices", "gpu-0=0", "devices as ID=NUMA,ID=NUMA (empty NUMA: no topology)")
	dir := flag.String("dir", pluginapi.DevicePluginPath, "kubelet's device plugin folder")
	name := flag.String("socket", "qos-guard-test.sock", "this plugin's socket name in -dir")
	flag.Parse()
	devices, err := parseDevices(*spec)
	if err != nil {
		log.Fatal(err)
	}
	kubeletSocket := filepath.Join(*dir, "kubelet.sock")
	own := filepath.Join(*dir, *name)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	for {
		_ = os.Remove(own)
		lis, err := net.Listen("unix", own)
		if err != nil {
			log.Fatalf("listen %s: %v", own, err)
		}
		p := &plugin{devices: devices, stop: make(chan struct{})}
		server := grpc.NewServer()
		pluginapi.RegisterDevicePluginServer(server, p)
		go func() { _ = server.Serve(lis) }()
		for {
			if err = register(kubeletSocket, *name, *resource); err == nil {
				break
			}
			log.Printf("register with %s: %v (retrying)", kubeletSocket, err)
			select {
			case <-signals:
				close(p.stop)
				server.Stop()
				_ = os.Remove(own)
				return
			case <-time.After(time.Second):
			}
		}
		log.Printf("registered %s with %d devices %s as %s", *resource, len(devices), *spec, own)
		restart := false
		for !restart {
			select {
			case <-signals:
				close(p.stop)
				server.Stop()
				_ = os.Remove(own)
				log.Printf("stopped")
				return
			case <-time.After(500 * time.Millisecond):
				if _, err := os.Stat(own); err != nil { // kubelet restarted and emptied its folder
					log.Printf("%s is gone: registering again", own)
					restart = true
				}
			}
		}
		close(p.stop)
		server.Stop()
	}
}
