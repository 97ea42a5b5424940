"""The ``qos-guard`` command: argument parsing, then one call into the piece that does the work."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webhook import __version__
from webhook.batch.report import FORMATS, Location, Report, render, skipped_text, summary_line
from webhook.batch.runner import check_paths, fix_paths
from webhook.cluster.pinning import DEFAULT_POOL_LABELS
from webhook.core.config import ConfigError
from webhook.core.engine import Mode
from webhook.manifests.configfile import load_config

if TYPE_CHECKING:
    from webhook.serving.options import ServeOptions

EXIT_OK, EXIT_VIOLATIONS, EXIT_USAGE = 0, 1, 2


def _err(message: str) -> None:
    print(f"qos-guard: {message}", file=sys.stderr)


def _nothing_to_judge(paths: Sequence[str], report: Report) -> str:
    """Why a run that judged no object fails, and the way out (a wrong path in CI must not pass)."""
    skipped = f" (skipped: {skipped_text(report.skipped)})" if report.skipped else ""
    hint = ("; an AdmissionReview is what the webhook receives: send it to `qos-guard serve`, or check the "
            "object in its request.object" if "AdmissionReview" in report.skipped else "")
    return (f"nothing to judge: no Pod or workload in {', '.join(paths)}{skipped}{hint}; check the paths, or "
            "pass --allow-empty where finding none is expected")


def cmd_check(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    if config.numa_auto:
        from webhook.batch.topology import with_cluster_topology

        config = with_cluster_topology(config, args.kubeconfig, _err, required=False)
    if args.format == "text":
        report = check_paths(args.paths, config, Mode(args.mode), stream=print)
        print(summary_line(report), file=sys.stderr)
    else:
        report = check_paths(args.paths, config, Mode(args.mode))
    empty = not report.counts.objects and not args.allow_empty
    if empty and args.format != "text":  # machine-read formats carry it too, as an input error
        report.add_error(Location(args.paths[0], 0), _nothing_to_judge(args.paths, report))
    if args.format != "text":
        sys.stdout.write(render(report, args.format))
    if empty:
        _err(_nothing_to_judge(args.paths, report))
        return EXIT_USAGE
    return report.exit_code


def cmd_fix(args: argparse.Namespace) -> int:
    tally = fix_paths(args.paths, load_config(args.config), Path(args.output) if args.output else None,
                      _err_line if args.dry_run else print, dry_run=args.dry_run, print_diff=_write_out)
    print(tally.summary(), file=sys.stderr)
    return tally.exit_code


def _err_line(line: str) -> None:
    print(line, file=sys.stderr)


def _write_out(text: str) -> None:
    sys.stdout.write(text)


def serve_options(args: argparse.Namespace) -> ServeOptions:
    """``serve``'s flags as ``ServeOptions`` (bench/serve.py reads the same flags, and a few of its own)."""
    from webhook.serving.options import ServeError, ServeOptions

    if args.workers < 1 or args.connections < 1:
        raise ServeError("--workers and --connections must be at least 1")
    return ServeOptions(bind=args.bind, metrics_bind=args.metrics_bind, workers=args.workers,
                        connections=args.connections, config=args.config, cert_file=args.cert_file,
                        key_file=args.key_file, kubeconfig=args.kubeconfig)


def cmd_serve(args: argparse.Namespace) -> int:
    from webhook.serving.server import ServeError, serve

    try:
        return serve(serve_options(args))
    except ServeError as exc:
        _err(str(exc))
        return EXIT_USAGE


