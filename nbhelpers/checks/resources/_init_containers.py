"""``RESOURCES_INIT_CONTAINER_FAILED``: an init container (KServe's storage-initializer or another) keeps failing,
so the serving container never starts."""

from __future__ import annotations

from nbhelpers.checks.resources._facts import ResourceFacts, container_named, describe_resources
from nbhelpers.facts import init_containers
from nbhelpers.facts.init_containers import InitFailure
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.sources import kube

_FIX = {
    init_containers.AUTH: (
        "The download was refused (401/403): give the storage-initializer credentials that may read the model. "
        "For a gated or private Hugging Face model, put a token of an account that accepted the model's terms in a "
        "Secret (HF_TOKEN) and reference it from the InferenceService (storage spec or the service account's "
        "secrets); for S3/GCS/Azure, attach the Secret with the bucket's credentials to the predictor's "
        "serviceAccountName and check the bucket policy."
    ),
    init_containers.NOT_FOUND: (
        "The model was not found (404 / NoSuchKey): correct the InferenceService's storageUri (scheme, bucket, "
        "prefix, repository id and revision) and check it from a pod in the namespace with the same credentials."
    ),
    init_containers.NO_SPACE: (
        "The download ran out of disk: the model is written to an emptyDir on the node. Give the pod enough "
        "ephemeral-storage (request and limit above the model's size), or mount a PVC for the model (pvc:// "
        "storageUri or a modelcar / local model cache) instead of downloading it on every start."
    ),
    init_containers.OOM: (
        "The init container was OOM-killed at its memory limit while downloading. Raise the storage-initializer's "
        "memory (KServe's inferenceservice-config ConfigMap, key storageInitializer: memoryRequest / memoryLimit), "
        "or switch the download backend (e.g. HF_HUB_ENABLE_HF_TRANSFER / disable xet), or pre-load the model on a "
        "PVC or as a modelcar."
    ),
    init_containers.TIMEOUT: (
        "The download timed out: check that the pod can reach the storage endpoint (egress, proxy, NetworkPolicy, "
        "DNS), and for very large models pre-load them on a PVC or as a modelcar."
    ),
    init_containers.UNKNOWN: (
        "Read the init container's log (kubectl logs <pod> -c <container> --previous) and fix what it reports; "
        "its error decides whether credentials, the storageUri, disk or memory are at fault."
    ),
}


def init_container_failed(facts: ResourceFacts) -> Finding | None:
    failures = init_containers.init_failures(facts.evidence, facts.pods)
    if not failures:
        return None
    first = _most_telling(failures)
    pods = list(dict.fromkeys(f.pod for f in failures))
    restarts = sum(f.restarts for f in failures)
    lines = [failure.describe() for failure in failures]
    pod = next((p for p in facts.pods if kube.name(p) == first.pod), None)
    spec = kube.pod_template_spec(pod) if pod is not None else {}
    declared = next((c for c in spec.get("initContainers") or [] if c.get("name") == first.container), None)
    if declared is not None:
        lines.append(describe_resources(declared))
    storage_uri = _storage_uri(facts)
    if storage_uri:
        lines.append(f"storageUri: {storage_uri}")
    if container_named(spec, facts.container_name) is not None:
        lines.append(f"{facts.container_name} cannot start until every init container has exited 0")
    cause_text = {
        init_containers.AUTH: "the download was refused (authentication / authorization)",
        init_containers.NOT_FOUND: "the model was not found at its storageUri",
        init_containers.NO_SPACE: "it ran out of disk space",
        init_containers.OOM: "it was OOM-killed at its memory limit",
        init_containers.TIMEOUT: "the download timed out",
        init_containers.UNKNOWN: "its log or termination message names no known cause",
    }[first.cause]
    quoted = ""
    if first.line:
        said = "It last wrote" if first.line_from.endswith(init_containers.LAST_LINE) else "Its error"
        quoted = f" {said}: {first.line!r}."
    summary = (
        f"Init container {first.container} fails in {len(pods)} pod(s) ({', '.join(pods)}; {restarts} restarts in "
        f"all): {cause_text}.{quoted} The pod's containers start only after every init container has exited 0, so "
        f"{facts.container_name} never starts, the pod never becomes Ready and is never an endpoint: this is not a "
        "slow cold start, and a longer deadline or timeout would not help."
    )
    return Finding(
        code="RESOURCES_INIT_CONTAINER_FAILED",
        title=f"init container {first.container} failing ({first.cause})",
        summary=summary,
        objects=(facts.isvc_ref, *(kube.ref(p) for p in facts.pods if kube.name(p) in pods)),
        evidence=tuple(lines),
        fix=Fix(what=_FIX[first.cause]),
    )


def _most_telling(failures: list[InitFailure]) -> InitFailure:
    """The failure to lead with: one with a known cause, the storage-initializer first."""
    return min(
        failures,
        key=lambda f: (
            f.cause == init_containers.UNKNOWN,
            f.container != init_containers.STORAGE_INITIALIZER,
        ),
    )


def _storage_uri(facts: ResourceFacts) -> str:
    if facts.evidence.target.is_llmisvc:  # an LLMInferenceService names its model in spec.model.uri
        return str((kube.spec(facts.evidence.isvc).get("model") or {}).get("uri") or "")
    predictor = kube.spec(facts.evidence.isvc).get("predictor") or {}
    for section in ("model", *(k for k in predictor if k not in ("model", "containers"))):
        value = predictor.get(section)
        if isinstance(value, dict) and value.get("storageUri"):
            return str(value["storageUri"])
    for container in predictor.get("containers") or []:
        for env in container.get("env") or []:
            if env.get("name") == "STORAGE_URI" and env.get("value"):
                return str(env["value"])
    return ""
