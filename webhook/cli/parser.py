"""The ``qos-guard`` command line: its parser, help texts and exit codes; ``main`` parses and hands the
arguments to one function of ``commands``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from webhook import __version__, interpreter
from webhook.batch import formats
from webhook.cli.commands import (
    cmd_agent,
    cmd_audit,
    cmd_certs,
    cmd_check,
    cmd_extender,
    cmd_fix,
    cmd_nodes,
    cmd_policy,
    cmd_serve,
    cmd_verify,
    err,
)
from webhook.cli.pipe import closed_pipe_tolerated
from webhook.core.config import ConfigError
from webhook.core.engine import Mode
from webhook.core.kubeletpinning import DEFAULT_POOL_LABELS
from webhook.core.kubeversion import DEFAULT, PRERELEASE_TEXT, SUPPORTED_TEXT
from webhook.core.operators import KSERVE_NAMESPACE
from webhook.core.outcome import ExitCode

CHECK_EXIT_CODES = """exit codes:
  0  every object judged is compliant (in --mode warn: always, unless 2 applies)
  1  a violation was found (never in --mode warn)
  2  wrong usage, an input that could not be read (named with its line; the rest is still checked), or
     nothing to judge: no Pod or workload found (pass --allow-empty to accept that)"""

FIX_EXIT_CODES = """exit codes:
  0  every object is compliant now (or would be, with --dry-run)
  1  violations are left that the mutation cannot fix (each line says why, and which setting would fix it)
  2  wrong usage, a file that could not be read or written (it is left unchanged), or nothing to judge: no
     Pod or workload found (pass --allow-empty to accept that)"""

AGENT_EXIT_CODES = """Every --interval seconds, on the node it runs on: reads kubelet's PodResources API, the NUMA
layout and each container's cgroup cpuset, and exports whether each container of an opted-in namespace is pinned and on
one NUMA node (qos_guard_container_* on --metrics-bind), with one Event per problem and optional reports.