def cmd_certs(args: argparse.Namespace) -> int:
    from webhook.serving.certs import ca_bundle, service_sans, write_bundle

    if args.days < 1:
        _err("--days must be at least 1")
        return EXIT_USAGE
    names = service_sans(args.service, args.namespace) + [n for n in args.extra_san if n]
    paths = write_bundle(Path(args.output_dir), names, args.days, keep_ca_key=True)
    print(f"qos-guard: wrote {paths.ca}, {paths.ca_key}, {paths.cert}, {paths.key} "
          f"(SANs {', '.join(names)}; valid {args.days} days)", file=sys.stderr)
    bundle = ca_bundle(paths.ca)
    print(bundle)
    if args.patch_webhooks:
        from webhook.cluster.client import ClusterError, patch_ca_bundle

        try:
            patched = patch_ca_bundle(bundle, args.patch_webhooks, kubeconfig=args.kubeconfig)
        except ClusterError as exc:
            _err(f"--patch-webhooks: {exc}")
            return EXIT_USAGE
        print(f"qos-guard: caBundle written into {', '.join(patched)}", file=sys.stderr)
    return EXIT_OK


def cmd_audit(args: argparse.Namespace) -> int:
    from webhook.batch.audit import audit
    from webhook.batch.policyreports import FLAVOURS, Subjects
    from webhook.batch.policyreports import build as build_reports
    from webhook.batch.policyreports import write as write_reports
    from webhook.cluster.client import ClusterError, Lister

    config = load_config(args.config)
    if args.page_size < 1:
        _err("--page-size must be at least 1")
        return EXIT_USAGE
    progress = _TerminalProgress() if sys.stderr.isatty() else None
    try:
        lister = Lister(args.kubeconfig, page_size=args.page_size)
        if config.numa_auto:
            from webhook.batch.topology import with_cluster_topology

            config = with_cluster_topology(config, args.kubeconfig, _err, required=True)
        if args.all_namespaces:
            namespaces = None
        elif args.namespace:
            namespaces = list(dict.fromkeys(args.namespace))
        else:
            namespaces = lister.opted_in_namespaces()
        subjects = Subjects()
        report = audit(subjects.watch(lister.objects(namespaces)), config, Mode(args.mode), progress)
        if args.report:  # stale reports are deleted everywhere, unless -n narrowed the run
            flavour = FLAVOURS[args.report]
            written = write_reports(lister, flavour, build_reports(flavour, report, subjects, namespaces or []),
                                    namespaces if args.namespace else None)
            print(f"qos-guard: {flavour.kind} written in {len(written.applied)} namespaces, "
                  f"{len(written.deleted)} stale deleted", file=sys.stderr)
    except ClusterError as exc:
        _err(f"audit: {exc}")
        return EXIT_USAGE
    finally:
        if progress is not None:
            progress.done()
    sys.stdout.write(render(report, args.format))
    if args.format == "text":
        scope = "all namespaces" if namespaces is None else f"{len(namespaces)} namespaces"
        print(f"{summary_line(report)} in {scope}", file=sys.stderr)
    return report.exit_code


def cmd_nodes(args: argparse.Namespace) -> int:
    from webhook.batch.nodes import build, render, summary_line
    from webhook.cluster.client import ClusterError
    from webhook.cluster.configz import NodeConfig, NodeInfo, NodeReader
    from webhook.cluster.pinning import valid_pool_label

    if args.names and args.selector is not None:
        _err("nodes: give node names or -l SELECTOR, not both")
        return EXIT_USAGE
    pool_labels = args.pool_label or list(DEFAULT_POOL_LABELS)
    bad = [label for label in pool_labels if not valid_pool_label(label)]
    if bad:
        _err(f"nodes: --pool-label {bad[0]!r} is not a label key (or PREFIX/* for every key under a prefix)")
        return EXIT_USAGE
    errors: list[str] = []
    try:
        reader = NodeReader(args.kubeconfig, args.context)
        if args.names:
            found = {name: reader.get(name) for name in dict.fromkeys(args.names)}
            nodes = [n for n in found.values() if isinstance(n, NodeInfo)]
            missing = [NodeConfig(NodeInfo(name), error=n) for name, n in found.items() if isinstance(n, str)]
        else:
            nodes, missing = reader.select(args.selector), []
            if not nodes:
                errors.append(f"no node matches -l {args.selector}" if args.selector else "the cluster has no node")
        configs = reader.read(nodes) + missing
    except ClusterError as exc:
        hint = "; listing nodes needs list on nodes (the ClusterRole in the README)" if "403" in str(exc) else ""
        _err(f"nodes: {exc}{hint}")
        return EXIT_USAGE
    report = build(sorted(configs, key=lambda c: c.node.name), pool_labels, errors)
    sys.stdout.write(render(report, args.format))
    if args.format == "text":
        print(summary_line(report), file=sys.stderr)
    return report.exit_code


