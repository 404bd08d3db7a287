"""The realism validator (docs/architecture.md#testing): what a real cluster and a real Prometheus would never show.

``validate_bundle(files or path)`` returns a list of problems (empty: the
bundle is plausible). It checks:

- metrics: ingress-nginx answers 504 only when vLLM's latency reaches the Ingress's proxy-read-timeout;
  counters never decrease (restart counters, the raw counters),
  histogram buckets are cumulative in ``le`` order and ``+Inf`` equals
  ``_count``, running requests never exceed the engine's ceiling
  (``--max-num-seqs``, else the version/GPU default), KV usage lies in 0-1 and
  fits the running requests (none running, nothing used; never more than they
  can hold), requests wait below ``--max-num-seqs`` only while the KV cache is
  nearly full (else the scheduler would admit them), rates are not negative, p95 is not above p99, samples lie in the
  window, kube-state-metrics agree with the pods at capture time, and the
  gateway serves no 2xx while no predictor pod is ready;
- objects: owner references resolve (for the kinds a capture reads), Service
  selectors match pods (when there are any), Endpoints/EndpointSlice addresses name existing pods
  with their IPs and readiness (a pod with no IP has no address), HPA scale
  targets exist and the HPA's current replicas are its target's (a target at
  zero replicas disables the HPA: ScalingActive=False, ScalingDisabled), Knative revisions are named ``<ksvc>-0000N`` with a
  ``<rev>-deployment``, predictor pods are named after their ReplicaSet,
  events name objects that exist and fall in the window (a pod its ReplicaSet deleted is gone, but its
  events remain, none later than its stop; a deleted pod must not still be in the bundle);
- pods: an unscheduled pod is Pending with no node, IP or container; a
  restarted container shows its last termination, a container in
  CrashLoopBackOff has restarted, runs follow each other in time, and the
  kubelet's Started events count every run (init containers included; a container still waiting to start for the
  first time, in PodInitializing or an image back-off, has none) of a pod created in the window; while an init
  container has not completed the pod is Pending with Initialized=False and no app container has started;
- Knative Revisions report their pods as Knative reads them: Ready=True only with an available replica, an
  ``ExitCode<N>`` only with a pod whose container exited with N, ``Unschedulable`` only with a pod the scheduler could
  not place;
- workloads that create no pod: a Revision whose image Knative could not resolve (ContainerMissing) has no
  Deployment; a ReplicaSet or Deployment with ReplicaFailure=True has fewer pods than it wants, and the
  ReplicaSet's FailedCreate events say why;
- logs: their pods and containers (init containers included) exist, ``.previous`` logs only for restarted
  containers, and their timestamps lie in the window;
- kube-state-metrics and exporters: restart counts and last terminated reasons
  agree with the pods, and no per-pod series names a pod that never ran.

The raw series (``scenario/metrics.om``) are checked when the bundle has them
(generated scenarios do; captured bundles only hold query answers).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

from nbhelpers.errors import BundleError, RunbookError
from nbhelpers.models.vllm_memory import Gpu, default_max_num_seqs, parse_version
from nbhelpers.scenarios.generator import RAW_METRICS_FILE
from nbhelpers.sources import kinds, kube
from nbhelpers.sources.base import SeriesData, series_from_matrix
from nbhelpers.sources.bundle import BundleCluster, BundleFiles, Manifest, read_manifest
from nbhelpers.sources.kube import KubeObject, event_interval
from nbhelpers.util import quantities
from nbhelpers.util.times import Window, parse_k8s_time

# Owner kinds a capture always reads in the target namespace: an owner of these kinds must be in the bundle.
_CAPTURED_OWNER_KINDS = (
    kinds.INFERENCE_SERVICE,
    kinds.KNATIVE_SERVICE,
    kinds.KNATIVE_REVISION,
    kinds.DEPLOYMENT,
    kinds.REPLICA_SET,
    kinds.SERVICE,
)
# A deleted pod's kubelet events (Killing) may follow the ReplicaSet's deletion by the drain and grace period.
_POD_STOP_SECONDS = timedelta(seconds=60)
# ingress-nginx's proxy-read-timeout annotation and default; a cut shows as latencies within 10 % of it.
NGINX_READ_TIMEOUT = "nginx.ingress.kubernetes.io/proxy-read-timeout"
NGINX_DEFAULT_READ_TIMEOUT = "60"
NEAR_TIMEOUT = 0.9
# With nothing running vLLM holds no KV blocks (only its reserved null block).
IDLE_KV_USAGE = 0.001
# Below this KV usage the scheduler still has blocks for a waiting request; a queue that stays this many scrapes
# below --max-num-seqs with the cache that empty is one vLLM would have admitted.
ADMITTING_KV_USAGE = 0.9
HELD_BACK_SCRAPES = 3
# The running-requests gauge vLLM caps at its ceiling (an HPA on it cannot read more per pod).
RUNNING_METRIC = "vllm:num_requests_running"
_CUDA_OOM = "torch.OutOfMemoryError: CUDA out of memory"
# vLLM V1's refusal to start: one request of the max seq len needs more KV cache than is available.
_KV_REFUSAL = re.compile(
    r"max seq len \((\d+)\), \(([\d.]+) GiB KV cache is needed, which is larger than the available KV cache "
    r"memory \(([\d.]+) GiB\)\. Based on the available memory, the estimated maximum model length is (\d+)\."
)
_KV_BLOCK_TOKENS = 16
_LOG_STAMP = re.compile(r"^(\S+)\s")
_OM_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)\s+(\S+)$")
_OM_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
_COUNTER_FAMILIES = re.compile(r"^# TYPE (\S+) counter$")


@dataclass(frozen=True)
class _Bundle:
    files: BundleFiles
    manifest: Manifest
    cluster: BundleCluster

    @property
    def window(self) -> Window:
        return self.manifest.window

    @property
    def namespace(self) -> str:
        return self.manifest.namespace

    def objects(self, kind: kinds.Kind) -> list[KubeObject]:
        return self.cluster.store.of_kind(kind.key)

    def pods(self) -> list[KubeObject]:
        return [pod for pod in self.objects(kinds.POD) if kube.namespace(pod) == self.namespace]


def validate_bundle(source: Mapping[str, bytes] | str | os.PathLike[str]) -> list[str]:
    """Problems that make the bundle implausible; an empty list when there are none."""
    files = BundleFiles(Path("<memory>"), dict(source)) if isinstance(source, Mapping) else BundleFiles(Path(source))
    try:
        manifest = read_manifest(files)
        bundle = _Bundle(files, manifest, BundleCluster(files, manifest))
    except BundleError as error:
        return [str(error)]
    problems: list[str] = []
    problems += _check_owners(bundle)
    problems += _check_services(bundle)
    problems += _check_endpoints(bundle)
    problems += _check_workload_names(bundle)
    problems += _check_pods(bundle)
    problems += _check_replica_failures(bundle)
    problems += _check_revision_conditions(bundle)
    problems += _check_events(bundle)
    problems += _check_logs(bundle)
    problems += _check_metrics(bundle)
    raw = files.text(RAW_METRICS_FILE)
    if raw is not None:
        problems += check_openmetrics(raw)
    return problems


# ---- objects ------------------------------------------------------------------------------------


def _index(bundle: _Bundle) -> dict[tuple[str, str, str], KubeObject]:
    """(kind key, namespace, name) -> object, for every object in the bundle."""
    return {
        (key, kube.namespace(obj), kube.name(obj)): obj
        for key in bundle.cluster.store.kind_keys()
        for obj in bundle.cluster.store.of_kind(key)
    }


def _read_failed(bundle: _Bundle, kind: kinds.Kind) -> bool:
    return any(
        str(record.get("what", "")).startswith(kind.key) and record.get("status") != "ok"
        for record in bundle.manifest.raw.get("reads") or []
    )


def _check_owners(bundle: _Bundle) -> list[str]:
    index = _index(bundle)
    problems = []
    checked = {kind.key: kind for kind in _CAPTURED_OWNER_KINDS if not _read_failed(bundle, kind)}
    for (key, namespace, name), obj in sorted(index.items()):
        if namespace != bundle.namespace:
            continue
        for owner in kube.metadata(obj).get("ownerReferences") or []:
            owner_kind = kinds.kind_for(str(owner.get("apiVersion", "")), str(owner.get("kind", "")))
            if owner_kind is None or owner_kind.key not in checked:
                continue
            found = index.get((owner_kind.key, namespace, str(owner.get("name"))))
            if found is None:
                problems.append(
                    f"{key}/{namespace}/{name}: owner {owner_kind.key} {owner.get('name')!r} is not in the bundle"
                )
            elif owner.get("uid") and kube.metadata(found).get("uid") != owner.get("uid"):
                problems.append(
                    f"{key}/{namespace}/{name}: owner {owner_kind.key} {owner.get('name')!r} has another uid"
                )
    return problems


def _check_services(bundle: _Bundle) -> list[str]:
    problems = []
    pods = bundle.pods()
    for service in bundle.objects(kinds.SERVICE):
        if kube.namespace(service) != bundle.namespace:
            continue
        selector = kube.spec(service).get("selector")
        # With no pod at all (the API server refused them, or Knative never created a Deployment) nothing can match.
        if selector and pods and not any(kube.selector_matches(selector, kube.labels(pod)) for pod in pods):
            problems.append(f"Service/{bundle.namespace}/{kube.name(service)}: selector {selector} matches no pod")
    for hpa in bundle.objects(kinds.HPA):
        target = kube.spec(hpa).get("scaleTargetRef") or {}
        target_kind = kinds.kind_for(str(target.get("apiVersion", "apps/v1")), str(target.get("kind", "")))
        found = {kube.name(obj): obj for obj in bundle.objects(target_kind)} if target_kind else {}
        where = f"HorizontalPodAutoscaler/{kube.namespace(hpa)}/{kube.name(hpa)}"
        if target.get("name") not in found:
            problems.append(f"{where}: scaleTargetRef {target} does not exist")
        else:
            problems += _check_hpa_replicas(where, hpa, found[str(target.get("name"))])
    return problems


def _check_hpa_replicas(where: str, hpa: KubeObject, target: KubeObject) -> list[str]:
    """The HPA reads its current replicas from the target's scale (status.replicas, omitted when 0), and switches
    itself off for a target at zero replicas: ScalingActive=False, ScalingDisabled."""
    current = int(kube.status(hpa).get("currentReplicas") or 0)
    actual = int(kube.status(target).get("replicas") or 0)
    if current != actual:
        return [f"{where}: currentReplicas {current}, but its target {kube.name(target)} has {actual} replicas"]
    active = kube.condition(hpa, "ScalingActive") or {}
    if kube.spec(target).get("replicas") == 0 and (active.get("status"), active.get("reason")) != (
        "False",
        "ScalingDisabled",
    ):
        return [f"{where}: its target {kube.name(target)} is at zero replicas, yet scaling is not ScalingDisabled"]
    return []


def _pod_addresses(endpoints: KubeObject) -> Iterator[tuple[dict[str, Any], bool]]:
    for subset in endpoints.get("subsets") or []:
        for address in subset.get("addresses") or []:
            yield address, True
        for address in subset.get("notReadyAddresses") or []:
            yield address, False


def _slice_addresses(endpoint_slice: KubeObject) -> Iterator[tuple[dict[str, Any], bool]]:
    for endpoint in endpoint_slice.get("endpoints") or []:
        for ip in endpoint.get("addresses") or []:
            ready = (endpoint.get("conditions") or {}).get("ready")
            yield {"ip": ip, "targetRef": endpoint.get("targetRef") or {}}, ready is not False


def _check_endpoints(bundle: _Bundle) -> list[str]:
    pods = {kube.name(pod): pod for pod in bundle.pods()}
    services = {kube.name(svc): svc for svc in bundle.objects(kinds.SERVICE) if kube.namespace(svc) == bundle.namespace}
    problems = []
    sources = [(kinds.ENDPOINTS, obj, kube.name(obj), _pod_addresses(obj)) for obj in bundle.objects(kinds.ENDPOINTS)]
    sources += [
        (kinds.ENDPOINT_SLICE, obj, kube.labels(obj).get("kubernetes.io/service-name", ""), _slice_addresses(obj))
        for obj in bundle.objects(kinds.ENDPOINT_SLICE)
    ]
    for kind, obj, service_name, addresses in sources:
        if kube.namespace(obj) != bundle.namespace:
            continue
        where = f"{kind.key}/{bundle.namespace}/{kube.name(obj)}"
        service = services.get(service_name)
        if service is None:
            problems.append(f"{where}: no Service named {service_name!r}")
            continue
        selector = kube.spec(service).get("selector")
        seen = set()
        for address, ready in addresses:
            target = address.get("targetRef") or {}
            if target.get("kind") != "Pod" or target.get("namespace", bundle.namespace) != bundle.namespace:
                continue
            pod = pods.get(str(target.get("name")))
            if pod is None:
                problems.append(
                    f"{where}: address {address.get('ip')} names pod {target.get('name')!r}, which does not exist"
                )
                continue
            seen.add(kube.name(pod))
            if kube.status(pod).get("podIP") != address.get("ip"):
                problems.append(f"{where}: address {address.get('ip')} is not the IP of pod {kube.name(pod)}")
            if ready != kube.pod_ready(pod):
                problems.append(
                    f"{where}: pod {kube.name(pod)} is listed as {'ready' if ready else 'not ready'}, but it is not"
                )
        if selector:
            expected = {
                name
                for name, pod in pods.items()
                if kube.selector_matches(selector, kube.labels(pod)) and kube.status(pod).get("podIP")
            }
            for missing in sorted(expected - seen):
                problems.append(f"{where}: pod {missing} matches the Service selector but has no address")
    return problems


def _check_workload_names(bundle: _Bundle) -> list[str]:
    problems = []
    isvc = bundle.manifest.isvc
    deployments = {kube.name(obj) for obj in bundle.objects(kinds.DEPLOYMENT)}
    replica_sets = {kube.name(obj) for obj in bundle.objects(kinds.REPLICA_SET)}
    revisions = {kube.name(obj) for obj in bundle.objects(kinds.KNATIVE_REVISION)}
    unresolved = {kube.name(obj) for obj in bundle.objects(kinds.KNATIVE_REVISION) if _image_unresolved(obj)}
    for revision in sorted(revisions):
        if not re.fullmatch(rf"{re.escape(isvc)}-predictor-\d{{5}}", revision):
            problems.append(f"Revision {revision!r} is not named <isvc>-predictor-0000N")
        has_deployment = f"{revision}-deployment" in deployments
        if revision in unresolved and has_deployment:
            problems.append(f"Revision {revision!r} is ContainerMissing, yet Knative created its Deployment")
        if revision not in unresolved and not has_deployment:
            problems.append(f"Revision {revision!r} has no Deployment {revision}-deployment")
    for ksvc in bundle.objects(kinds.KNATIVE_SERVICE):
        for field in ("latestCreatedRevisionName", "latestReadyRevisionName"):
            named = kube.status(ksvc).get(field)
            if named and named not in revisions:
                problems.append(f"Knative Service {kube.name(ksvc)}: {field} {named!r} is not a Revision in the bundle")
    for pod in bundle.pods():
        if not kube.is_predictor(pod):
            continue
        template_hash = kube.labels(pod).get("pod-template-hash", "")
        owners = kube.owner_names(pod, "ReplicaSet")
        name = kube.name(pod)
        # An LLMInferenceService's vLLM pods come from <name>-kserve (or -kserve-prefill): workload_single_node.go.
        prefix = f"{isvc}-kserve-" if kube.is_llmisvc_workload(pod) else f"{isvc}-predictor-"
        if not name.startswith(prefix):
            problems.append(f"pod {name}: predictor pods are named {prefix}...")
        for owner in owners:
            if owner not in replica_sets:
                continue
            if not re.fullmatch(rf"{re.escape(owner)}-[a-z0-9]{{5}}", name) or not owner.endswith(f"-{template_hash}"):
                problems.append(
                    f"pod {name}: not named <replicaset>-<5 chars> after {owner} with its pod-template-hash"
                )
    return problems


def _check_pods(bundle: _Bundle) -> list[str]:
    problems = []
    for pod in bundle.pods():
        where, status = f"Pod/{bundle.namespace}/{kube.name(pod)}", kube.status(pod)
        if not kube.spec(pod).get("nodeName"):
            scheduled = kube.condition(pod, "PodScheduled") or {}
            if status.get("phase") != "Pending" or str(scheduled.get("status")) != "False":
                problems.append(f"{where}: no node, but not Pending with PodScheduled=False")
            if status.get("podIP") or status.get("containerStatuses"):
                problems.append(f"{where}: no node, yet it has an IP or container statuses")
            continue
        for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            problems += _check_container_status(f"{where} {container.get('name')}", container)
        problems += _check_initialization(where, pod)
    return problems


def _init_completed(status: Mapping[str, Any]) -> bool:
    terminated = (status.get("state") or {}).get("terminated") or {}
    return bool(terminated) and int(terminated.get("exitCode") or 0) == 0


def _runs(container: Mapping[str, Any]) -> int:
    """How many times a container has run: none while it waits to start for the first time."""
    state = container.get("state") or {}
    ever = "running" in state or "terminated" in state or (container.get("lastState") or {}).get("terminated")
    return int(container.get("restartCount") or 0) + 1 if ever else 0


def _check_initialization(where: str, pod: KubeObject) -> list[str]:
    """Containers start only after every init container exited 0 (a native sidecar, ``restartPolicy: Always``, once it
    has started): until then the pod is Pending, not Initialized."""
    status = kube.status(pod)
    sidecars = {c.get("name") for c in kube.spec(pod).get("initContainers") or [] if c.get("restartPolicy") == "Always"}
    pending = [
        str(c.get("name"))
        for c in status.get("initContainerStatuses") or []
        if not _init_completed(c) and not (c.get("name") in sidecars and c.get("started"))
    ]
    if not pending:
        return []
    problems = []
    initialized = kube.condition(pod, "Initialized") or {}
    if status.get("phase") != "Pending" or str(initialized.get("status")) != "False":
        problems.append(
            f"{where}: init container {pending[0]} has not completed, but the pod is not Pending/Initialized=False"
        )
    for container in status.get("containerStatuses") or []:
        if _runs(container) or (container.get("state") or {}).get("waiting", {}).get("reason") != "PodInitializing":
            problems.append(f"{where} {container.get('name')}: started or not PodInitializing before init completed")
    return problems


def _image_unresolved(revision: KubeObject) -> bool:
    healthy = kube.condition(revision, "ContainerHealthy") or {}
    return str(healthy.get("status")) == "False" and healthy.get("reason") == "ContainerMissing"


def _check_revision_conditions(bundle: _Bundle) -> list[str]:
    """A Revision's Ready says what Knative read from its Deployment and pods (docs/upstream-facts.md, "Knative
    Revision conditions from the pods")."""
    problems = []
    deployments = {kube.name(obj): obj for obj in bundle.objects(kinds.DEPLOYMENT)}
    for revision in bundle.objects(kinds.KNATIVE_REVISION):
        name = kube.name(revision)
        ready = kube.condition(revision, "Ready") or {}
        reason = str(ready.get("reason") or "")
        pods = [pod for pod in bundle.pods() if kube.labels(pod).get("serving.knative.dev/revision") == name]
        deployment = deployments.get(f"{name}-deployment")
        available = int(kube.status(deployment).get("availableReplicas") or 0) if deployment is not None else 0
        if str(ready.get("status")) == "True" and not available:
            problems.append(f"Revision {name!r} is Ready without an available replica")
        if reason.startswith("ExitCode") and not any(_exited_with(pod, reason[len("ExitCode") :]) for pod in pods):
            problems.append(f"Revision {name!r} reports {reason}, but no pod's container exited with that code")
        if reason == "Unschedulable" and not any(
            str((kube.condition(pod, "PodScheduled") or {}).get("status")) == "False" for pod in pods
        ):
            problems.append(f"Revision {name!r} reports Unschedulable, but every pod was scheduled")
    return problems


