"""What each ``qos-guard`` command does with its parsed arguments: one call into the layer that does the work,
and the exit code."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webhook.batch.formats import render, render_nodes
from webhook.batch.report import Location, Report, numbered, skipped_text, summary_line
from webhook.batch.runner import check_paths, fix_paths
from webhook.cli.flags import with_flags
from webhook.core.config import Config
from webhook.core.engine import Mode
from webhook.core.facts import NO_FACTS
from webhook.core.kubeletpinning import DEFAULT_POOL_LABELS
from webhook.core.kubeversion import DEFAULT
from webhook.core.outcome import ExitCode, Refused
from webhook.manifests.configfile import load_config

if TYPE_CHECKING:
    from webhook.serving.options import ServeOptions



def err(message: str) -> None:
    print(f"qos-guard: {message.removeprefix('qos-guard: ')}", file=sys.stderr)  # said once, whoever said it


def _nothing_to_judge(paths: Sequence[str], report: Report) -> str:
    """Why a run that judged no object fails, and the way out (a wrong path in CI must not pass)."""
    skipped = f" (skipped: {skipped_text(report.skipped)})" if report.skipped else ""
    hint = ("; an AdmissionReview is what the webhook receives: send it to `qos-guard serve`, or check the "
            "object in its request.object" if "AdmissionReview" in report.skipped else "")
    return (f"nothing to judge: no Pod or workload in {', '.join(paths)}{skipped}{hint}; check the paths, or "
            "pass --allow-empty where finding none is expected")


def configured(args: argparse.Namespace) -> Config:
    """``--config``'s configuration, with the flags that replace its keys (``webhook.cli.flags``)."""
    config = with_flags(load_config(args.config), args)
    if (kube := config.kubernetes_version) is not None and kube.note:  # a pre-release judges: said, every format
        err(f"{kube.note}; --kubernetes-version {DEFAULT.minor} judges with the newest released minor")
    return config


def cmd_check(args: argparse.Namespace) -> ExitCode:
    config = configured(args)
    facts = NO_FACTS
    said: list[tuple[str, str, str]] = []  # (rule, its notice, the message as said)
    # Files are judged with what the cluster holds beside them once --kubeconfig names one (its minor, the objects
    # operators build Pods from, its DRA claims): the builders' "run with --kubeconfig" is a way out that works.
    if args.kubeconfig or config.numa_auto or config.policy.device_classes:
        from webhook.batch.clusterfacts import cluster_facts, notice_rule

        def hear(message: str) -> None:  # the minor judged is said on stderr; what was not read is a notice
            if message.startswith("qos-guard: "):
                err(message.removeprefix("qos-guard: "))
            else:
                rule = notice_rule(message)
                said.append((rule, message.removeprefix(f"{rule}: "), message))

        facts = cluster_facts(config, args.kubeconfig, hear, required=False, version=args.kubernetes_version is None)
    # What could not be read from the cluster is judged fail-open (numa-unfit silent) but never silently: a
    # notice, counted in the summary (a CI job sees "1 notice" where it expected NUMA to be judged).
    where = Location(args.kubeconfig or "cluster")
    notices = [(where, rule, notice) for rule, notice, _ in said]
    if args.format == "text":
        report = check_paths(args.paths, config, Mode(args.mode), stream=print, facts=facts, notices=notices,
                             exclude=args.exclude)
        print(summary_line(report), file=sys.stderr)
    else:
        for _, _, message in said:
            err(message)
        report = check_paths(args.paths, config, Mode(args.mode), facts=facts, notices=notices,
                             exclude=args.exclude)
    if report.shipped:  # said as the webhook says it with policy.operatorObjects: false
        err(f"{skipped_text(report.shipped)} judged with KServe's shipped inferenceservice-config (neither the "
            "input nor a cluster gave one): add it to the input, or --kubeconfig reads the cluster's")
    empty = not report.counts.objects and not report.counts.errors and not args.allow_empty
    if empty and args.format != "text":  # machine-read formats carry it too, as an input error
        report.add_error(Location(args.paths[0], 0), _nothing_to_judge(args.paths, report))
    if args.format != "text":
        sys.stdout.write(render(report, args.format))
    if empty:
        err(_nothing_to_judge(args.paths, report))
        return ExitCode.USAGE
    return report.exit_code


