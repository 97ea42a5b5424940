// Package iptables stands in for sigs.k8s.io/iptables-wrappers/pkg/iptables, which kubelet v1.38.0-beta.0
// imports (pkg/kubelet/kubelet_network_linux.go) but the Go module proxy does not serve (v1.0.0: "403 This
// module version is not available"). hack/build-tools.sh uses it only then, and names the kubelet it builds
// with it kubelet-VERSION+iptables-standin, so nobody takes that binary for the release's own.
//
// It is the code the library was moved out of: k8s.io/kubernetes v1.37.2 pkg/util/iptables, copied at build
// time from the module cache into internal/legacy, behind the context-taking API 1.38's kubelet calls. Kubelet
// uses it for nothing but its KUBE-IPTABLES-HINT and KUBE-FIREWALL chains (best effort: without iptables it logs
// and goes on); the CPU, memory, device and Topology Managers the node tier proves do not touch it.
package iptables

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"

	legacy "sigs.k8s.io/iptables-wrappers/internal/legacy"
)

type (
	// Chain is an iptables chain.
	Chain = legacy.Chain
	// Table is an iptables table.
	Table = legacy.Table
	// RulePosition is where EnsureRule puts a rule (-I or -A).
	RulePosition = legacy.RulePosition
	// Protocol is IPv4 or IPv6.
	Protocol = legacy.Protocol
)

const (
	TableFilter  = legacy.TableFilter
	TableNAT     = legacy.TableNAT
	TableMangle  = legacy.TableMangle
	ChainInput   = legacy.ChainInput
	ChainOutput  = legacy.ChainOutput
	Prepend      = legacy.Prepend
	Append       = legacy.Append
	ProtocolIPv4 = legacy.ProtocolIPv4
	ProtocolIPv6 = legacy.ProtocolIPv6
)

// Mode picks the iptables binaries; 1.37's runner always ran the installed `iptables`.
type Mode int

// UseInstalledMode runs the iptables the system has installed (legacy or nft, whichever it points to).
const UseInstalledMode Mode = 0

// Interface is what kubelet v1.38.0-beta.0 calls.
type Interface interface {
	EnsureChain(ctx context.Context, table Table, chain Chain) (bool, error)
	EnsureRule(ctx context.Context, position RulePosition, table Table, chain Chain, args ...string) (bool, error)
	IsIPv6() bool
	Protocol() Protocol
	Monitor(ctx context.Context, canary Chain, tables []Table, reloadFunc func(), interval time.Duration)
}

type runner struct{ r legacy.Interface }

// NewBestEffort returns a runner per IP family whose iptables works here (none where iptables is absent).
func NewBestEffort(_ context.Context, _ Mode) map[v1.IPFamily]Interface {
	out := map[v1.IPFamily]Interface{}
	for family, r := range legacy.NewBestEffort() {
		out[family] = runner{r}
	}
	return out
}

func (x runner) EnsureChain(_ context.Context, table Table, chain Chain) (bool, error) {
	return x.r.EnsureChain(table, chain)
}

func (x runner) EnsureRule(_ context.Context, position RulePosition, table Table, chain Chain, args ...string) (bool, error) {
	return x.r.EnsureRule(position, table, chain, args...)
}

func (x runner) IsIPv6() bool { return x.r.IsIPv6() }

func (x runner) Protocol() Protocol { return x.r.Protocol() }

func (x runner) Monitor(ctx context.Context, canary Chain, tables []Table, reloadFunc func(), interval time.Duration) {
	x.r.Monitor(canary, tables, reloadFunc, interval, ctx.Done())
}
