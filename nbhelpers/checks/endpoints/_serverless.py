"""The Serverless serving path: the Knative Service and the revisions that carry traffic, each behind its
``<revision>-private`` Service (``ROUTING_LAYER_MISMATCH``, ``ROUTING_REVISION_NOT_READY``,
``ENDPOINTS_NONE_READY``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from nbhelpers.checks.endpoints._endpoints import MAX_LISTED, none_ready
from nbhelpers.errors import RunbookError
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.sources import kinds, kube
from nbhelpers.util.times import parse_duration, parse_k8s_time

MIN_SCALE_ANNOTATIONS = ("autoscaling.knative.dev/min-scale", "autoscaling.knative.dev/minScale")
PROGRESS_DEADLINE_ANNOTATION = "serving.knative.dev/progress-deadline"
DEFAULT_PROGRESS_DEADLINE = timedelta(seconds=600)


def serverless_path(evidence: Evidence) -> list[Finding]:
    failure = evidence.failure(kinds.KNATIVE_SERVICE.key)
    if failure is not None and failure.status in ("not_installed", "missing"):
        return [_knative_missing(evidence, f"the Knative Service CRD is not installed ({failure.reason})")]
    common.require_read(evidence, kinds.KNATIVE_SERVICE.key)
    common.require_read(evidence, kinds.KNATIVE_REVISION.key)
    ksvc = common.knative_service(evidence)
    if ksvc is None:
        return [_knative_missing(evidence, f"no Knative Service {common.predictor_name(evidence)} exists")]
    findings = _revisions_not_ready(evidence, ksvc)
    common.require_read(evidence, kinds.POD.key + " ")
    common.require_address_reads(evidence)
    for revision, percent in common.traffic_revisions(evidence):
        finding = _revision_endpoints(evidence, revision, percent)
        if finding is not None:
            findings.append(finding)
    return findings


def _knative_missing(evidence: Evidence, what: str) -> Finding:
    isvc = evidence.isvc
    mode = evidence.deployment_mode_raw or evidence.deployment_mode
    lines = [f"deployment mode: {mode} (normalized {evidence.deployment_mode})"]
    lines += [f"InferenceService condition {kube.describe_condition(c)}" for c in kube.conditions(isvc)]
    return Finding(
        code="ROUTING_LAYER_MISMATCH",
        title="Serverless InferenceService without a Knative Service",
        summary=f"The InferenceService is deployed in {mode} mode, which needs Knative Serving, but {what}. "
        "Nothing serves it, however healthy the model would be.",
        objects=(kube.ref(isvc),),
        evidence=tuple(lines),
        fix=Fix(
            what="Either install Knative Serving (and its networking layer), or run the service in RawDeployment mode. "
            "KServe does not allow changing the deployment mode of an existing InferenceService, so recreate it:\n"
            f"  kubectl get inferenceservice {evidence.target.isvc} -n {evidence.target.namespace} -o yaml > isvc.yaml\n"
            f"  # set metadata.annotations[{kube.DEPLOYMENT_MODE_ANNOTATION!r}] to RawDeployment, drop status\n"
            "  kubectl replace --force -f isvc.yaml\n"
            "Roll back by replacing it again with the saved original."
        ),
    )


def _progress_deadline(evidence: Evidence, revision: Mapping[str, Any]) -> timedelta:
    candidates = [kube.annotations(revision).get(PROGRESS_DEADLINE_ANNOTATION)]
    config = evidence.config_map(evidence.site.knative_namespace, "config-deployment")
    if config is not None:
        candidates.append((config.get("data") or {}).get("progress-deadline"))
    for text in candidates:
        if text:
            try:
                return parse_duration(str(text))
            except RunbookError:
                continue
    return DEFAULT_PROGRESS_DEADLINE


def _revisions_not_ready(evidence: Evidence, ksvc: Mapping[str, Any]) -> list[Finding]:
    traffic = dict(common.traffic_revisions(evidence))
    names = list(traffic)
    latest = common.latest_revision_name(evidence)
    if latest and latest not in names:
        names.append(latest)
    findings = []
    for name in names:
        revision = common.named(evidence, kinds.KNATIVE_REVISION, name)
        if revision is None:
            continue
        stuck = _revision_problem(evidence, revision)
        if stuck is not None:
            findings.append(_revision_finding(evidence, ksvc, revision, traffic.get(name, 0), stuck))
    ready = kube.condition(ksvc, "Ready")
    if not findings and ready is not None and str(ready.get("status")) == "False":
        lines = [f"{kube.ref(ksvc)} condition {kube.describe_condition(c)}" for c in kube.conditions(ksvc)]
        findings.append(
            Finding(
                code="ROUTING_REVISION_NOT_READY",
                title=f"Knative Service {kube.name(ksvc)} not ready ({ready.get('reason') or 'no reason'})",
                summary=f"Knative reports {kube.describe_condition(ready)} for {kube.ref(ksvc)}; while it is not ready "
                "its route does not serve the revisions.",
                objects=(kube.ref(ksvc), kube.ref(evidence.isvc)),
                evidence=tuple(lines),
                fix=Fix(
                    what=f"Read the failing condition: kubectl describe ksvc {kube.name(ksvc)} -n {kube.namespace(ksvc)}. "
                    "Nothing to roll back: this finding changes nothing by itself."
                ),
            )
        )
    return findings


def _revision_problem(evidence: Evidence, revision: Mapping[str, Any]) -> str | None:
    """Why the revision is not ready, or None when it is ready or still deploying within its deadline."""
    ready = kube.condition(revision, "Ready")
    if ready is None:
        return None
    state = str(ready.get("status"))
    if state == "False":
        return kube.describe_condition(ready)
    created = parse_k8s_time(kube.created(revision))
    deadline = _progress_deadline(evidence, revision)
    if state == "Unknown" and created is not None and evidence.observed_at - created > deadline:
        age = int((evidence.observed_at - created).total_seconds())
        return f"{kube.describe_condition(ready)}, still not ready {age} s after creation (progress deadline {int(deadline.total_seconds())} s)"
    return None


def _revision_finding(
    evidence: Evidence, ksvc: Mapping[str, Any], revision: Mapping[str, Any], percent: int, problem: str
) -> Finding:
    name = kube.name(revision)
    share = f"{percent}% of traffic" if percent else "the newest revision, no traffic yet"
    lines = [
        f"{kube.ref(revision)} ({share}) condition {kube.describe_condition(c)}" for c in kube.conditions(revision)
    ]
    lines += [f"{kube.ref(ksvc)} condition {kube.describe_condition(c)}" for c in kube.conditions(ksvc)]
    pods = [pod for pod in common.predictor_pods(evidence) if kube.labels(pod).get(common.REVISION_LABEL) == name]
    lines += [common.describe_pod_state(pod) for pod in pods[-MAX_LISTED:]]
    effect = (
        "Knative will not route to it, and the traffic it should carry fails"
        if percent
        else "Knative keeps traffic on the previous revision, so the new configuration never serves"
    )
    serving = common.service_addresses(evidence, f"{name}-private")
    if serving.ready:
        return _stale_revision(evidence, revision, problem, serving, lines)
    return Finding(
        code="ROUTING_REVISION_NOT_READY",
        title=f"revision {name} not ready: {problem.split(':')[0]}",
        summary=f"Revision {name} ({share}) is not ready: {problem}. {effect}.",
        objects=(kube.ref(revision), kube.ref(ksvc), kube.ref(evidence.isvc)),
        evidence=tuple(lines),
        fix=Fix(
            what="The condition's reason names the failing stage: ProgressDeadlineExceeded (pods did not become ready in "
            "time: see probes, resources, cold_start), ContainerMissing (image), ExitCode/CrashLoopBackOff (the engine "
            f"crashes: read the logs). Inspect: kubectl describe revision {name} -n {kube.namespace(revision)}. "
            "Nothing to roll back: this finding changes nothing by itself."
        ),
    )


def _stale_revision(
    evidence: Evidence, revision: Mapping[str, Any], problem: str, serving: common.Addresses, lines: list[str]
) -> Finding:
    """A revision whose conditions say it failed while its pods are ready behind ``<revision>-private``: the
    condition no longer describes the pods. Knative 1.14 to 1.16 keep ContainerHealthy=False once a container has
    exited while no pod was available, even after it recovered (knative/serving#15487, fixed in 1.17 by PR #15503);
    the Configuration, the Route and KServe's conditions above it copy that False. Info: the evidence shows the
    revision serving."""
    name = kube.name(revision)
    return Finding(
        code="ROUTING_REVISION_NOT_READY",
        title=f"revision {name} reports {problem.split(':')[0]} while its pods are ready",
        summary=f"Revision {name} reports {problem}, but {len(serving.ready)} ready address(es) stand behind "
        f"{serving.service}: its pods are ready and take traffic, so the condition is stale rather than the cause "
        "of failing requests. Knative 1.14 to 1.16 keep ContainerHealthy=False after a container that exited while "
        "no pod was available has recovered (knative/serving#15487), and the Route and the InferenceService copy it.",
        objects=(kube.ref(revision), kube.ref(evidence.isvc)),
        evidence=(*lines, *serving.lines),
        fix=Fix(
            what="Nothing serves less because of it. The condition clears with Knative 1.17 or later (PR #15503) or "
            "with the next revision (any change of the InferenceService's predictor). Inspect: kubectl describe "
            f"revision {name} -n {kube.namespace(revision)}."
        ),
        severity=Severity.INFO,
    )


def _min_scale(evidence: Evidence, revision: Mapping[str, Any] | None) -> int:
    annotations = kube.annotations(revision) if revision is not None else {}
    for key in MIN_SCALE_ANNOTATIONS:
        if str(annotations.get(key, "")).isdigit():
            return int(annotations[key])
    configured = (kube.spec(evidence.isvc).get("predictor") or {}).get("minReplicas")
    return int(configured) if isinstance(configured, int) else 1


def _desired_scale(evidence: Evidence, revision: str) -> tuple[int | None, str]:
    autoscaler = common.named(evidence, kinds.POD_AUTOSCALER, revision)
    if autoscaler is not None and isinstance(kube.status(autoscaler).get("desiredScale"), int):
        status = kube.status(autoscaler)
        return int(status["desiredScale"]), (
            f"{kube.ref(autoscaler)}: desiredScale {status['desiredScale']}, actualScale {status.get('actualScale', '?')}"
        )
    deployment = common.named(evidence, kinds.DEPLOYMENT, f"{revision}-deployment")
    if deployment is not None and isinstance(kube.spec(deployment).get("replicas"), int):
        replicas = int(kube.spec(deployment)["replicas"])
        return replicas, f"{kube.ref(deployment)}: spec.replicas {replicas}"
    return None, "no PodAutoscaler or Deployment shows the desired scale"


def _revision_endpoints(evidence: Evidence, revision: str, percent: int) -> Finding | None:
    private = f"{revision}-private"
    addresses = common.service_addresses(evidence, private)
    if addresses.ready:
        return None
    pods = [pod for pod in common.predictor_pods(evidence) if kube.labels(pod).get(common.REVISION_LABEL) == revision]
    revision_object = common.named(evidence, kinds.KNATIVE_REVISION, revision)
    min_scale = _min_scale(evidence, revision_object)
    desired, desired_line = _desired_scale(evidence, revision)
    if min_scale == 0 and (desired == 0 or (desired is None and not pods)):
        return None  # scaled to zero by design: the activator holds requests until a pod is ready
    public = common.service_addresses(evidence, revision)
    lines = [
        *addresses.lines,
        *(f"public {line} (the activator's addresses while it proxies)" for line in public.lines),
        f"min-scale {min_scale}; {desired_line}",
        *(common.describe_pod_state(pod) for pod in pods[-MAX_LISTED:]),
    ]
    title = f"no ready endpoints behind revision {revision} ({percent}% of traffic)"
    objects = [f"Service/{evidence.target.namespace}/{private}"]
    if revision_object is not None:
        objects.append(kube.ref(revision_object))
    return none_ready(evidence, title, f"Service {private}", addresses, pods, objects, lines)
