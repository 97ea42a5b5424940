"""A real node beside the end-to-end control plane: containerd (runc), a kubelet with the static CPU Manager,
kube-scheduler and kube-controller-manager, all built by ``hack/build-tools.sh``; images built by
``hack/node-images.sh`` and imported into containerd (nothing is pulled). ``running_node`` starts it all and, on
exit, stops it and removes what it made on the host: Pods, containers, mounts, cgroups, the bridge, network
namespaces and CNI state.

Run ``python -m tests.node.node`` to start a node by hand (it prints a kubeconfig and waits for Ctrl-C).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests
import yaml

from tests import waiting
from tests.binaries import ROOT, binary, kube_version
from tests.e2e.conftest import Cluster, control_plane, stop_process, wait_until_ready
from tests.serving import free_port
from webhook import __version__

NODE_NAME = "qos-guard-node"
BRIDGE = "qgnode0"
POD_SUBNET = "10.244.77.0/24"
CNI_NETWORK = "qos-guard-node"
WEBHOOK_TAG = __version__  # the tag make node-tools builds the image with
RESERVED_CPU = "100m"  # systemReserved: the static policy keeps ceil(0.1) = 1 CPU out of exclusive use
CGROUP_V1 = Path("/sys/fs/cgroup")
# What the tier writes on the host's disk (containerd's root with the imported images, the Pods' logs, etcd)
# with room to spare; below it the node fixture refuses to start and says how much is free where.
MIN_FREE_DISK = 4 << 30
NODE_TOOLS = ("kubelet", "kube-controller-manager", "kube-scheduler", "containerd", "containerd-shim-runc-v2",
              "ctr", "cni-bridge", "cni-host-local", "cni-loopback")
# kubelet's device plugin registration socket is here whatever its --root-dir (pluginapi.KubeletSocket).
DEVICE_PLUGINS = Path("/var/lib/kubelet/device-plugins")


def why_not() -> str | None:
    """Why this machine cannot run the node, or None if it can."""
    if os.geteuid() != 0:
        return "needs root (kubelet, containerd and runc manage cgroups, mounts and network namespaces)"
    if not Path("/proc/self/ns/net").exists():
        return "no namespaces in this kernel"
    if not (CGROUP_V1 / "cpuset").is_dir() and not (CGROUP_V1 / "cgroup.controllers").exists():
        return "no cpuset cgroup controller"
    return None


def _run(*args: str, check: bool = True, timeout: float = 600, **kw: Any) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc


# kubelet's checkpoints that refuse a restart with other settings ("configured policy ... differs from state
# checkpoint policy", a reserved CPU missing from defaultCpuSet), and the settings each one records.
# featureGates too: kubelet v1.36.3 started with PodLevelResourceManagers on writes a CPU Manager checkpoint that
# the same kubelet with the gate off refuses ("checkpoint is corrupted, please drain this node and delete ...").
STATE_FILES = {
    "cpu_manager_state": ("cpuManagerPolicy", "cpuManagerPolicyOptions", "reservedSystemCPUs", "systemReserved",
                          "kubeReserved", "featureGates"),
    "memory_manager_state": ("memoryManagerPolicy", "reservedMemory", "systemReserved", "kubeReserved",
                             "evictionHard", "featureGates"),
}


@dataclass
class Kubelet:
    """How the node's kubelet was started: the first configuration (what ``restart_kubelet()`` with no
    arguments returns to), the one it runs now, and its process."""

    binary: str
    args: list[str]  # after the binary: --config, --kubeconfig, --root-dir, ...
    env: dict[str, str]
    base_config: dict[str, Any]
    config: dict[str, Any]
    process: subprocess.Popen[bytes] | None = None
    extra_args: tuple[str, ...] = ()
    wrapper: tuple[str, ...] = ()


@dataclass
class Node:
    """The running node: its control plane, where its state lives and what it was configured with."""

    cluster: Cluster
    folder: Path
    kubelet_root: Path
    images: dict[str, str]  # role -> image name
    kubelet: Kubelet
    procs: dict[str, subprocess.Popen[bytes]]  # what _shutdown stops; "kubelet" follows restarts

    @property
    def pod_resources_socket(self) -> Path:
        return self.kubelet_root / "pod-resources" / "kubelet.sock"

    def cpu_manager_state(self) -> dict[str, Any]:
        state: dict[str, Any] = json.loads((self.kubelet_root / "cpu_manager_state").read_text())
        return state

    def memory_manager_state(self) -> dict[str, Any]:
        state: dict[str, Any] = json.loads((self.kubelet_root / "memory_manager_state").read_text())
        return state

    def restart_kubelet(self, overrides: dict[str, Any] | None = None, args: Sequence[str] = (),
                        wrapper: Sequence[str] = (), clean_state: bool | None = None,
                        timeout: float = 180) -> dict[str, Any]:
        """Stop the kubelet and start it again with the first configuration plus ``overrides`` (a key set to
        None is removed; overrides never accumulate, so ``restart_kubelet()`` restores the original), then wait
        until the Node is Ready again by the new process's heartbeat. Running Pods keep running.

        ``args`` are extra command-line flags; ``wrapper`` is a command the kubelet runs under, its command
        line appended (e.g. ``["unshare", "--mount", "--", "sh", "-c", 'mount ... && exec "$@"', "kubelet"]``).
        ``clean_state``: delete the CPU/Memory Manager checkpoints (``STATE_FILES``) first; by default only
        those whose recorded settings change, which kubelet would otherwise refuse to start with (drain the
        node first when Pods hold exclusive CPUs: their assignment is forgotten). Returns the configuration.
        """
        k = self.kubelet
        config = copy.deepcopy(k.base_config)
        for key, value in (overrides or {}).items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        if k.process is not None:
            _stop_group(k.process)
        for state, keys in STATE_FILES.items():
            changed = any(config.get(key) != k.config.get(key) for key in keys)
            if clean_state or (clean_state is None and changed):
                (self.kubelet_root / state).unlink(missing_ok=True)
        k.config, k.extra_args, k.wrapper = config, tuple(args), tuple(wrapper)
        (self.folder / "kubelet.yaml").write_text(yaml.safe_dump(config))
        stopped = time.time()
        k.process = self.procs["kubelet"] = _start(
            "kubelet", [*k.wrapper, k.binary, *k.args, *k.extra_args], self.folder, k.env, append=True)
        wait_until_ready("kubelet Node Ready after restart",
                         lambda: _ready_node(self.cluster, after=stopped) and self.pod_resources_socket.exists(),
                         k.process, self.folder / "kubelet.log", timeout=timeout)
        return config

    @contextlib.contextmanager
    def kubelet_configured(self, overrides: dict[str, Any], args: Sequence[str] = (),
                           wrapper: Sequence[str] = ()) -> Iterator[dict[str, Any]]:
        """The kubelet restarted with ``overrides`` for the block, then restarted with its first configuration
        (whatever the block raised, and also when the kubelet never got Ready with ``overrides``), so the next
        test sees the node as it was."""
        try:
            yield self.restart_kubelet(overrides, args, wrapper)
        finally:
            self.restart_kubelet()


def fake_numa_wrapper(fake_node_folder: Path) -> list[str]:
    """A ``restart_kubelet`` wrapper: the kubelet in a mount namespace of its own in which ``fake_node_folder``
    stands for /sys/devices/system/node (cadvisor reads the machine's NUMA layout there, and no flag moves it).
    The kubelet's root folder is a shared mount (``running_node``), so the volumes it mounts still reach
    containerd."""
    script = 'mount --bind "$0" /sys/devices/system/node && exec "$@"'
    return ["unshare", "--mount", "--propagation", "unchanged", "--", "sh", "-c", script, str(fake_node_folder)]


def _kubelet_config(folder: Path, port: int, healthz_port: int) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        # This machine's hierarchy is cgroup v1; kubelet >= 1.35 refuses it unless told (KEP-5573).
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{folder / 'containerd.sock'}",
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "port": port, "healthzPort": healthz_port, "healthzBindAddress": "127.0.0.1", "readOnlyPort": 0,
        "podLogsDir": str(folder / "pod-logs"),
        "volumePluginDir": str(folder / "volume-plugins"),
        "staticPodPath": "",
        "failSwapOn": False,
        # What the people this tool is for run: the static CPU Manager, Static Memory Manager and the
        # single-numa-node Topology Manager with container scope.
        "cpuManagerPolicy": "static",
        "cpuManagerReconcilePeriod": "2s",
        "systemReserved": {"cpu": RESERVED_CPU, "memory": "500Mi"},
        "memoryManagerPolicy": "Static",
        # Must equal systemReserved + kubeReserved + evictionHard memory, on the node's NUMA nodes.
        "reservedMemory": [{"numaNode": 0, "limits": {"memory": "600Mi"}}],
        # The node's disk is the host's, shared with whatever else runs there: as kind does, kubelet never evicts
        # for disk (0%), so a full host disk is the node fixture's clear refusal (MIN_FREE_DISK), not a test Pod
        # rejected as "The node had condition: [DiskPressure]" halfway through the tier.
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "0%", "imagefs.available": "0%",
                         "nodefs.inodesFree": "0%"},
        "topologyManagerPolicy": "single-numa-node",
        "topologyManagerScope": "container",
        # The images are imported, never pulled: never collect them.
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "nodeStatusUpdateFrequency": "2s",
        "syncFrequency": "5s",
    }


def _containerd_config(folder: Path, cni_bin: Path, cni_conf: Path, sandbox: str) -> str:
    return f"""version = 3
root = "{folder / 'containerd' / 'root'}"
state = "{folder / 'containerd' / 'state'}"
[grpc]
  address = "{folder / 'containerd.sock'}"
[ttrpc]
  address = "{folder / 'containerd.sock.ttrpc'}"
[plugins.'io.containerd.internal.v1.opt']
  path = "{folder / 'containerd' / 'opt'}"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{sandbox}"
[plugins.'io.containerd.cri.v1.runtime']
  netns_mounts_under_state_dir = true
  # No CAP_SYS_RESOURCE on this machine kind: runc cannot lower oom_score_adj to the kubelet's -998/-997 and the
  # sandbox fails ("failed to update /proc/self/oom_score_adj"); clamp to containerd's own score, as rootless does.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "{os.environ.get('QOS_GUARD_RUNC') or shutil.which('runc') or 'runc'}"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{cni_bin}"]
    conf_dir = "{cni_conf}"
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""


def _cni_config(folder: Path) -> dict[str, Any]:
    return {"cniVersion": "1.0.0", "name": CNI_NETWORK, "plugins": [{
        "type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False,
        "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_SUBNET}]],
                 "routes": [{"dst": "0.0.0.0/0"}], "dataDir": str(folder / "cni-ipam")}}]}


