"""``RESOURCES_POD_CREATION_REJECTED``: the API server refuses to create the predictor's pods (a ResourceQuota, a
LimitRange, an admission webhook, Pod Security admission), so they never exist.

A rejected pod leaves no Pod object and no pod event: only the ReplicaSet's ``FailedCreate`` events and the
Deployment's ``ReplicaFailure`` condition carry the API server's message. Knative 1.12.1 and later copy it into
the Revision of a Serverless predictor (``ResourcesAvailable=False``, ``FailedCreate``); older releases leave the
Revision ``Deploying`` (knative/serving#13708)."""

from __future__ import annotations

import re

from nbhelpers.checks.resources._facts import ResourceFacts
from nbhelpers.facts import common
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.sources import kinds, kube

_QUOTA_EXCEEDED = re.compile(r"exceeded quota: ([^,]+), requested: (.+?), used: (.+?), limited: ([^\s\"]+)")
_QUOTA_FAILED = re.compile(r"failed quota: ([^:]+): (must specify [^\"]+)")
_LIMIT_RANGE = re.compile(
    r"(?:maximum|minimum) [\w./-]+ usage per (?:Container|Pod) is [^\s,]+[^\"]*|LimitRange[^\"]*", re.IGNORECASE
)
_WEBHOOK = re.compile(r'admission webhook "([^"]+)" denied the request: ([^"]+)')
_POD_SECURITY = re.compile(r'violates PodSecurity "([^"]+)": ([^"]+)')

_FIX = {
    "quota": "Free or raise the namespace's ResourceQuota (kubectl describe resourcequota -n {ns}): the pods ask "
    "for more than is left. For nvidia.com/gpu, raise requests.nvidia.com/gpu or lower the replicas / GPUs per pod.",
    "quota requests": "The namespace's ResourceQuota requires the named requests and limits on every container, "
    "sidecars included (queue-proxy: Knative's config-deployment queue-sidecar-* defaults; istio-proxy: the "
    "sidecar.istio.io/proxy* annotations); set them.",
    "limit range": "Fit the containers into the namespace's LimitRange (kubectl describe limitrange -n {ns}) or "
    "change the LimitRange.",
    "webhook": "Satisfy or fix the admission webhook's policy named in the message (its owner decides); the "
    "webhook's own logs explain the rule.",
    "pod security": "Make the pod meet the namespace's Pod Security level (securityContext as the message lists) or "
    "label the namespace with the level the runtime needs.",
    "unknown": "Read the ReplicaSet's FailedCreate events (kubectl describe rs -n {ns}) and fix what the API server "
    "refused.",
}


def _classify(message: str) -> tuple[str, str]:
    """(class, the rule and numbers named)."""
    if match := _QUOTA_EXCEEDED.search(message):
        return "quota", (
            f"ResourceQuota {match.group(1)}: requested {match.group(2)}, used {match.group(3)}, "
            f"limited {match.group(4)}"
        )
    if match := _QUOTA_FAILED.search(message):
        return "quota requests", f"ResourceQuota {match.group(1)}: {match.group(2)}"
    if match := _POD_SECURITY.search(message):
        return "pod security", f'PodSecurity "{match.group(1)}": {match.group(2)}'
    if match := _WEBHOOK.search(message):
        return "webhook", f"admission webhook {match.group(1)}: {match.group(2)}"
    if match := _LIMIT_RANGE.search(message):
        return "limit range", f"LimitRange: {match.group(0)}"
    return "unknown", common.shorten(message, 300)


def pod_creation_rejected(facts: ResourceFacts) -> Finding | None:
    evidence = facts.evidence
    prefix = common.predictor_name(evidence)
    lines: list[str] = []
    messages: list[str] = []
    objects: list[str] = []
    for deployment in evidence.of(kinds.DEPLOYMENT):
        if not kube.name(deployment).startswith(prefix):
            continue
        condition = kube.condition(deployment, "ReplicaFailure")
        if condition is not None and str(condition.get("status")) == "True":
            lines.append(f"{kube.ref(deployment)} condition {kube.describe_condition(condition)}")
            messages.append(str(condition.get("message") or ""))
            objects.append(kube.ref(deployment))
    for replica_set in evidence.of(kinds.REPLICA_SET):
        if not kube.name(replica_set).startswith(prefix):
            continue
        for event in evidence.events_about("ReplicaSet", kube.name(replica_set)):
            if event.get("reason") != "FailedCreate":
                continue
            message = str(event.get("message") or event.get("note") or "")
            count = event.get("count") or (event.get("series") or {}).get("count") or 1
            lines.append(f"event FailedCreate on {kube.ref(replica_set)} ×{count}: {message!r}")
            messages.append(message)
            objects.append(kube.ref(replica_set))
    if not messages:
        return None
    classified = [_classify(m) for m in messages if m]
    known = [c for c in classified if c[0] != "unknown"]
    kind, rule = (known or classified or [("unknown", "")])[0]
    namespace = kube.namespace(evidence.isvc)
    summary = (
        f"The API server refuses to create the predictor's pods: {rule}. No pod is created, so nothing can start, "
        "become Ready or serve; the autoscaler's recommendation cannot take effect either (it asks for replicas "
        "that are never created), so this is neither a slow cold start nor an autoscaler problem."
    )
    return Finding(
        code="RESOURCES_POD_CREATION_REJECTED",
        title=f"pods rejected at creation ({kind})",
        summary=summary,
        objects=(facts.isvc_ref, *dict.fromkeys(objects)),
        evidence=tuple(dict.fromkeys(lines)),
        fix=Fix(what=_FIX[kind].format(ns=namespace)),
    )
