"""Messages with the way out for sidecars: a 100m sidecar's ``cpu-not-integer`` names
``policy.fractionalCPUContainers`` (only that container would share CPUs), and a mesh proxy's findings name the
mesh's own annotations, so the fix is made where the container comes from (its injector)."""

from __future__ import annotations

from typing import Any

from tests.builders import container, pod, rl
from webhook.core.config import Config, parse_config
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import Facts
from webhook.core.operators import collect
from webhook.core.operators.kserve import RELATED
from webhook.core.rules.base import cel_string
from webhook.core.rules.sidecars import MESH_PROXIES, mesh_hint, mesh_hint_cel


def _messages(manifest: dict[str, object], config: Config | None = None) -> dict[tuple[str, str | None], str]:
    found = evaluate(manifest, config or Config(), Mode.ENFORCE).violations
    return {(v.rule, v.container): v.message for _, v in found}


def test_only_a_sidecar_is_offered_to_share_cpus() -> None:
    manifest = pod(container("server", None, rl("1500m", "4Gi")), container("shipper", None, rl("250m", "64Mi")),
                   init=[container("warmup", None, rl("500m", "64Mi"))])
    found = _messages(manifest)
    share = "; or let this container alone share CPUs (the others stay pinned): add {} to " \
            "policy.fractionalCPUContainers"
    assert found[("cpu-not-integer", "server")].endswith("use 1 or 2")  # the workload itself: no such way out
    assert found[("cpu-not-integer", "shipper")].endswith("use 1" + share.format("shipper"))
    assert found[("cpu-not-integer", "warmup")].endswith("use 1" + share.format("warmup"))
    exempt = _messages(manifest, parse_config({"policy": {"fractionalCPUContainers": ["shipper", "warmup"]}}))
    assert set(exempt) == {("cpu-not-integer", "server")}


def test_istio_proxy_defaults_name_the_istio_annotations() -> None:
    """Istio's injector adds istio-proxy with 100m/2000m cpu and 128Mi/1Gi memory: every inference Pod it
    injects becomes Burstable. Its resources come from the Pod's annotations, not from its spec."""
    manifest = pod(container("vllm", None, rl("4", "16Gi")),
                   container("istio-proxy", rl("100m", "128Mi"), rl("2000m", "1Gi")))
    messages = [v.message for _, v in evaluate(manifest, Config(), Mode.ENFORCE).violations]
    assert messages == [
        'container "istio-proxy" (spec.containers[1]): cpu request 100m differs from its limit 2000m; set '
        "resources.requests.cpu to 2000m; Istio injects this container: set its cpu with the Pod annotations "
        "sidecar.istio.io/proxyCPU and sidecar.istio.io/proxyCPULimit (both to the same value)",
        'container "istio-proxy" (spec.containers[1]): memory request 128Mi differs from its limit 1Gi; set '
        "resources.requests.memory to 1Gi; Istio injects this container: set its memory with the Pod annotations "
        "sidecar.istio.io/proxyMemory and sidecar.istio.io/proxyMemoryLimit (both to the same value)"]


def test_istio_puts_its_proxy_first_and_it_is_still_a_sidecar() -> None:
    """holdApplicationUntilProxyStarts injects istio-proxy as the first container."""
    first = pod(container("istio-proxy", None, rl("500m", "256Mi")), container("vllm", None, rl("4", "16Gi")))
    found = _messages(first)
    message = found[("cpu-not-integer", "istio-proxy")]
    assert "add istio-proxy to policy.fractionalCPUContainers" in message
    assert message.endswith("sidecar.istio.io/proxyCPU and sidecar.istio.io/proxyCPULimit (both to the same value)")


def test_linkerd_proxy_names_the_linkerd_annotations() -> None:
    manifest = pod(container("server", None, rl("2", "4Gi")), container("linkerd-proxy", rl("1", "20Mi"), None))
    found = [v.message for _, v in evaluate(manifest, Config(), Mode.ENFORCE).violations]
    assert any(m.endswith("config.linkerd.io/proxy-cpu-request and config.linkerd.io/proxy-cpu-limit "
                          "(both to the same value)") for m in found)
    assert any(m.endswith("config.linkerd.io/proxy-memory-request and config.linkerd.io/proxy-memory-limit "
                          "(both to the same value)") for m in found)


def test_the_cel_says_the_same_sentences() -> None:
    for proxy, mesh in MESH_PROXIES.items():
        for resource in mesh.annotations:
            assert cel_string(mesh_hint(proxy, resource)) in mesh_hint_cel("f.b.name", "f.r")
    assert mesh_hint("app", "cpu") == "" and mesh_hint(None, "cpu") == ""