def _exited_with(pod: KubeObject, code: str) -> bool:
    return any(
        str(((status.get("lastState") or {}).get("terminated") or {}).get("exitCode")) == code
        for status in kube.status(pod).get("containerStatuses") or []
    )


def _check_replica_failures(bundle: _Bundle) -> list[str]:
    """A workload that failed to create pods has fewer than it wants, and the ReplicaSet's events say why."""
    problems = []
    failed_create = {
        str((event.get("involvedObject") or {}).get("name"))
        for event in bundle.objects(kinds.EVENT)
        if event.get("reason") == "FailedCreate"
    }
    for kind in (kinds.DEPLOYMENT, kinds.REPLICA_SET):
        for obj in bundle.objects(kind):
            failure = kube.condition(obj, "ReplicaFailure") or {}
            if str(failure.get("status")) != "True":
                continue
            where = f"{kind.key}/{kube.namespace(obj)}/{kube.name(obj)}"
            if int(kube.status(obj).get("replicas") or 0) >= int(kube.spec(obj).get("replicas") or 0):
                problems.append(f"{where}: ReplicaFailure, yet it has all the replicas it wants")
            if kind is kinds.REPLICA_SET and kube.name(obj) not in failed_create:
                problems.append(f"{where}: ReplicaFailure without a FailedCreate event")
    return problems