def cmd_policy(args: argparse.Namespace) -> int:
    from webhook.policies.generate import PolicyError, render

    config = load_config(args.config)
    try:
        text = render(config, args.mode, args.namespace, args.api_version)
    except PolicyError as exc:
        _err(f"policy: {exc}")
        return EXIT_USAGE
    sys.stdout.write(text)
    return EXIT_OK


def _node_paths(args: argparse.Namespace) -> tuple[Path, Path, Path]:
    sys_root = Path(args.sys_root)
    cgroup_root = Path(args.cgroup_root) if args.cgroup_root else sys_root / "fs" / "cgroup"
    return Path(args.pod_resources_socket), sys_root, cgroup_root


def cmd_agent(args: argparse.Namespace) -> int:
    import os

    from webhook.cluster.client import ClusterError
    from webhook.cluster.reports import FLAVOURS
    from webhook.node.agent import AgentOptions, run_agent

    node = args.node or os.environ.get("NODE_NAME", "")
    if not node:
        _err("agent: no node name: pass --node or set NODE_NAME (the chart sets it from spec.nodeName)")
        return EXIT_USAGE
    if args.interval < 1:
        _err("agent: --interval must be at least 1 second")
        return EXIT_USAGE
    host, _, port = args.metrics_bind.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        _err(f"agent: --metrics-bind {args.metrics_bind!r} is not HOST:PORT")
        return EXIT_USAGE
    config = load_config(args.config)
    socket, sys_root, cgroup_root = _node_paths(args)
    opts = AgentOptions(node=node, socket=socket, sys_root=sys_root, cgroup_root=cgroup_root,
                        interval=args.interval, metrics_host=host.strip("[]") or "0.0.0.0", metrics_port=int(port),
                        kubeconfig=args.kubeconfig, report=FLAVOURS[args.report] if args.report else None,
                        fractional_allowed=tuple(config.policy.fractional_cpu_containers),
                        events=not args.no_events)
    try:
        return run_agent(opts)
    except ClusterError as exc:
        _err(f"agent: {exc}")
        return EXIT_USAGE
    except OSError as exc:  # the metrics port
        _err(f"agent: cannot listen on {args.metrics_bind}: {exc.strerror or exc} (--metrics-bind)")
        return EXIT_USAGE


def cmd_verify(args: argparse.Namespace) -> int:
    from webhook.cluster.client import ClusterError, Lister
    from webhook.node.kubelet import PodResourcesClient, PodResourcesError
    from webhook.node.observe import observe
    from webhook.node.sysfs import SysfsError
    from webhook.node.verify import render_json, render_text, summary_line

    only: list[tuple[str, str]] = []
    for ref in args.pods:
        ns, sep, name = ref.partition("/")
        if not sep or not ns or not name or "/" in name:
            _err(f"verify: {ref!r} is not NAMESPACE/POD")
            return EXIT_USAGE
        only.append((ns, name))
    config = load_config(args.config)
    socket, sys_root, cgroup_root = _node_paths(args)
    try:
        api = Lister(args.kubeconfig)
        with PodResourcesClient(socket) as kubelet:
            snap = observe(kubelet, api, sys_root, cgroup_root, args.node or None, only or None,
                           config.policy.fractional_cpu_containers)
    except (PodResourcesError, SysfsError, ClusterError) as exc:
        _err(f"verify: {exc}")
        return EXIT_USAGE
    sys.stdout.write(render_json(snap) if args.format == "json" else render_text(snap))
    if args.format == "text":
        print(summary_line(snap), file=sys.stderr)
    if any(p.problems for p in snap.placements):
        return EXIT_VIOLATIONS
    return EXIT_USAGE if snap.errors else EXIT_OK