def test_limits_missing_and_cpu_not_integer_give_one_advice() -> None:
    """A 50m sidecar without a cpu limit was told "set resources.limits.cpu to 50m (its request)" by
    limits-missing, then "use 1" by cpu-not-integer: following the first only traded one finding for the other.
    Both say the same whole numbers now; a container allowed to share CPUs keeps the copy-the-request advice."""
    manifest = pod(container("vllm", rl("4", "16Gi"), rl("4", "16Gi")),
                   container("shipper", rl("50m", "64Mi"), rl(memory="64Mi")),
                   container("proxy", rl("1500m", "64Mi"), rl(memory="64Mi")),
                   container("tidy", rl("2", "64Mi"), rl(memory="64Mi")))
    found = _messages(manifest)
    assert found[("limits-missing", "shipper")].endswith(
        "no cpu limit, so the Pod is not Guaranteed; set resources.requests.cpu and resources.limits.cpu to one "
        "whole number of CPUs (50m is not one): use 1")
    assert "; use 1;" in found[("cpu-not-integer", "shipper")]
    assert found[("limits-missing", "proxy")].endswith("(1500m is not one): use 1 or 2")
    assert "; use 1 or 2;" in found[("cpu-not-integer", "proxy")]
    assert found[("limits-missing", "tidy")].endswith("set resources.limits.cpu to 2 (its request)")
    shared = _messages(manifest, parse_config({"policy": {"fractionalCPUContainers": ["shipper"]}}))
    assert shared[("limits-missing", "shipper")].endswith("set resources.limits.cpu to 50m (its request)")
    assert ("cpu-not-integer", "shipper") not in shared


def test_kserves_modelcar_names_its_one_config_key_and_the_native_mode() -> None:
    """KServe's modelcar and modelcar-init take cpuModelcar as both request and limit (kserve v0.20.0
    CreateModelcarContainer): the message names that one key, and oci+native:// (no container at all)."""
    manifest = pod(container("server", rl("2", "4Gi"), rl("2", "4Gi")), container("modelcar", rl("10m", "15Mi"),
                                                                                  rl("10m", "15Mi")))
    message = _messages(manifest)[("cpu-not-integer", "modelcar")]
    assert message.endswith("KServe injects this container: set its cpu (request and limit) with "
                            "inferenceservice-config storageInitializer cpuModelcar; or name the model by an "
                            "oci+native:// URI (an image volume, no container)"), message


def test_kserves_agent_for_a_model_without_storage_names_the_storage_as_the_way_out() -> None:
    """KServe injects its agent into a model predictor with no storage (IsMMSPredictor; the finding names the
    missing storageUri): giving the model its storage removes the agent, which the message says after the
    ConfigMap keys. An agent for a logger, or a Pod's own container named agent, is told the keys only."""
    runtime = {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ServingRuntime",
               "metadata": {"name": "rt", "namespace": "ml"},
               "spec": {"supportedModelFormats": [{"name": "sklearn", "autoSelect": True}], "containers": [
                   {"name": "kserve-container", "resources": {"requests": rl("2", "4Gi"), "limits": rl("2", "4Gi")}}]}}
    predictor: dict[str, Any] = {"model": {"modelFormat": {"name": "sklearn"}, "runtime": "rt"}}
    isvc = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "m", "namespace": "ml",
                         "annotations": {"serving.kserve.io/deploymentMode": "Standard"}},
            "spec": {"predictor": predictor}}
    related = Facts(related=collect([runtime], RELATED))
    storage = ("; or give the model its storage (its storageUri or storage, or the predictor's storageUris): KServe "
               "then takes it for one model and injects no agent (a pvc:// URI adds no container; other schemes "
               "add the storage-initializer)")

    def agent() -> list[str]:
        found = evaluate(isvc, Config(), Mode.ENFORCE, related).violations
        return [v.message for _, v in found if v.container == "agent"]

    [cpu, memory] = agent()
    assert cpu.endswith("inferenceservice-config agent cpuRequest and cpuLimit (both to the same value)" + storage)
    assert memory.endswith("agent memoryRequest and memoryLimit (both to the same value)" + storage)
    predictor["model"]["storageUri"] = "pvc://models/m"
    predictor["logger"] = {"mode": "all"}
    assert [m.endswith("(both to the same value)") for m in agent()] == [True, True]
    own = _messages(pod(container("server", rl("2", "4Gi"), rl("2", "4Gi")),
                        container("agent", rl("100m", "100Mi"), rl("1", "1Gi"))))
    assert own[("requests-not-equal-limits", "agent")].endswith("(both to the same value)")
