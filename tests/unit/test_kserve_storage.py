"""What a model's storage brings to its Pod (KServe v0.20.0): the storage-initializer for a storageUri,
``storage.path`` or ``storageUris``, the modelcar for OCI URIs by the configured mode."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tests.unit.kserve_cases import (
    RAW,
    RT,
    SI,
    both,
    config,
    findings,
    isvc,
    model,
    runtime,
)
from webhook.core.operators import collect
from webhook.core.operators.kserve import RELATED
from webhook.core.workloads import find_targets, walk


def test_a_models_storage_path_brings_the_storage_initializer() -> None:
    """component.go addStorageSpecAnnotations: storage.path is the storage-initializer's source URI (its scheme
    from the storage secret); with a storageUri as well KServe refuses the predictor (predictor.go)."""
    storage = {"key": "s3-creds", "path": "models/iris"}
    assert findings(isvc({"model": model(storage=storage)}, RAW), RT) == both(SI, "spec.predictor.model.storage.path")
    # storage without a path (credentials for the storageUri): the storageUri decides
    keyed = model(storage={"key": "s3-creds"}, storageUri="pvc://models/iris")
    assert findings(isvc({"model": keyed}, RAW), RT) == Counter()
    (reason,) = walk(isvc({"model": model(storage=storage, storageUri="s3://b/m")}, RAW), related=RT)
    assert isinstance(reason, str) and "must provide only one of storageUri and storage.path" in reason


def test_storage_uris_bring_one_storage_initializer_or_modelcars() -> None:
    """raw_kube_reconciler.go / ksvc_reconciler.go CommonStorageInitialization (IsLegacyURI false): one
    storage-initializer for the URIs neither pvc:// nor OCI, a modelcar and modelcar-init per OCI URI."""
    def with_uris(*uris: str) -> dict[str, Any]:
        return isvc({"model": model(), "storageUris": [{"uri": u, "mountPath": f"/mnt/models/{i}"}
                                                         for i, u in enumerate(uris)]}, RAW)
    assert findings(with_uris("s3://b/m", "gs://b/n"), RT) == both(SI, "spec.predictor.storageUris[0].uri")
    assert findings(with_uris("pvc://models/m"), RT) == Counter()
    [target] = find_targets(with_uris("oci://r/a:1", "oci://r/b:1", "pvc://models/m"), related=RT)
    pod = target.pod_spec()
    assert [c.name for c in pod.containers] == ["kserve-container", "modelcar", "modelcar-1"]
    assert [c.name for c in pod.init_containers] == ["modelcar-init", "modelcar-init-1"]


def test_oci_models_get_the_modelcar_by_the_configured_mode() -> None:
    """mutator.go InjectModelcar under ResolveOciModelMode (types/config.go): KServe's shipped ConfigMap has
    enableModelcar true, so oci:// gets modelcar and modelcar-init at 10m/15Mi (utils/storage.go); oci+native://
    mounts an image volume (no container, no storage-initializer); with OCI models off, oci:// is downloaded by
    the storage-initializer."""
    fractional = Counter({"cpu-not-integer modelcar spec.predictor.model.storageUri.resources.cpu": 1,
                          "cpu-not-integer modelcar-init spec.predictor.model.storageUri.resources.cpu": 1})
    oci = isvc({"model": model(storageUri="oci://registry/model:1")}, RAW)
    assert findings(oci, RT) == fractional
    assert findings(isvc({"model": model(storageUri="oci+native://registry/model:1")}, RAW), RT) == Counter()
    off = {"image": "x", "cpuRequest": "100m", "cpuLimit": "1", "memoryRequest": "100Mi", "memoryLimit": "1Gi"}
    assert findings(oci, collect([runtime("rt", "sklearn"), config(storageInitializer=off)], RELATED)) == \
        both(SI, "spec.predictor.model.storageUri")
    native = {**off, "ociModelMode": "native"}
    assert findings(oci, collect([runtime("rt", "sklearn"), config(storageInitializer=native)], RELATED)) == Counter()
    whole = {**off, "enableModelcar": True, "cpuModelcar": "1", "memoryModelcar": "64Mi"}
    assert findings(oci, collect([runtime("rt", "sklearn"), config(storageInitializer=whole)], RELATED)) == Counter()