def _check_container_status(where: str, container: Mapping[str, Any]) -> list[str]:
    problems = []
    restarts = int(container.get("restartCount") or 0)
    state = container.get("state") or {}
    last = (container.get("lastState") or {}).get("terminated")
    if restarts and not last:
        problems.append(f"{where}: {restarts} restarts but no lastState.terminated")
    if not restarts and last:
        problems.append(f"{where}: a last termination but restartCount 0")
    if (state.get("waiting") or {}).get("reason") == "CrashLoopBackOff" and not restarts:
        problems.append(f"{where}: CrashLoopBackOff without a restart")
    if last:
        started, finished = parse_k8s_time(last.get("startedAt")), parse_k8s_time(last.get("finishedAt"))
        running = parse_k8s_time((state.get("running") or {}).get("startedAt"))
        if started and finished and finished < started:
            problems.append(f"{where}: the last termination finished before it started")
        if running and finished and running < finished:
            problems.append(f"{where}: the running container started before the previous one finished")
        if last.get("reason") == "OOMKilled" and last.get("exitCode") != 137:
            problems.append(f"{where}: OOMKilled with exit code {last.get('exitCode')}, not 137")
    return problems


def _started_events(bundle: _Bundle) -> dict[tuple[str, str], int]:
    """(pod, container) -> how many times the kubelet reported the container Started."""
    counts: dict[tuple[str, str], int] = {}
    for event in bundle.objects(kinds.EVENT):
        involved = event.get("involvedObject") or {}
        if event.get("reason") != "Started" or involved.get("kind") != "Pod":
            continue
        field = str(involved.get("fieldPath") or "")
        container = field.removeprefix("spec.containers{").removeprefix("spec.initContainers{").removesuffix("}")
        key = (str(involved.get("name")), container)
        counts[key] = counts.get(key, 0) + int(event.get("count") or 1)
    return counts