exit codes:
  0  stopped by SIGTERM or SIGINT
  2  wrong usage or bad configuration: no node name (--node, $NODE_NAME), --interval under 1 s, a
     --metrics-bind that is not HOST:PORT or is in use"""

VERIFY_EXIT_CODES = """Once, from a shell on the node (root, for kubelet's socket): the agent's decision for each
container of an opted-in namespace on this node, instead of taskset, numastat and PCI sysfs by hand.

exit codes:
  0  every container judged is pinned and on one NUMA node (or not meant to be pinned)
  1  a container is not pinned, is pinned across NUMA nodes, is pinned with a device whose NUMA node
     cannot be found (unknown NUMA), or has more than --remote-memory-share of its anonymous memory off
     its CPUs' NUMA node (remote memory)
  2  wrong usage, or kubelet's PodResources socket, sysfs or the API server could not be read (named)"""

EXIT_CODES = """exit codes: 0 success; 1 violations found (check, audit, fix), a node that cannot pin (nodes), a
container not pinned, not on one NUMA node or with remote memory (verify); 2 wrong usage, bad configuration or an
input that could not be read. `qos-guard COMMAND --help` says what each command returns."""


def _command(sub: Any, name: str, summary: str, epilog: str | None = None) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(name, help=summary, description=summary, epilog=epilog,
                                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    return parser


def _format_option(command: argparse.ArgumentParser, name: str) -> None:
    """``--format`` of every command that has one: choices and help from the one registry of formats."""
    command.add_argument("--format", choices=list(formats.FORMATS), default=formats.DEFAULT,
                         help=formats.choices_help(name))


def _version_option(command: argparse.ArgumentParser) -> None:
    command.add_argument("--kubernetes-version", metavar="1.MINOR",
                         help=f"judge with this Kubernetes minor's semantics ({SUPPORTED_TEXT}; v1.37.2 is read as "
                              f"1.37): QoS class, defaulting and pod-level resources differ between minors "
                              f"(default: the kubernetesVersion key, else {DEFAULT.minor}, the newest released; "
                              f"{PRERELEASE_TEXT})")


def _kserve_option(command: argparse.ArgumentParser) -> None:
    command.add_argument("--kserve-namespace", metavar="NAMESPACE",
                         help="the namespace KServe runs in, where it reads inferenceservice-config, its "
                              "LLMInferenceServiceConfig presets and config-scheduler-* ConfigMaps (opendatahub, "
                              "redhat-ods-applications under OpenDataHub and OpenShift AI; a DNS-1123 label) "
                              f"(default: the policy.kserveNamespace key, else {KSERVE_NAMESPACE})")


def add_serve_arguments(serve: argparse.ArgumentParser) -> None:
    """``serve``'s flags (bench/serve.py adds its benchmark-only ones to the same)."""
    serve.add_argument("--bind", default="0.0.0.0:8443", help="TLS address (default 0.0.0.0:8443)")
    serve.add_argument("--metrics-bind", default="0.0.0.0:8080",
                       help="plain HTTP address for /metrics, /healthz, /readyz (default 0.0.0.0:8080)")
    serve.add_argument("--workers", type=int, default=2, help="gunicorn worker processes (default 2)")
    serve.add_argument("--connections", type=int, default=1000,
                       help="open connections per worker, idle or stalled ones included; more wait in the "
                            "listen backlog (default 1000)")
    serve.add_argument("--config", help="configuration file (docs/contract.md#configuration)")
    serve.add_argument("--cert-file", help="serving certificate (PEM); default: a local development CA for "
                                           "localhost, made once in ./certs/localhost (never over other files)")
    serve.add_argument("--key-file", help="private key of --cert-file (PEM)")
    serve.add_argument("--kubeconfig", help="with policy.numa: auto, where to watch NodeResourceTopology objects "
                                            "and node labels (default: in-cluster, else $KUBECONFIG or "
                                            "~/.kube/config)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qos-guard",
        description="Keep latency-critical Pods Guaranteed with whole CPUs, so kubelet pins them.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"qos-guard {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = _command(sub, "check", "judge manifest files, folders or stdin as the webhook would (a dry run)",
                     CHECK_EXIT_CODES)
    check.add_argument("paths", nargs="+", metavar="PATH",
                       help="file, folder (recursive: .yaml, .yml, .json) or - for stdin")
    check.add_argument("--mode", choices=[m.value for m in Mode], default=Mode.ENFORCE.value,
                       help="judge as a namespace in this mode would be: enforce (what would be refused), mutate "
                            "(what the webhook would patch, as notices, and what it would still refuse) or warn "
                            "(report, never fail) (default enforce)")
    check.add_argument("--config", help="configuration file (docs/contract.md#configuration)")
    check.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                       help="leave out files and folders this shell pattern matches, as the paths are written "
                            "(e.g. charts, 'deploy/*.json'); repeat for more")
    _format_option(check, "check")
    check.add_argument("--allow-empty", action="store_true",
                       help="exit 0 when no Pod or workload is found (a pre-commit hook given only other "
                            "files); by default that is exit 2, so a wrong path in CI does not pass")
    check.add_argument("--kubeconfig", help="judge with this cluster beside the files: its API server's minor "
                                            "(unless --kubernetes-version says otherwise), the objects operators "
                                            "build Pods from (ServingRuntimes, KServe's ConfigMaps) and its DRA "
                                            "claims and slices; with policy.numa: auto, NUMA fit against its "
                                            "NodeResourceTopology objects and node labels; with "
                                            "policy.deviceClasses: true, its DeviceClasses")
    _version_option(check)
    _kserve_option(check)
    check.set_defaults(func=cmd_check)

    fix = _command(sub, "fix", "rewrite manifest files so their Pods are Guaranteed with whole CPUs where that "
                               "is safe (requests set to limits), keeping comments and layout", FIX_EXIT_CODES)
    fix.add_argument("paths", nargs="+", metavar="PATH",
                     help="file or folder (recursive: .yaml, .yml, .json) to fix in place, or - alone: "
                          "read standard input, write the fixed manifest to standard output (a filter)")
    fix.add_argument("--output", metavar="DIR", help="write fixed copies here instead of in place")
    fix.add_argument("--dry-run", action="store_true",
                     help="write nothing: print a unified diff of what would change on stdout (apply it with "
                          "patch -p1 or git apply), the changes and what is left on stderr")
    fix.add_argument("--config", help="configuration file (docs/contract.md#configuration)")
    fix.add_argument("--allow-empty", action="store_true",
                     help="exit 0, not 2, when no Pod or workload is found (as check --allow-empty)")
    _version_option(fix)
    _kserve_option(fix)
    fix.set_defaults(func=cmd_fix)

    serve = _command(sub, "serve", "run the admission webhook (gunicorn, TLS)",
                     "exit codes:\n  0  stopped by SIGTERM or SIGINT (requests in flight finished)\n"
                     "  2  wrong usage, bad configuration, unusable certificate files or a port in use")
    add_serve_arguments(serve)
    serve.set_defaults(func=cmd_serve)

    extender = _command(sub, "extender", "run kube-scheduler's NUMA extender: filter and prioritize nodes by "
                        "whether the Pod fits one NUMA node now (gunicorn, TLS)",
                        "exit codes:\n  0  stopped by SIGTERM or SIGINT\n"
                        "  2  wrong usage, unusable certificate files or a port in use")
    extender.add_argument("--bind", default="0.0.0.0:8444", help="address to serve on (default 0.0.0.0:8444)")
    extender.add_argument("--cert-file", help="serving certificate (PEM); the scheduler's tlsConfig.caData names "
                                              "its CA")
    extender.add_argument("--key-file", help="private key of --cert-file (PEM)")
    extender.add_argument("--client-ca-file", help="CA (PEM) that verifies the scheduler's client certificate "
                                                   "(its extenders[].tlsConfig certFile); the verbs then answer "
                                                   "only such clients; required unless --bind is loopback")
    extender.add_argument("--plain", action="store_true",
                          help="plain HTTP, for a scheduler on the same host: --bind must be loopback")
    extender.add_argument("--kubeconfig", help="where to watch NodeResourceTopology objects and bound Pods "
                                               "(default: in-cluster, else $KUBECONFIG)")
    extender.add_argument("--reservation-timeout", type=float, default=120.0, metavar="SECONDS",
                          help="how long a Pod bound to a node is held against it while the node's "
                               "NodeResourceTopology does not say it counts it (default 120)")
    extender.set_defaults(func=cmd_extender)

    certs = _command(sub, "certs", "write a CA and a serving certificate; print the caBundle",
                     "exit codes:\n  0  written (and patched)\n  2  wrong usage (a name a certificate cannot carry, "
                     "--output-dir not a\n     folder or not writable, a CA already there without --renew or "
                     "--force), or\n     --patch-webhooks failed")
    certs.add_argument("--service", default="qos-guard", help="webhook Service name (default qos-guard)")
    certs.add_argument("--namespace", default="qos-guard", help="its namespace (default qos-guard)")
    certs.add_argument("--output-dir", default="certs", help="where to write the files (default ./certs)")
    certs.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    certs.add_argument("--patch-webhooks", nargs="+", metavar="NAME",
                       help="write the caBundle into these Validating/MutatingWebhookConfigurations")
    certs.add_argument("--kubeconfig", help="kubeconfig for --patch-webhooks (default: in-cluster or ~/.kube)")
    certs.add_argument("--extra-san", action="append", default=[], metavar="NAME_OR_IP",
                       help="another DNS name or IP address for the serving certificate (repeatable), e.g. for "
                            "a webhook reached by URL outside the cluster")
    replace = certs.add_mutually_exclusive_group()
    replace.add_argument("--renew", action="store_true",
                         help="keep the CA in --output-dir (ca.crt, ca.key) and issue a new serving certificate "
                              "from it: deployed caBundles stay valid")
    replace.add_argument("--force", action="store_true",
                         help="replace a CA already in --output-dir; every caBundle made from the old one must "
                              "then be replaced too (refused without it)")
    certs.set_defaults(func=cmd_certs)

    audit = _command(sub, "audit", "judge the Pods and workloads already in a cluster",
                     "exit codes:\n  0  nothing found\n  1  a violation was found (never in --mode warn)\n"
                     "  2  wrong usage, or the cluster could not be listed (an object that could not be read is\n     "
                     "named; the rest is still judged)")
    scope = audit.add_mutually_exclusive_group()
    scope.add_argument("--all-namespaces", "-A", action="store_true",
                       help="every namespace, not only those labelled qos-guard.io/mode")
    scope.add_argument("--namespace", "-n", action="append", metavar="NS", help="only this namespace (repeatable)")
    audit.add_argument("--mode", choices=[m.value for m in Mode], default=Mode.ENFORCE.value,
                       help="judge as this mode (default enforce: what would be refused today)")
    audit.add_argument("--config", help="configuration file (docs/contract.md#configuration)")
    _format_option(audit, "audit")
    audit.add_argument("--kubeconfig", help="kubeconfig (default: in-cluster, else $KUBECONFIG or ~/.kube/config)")
    audit.add_argument("--context", help="the kubeconfig context to use (default: its current context)")
    audit.add_argument("--page-size", type=int, default=500, help="objects per list request (default 500)")
    audit.add_argument("--report", choices=["openreports", "policyreport"],
                       help="also write the findings into the cluster, one report per namespace, replaced on "
                            "each run: openreports.io/v1alpha1 Report, or wgpolicyk8s.io/v1alpha2 PolicyReport")
    _kserve_option(audit)
    audit.set_defaults(func=cmd_audit)

    nodes = sub.add_parser(
        "nodes", help="whether each node's kubelet is set up to pin (CPU, Memory and Topology Managers)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit codes:\n  0  every selected node can pin\n  1  a node cannot pin\n"
               "  2  wrong usage, a node's configuration could not be read, or no node was selected",
        description="Read each node's kubelet configuration through the API server (GET "
                    "/api/v1/nodes/NAME/proxy/configz, which needs get on nodes/proxy) and say whether it pins: "
                    "cpuManagerPolicy static with reserved CPUs, and topologyManagerPolicy not none. Exit 1 when "
                    "a node cannot pin, else 2 when one could not be read, else 0.")
    nodes.add_argument("names", nargs="*", metavar="NODE", help="only these nodes (default: every node)")
    nodes.add_argument("-l", "--selector", metavar="SELECTOR",
                       help="only nodes with these labels, as kubectl -l (e.g. pool=inference)")
    nodes.add_argument("--pool-label", action="append", metavar="KEY",
                       help="a label naming a node pool whose nodes must pin alike (repeatable; PREFIX/* for every "
                            f"key under PREFIX). Default: {', '.join(DEFAULT_POOL_LABELS)}")
    _format_option(nodes, "nodes")
    nodes.add_argument("--kubeconfig", help="kubeconfig (default: in-cluster, else $KUBECONFIG or ~/.kube/config)")
    nodes.add_argument("--context", help="the kubeconfig context to use (default: its current context)")
    nodes.set_defaults(func=cmd_nodes)

    policy = _command(sub, "policy", "print ValidatingAdmissionPolicy and MutatingAdmissionPolicy YAML enforcing "
                                     "the rules inside the API server (no webhook)",
                      "Kubernetes 1.36 or later: MutatingAdmissionPolicy v1 (--mode mutate, all) is served from 1.36;\n"
                      "--mode enforce or warn prints ValidatingAdmissionPolicies only (1.35 or later). The output's\n"
                      "first line says which.\n\n"
                      "exit codes:\n  0  printed\n  2  wrong usage (a --namespace that is not a DNS-1123 label), bad "
                      "configuration,\n     or a setting CEL cannot express (named)")
    policy.add_argument("--config", help="configuration file (docs/contract.md#configuration)")
    policy.add_argument("--mode", choices=["enforce", "mutate", "warn", "all"], default="all",
                        help="which namespace mode's policies to print (default all)")
    policy.add_argument("--api-version", choices=["v1"], default="v1",
                        help="admissionregistration.k8s.io version (v1: Kubernetes 1.36 and later)")
    policy.add_argument("--namespace", default="qos-guard",
                        help="namespace of the parameters ConfigMap, never judged (default qos-guard)")
    _version_option(policy)
    policy.set_defaults(func=cmd_policy)

    def node_flags(p: argparse.ArgumentParser) -> None:
        p.add_argument("--pod-resources-socket", default="/var/lib/kubelet/pod-resources/kubelet.sock",
                       help="kubelet's PodResources socket (default /var/lib/kubelet/pod-resources/kubelet.sock)")
        p.add_argument("--sys-root", default="/sys", help="where the host's sysfs is (default /sys)")
        p.add_argument("--cgroup-root", help="where the host's cgroup hierarchy is (default SYS_ROOT/fs/cgroup)")
        p.add_argument("--kubeconfig", help="kubeconfig (default: in-cluster, else $KUBECONFIG or ~/.kube/config)")
        p.add_argument("--config", help="configuration file: policy.fractionalCPUContainers run in the shared "
                                        "pool by choice and are not a problem")
        p.add_argument("--dra-numa-attribute", action="append", metavar="NAME",
                       help="a DRA driver's NUMA node attribute, read after resource.kubernetes.io/numaNode and before "
                            "pciBusID/pcieRoot; repeat for several, in order; NAME without a domain is the driver's "
                            "own (default: dra.net/numaNode, gpu.amd.com/numaNode, dra.memory/numaNode, "
                            "gpu.nvidia.com/numa, numaNode)")
        p.add_argument("--remote-memory-share", type=float, default=0.10, metavar="SHARE",
                       help="NUMARemoteMemory when more than this share (0-1) of a pinned container's anonymous "
                            "memory is off its CPUs' NUMA node (memory.numa_stat; default 0.10)")

    agent = _command(sub, "agent", "node agent (DaemonSet): metrics, Events and reports on where kubelet placed "
                                   "each pinned container", AGENT_EXIT_CODES)
    node_flags(agent)
    agent.add_argument("--node", help="this node's name (default $NODE_NAME)")
    agent.add_argument("--interval", type=float, default=30, help="seconds between looks (default 30)")
    agent.add_argument("--metrics-bind", default="0.0.0.0:8080", help="plain HTTP /metrics (default 0.0.0.0:8080)")
    agent.add_argument("--report", choices=["openreports", "policyreport"],
                       help="also write results, one report per namespace and node, replaced when they change")
    agent.add_argument("--no-events", action="store_true", help="no Kubernetes Events on the Pods")
    agent.add_argument("--publish-topology", action="store_true",
                       help="also publish this node's NodeResourceTopology (topology.node.k8s.io/v1alpha2) as NFD's "
                            "topology-updater does, for numa: auto and the extender; not where NFD publishes it")
    agent.add_argument("--topology-poll", type=float, default=0.25, metavar="SECONDS",
                       help="with --publish-topology: seconds between looks at kubelet's PodResources (two local "
                            "gRPC calls each; default 0.25)")
    agent.add_argument("--topology-manager-policy", choices=["none", "best-effort", "restricted", "single-numa-node"],
                       help="with --publish-topology: kubelet's topologyManagerPolicy (default: read from this "
                            "node's kubelet, /configz on its port, get on nodes/configz)")
    agent.add_argument("--topology-manager-scope", choices=["container", "pod"],
                       help="with --publish-topology: kubelet's topologyManagerScope (give both or neither)")
    agent.add_argument("--kubelet-address", metavar="IP",
                       help="with --publish-topology: this node's kubelet, for its configz (default $NODE_IP, "
                            "which the chart sets from status.hostIP, else 127.0.0.1)")
    agent.add_argument("--kubelet-port", type=int, default=10250, metavar="PORT",
                       help="with --publish-topology: kubelet's authenticated port (default 10250)")
    agent.add_argument("--kubelet-ca", metavar="FILE",
                       help="with --publish-topology: verify kubelet's serving certificate against this CA "
                            "(default: not verified; kubelet's own certificate is self-signed)")
    agent.set_defaults(func=cmd_agent)

    verify = _command(sub, "verify", "on a node: is each pinned container exclusive and on one NUMA node with its "
                                     "memory and devices?", VERIFY_EXIT_CODES)
    node_flags(verify)
    verify.add_argument("pods", nargs="*", metavar="NAMESPACE/POD",
                        help="only these Pods (read with PodResources Get); default every Pod of an opted-in "
                             "namespace on this node")
    verify.add_argument("--node", help="this node's name (default: the Pods kubelet lists, matched by name)")
    verify.add_argument("--format", choices=["text", "json"], default="text",
                        help="text (each container's verdict with a numastat -p-like table of its memory per NUMA "
                             "node) or json (one document, for scripts; bytes per NUMA node under numaMemory) "
                             "(default text)")
    verify.set_defaults(func=cmd_verify)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # Once, here where the process starts, never per document (see webhook/interpreter.py): the servers and the
    # agent run for weeks and keep the collector's default thresholds; every other command reads and exits.
    interpreter.configure(batch=args.func not in (cmd_serve, cmd_extender, cmd_agent))
    if args.func in (cmd_serve, cmd_agent):  # servers: their output is logs, never a report
        return _run(args)
    with closed_pipe_tolerated():  # a reader that stops early never changes the exit code
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args))
    except ConfigError as exc:
        err(f"invalid configuration: {exc}")
        return ExitCode.USAGE