def cmd_fix(args: argparse.Namespace) -> ExitCode:
    if "-" in args.paths:
        if len(args.paths) > 1 or args.output:
            err("fix: - (standard input to standard output, a filter) is given alone, without --output")
            return ExitCode.USAGE
        from webhook.batch.fix_stdin import main_stdin

        tally = main_stdin(configured(args), args.dry_run)
    else:
        tally = fix_paths(args.paths, configured(args), Path(args.output) if args.output else None,
                          _err_line if args.dry_run else print, dry_run=args.dry_run, print_diff=_write_out)
    print(tally.summary(), file=sys.stderr)
    empty = tally.nothing_to_fix(args.paths)
    if empty is not None and not args.allow_empty:  # as check: a run that judged nothing fails
        err(empty)
        return ExitCode.USAGE
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
        err(str(exc))
        return ExitCode.USAGE


def cmd_extender(args: argparse.Namespace) -> ExitCode:
    from webhook.serving.extender import serve_extender
    from webhook.serving.extender_options import ExtenderOptions
    from webhook.serving.options import ServeError

    try:
        serve_extender(ExtenderOptions(args.bind, args.plain, args.cert_file, args.key_file, args.kubeconfig,
                                       args.reservation_timeout, args.client_ca_file))
    except ServeError as exc:
        err(str(exc))
        return ExitCode.USAGE
    return ExitCode.OK


def cmd_certs(args: argparse.Namespace) -> ExitCode:
    from webhook.serving.certs import (
        CertError,
        ca_bundle,
        check_folder,
        check_names,
        reissue_serving,
        service_sans,
        write_bundle,
    )

    if args.days < 1:
        err("--days must be at least 1")
        return ExitCode.USAGE
    extra = [n for n in args.extra_san if n]
    folder = Path(args.output_dir)
    try:
        check_names(args.service, args.namespace, extra)
        check_folder(folder, replace=args.force or args.renew)
        if args.patch_webhooks and not _webhooks_found(args):  # before anything is written: a retry starts afresh
            return ExitCode.USAGE
        names = service_sans(args.service, args.namespace) + extra
        if args.renew:
            if not (folder / "ca.key").is_file():
                raise CertError(f"--renew needs the CA's key, {folder / 'ca.key'}, which is not there; without it "
                                "only a new CA (--force) can sign a certificate")
            paths = reissue_serving(folder, names, args.days)
        else:
            paths = write_bundle(folder, names, args.days, keep_ca_key=True)
    except CertError as exc:
        err(str(exc))
        return ExitCode.USAGE
    except (OSError, ValueError) as exc:
        where = getattr(exc, "filename", None) or folder
        err(f"cannot write the certificates to {where}: {getattr(exc, 'strerror', None) or exc}; choose another "
            "--output-dir")
        return ExitCode.USAGE
    written = [paths.ca, paths.ca_key, paths.cert, paths.key] if not args.renew else [paths.cert, paths.key]
    print(f"qos-guard: wrote {', '.join(str(p) for p in written if p)} "
          f"(SANs {', '.join(names)}; valid {args.days} days{'; the CA kept' if args.renew else ''})",
          file=sys.stderr)
    bundle = ca_bundle(paths.ca)
    print(bundle)
    if args.patch_webhooks:
        from webhook.cluster.client import ClusterError, patch_ca_bundle
        from webhook.cluster.kubeconfig import explain

        try:
            patched = patch_ca_bundle(bundle, args.patch_webhooks, kubeconfig=args.kubeconfig)
        except ClusterError as exc:
            again = "--renew" if args.renew else "--force"
            err(f"--patch-webhooks: {explain(exc, args.kubeconfig)}; the certificates above are written: run "
                f"the same command again with {again} once the API server answers")
            return ExitCode.USAGE
        print(f"qos-guard: caBundle written into {', '.join(patched)}", file=sys.stderr)
    return ExitCode.OK


def _webhooks_found(args: argparse.Namespace) -> bool:
    """``certs --patch-webhooks``: the API server answers and has every named configuration (said when not)."""
    from webhook.cluster.client import ClusterError, find_webhooks
    from webhook.cluster.kubeconfig import explain, preflight

    try:
        preflight(args.kubeconfig)
        find_webhooks(args.patch_webhooks, kubeconfig=args.kubeconfig)
    except ClusterError as exc:
        err(f"--patch-webhooks: {explain(exc, args.kubeconfig)}; nothing was written to {args.output_dir}")
        return False
    return True