def _check_runs_against_events(bundle: _Bundle) -> list[str]:
    """Each run of a container is one Started event: for pods created in the window they must add up."""
    started = _started_events(bundle)
    problems = []
    for pod in bundle.pods():
        created = parse_k8s_time(kube.created(pod))
        if created is None or not bundle.window.contains(created):
            continue
        status = kube.status(pod)
        for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            runs = _runs(container)
            seen = started.get((kube.name(pod), str(container.get("name"))), 0)
            if seen != runs:
                problems.append(
                    f"Pod/{bundle.namespace}/{kube.name(pod)} {container.get('name')}: {runs} runs "
                    f"(restartCount + 1), but {seen} Started events"
                )
    return problems


def _check_events(bundle: _Bundle) -> list[str]:
    index = _index(bundle)
    deleted = _deleted_pods(bundle)
    problems = _check_runs_against_events(bundle)
    for name in sorted(set(deleted) & {kube.name(pod) for pod in bundle.pods()}):
        problems.append(f"Pod/{bundle.namespace}/{name}: deleted by its ReplicaSet, yet still in the bundle")
    for event in bundle.objects(kinds.EVENT):
        involved = event.get("involvedObject") or event.get("regarding") or {}
        where = f"Event {kube.name(event)}"
        first, last = event_interval(event)
        if first is None:
            problems.append(f"{where}: no timestamp")
        elif last is not None and (last < bundle.window.start or first >= bundle.window.end or last < first):
            problems.append(f"{where}: {first}..{last} lies outside the window")
        involved_kind = kinds.kind_for(str(involved.get("apiVersion", "v1")), str(involved.get("kind", "")))
        if involved_kind is None or _read_failed(bundle, involved_kind):
            continue
        key = (involved_kind.key, str(involved.get("namespace") or ""), str(involved.get("name")))
        if key not in index and not (involved_kind is kinds.POD and key[2] in deleted):
            problems.append(f"{where}: names {involved_kind.key} {involved.get('name')!r}, which is not in the bundle")
        elif key[2] in deleted and first is not None and first > deleted[key[2]] + _POD_STOP_SECONDS:
            problems.append(f"{where}: about pod {key[2]} after its ReplicaSet deleted it")
    return problems