class _TerminalProgress:
    """One self-overwriting status line on stderr, so a large cluster does not look hung."""

    def __init__(self) -> None:
        self._shown = False

    def __call__(self, count: int, namespace: str, kind: str) -> None:
        if count % 50 == 1:
            print(f"\r\033[Kqos-guard: audit: {count} objects read ({namespace} {kind})", end="",
                  file=sys.stderr, flush=True)
            self._shown = True

    def done(self) -> None:
        if self._shown:
            print("\r\033[K", end="", file=sys.stderr, flush=True)


CHECK_EXIT_CODES = """exit codes:
  0  every object judged is compliant (in --mode warn: always, unless 2 applies)
  1  a violation was found (never in --mode warn)
  2  wrong usage, an input that could not be read (named with its line; the rest is still checked), or
     nothing to judge: no Pod or workload found (pass --allow-empty to accept that)"""

FIX_EXIT_CODES = """exit codes:
  0  every object is compliant now (or would be, with --dry-run)
  1  violations are left that the mutation cannot fix (each line says why, and which setting would fix it)
  2  wrong usage, or a file that could not be read or written (it is left unchanged)"""

EXIT_CODES = """exit codes: 0 success; 1 violations found (check, audit, fix); 2 wrong usage, bad configuration or an
input that could not be read. `qos-guard COMMAND --help` says what each command returns."""


