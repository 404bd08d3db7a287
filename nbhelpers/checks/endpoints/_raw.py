"""The RawDeployment serving path: the Service ``<isvc>-predictor`` that selects the pods directly
(``ROUTING_LAYER_MISMATCH``, ``ENDPOINTS_SELECTOR_MISMATCH``, ``ENDPOINTS_NONE_READY``).
"""

from __future__ import annotations

from nbhelpers.checks.endpoints._endpoints import MAX_LISTED, none_ready, selector_mismatch, selector_text
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.sources import kinds, kube


def raw_path(evidence: Evidence) -> list[Finding]:
    common.require_read(evidence, kinds.SERVICE.key + " ")
    common.require_read(evidence, kinds.POD.key + " ")
    common.require_address_reads(evidence)
    service = common.named(evidence, kinds.SERVICE, common.predictor_name(evidence))
    if service is None:
        return [_raw_service_missing(evidence)]
    findings: list[Finding] = []
    mismatch = selector_mismatch(evidence, service)
    if mismatch is not None:
        findings.append(mismatch)
    pods = common.predictor_pods(evidence)
    addresses = common.service_addresses(evidence, kube.name(service))
    if not addresses.ready:
        lines = [
            f"{kube.ref(service)} selector {selector_text(service)}",
            *addresses.lines,
            *_deployment_lines(evidence),
            *(common.describe_pod_state(pod) for pod in pods[-MAX_LISTED:]),
        ]
        title = f"Service {kube.name(service)} has no ready endpoints"
        findings.append(
            none_ready(evidence, title, f"Service {kube.name(service)}", addresses, pods, [kube.ref(service)], lines)
        )
    return findings


def _raw_service_missing(evidence: Evidence) -> Finding:
    name = common.predictor_name(evidence)
    lines = [f"InferenceService condition {kube.describe_condition(c)}" for c in kube.conditions(evidence.isvc)]
    lines.append(
        f"Services in {evidence.target.namespace}: "
        + (
            ", ".join(
                sorted(
                    kube.name(s) for s in evidence.of(kinds.SERVICE) if kube.namespace(s) == evidence.target.namespace
                )
            )
            or "none"
        )
    )
    return Finding(
        code="ROUTING_LAYER_MISMATCH",
        title=f"no Service {name} for a RawDeployment InferenceService",
        summary=f"In {evidence.deployment_mode_raw or evidence.deployment_mode} mode KServe serves the predictor through "
        f"the Service {name}, which does not exist: requests have nowhere to go even if the pods are ready.",
        objects=(kube.ref(evidence.isvc),),
        evidence=tuple(lines),
        fix=Fix(
            what="Check that the InferenceService really is reconciled in RawDeployment mode (its conditions above) and "
            "that the KServe controller runs; KServe recreates the Service on its next reconcile. "
            "Nothing to roll back: this finding changes nothing by itself."
        ),
    )


def _deployment_lines(evidence: Evidence) -> list[str]:
    lines = []
    for deployment in evidence.of(kinds.DEPLOYMENT):
        if kube.is_predictor(deployment) and kube.namespace(deployment) == evidence.target.namespace:
            status = kube.status(deployment)
            lines.append(
                f"{kube.ref(deployment)}: replicas {kube.spec(deployment).get('replicas', '?')}, "
                f"ready {status.get('readyReplicas', 0)}, available {status.get('availableReplicas', 0)}"
            )
    return lines