def _deleted_pods(bundle: _Bundle) -> dict[str, datetime]:
    """Pods a ReplicaSet of the bundle deleted (scaled away), with when: their events outlive them."""
    replica_sets = {kube.name(obj) for obj in bundle.objects(kinds.REPLICA_SET)}
    deleted = {}
    for event in bundle.objects(kinds.EVENT):
        involved = event.get("involvedObject") or {}
        message = str(event.get("message") or "")
        if event.get("reason") != "SuccessfulDelete" or involved.get("name") not in replica_sets:
            continue
        first, _ = event_interval(event)
        if message.startswith("Deleted pod: ") and first is not None:
            deleted[message.removeprefix("Deleted pod: ")] = first
    return deleted


def _check_logs(bundle: _Bundle) -> list[str]:
    pods = {kube.name(pod): pod for pod in bundle.pods()}
    problems = []
    for name, data in sorted(bundle.files.under("logs/")):
        parts = name.split("/")
        if len(parts) != 4:
            problems.append(f"{name}: not logs/<namespace>/<pod>/<container>.log")
            continue
        _, _namespace, pod_name, file_name = parts
        container = file_name.removesuffix(".log").removesuffix(".previous")
        pod = pods.get(pod_name)
        if pod is None:
            problems.append(f"{name}: pod {pod_name} is not in the bundle")
        elif container not in {
            str(c.get("name"))
            for c in [*kube.containers(kube.spec(pod)), *(kube.spec(pod).get("initContainers") or [])]
        }:
            problems.append(f"{name}: pod {pod_name} has no container {container}")
        elif file_name.endswith(".previous.log") and not _restarted(pod, container):
            problems.append(f"{name}: a previous log, but {container} never restarted")
        elif file_name.endswith(".previous.log") and _CUDA_OOM in data.decode("utf-8", errors="replace"):
            problems += _check_engine_error_exit(name, pod, container, "a CUDA out-of-memory error")
        elif file_name.endswith(".previous.log") and _KV_REFUSAL.search(data.decode("utf-8", errors="replace")):
            problems += _check_engine_error_exit(name, pod, container, "vLLM's KV cache capacity check")
        refusal = _KV_REFUSAL.search(data.decode("utf-8", errors="replace"))
        if refusal is not None:
            problems += _check_kv_refusal(name, refusal)
        previous: datetime | None = None
        for line in data.decode("utf-8", errors="replace").splitlines():
            match = _LOG_STAMP.match(line)
            moment = parse_k8s_time(match.group(1)) if match else None
            if moment is None:
                continue
            if not bundle.window.contains(moment):
                problems.append(f"{name}: line at {match.group(1) if match else '?'} lies outside the window")
                break
            if previous is not None and moment < previous:
                problems.append(f"{name}: timestamps go backwards at {match.group(1) if match else '?'}")
                break
            previous = moment
    return problems


def _check_engine_error_exit(name: str, pod: KubeObject, container: str, cause: str) -> list[str]:
    """An engine that refuses to start (PyTorch's CUDA out-of-memory error, vLLM's KV cache check) raises an
    exception in the process: it exits with code 1 (Error). The kernel's OOM killer (OOMKilled, 137) is about host
    memory and leaves no such line."""
    for status in kube.status(pod).get("containerStatuses") or []:
        last = (status.get("lastState") or {}).get("terminated") or {}
        if status.get("name") == container and last and (last.get("reason"), last.get("exitCode")) != ("Error", 1):
            return [
                f"{name}: the engine died of {cause}, but the container's last termination is "
                f"{last.get('reason')} (exit code {last.get('exitCode')}), not Error (1)"
            ]
    return []