def build_images() -> dict[str, tuple[str, Path]]:
    """role -> (image name, docker-archive path), built (or reused from the cache) by hack/node-images.sh."""
    # KUBE_VERSION: the kube-scheduler image is the binary of the release the tiers run.
    proc = _run("bash", str(ROOT / "hack" / "node-images.sh"), WEBHOOK_TAG, timeout=1800,
                env={**os.environ, "KUBE_VERSION": kube_version()})
    images: dict[str, tuple[str, Path]] = {}
    for line in proc.stdout.splitlines():
        name, path = line.split("\t")
        role = name.rsplit("/", 1)[1].split(":")[0]
        images[role] = (name, Path(path))
    return images


def _start(what: str, args: list[str], folder: Path, env: dict[str, str] | None = None,
           append: bool = False) -> subprocess.Popen[bytes]:
    log = folder / f"{what}.log"
    with log.open("ab" if append else "wb") as out:
        if append:
            out.write(f"\n=== restarted: {' '.join(args)}\n".encode())
            out.flush()
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process's whole session (a wrapper that does not exec is stopped with it), SIGKILL after
    20 s."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _ready_node(c: Cluster, after: float | None = None) -> bool:
    """The Node is Ready; with ``after``, by a heartbeat later than that (epoch seconds): a stopped kubelet's
    last Ready status stays in the API for the node monitor's grace period."""
    proc = c.kubectl("get", "node", NODE_NAME, "-o", "json")
    if proc.returncode != 0:
        return False
    conditions = json.loads(proc.stdout)["status"].get("conditions", [])
    for x in conditions:
        if x["type"] == "Ready" and x["status"] == "True":
            if after is None:
                return True
            beat = datetime.strptime(x["lastHeartbeatTime"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
            return beat.timestamp() > int(after)
    return False


@contextlib.contextmanager
def running_node(folder: Path) -> Iterator[Node]:
    """Start the control plane, containerd, kubelet, scheduler and controller manager; tear all down on exit."""
    subprocess.run(["bash", str(ROOT / "hack" / "node-deps.sh")], check=True, timeout=900)
    tools = {name: binary(name) for name in NODE_TOOLS}
    images = build_images()
    folder.mkdir(parents=True, exist_ok=True)
    bin_dir, cni_bin, cni_conf = folder / "bin", folder / "cni" / "bin", folder / "cni" / "conf"
    for d in (bin_dir, cni_bin, cni_conf, folder / "pod-logs", folder / "volume-plugins"):
        d.mkdir(parents=True, exist_ok=True)
    (bin_dir / "containerd-shim-runc-v2").symlink_to(tools["containerd-shim-runc-v2"])
    for plugin in ("bridge", "host-local", "loopback"):
        (cni_bin / plugin).symlink_to(tools[f"cni-{plugin}"])
    (cni_conf / "10-qos-guard.conflist").write_text(json.dumps(_cni_config(folder)))
    (folder / "containerd.toml").write_text(
        _containerd_config(folder, cni_bin, cni_conf, images["pause"][0]))
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}")
    kubelet_root = folder / "kubelet"
    procs: dict[str, subprocess.Popen[bytes]] = {}
    # Webhook Services resolve to their EndpointSlices' Pod IPs (upstream cmd/kube-apiserver/app/server.go,
    # buildServiceResolver): there is no kube-proxy, and Pod IPs are routable from the API server's host.
    # It reaches the kubelet (exec, logs) at the Node's InternalIP: its name resolves nowhere.
    apiserver_args = ["--enable-aggregator-routing=true", "--kubelet-preferred-address-types=InternalIP"]
    with contextlib.ExitStack() as stack:
        stack.callback(_cleanup_host, folder)
        stack.callback(_cleanup_device_plugins)
        # A shared mount, so a kubelet restarted in a mount namespace of its own (restart_kubelet's fake NUMA
        # layout) still propagates the volumes it mounts here to containerd, which lives in this one.
        kubelet_root.mkdir(parents=True, exist_ok=True)
        _run("mount", "--bind", str(kubelet_root), str(kubelet_root))
        _run("mount", "--make-shared", str(kubelet_root))
        containerd = _start("containerd", [tools["containerd"], "--config", str(folder / "containerd.toml")],
                            folder, env)
        stack.callback(stop_process, containerd)
        stack.callback(_remove_containers, tools["ctr"], folder)
        wait_until_ready("containerd", lambda: (folder / "containerd.sock").exists(), containerd,
                         folder / "containerd.log")
        node_images = {}
        for role, (name, archive) in images.items():
            _run(tools["ctr"], "--address", str(folder / "containerd.sock"), "--namespace", "k8s.io",
                 "images", "import", str(archive))
            node_images[role] = name
        c = stack.enter_context(control_plane(folder / "control-plane", apiserver_args))
        # On exit, in this order: no controller recreates Pods, the kubelet deletes them, then it stops.
        stack.callback(_shutdown, procs, c, folder)
        pki = folder / "control-plane" / "pki"
        common = ["--kubeconfig", str(c.kubeconfig), "--leader-elect=false", "--bind-address=127.0.0.1"]
        procs["kube-controller-manager"] = _start("kube-controller-manager", [
            tools["kube-controller-manager"], *common, f"--secure-port={free_port()}",
            f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={pki / 'ca.crt'}",
            "--use-service-account-credentials=false", "--controllers=*"], folder)
        procs["kube-scheduler"] = _start("kube-scheduler", [
            tools["kube-scheduler"], *common, f"--secure-port={free_port()}"], folder)
        port, healthz_port = free_port(), free_port()
        config = _kubelet_config(folder, port, healthz_port)
        (folder / "kubelet.yaml").write_text(yaml.safe_dump(config))
        kubelet_args = [f"--config={folder / 'kubelet.yaml'}", f"--kubeconfig={c.kubeconfig}",
                        f"--root-dir={kubelet_root}", f"--hostname-override={NODE_NAME}", "--v=2",
                        # Its self-signed serving certificate, by default in /var/lib/kubelet/pki whatever --root-dir.
                        f"--cert-dir={folder / 'kubelet-pki'}"]
        procs["kubelet"] = kubelet = _start("kubelet", [tools["kubelet"], *kubelet_args], folder, env)
        wait_until_ready("kubelet Node Ready", lambda: _ready_node(c), kubelet, folder / "kubelet.log", timeout=180)
        kcm = procs["kube-controller-manager"]
        wait_until_ready("kube-controller-manager (default ServiceAccount)",
              lambda: c.kubectl("get", "serviceaccount", "default").returncode == 0, kcm,
              folder / "kube-controller-manager.log", timeout=120)
        yield Node(c, folder, kubelet_root, node_images,
                   Kubelet(tools["kubelet"], kubelet_args, env, config, copy.deepcopy(config), kubelet), procs)


def _shutdown(procs: dict[str, subprocess.Popen[bytes]], c: Cluster, folder: Path) -> None:
    """Controllers first (nothing recreates Pods), then every Pod deleted gracefully through the kubelet
    (which stops their containers and sandboxes and releases their network), then the kubelet."""
    for name in ("kube-controller-manager", "kube-scheduler"):
        if name in procs:
            stop_process(procs[name])
    kubelet = procs.get("kubelet")
    if kubelet is not None and kubelet.poll() is None:
        c.kubectl("delete", "pods", "--all", "--all-namespaces", "--grace-period=2", "--wait=false")
        left = ""

        def gone() -> bool:
            nonlocal left
            proc = c.kubectl("get", "pods", "--all-namespaces", "-o", "name")
            left = proc.stdout.strip() or proc.stderr.strip()
            return proc.returncode == 0 and not proc.stdout.strip()

        try:
            waiting.eventually("every Pod deleted through the kubelet", gone, within=90, every=1, seen=lambda: left)
        except AssertionError as exc:  # teardown goes on: _remove_containers and _cleanup_host force the rest
            print(f"\nnode teardown: {exc}; stopping the kubelet anyway", flush=True)
        time.sleep(3)  # the kubelet removes stopped sandboxes right after the Pod objects are gone
    if kubelet is not None:
        _stop_group(kubelet)


def _cleanup_device_plugins() -> None:
    """What kubelet (its registration socket, checkpoint) and the tests' device plugin left in the fixed
    /var/lib/kubelet/device-plugins; the folders themselves when nothing else is in them."""
    if DEVICE_PLUGINS.is_dir():
        for entry in DEVICE_PLUGINS.iterdir():
            if entry.name == "kubelet.sock" or entry.name.startswith(("qos-guard", "kubelet_internal_checkpoint")):
                entry.unlink(missing_ok=True)
    for folder in (DEVICE_PLUGINS, DEVICE_PLUGINS.parent):
        with contextlib.suppress(OSError):
            folder.rmdir()


def _remove_containers(ctr: str, folder: Path) -> None:
    """Whatever the kubelet left in containerd (only after a failure): kill its tasks, delete its containers."""
    base = [ctr, "--address", str(folder / "containerd.sock"), "--namespace", "k8s.io"]
    listed = subprocess.run([*base, "containers", "list", "--quiet"], capture_output=True, text=True, timeout=30)
    for cid in listed.stdout.split():
        subprocess.run([*base, "tasks", "kill", "--signal", "SIGKILL", cid], capture_output=True, timeout=30)
        subprocess.run([*base, "tasks", "delete", "--force", cid], capture_output=True, timeout=30)
        subprocess.run([*base, "containers", "delete", cid], capture_output=True, timeout=30)


def _cleanup_host(folder: Path) -> None:
    """After containerd and the kubelet stopped: no process, mount, cgroup, netns or link of this node is left."""
    sock = str(folder / "containerd.sock")
    # Shims outlive containerd by design; ours name our socket on their command line.
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            cmdline = (pid_dir / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if sock.encode() in cmdline or any(a.startswith(str(folder).encode() + b"/") for a in cmdline[:1]):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_dir.name), signal.SIGKILL)
    time.sleep(0.5)
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for target in reversed(mounts):
        path = target.replace("\\040", " ")
        if path.startswith(str(folder) + "/"):
            subprocess.run(["umount", "--lazy", path], capture_output=True)
    _remove_cgroups()
    # The node's state (image layers, snapshots, Pod volumes: ~1 GB) goes too; its logs stay with pytest's.
    left = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    if not any(m.startswith(str(folder) + "/") for m in left):
        for state in ("containerd", "kubelet", "cni-ipam"):
            shutil.rmtree(folder / state, ignore_errors=True)
    subprocess.run(["ip", "link", "delete", BRIDGE], capture_output=True)
    for cache in Path("/var/lib/cni/results").glob(f"{CNI_NETWORK}-*"):
        cache.unlink(missing_ok=True)