def cmd_audit(args: argparse.Namespace) -> ExitCode:
    from webhook.batch.audit import audit_cluster

    config = with_flags(load_config(args.config), args)
    if args.page_size < 1:
        err("--page-size must be at least 1")
        return ExitCode.USAGE
    progress = _TerminalProgress() if sys.stderr.isatty() else None
    try:
        run = audit_cluster(config, args.kubeconfig, Mode(args.mode), namespaces=args.namespace or (),
                            all_namespaces=args.all_namespaces, page_size=args.page_size, report=args.report,
                            progress=progress, say=err, context=args.context)
    except Refused as exc:
        err(f"audit: {exc}")
        if args.format != "text":  # a SARIF upload or a JSON reader gets a valid file naming the failure
            failed = Report(Mode(args.mode))
            failed.add_error(Location("(cluster)"), f"audit: {exc}")
            sys.stdout.write(render(failed, args.format))
        return ExitCode.USAGE
    finally:
        if progress is not None:
            progress.done()
    if run.flavour is not None and run.written is not None:
        going = run.written.terminating
        print(f"qos-guard: {run.flavour.kind} written in {numbered(len(run.written.applied), 'namespace')}, "
              f"{len(run.written.deleted)} stale deleted"
              + (f", none written in {', '.join(going)} (being deleted)" if going else ""), file=sys.stderr)
    sys.stdout.write(render(run.report, args.format))
    if args.format == "text":
        scope = "all namespaces" if run.namespaces is None else numbered(len(run.namespaces), "namespace")
        print(summary_line(run.report, f" in {scope}"), file=sys.stderr)
    return run.report.exit_code


def cmd_nodes(args: argparse.Namespace) -> ExitCode:
    from webhook.batch.nodes import read_nodes, summary_line
    from webhook.core.kubeletpinning import valid_pool_label

    if args.names and args.selector is not None:
        err("nodes: give node names or -l SELECTOR, not both")
        return ExitCode.USAGE
    pool_labels = args.pool_label or list(DEFAULT_POOL_LABELS)
    bad = [label for label in pool_labels if not valid_pool_label(label)]
    if bad:
        err(f"nodes: --pool-label {bad[0]!r} is not a label key (or PREFIX/* for every key under a prefix)")
        return ExitCode.USAGE
    try:
        report = read_nodes(args.kubeconfig, args.context, args.names, args.selector, pool_labels)
    except Refused as exc:
        err(f"nodes: {exc}")
        if args.format != "text":  # as audit: the format's own error record, never an empty file
            from webhook.batch.nodes import NodesReport

            sys.stdout.write(render_nodes(NodesReport([], errors=[f"nodes: {exc}"]), args.format))
        return ExitCode.USAGE
    sys.stdout.write(render_nodes(report, args.format))
    if args.format == "text":
        print(summary_line(report), file=sys.stderr)
    return report.exit_code


def cmd_policy(args: argparse.Namespace) -> ExitCode:
    from webhook.policies.generate import PolicyError, render

    config = configured(args)
    try:
        text = render(config, args.mode, args.namespace, args.api_version)
    except PolicyError as exc:
        err(f"policy: {exc}")
        return ExitCode.USAGE
    sys.stdout.write(text)
    return ExitCode.OK


def _share_error(command: str, args: argparse.Namespace) -> bool:
    """True (and the message printed) when --remote-memory-share is not a share."""
    share = args.remote_memory_share
    if not 0 <= share < 1:  # NaN too
        err(f"{command}: --remote-memory-share {share!r} is not a share from 0 to under 1 (0.10 is 10 %)")
        return True
    return False


def _node_paths(args: argparse.Namespace) -> tuple[Path, Path, Path]:
    sys_root = Path(args.sys_root)
    cgroup_root = Path(args.cgroup_root) if args.cgroup_root else sys_root / "fs" / "cgroup"
    return Path(args.pod_resources_socket), sys_root, cgroup_root


def _dra_attributes(args: argparse.Namespace, command: str) -> tuple[str, ...] | None:
    """The --dra-numa-attribute names (the defaults when none is given); None, said, when one is not a name."""
    from webhook.node.dra_locality import DEFAULT_DRIVER_ATTRIBUTES, check_attribute_names

    names = tuple(args.dra_numa_attribute or DEFAULT_DRIVER_ATTRIBUTES)
    problem = check_attribute_names(names)
    if problem:
        err(f"{command}: --dra-numa-attribute {problem}")
        return None
    return names