def _command(sub: Any, name: str, summary: str, epilog: str | None = None) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(name, help=summary, description=summary, epilog=epilog,
                                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    return parser


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
    check.add_argument("--format", choices=FORMATS, default="text",
                       help="text (file:line: Kind/name: rule: message), json, sarif (2.1.0, code scanning), "
                            "junit (one test case per object) or github (workflow annotations) (default text)")
    check.add_argument("--allow-empty", action="store_true",
                       help="exit 0 when no Pod or workload is found (a pre-commit hook given only other "
                            "files); by default that is exit 2, so a wrong path in CI does not pass")
    check.add_argument("--kubeconfig", help="with policy.numa: auto, judge NUMA fit against this cluster's "
                                            "NodeResourceTopology objects and node labels")
    check.set_defaults(func=cmd_check)

    fix = _command(sub, "fix", "rewrite manifest files so their Pods are Guaranteed with whole CPUs where that "
                               "is safe (requests set to limits), keeping comments and layout", FIX_EXIT_CODES)
    fix.add_argument("paths", nargs="+", metavar="PATH",
                     help="file or folder (recursive: .yaml, .yml, .json) to fix in place")
    fix.add_argument("--output", metavar="DIR", help="write fixed copies here instead of in place")
    fix.add_argument("--dry-run", action="store_true",
                     help="write nothing: print a unified diff of what would change on stdout (apply it with "
                          "patch -p1 or git apply), the changes and what is left on stderr")
    fix.add_argument("--config", help="configuration file (docs/contract.md#configuration)")
    fix.set_defaults(func=cmd_fix)

    serve = _command(sub, "serve", "run the admission webhook (gunicorn, TLS)",
                     "exit codes:\n  0  stopped by SIGTERM or SIGINT (requests in flight finished)\n"
                     "  2  wrong usage, bad configuration, unusable certificate files or a port in use")
    add_serve_arguments(serve)
    serve.set_defaults(func=cmd_serve)

    certs = _command(sub, "certs", "write a CA and a serving certificate; print the caBundle",
                     "exit codes:\n  0  written (and patched)\n  2  wrong usage, or --patch-webhooks failed")
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
    audit.add_argument("--format", choices=FORMATS, default="text")
    audit.add_argument("--kubeconfig", help="kubeconfig (default: in-cluster, else $KUBECONFIG or ~/.kube/config)")
    audit.add_argument("--page-size", type=int, default=500, help="objects per list request (default 500)")
    audit.add_argument("--report", choices=["openreports", "policyreport"],
                       help="also write the findings into the cluster, one report per namespace, replaced on "
                            "each run: openreports.io/v1alpha1 Report, or wgpolicyk8s.io/v1alpha2 PolicyReport")
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
    nodes.add_argument("--format", choices=FORMATS, default="text")
    nodes.add_argument("--kubeconfig", help="kubeconfig (default: in-cluster, else $KUBECONFIG or ~/.kube/config)")
    nodes.add_argument("--context", help="the kubeconfig context to use (default: its current context)")
    nodes.set_defaults(func=cmd_nodes)

    policy = _command(sub, "policy", "print ValidatingAdmissionPolicy and MutatingAdmissionPolicy YAML enforcing "
                                     "the rules inside the API server (no webhook)",
                      "exit codes:\n  0  printed\n  2  wrong usage, bad configuration, or a setting CEL cannot "
                      "express (named)")
    policy.add_argument("--config", help="configuration file (docs/contract.md#configuration)")
    policy.add_argument("--mode", choices=["enforce", "mutate", "warn", "all"], default="all",
                        help="which namespace mode's policies to print (default all)")
    policy.add_argument("--api-version", choices=["v1"], default="v1",
                        help="admissionregistration.k8s.io version (v1: Kubernetes 1.36 and later)")
    policy.add_argument("--namespace", default="qos-guard",
                        help="namespace of the parameters ConfigMap, never judged (default qos-guard)")
    policy.set_defaults(func=cmd_policy)

    def node_flags(p: argparse.ArgumentParser) -> None:
        p.add_argument("--pod-resources-socket", default="/var/lib/kubelet/pod-resources/kubelet.sock",
                       help="kubelet's PodResources socket (default /var/lib/kubelet/pod-resources/kubelet.sock)")
        p.add_argument("--sys-root", default="/sys", help="where the host's sysfs is (default /sys)")
        p.add_argument("--cgroup-root", help="where the host's cgroup hierarchy is (default SYS_ROOT/fs/cgroup)")
        p.add_argument("--kubeconfig", help="kubeconfig (default: in-cluster, else $KUBECONFIG or ~/.kube/config)")
        p.add_argument("--config", help="configuration file: policy.fractionalCPUContainers run in the shared "
                                        "pool by choice and are not a problem")

    agent = sub.add_parser("agent", help="node agent (DaemonSet): metrics, Events and reports on where kubelet "
                                         "placed each pinned container")
    node_flags(agent)
    agent.add_argument("--node", help="this node's name (default $NODE_NAME)")
    agent.add_argument("--interval", type=float, default=30, help="seconds between looks (default 30)")
    agent.add_argument("--metrics-bind", default="0.0.0.0:8080", help="plain HTTP /metrics (default 0.0.0.0:8080)")
    agent.add_argument("--report", choices=["openreports", "policyreport"],
                       help="also write results, one report per namespace and node, replaced when they change")
    agent.add_argument("--no-events", action="store_true", help="no Kubernetes Events on the Pods")
    agent.set_defaults(func=cmd_agent)

    verify = sub.add_parser("verify", help="on a node: is each pinned container exclusive and on one NUMA node "
                                           "with its memory and devices?")
    node_flags(verify)
    verify.add_argument("pods", nargs="*", metavar="NAMESPACE/POD",
                        help="only these Pods (read with PodResources Get); default every Pod of an opted-in "
                             "namespace on this node")
    verify.add_argument("--node", help="this node's name (default: the Pods kubelet lists, matched by name)")
    verify.add_argument("--format", choices=["text", "json"], default="text")
    verify.set_defaults(func=cmd_verify)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except ConfigError as exc:
        _err(f"invalid configuration: {exc}")
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    return code


if __name__ == "__main__":
    sys.exit(main())