def _remove_cgroups() -> None:
    """The kubepods hierarchy the kubelet made in each cgroup v1 controller (deepest first), after killing any
    process still in it (there is none unless a shim died)."""
    for controller in CGROUP_V1.iterdir():
        top = controller / "kubepods"
        if not top.is_dir():
            continue
        for procs in top.rglob("cgroup.procs"):
            for pid in procs.read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
        for d in [*dirs, top]:
            for _ in range(20):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.2)


def main() -> None:
    """Start a node by hand and keep it until Ctrl-C."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="qos-guard-node-"))

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)
    with running_node(folder) as node:
        print(f"export KUBECONFIG={node.cluster.kubeconfig}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()


if __name__ == "__main__":
    main()


def start_topology_agent(stack: contextlib.ExitStack, node: Node, sys_root: Path,
                         log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``qos-guard agent --publish-topology`` on this node as an operator's host process (the fake ``sys_root``,
    configz from the kubelet's own port: this kubelet is anonymous, AlwaysAllow), stopped when ``stack`` closes;
    the process and its metrics URL, once it answers."""
    port = free_port()
    agent = subprocess.Popen([sys.executable, "-m", "webhook.cli", "agent", "--node", NODE_NAME,
                              "--pod-resources-socket", str(node.pod_resources_socket), "--sys-root", str(sys_root),
                              "--kubeconfig", str(node.cluster.kubeconfig), "--interval", "2",
                              "--metrics-bind", f"127.0.0.1:{port}", "--no-events", "--publish-topology",
                              "--kubelet-address", "127.0.0.1", "--kubelet-port", str(node.kubelet.config["port"])],
                             stdout=log.open("wb"), stderr=subprocess.STDOUT, env=node.cluster.env)
    stack.callback(stop_process, agent)
    metrics = f"http://127.0.0.1:{port}/metrics"
    wait_until_ready("agent metrics", lambda: requests.get(metrics, timeout=2).ok, agent, log)
    return agent, metrics