def _topology_options(args: argparse.Namespace) -> Any:
    """The agent's ``--publish-topology`` options (None without it), or what is wrong with them."""
    import os

    from webhook.node.agent import TopologyOptions

    given = [f for f in ("topology_manager_policy", "topology_manager_scope") if getattr(args, f) is not None]
    if not args.publish_topology:
        if given or args.topology_poll != 0.25:
            return "--topology-poll and --topology-manager-policy/--topology-manager-scope need --publish-topology"
        return None
    if len(given) == 1:
        return ("give --topology-manager-policy and --topology-manager-scope together (or neither: both are then "
                "read from kubelet's configz)")
    if not 0.05 <= args.topology_poll <= 60:
        return f"--topology-poll {args.topology_poll:g}: must be between 0.05 and 60 seconds"
    if not 0 < args.kubelet_port < 65536:
        return f"--kubelet-port {args.kubelet_port}: not a port (kubelet's is 10250 unless its configuration says)"
    address = args.kubelet_address or os.environ.get("NODE_IP") or "127.0.0.1"
    return TopologyOptions(args.topology_poll, args.topology_manager_policy, args.topology_manager_scope,
                           address, args.kubelet_port, Path(args.kubelet_ca) if args.kubelet_ca else None)


def cmd_agent(args: argparse.Namespace) -> int:
    import os

    from webhook.cluster.client import ClusterError
    from webhook.cluster.reports import FLAVOURS
    from webhook.node.agent import AgentOptions, run_agent

    node = args.node or os.environ.get("NODE_NAME", "")
    if not node:
        err("agent: no node name: pass --node or set NODE_NAME (the chart sets it from spec.nodeName)")
        return ExitCode.USAGE
    if args.interval < 1:
        err("agent: --interval must be at least 1 second")
        return ExitCode.USAGE
    host, _, port = args.metrics_bind.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        err(f"agent: --metrics-bind {args.metrics_bind!r} is not HOST:PORT")
        return ExitCode.USAGE
    if _share_error("agent", args):
        return ExitCode.USAGE
    topology = _topology_options(args)
    if isinstance(topology, str):
        err(f"agent: {topology}")
        return ExitCode.USAGE
    config = load_config(args.config)
    socket, sys_root, cgroup_root = _node_paths(args)
    attributes = _dra_attributes(args, "agent")
    if attributes is None:
        return ExitCode.USAGE
    opts = AgentOptions(node=node, socket=socket, sys_root=sys_root, cgroup_root=cgroup_root,
                        interval=args.interval, metrics_host=host.strip("[]") or "0.0.0.0", metrics_port=int(port),
                        kubeconfig=args.kubeconfig, report=FLAVOURS[args.report] if args.report else None,
                        fractional_allowed=tuple(config.policy.fractional_cpu_containers),
                        events=not args.no_events, dra_attributes=attributes,
                        remote_share=args.remote_memory_share, topology=topology)
    from webhook.cluster.kubeconfig import explain, preflight

    try:
        preflight(args.kubeconfig)
        return run_agent(opts)
    except ClusterError as exc:
        err(f"agent: {explain(exc, args.kubeconfig)}")
        return ExitCode.USAGE
    except OSError as exc:  # the metrics port
        err(f"agent: cannot listen on {args.metrics_bind}: {exc.strerror or exc} (--metrics-bind)")
        return ExitCode.USAGE


def cmd_verify(args: argparse.Namespace) -> ExitCode:
    from webhook.node.verify import exit_code, render_error, render_json, render_text, summary_line, verify

    only: list[tuple[str, str]] = []
    for ref in args.pods:
        ns, sep, name = ref.partition("/")
        if not sep or not ns or not name or "/" in name:
            err(f"verify: {ref!r} is not NAMESPACE/POD")
            return ExitCode.USAGE
        only.append((ns, name))
    if _share_error("verify", args):
        return ExitCode.USAGE
    config = load_config(args.config)
    socket, sys_root, cgroup_root = _node_paths(args)
    attributes = _dra_attributes(args, "verify")
    if attributes is None:
        return ExitCode.USAGE
    try:
        snap = verify(args.kubeconfig, socket, sys_root, cgroup_root, args.node or None, only,
                      config.policy.fractional_cpu_containers, attributes, args.remote_memory_share)
    except Refused as exc:
        err(f"verify: {exc}")  # in JSON too, as audit and nodes: the format's own error record, never nothing
        sys.stdout.write(render_error(f"verify: {exc}") if args.format == "json" else "")
        return ExitCode.USAGE
    sys.stdout.write(render_json(snap) if args.format == "json" else render_text(snap))
    if args.format == "text":
        print(summary_line(snap), file=sys.stderr)
    return exit_code(snap)


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
