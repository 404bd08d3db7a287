"""``ENDPOINTS_NONE_READY`` and ``ENDPOINTS_SELECTOR_MISMATCH``, whichever Service of the path they concern: no
ready address behind it, told apart as a cause in the pods or in routing, or a selector that misses every pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common
from nbhelpers.findings import patches
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.sources import kinds, kube

MAX_LISTED = 5


def none_ready(
    evidence: Evidence,
    title: str,
    where: str,
    addresses: common.Addresses,
    pods: Sequence[Mapping[str, Any]],
    objects: list[str],
    lines: list[str],
) -> Finding:
    ready_pods = [pod for pod in pods if kube.pod_ready(pod)]
    if ready_pods:
        diagnosis = (
            f"{len(ready_pods)} of {len(pods)} predictor pods are Ready but none is a ready address: routing is "
            "broken, not the pods (a selector that misses them, or a targetPort that does not resolve)."
        )
        next_step = "Compare the Service selector and targetPort with the pods (ENDPOINTS_SELECTOR_MISMATCH, ports)."
    elif pods:
        diagnosis = (
            f"{len(pods)} predictor pods exist and none is ready: the cause is in the pods (probes, ports, "
            "resources, a crashing engine), not in routing."
        )
        next_step = "Follow the probes, ports and resources steps for why the pods are not ready."
    elif _no_workload(evidence):
        # Knative resolves the image to a digest before it creates the Revision's Deployment (kserve/kserve#993).
        diagnosis = (
            "No predictor pod exists, nor a Deployment to create one: the workload itself was never created (on "
            "Serverless, Knative creates the Revision's Deployment only once its image resolves to a digest)."
        )
        next_step = (
            "Read the InferenceService's conditions (and on Serverless the Revision's) for why the workload was not "
            "created."
        )
    else:
        diagnosis = "No predictor pod exists: nothing is running to serve."
        next_step = "Look at the Deployment/ReplicaSet events (quota, admission, scheduling) and the autoscaler."
    summary = (
        f"{where} has {len(addresses.ready)} ready and {len(addresses.not_ready)} not-ready addresses, so requests "
        f"have nowhere to go (503 'no healthy upstream'). {diagnosis}"
    )
    refs = objects + [kube.ref(pod) for pod in pods[-MAX_LISTED:]]
    return Finding(
        code="ENDPOINTS_NONE_READY",
        title=title,
        summary=summary,
        objects=tuple(dict.fromkeys(refs)),
        evidence=tuple(lines),
        fix=Fix(
            what=f"{next_step} Watch: kubectl get endpointslices -n {evidence.target.namespace} "
            f"-l {common.SERVICE_NAME_LABEL}={where.split()[-1]} -w. "
            "Nothing to roll back: this finding changes nothing by itself."
        ),
    )


def _no_workload(evidence: Evidence) -> bool:
    """Deployments and PodAutoscalers were read and neither exists for the predictor: nothing was created below the
    InferenceService or Revision (a PodAutoscaler is created after the Deployment, so either shows it was)."""
    workload_kinds = (kinds.DEPLOYMENT, kinds.POD_AUTOSCALER)
    if any(evidence.failure(kind.key + " ") is not None for kind in workload_kinds):
        return False
    return not any(kube.is_predictor(obj) for kind in workload_kinds for obj in evidence.of(kind))


def selector_text(service: Mapping[str, Any]) -> str:
    selector = kube.spec(service).get("selector") or {}
    return ",".join(f"{key}={value}" for key, value in sorted(selector.items())) or "(none)"


def selector_mismatch(evidence: Evidence, service: Mapping[str, Any]) -> Finding | None:
    selector = kube.spec(service).get("selector") or {}
    pods = common.predictor_pods(evidence)
    if not selector or not pods or any(kube.selector_matches(selector, kube.labels(pod)) for pod in pods):
        return None
    sample = pods[-1]
    pod_labels = kube.labels(sample)
    differing = [
        f"{key}={value} (pod has {pod_labels[key]!r})" if key in pod_labels else f"{key}={value} (pod lacks the label)"
        for key, value in sorted(selector.items())
        if pod_labels.get(key) != str(value)
    ]
    lines = [
        f"{kube.ref(service)} selector {selector_text(service)}",
        f"selector terms no predictor pod satisfies: {'; '.join(differing)}",
        *(
            f"{kube.ref(pod)} labels: " + ",".join(f"{k}={v}" for k, v in sorted(kube.labels(pod).items()))
            for pod in pods[-MAX_LISTED:]
        ),
    ]
    summary = (
        f"The selector of {kube.ref(service)} ({selector_text(service)}) matches none of the {len(pods)} "
        f"predictor pods: {'; '.join(differing)}. The Service never gets endpoints, however healthy the pods are."
    )
    owner = common.controller_owner(service)
    plan = _selector_patch(evidence, service, selector, pod_labels, owner)
    what = "Make the selector match the predictor pods' labels."
    if owner and plan is None:
        what += (
            f" The Service is generated by {owner} from the pods' labels: find what changed the pod labels "
            "(an edited Deployment) and let KServe reconcile."
        )
    elif owner:
        what += f" The Service is generated by {owner}; the InferenceService sets a label that overrides the pods' own."
    return Finding(
        code="ENDPOINTS_SELECTOR_MISMATCH",
        title=f"selector of Service {kube.name(service)} matches no predictor pod",
        summary=summary,
        objects=(kube.ref(service), *(kube.ref(pod) for pod in pods[-MAX_LISTED:])),
        evidence=tuple(lines),
        fix=Fix.from_plan(what, plan),
    )


def _selector_patch(
    evidence: Evidence,
    service: Mapping[str, Any],
    selector: Mapping[str, Any],
    pod_labels: Mapping[str, str],
    owner: str | None,
) -> patches.PatchPlan | None:
    if owner is None:

        def fix_selector(obj: common.KubeObject) -> None:
            fixed = {key: pod_labels[key] for key in selector if key in pod_labels}
            obj["spec"]["selector"] = fixed or {
                kube.ISVC_LABEL: evidence.target.isvc,
                kube.COMPONENT_LABEL: "predictor",
            }

        return patches.plan_patch(service, fix_selector)
    # A label set on the InferenceService is copied onto the pods and can override the one KServe selects on.
    overridden = [
        (path, key)
        for path in (("metadata", "labels"), ("spec", "predictor", "labels"))
        for key in selector
        if key in _dig(evidence.isvc, path) and _dig(evidence.isvc, path)[key] == pod_labels.get(key)
    ]
    if not overridden:
        return None

    def drop_labels(isvc: common.KubeObject) -> None:
        for path, key in overridden:
            _dig(isvc, path).pop(key, None)

    return patches.plan_patch(evidence.isvc, drop_labels)


def _dig(obj: Mapping[str, Any], path: Iterable[str]) -> dict[str, Any]:
    node: Any = obj
    for step in path:
        node = (node or {}).get(step) if isinstance(node, Mapping) else None
    return node if isinstance(node, dict) else {}