def _check_kv_refusal(name: str, refusal: re.Match[str]) -> list[str]:
    """vLLM's numbers hold together: the request does not fit, the estimate is shorter than it, and the estimate
    is the whole blocks the available memory holds at the bytes per token the needed memory implies."""
    max_len, needed, available, estimate = (
        int(refusal.group(1)),
        float(refusal.group(2)),
        float(refusal.group(3)),
        int(refusal.group(4)),
    )
    if needed <= available or estimate >= max_len:
        return [
            f"{name}: the KV capacity error says {needed} GiB needed, {available} GiB available, estimate "
            f"{estimate} for {max_len} tokens: that request would fit"
        ]
    gib_per_token = needed / max_len
    slack = 0.01 + gib_per_token * _KV_BLOCK_TOKENS + 0.005 * estimate / max_len
    if abs(estimate * gib_per_token - available) > slack:
        return [
            f"{name}: the KV capacity error's estimate of {estimate} tokens holds {estimate * gib_per_token:.2f} GiB "
            f"at {needed} GiB per {max_len} tokens, not the {available} GiB it says are available"
        ]
    return []


def _restarted(pod: KubeObject, container: str) -> bool:
    return any(
        status.get("name") == container and int(status.get("restartCount") or 0) > 0
        for status in [
            *(kube.status(pod).get("initContainerStatuses") or []),
            *(kube.status(pod).get("containerStatuses") or []),
        ]
    )


# ---- metrics ------------------------------------------------------------------------------------


def _answers(bundle: _Bundle) -> dict[str, tuple[SeriesData, ...]]:
    index_text = bundle.files.text("metrics/index.json")
    index = json.loads(index_text) if index_text else {}
    answers = {}
    for query_id, entry in index.items():
        text = bundle.files.text(f"metrics/{query_id}.json")
        if entry.get("status") in ("ok", "empty") and text is not None:
            answers[query_id] = series_from_matrix(json.loads(text), str(entry.get("promql"))).series
    return answers


def _by_pod(series: tuple[SeriesData, ...]) -> dict[str, dict[float, float]]:
    return {item.labels.get("pod", ""): dict(item.samples) for item in series}


def _ceilings(bundle: _Bundle) -> dict[str, int]:
    """Per pod: the most requests vLLM runs at once (``--max-num-seqs``, else its version/GPU default)."""
    nodes = {kube.name(node): node for node in bundle.objects(kinds.NODE)}
    ceilings = {}
    for pod in bundle.pods():
        for container in kube.containers(kube.spec(pod)):
            if container.get("name") != kube.SERVING_CONTAINER:
                continue
            args = [str(arg) for arg in (container.get("command") or []) + (container.get("args") or [])]
            value = next((args[i + 1] for i, arg in enumerate(args[:-1]) if arg == "--max-num-seqs"), None)
            value = value or next((arg.split("=", 1)[1] for arg in args if arg.startswith("--max-num-seqs=")), None)
            if value is None:
                node = nodes.get(str(kube.spec(pod).get("nodeName")))
                labels = kube.labels(node) if node else {}
                memory_mib = int(labels.get("nvidia.com/gpu.memory", "0") or 0)
                product = labels.get("nvidia.com/gpu.product", "").replace("-", " ") or None
                gpu = Gpu(memory_mib * 1024 * 1024, product)
                value = str(default_max_num_seqs(_image_version(str(container.get("image") or "")), gpu).value)
            ceilings[kube.name(pod)] = int(value)
    return ceilings


def _image_version(image: str) -> tuple[int, int, int] | None:
    """The vLLM version in an image tag (``vllm/vllm-openai:v0.10.1``), else None (the newest defaults apply)."""
    tag = image.rsplit("/", 1)[-1].partition(":")[2]
    try:
        return parse_version(tag) if tag else None
    except RunbookError:
        return None


def _check_metrics(bundle: _Bundle) -> list[str]:
    answers = _answers(bundle)
    problems = []
    low, high = bundle.window.start.timestamp(), bundle.window.end.timestamp()
    for query_id, series in sorted(answers.items()):
        for item in series:
            if any(not low <= t <= high for t, _ in item.samples):
                problems.append(f"metrics {query_id}: samples outside the window")
                break
            is_rate = query_id.endswith(("_rate", "_by_code", "_by_status"))
            if is_rate and any(v < 0 for _, v in item.samples):
                problems.append(f"metrics {query_id} {item.labels}: a negative rate")
    for item in answers.get("pod_restarts", ()):
        values = [v for _, v in item.samples]
        if any(later < earlier for earlier, later in pairwise(values)):
            problems.append(f"metrics pod_restarts {item.labels}: the restart counter decreases")
    problems += _check_engine(answers, _ceilings(bundle))
    problems += _check_quantiles(answers)
    problems += _check_kube_state(bundle, answers)
    return problems


def _check_engine(answers: dict[str, tuple[SeriesData, ...]], ceilings: dict[str, int]) -> list[str]:
    problems = []
    running = _by_pod(answers.get("vllm_running", ()))
    kv_usage = _by_pod(answers.get("vllm_kv_cache_usage", ()))
    blocks = {
        item.labels.get("pod", ""): int(item.labels.get("num_gpu_blocks", "0") or 0)
        for item in answers.get("vllm_cache_config", ())
    }
    for pod, samples in sorted(running.items()):
        ceiling = ceilings.get(pod)
        if ceiling is not None and any(v > ceiling for v in samples.values()):
            problems.append(
                f"metrics vllm_running {pod}: {max(samples.values()):g} running, above the ceiling {ceiling}"
            )
    for pod, samples in sorted(kv_usage.items()):
        if any(not 0 <= v <= 1 for v in samples.values()):
            problems.append(f"metrics vllm_kv_cache_usage {pod}: outside 0-1")
            continue
        in_flight = running.get(pod, {})
        for at, usage in sorted(samples.items()):
            requests = in_flight.get(at)
            if requests is None:
                continue
            if requests == 0 and usage > IDLE_KV_USAGE:
                problems.append(f"metrics {pod} at {at:.0f}: KV cache {usage:.1%} used with no running request")
                break
            if requests > 0 and blocks.get(pod) and usage * blocks[pod] < requests * 0.5:
                problems.append(
                    f"metrics {pod} at {at:.0f}: {requests:g} running requests in {usage:.2%} of the KV cache"
                )
                break
    return problems + _check_admission(answers, ceilings)


def _check_admission(answers: dict[str, tuple[SeriesData, ...]], ceilings: dict[str, int]) -> list[str]:
    """vLLM's scheduler admits a waiting request whenever the batch is below --max-num-seqs and the cache has its
    blocks: requests that keep waiting below the ceiling (several scrapes in a row) need a nearly full KV cache."""
    problems = []
    running = _by_pod(answers.get("vllm_running", ()))
    kv_usage = _by_pod(answers.get("vllm_kv_cache_usage", ()))
    for pod, waiting in sorted(_by_pod(answers.get("vllm_waiting", ())).items()):
        ceiling, in_flight, usage = ceilings.get(pod), running.get(pod, {}), kv_usage.get(pod, {})
        if ceiling is None or not usage:
            continue
        streak = 0
        for at, queued in sorted(waiting.items()):
            held_back = queued >= 1 and in_flight.get(at, ceiling) < ceiling and usage.get(at, 1.0) < ADMITTING_KV_USAGE
            streak = streak + 1 if held_back else 0
            if streak == HELD_BACK_SCRAPES:
                problems.append(
                    f"metrics {pod} at {at:.0f}: {queued:g} requests waiting below the ceiling {ceiling} with the KV "
                    f"cache {usage[at]:.0%} used: vLLM would have admitted them"
                )
                break
    return problems


def _check_quantiles(answers: dict[str, tuple[SeriesData, ...]]) -> list[str]:
    problems = []
    p95 = {t: v for item in answers.get("vllm_e2e_p95", ()) for t, v in item.samples}
    p99 = {t: v for item in answers.get("vllm_e2e_p99", ()) for t, v in item.samples}
    for at, value in sorted(p95.items()):
        other = p99.get(at)
        if other is not None and not math.isnan(value) and not math.isnan(other) and value > other + 1e-9:
            problems.append(f"metrics vllm_e2e at {at:.0f}: p95 {value:.3f}s above p99 {other:.3f}s")
            break
    return problems


def _last(series: tuple[SeriesData, ...]) -> float | None:
    samples = [sample for item in series for sample in item.samples]
    return max(samples)[1] if samples else None


def _check_kube_state(bundle: _Bundle, answers: dict[str, tuple[SeriesData, ...]]) -> list[str]:
    """kube-state-metrics at the end of the window must agree with the pods captured."""
    problems = []
    pods = [pod for pod in bundle.pods() if kube.is_predictor(pod)]
    ready_now = sum(1 for pod in pods if kube.pod_ready(pod))
    ready_metric = _last(answers.get("pod_ready", ()))
    if ready_metric is not None and ready_metric != ready_now:
        problems.append(f"metrics pod_ready ends at {ready_metric:g}, but {ready_now} predictor pods are Ready")
    restarts = {
        (item.labels.get("pod"), item.labels.get("container")): item.samples[-1][1]
        for item in answers.get("pod_restarts", ())
        if item.samples
    }
    for pod in pods:
        for status in kube.status(pod).get("containerStatuses") or []:
            value = restarts.get((kube.name(pod), status.get("name")))
            if value is not None and value != int(status.get("restartCount") or 0):
                problems.append(
                    f"metrics pod_restarts {kube.name(pod)}/{status.get('name')}: {value:g}, the pod says {status.get('restartCount')}"
                )
    problems += _check_terminations(bundle, answers)
    never_ran = {kube.name(pod) for pod in pods if not kube.status(pod).get("containerStatuses")}
    for query_id, series in sorted(answers.items()):
        named = sorted({item.labels.get("pod", "") for item in series} & never_ran)
        if named:
            problems.append(f"metrics {query_id}: series for pod {named[0]}, which never ran a container")
    if pods and ready_now == 0:
        for query_id, label in (("istio_requests_by_code", "response_code"), ("nginx_requests_by_status", "status")):
            for item in answers.get(query_id, ()):
                code = item.labels.get(label, "")
                if code.startswith("2") and item.samples and item.samples[-1][1] > 0:
                    problems.append(f"metrics {query_id}: 2xx responses while no predictor pod is ready")
    problems += _check_nginx_timeouts(bundle, answers)
    problems += _check_hpa_limits(bundle, answers)
    return problems


def _check_hpa_limits(bundle: _Bundle, answers: dict[str, tuple[SeriesData, ...]]) -> list[str]:
    """An HPA limited by TooManyReplicas sits at its maxReplicas, and the last samples of kube-state-metrics'
    current and desired replicas (the catalog takes the max over the predictor's HPAs) read the same status."""
    problems = []
    hpas = [hpa for hpa in bundle.objects(kinds.HPA) if kube.namespace(hpa) == bundle.namespace]
    for hpa in hpas:
        where = f"HorizontalPodAutoscaler/{kube.namespace(hpa)}/{kube.name(hpa)}"
        limited = kube.condition(hpa, "ScalingLimited") or {}
        maximum = kube.spec(hpa).get("maxReplicas")
        current = int(kube.status(hpa).get("currentReplicas") or 0)
        if (limited.get("status"), limited.get("reason")) == ("True", "TooManyReplicas") and current != maximum:
            problems.append(
                f"{where}: ScalingLimited TooManyReplicas, but currentReplicas {current} != maxReplicas {maximum}"
            )
    problems += _check_hpa_running_average(bundle, hpas)
    for query_id, field in (("hpa_current_replicas", "currentReplicas"), ("hpa_desired_replicas", "desiredReplicas")):
        last = _last(answers.get(query_id, ()))
        highest = max((int(kube.status(hpa).get(field) or 0) for hpa in hpas), default=None)
        if last is not None and highest is not None and last != highest:
            problems.append(f"metrics {query_id} end at {last:g}, but the HPAs' highest status.{field} is {highest}")
    return problems


def _check_hpa_running_average(bundle: _Bundle, hpas: list[KubeObject]) -> list[str]:
    """vLLM never runs more requests than its ceiling, so an HPA cannot read an average of running requests per pod
    above the highest ceiling of the predictor pods (such an HPA would have scaled out)."""
    ceiling = max(_ceilings(bundle).values(), default=None)
    if ceiling is None:
        return []
    problems = []
    for hpa in hpas:
        for metric in kube.status(hpa).get("currentMetrics") or []:
            pods = metric.get("pods") or {}
            name = str((pods.get("metric") or {}).get("name") or "")
            average = quantities.try_parse((pods.get("current") or {}).get("averageValue"))
            if name == RUNNING_METRIC and average is not None and float(average) > ceiling:
                problems.append(
                    f"HorizontalPodAutoscaler/{kube.namespace(hpa)}/{kube.name(hpa)}: {name} averages "
                    f"{float(average):g} per pod, above the pods' ceiling of {ceiling} running requests"
                )
    return problems


def _check_nginx_timeouts(bundle: _Bundle, answers: dict[str, tuple[SeriesData, ...]]) -> list[str]:
    """ingress-nginx answers 504 on its own only when a request outlasts its proxy-read-timeout: such 504s need
    vLLM's end-to-end latency to reach the Ingress's timeout (nginx's 60 s default when no annotation sets it)."""
    cut = any(
        item.labels.get("status") == "504" and any(value > 0 for _, value in item.samples)
        for item in answers.get("nginx_requests_by_status", ())
    )
    latencies = [value for item in answers.get("vllm_e2e_p99", ()) for _, value in item.samples if math.isfinite(value)]
    if not cut or not latencies:
        return []
    timeouts = [
        float(kube.annotations(ingress).get(NGINX_READ_TIMEOUT, NGINX_DEFAULT_READ_TIMEOUT))
        for ingress in bundle.objects(kinds.INGRESS)
        if kube.namespace(ingress) == bundle.namespace
    ]
    if timeouts and max(latencies) < NEAR_TIMEOUT * min(timeouts):
        return [
            f"metrics nginx_requests_by_status: 504s, but vLLM's p99 latency peaks at {max(latencies):.1f} s, "
            f"far below the Ingress's proxy-read-timeout of {min(timeouts):g} s"
        ]
    return []


def _check_terminations(bundle: _Bundle, answers: dict[str, tuple[SeriesData, ...]]) -> list[str]:
    """kube-state-metrics' last terminated reason, at the end of the window, is the pods' lastState."""
    if not answers.get("pod_restarts"):
        return []  # no kube-state-metrics in this Prometheus: nothing to compare
    latest: dict[tuple[str, str], tuple[float, str]] = {}
    for item in answers.get("pod_last_terminated_reason", ()):
        if not item.samples:
            continue
        key = (item.labels.get("pod", ""), item.labels.get("container", ""))
        stamp = item.samples[-1][0]
        if key not in latest or stamp > latest[key][0]:
            latest[key] = (stamp, item.labels.get("reason", ""))
    problems = []
    # The catalog's pod selectors take the predictor's (the vLLM workload's) pods only, not an endpoint picker's.
    for pod in (pod for pod in bundle.pods() if kube.is_predictor(pod)):
        for status in kube.status(pod).get("containerStatuses") or []:
            key = (kube.name(pod), str(status.get("name")))
            last = (status.get("lastState") or {}).get("terminated") or {}
            seen = latest.get(key, (0.0, ""))[1]
            if str(last.get("reason") or "") != seen:
                problems.append(
                    f"metrics pod_last_terminated_reason {key[0]}/{key[1]}: {seen or 'no series'}, "
                    f"the pod says {last.get('reason') or 'never terminated'}"
                )
    return problems


# ---- raw series ---------------------------------------------------------------------------------


def _parse_openmetrics(
    text: str,
) -> tuple[set[str], dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[float, float]]]]:
    counters: set[str] = set()
    series: dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[float, float]]] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            match = _COUNTER_FAMILIES.match(line)
            if match:
                counters.add(match.group(1) + "_total")
            continue
        sample = _OM_SAMPLE.match(line)
        if sample is None:
            continue
        name, label_text, value, stamp = sample.groups()
        labels = tuple(sorted(_OM_LABEL.findall(label_text or "")))
        series.setdefault((name, labels), []).append((float(stamp), float(value)))
    return counters, series


def check_openmetrics(text: str) -> list[str]:
    """Counters monotonic and histogram buckets cumulative in raw OpenMetrics series."""
    counters, series = _parse_openmetrics(text)
    problems = []
    for (name, labels), samples in sorted(series.items()):
        monotonic = name in counters or name.endswith(("_bucket", "_count"))
        values = [value for _, value in sorted(samples)]
        if monotonic and any(later < earlier for earlier, later in pairwise(values)):
            problems.append(f"raw {name}{dict(labels)}: the counter decreases")
    buckets: dict[tuple[str, tuple[tuple[str, str], ...], float], list[tuple[float, float]]] = {}
    for (name, labels), samples in series.items():
        if not name.endswith("_bucket"):
            continue
        le = float(dict(labels)["le"])
        rest = tuple(label for label in labels if label[0] != "le")
        for stamp, value in samples:
            buckets.setdefault((name, rest, stamp), []).append((le, value))
    counts = {
        (name.removesuffix("_count"), labels): dict(samples)
        for (name, labels), samples in series.items()
        if name.endswith("_count")
    }
    for (name, rest, stamp), points in sorted(buckets.items()):
        ordered = [value for _, value in sorted(points)]
        if any(later < earlier for earlier, later in pairwise(ordered)):
            problems.append(f"raw {name}{dict(rest)} at {stamp:.0f}: buckets are not cumulative in le order")
        total = counts.get((name.removesuffix("_bucket"), rest), {}).get(stamp)
        if total is not None and ordered and ordered[-1] != total:
            problems.append(
                f"raw {name}{dict(rest)} at {stamp:.0f}: +Inf bucket {ordered[-1]:g} differs from _count {total:g}"
            )
    return problems
