"""gather(): read everything the checks may need for one InferenceService, once, into an :class:`Evidence`.

Each read is recorded (ok, forbidden, missing, not installed, timeout...) so a partial run can say what
it could not see; secrets are redacted before anything is kept.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from functools import partial
from types import MappingProxyType
from typing import Any, TypeVar

from nbhelpers.errors import ReadFailed, RunbookError
from nbhelpers.evidence.model import ContainerLog, Evidence, ReadRecord, SiteConfig, Target
from nbhelpers.metrics import catalog, triggers
from nbhelpers.metrics.series import MetricData
from nbhelpers.sources import kinds, kube
from nbhelpers.sources.base import (
    ClusterSource,
    LogRequest,
    MetricsSource,
    SeriesData,
    describe_get,
    describe_list,
    describe_logs,
)
from nbhelpers.sources.kube import KubeObject
from nbhelpers.util.limits import LimitExceeded
from nbhelpers.util.redaction import redact_labels, redact_objects, redact_text
from nbhelpers.util.safe_load import load_json
from nbhelpers.util.times import Window, parse_k8s_time, query_step_seconds

MAX_LOG_PODS = 3
DEFAULT_SITE = SiteConfig()  # KServe and Knative in their default namespaces, no client timeout known
T = TypeVar("T")


class _Reader:
    """Runs reads against the sources and keeps a record of each."""

    def __init__(self, cluster: ClusterSource) -> None:
        self.cluster = cluster
        self.records: list[ReadRecord] = []
        self.objects: dict[str, dict[str, KubeObject]] = {}
        self._ahead: dict[tuple[str, str | None, str | None], Future[Any]] = {}

    def read_ahead(self, lists: Iterable[tuple[kinds.Kind, str | None, str | None]]) -> None:
        """Start these independent list reads now, ``cluster.parallel_reads`` at a time, when the source waits on
        a server. :meth:`list` then takes each answer (or failure) when the gather reaches it, so the records, the
        objects and their order are those of reads made one after the other."""
        if self.cluster.parallel_reads <= 1:
            return
        pool = ThreadPoolExecutor(max_workers=self.cluster.parallel_reads, thread_name_prefix="kube-read")
        for kind, namespace, selector in lists:
            self._ahead[(kind.key, namespace, selector)] = pool.submit(self.cluster.list, kind, namespace, selector)
        pool.shutdown(wait=False)  # the threads end with their reads; list() waits for each answer it needs

    def attempt(self, what: str, read: Callable[[], T]) -> T | None:
        try:
            value = read()
        except ReadFailed as failure:
            self.records.append(ReadRecord(what, failure.status, failure.reason))
            return None
        self.records.append(ReadRecord(what, "ok"))
        return value

    def keep(self, kind: kinds.Kind, objects: Iterable[KubeObject]) -> list[KubeObject]:
        bucket = self.objects.setdefault(kind.key, {})
        kept = []
        for obj in objects:
            obj.setdefault("kind", kind.kind)
            obj.setdefault("apiVersion", f"{kind.group}/{kind.versions[0]}" if kind.group else kind.versions[0])
            bucket[kube.ref(obj)] = obj
            kept.append(obj)
        return kept

    def list(self, kind: kinds.Kind, namespace: str | None, selector: str | None = None) -> list[KubeObject]:
        what = describe_list(kind, namespace, selector)
        started = self._ahead.pop((kind.key, namespace, selector), None)
        read: Callable[[], list[KubeObject]] = (
            started.result if started is not None else partial(self.cluster.list, kind, namespace, selector)
        )
        found = self.attempt(what, read)
        return self.keep(kind, found or [])

    def get(self, kind: kinds.Kind, namespace: str | None, name: str) -> KubeObject | None:
        what = describe_get(kind, namespace, name)
        found = self.attempt(what, lambda: self.cluster.get(kind, namespace, name))
        if found is None:
            return None
        return self.keep(kind, [found])[0]


# Listed namespace-wide for either kind of target: the Services and addresses in front of the pods, and the
# autoscalers that may act on them (matched to the target by name or scale target, not by label).
_SERVING_PATH_KINDS = (kinds.SERVICE, kinds.ENDPOINTS, kinds.ENDPOINT_SLICE, kinds.HPA, kinds.SCALED_OBJECT)


def gather(
    cluster: ClusterSource,
    metrics: MetricsSource | None,
    target: Target,
    window: Window,
    observed_at: datetime,
    site: SiteConfig = DEFAULT_SITE,
    progress: Callable[[str], None] | None = None,
) -> Evidence:
    """Read the evidence for ``target``. Raises ``RunbookError`` only for an unknown service."""
    if target.is_llmisvc:
        return _gather_llmisvc(cluster, metrics, target, window, observed_at, site, progress)
    reader = _Reader(cluster)
    note = progress or (lambda _message: None)
    note("reading the InferenceService")
    reader.keep(kinds.INFERENCE_SERVICE, [require_isvc(cluster, target)])
    reader.records.append(ReadRecord(describe_get(kinds.INFERENCE_SERVICE, target.namespace, target.isvc), "ok"))
    reader.get(kinds.CONFIG_MAP, site.kserve_namespace, "inferenceservice-config")
    isvc_ref = describe_get(kinds.INFERENCE_SERVICE, target.namespace, target.isvc)

    note("reading predictor objects")
    namespace = target.namespace
    selector = f"{kube.ISVC_LABEL}={target.isvc}"
    labelled = (
        kinds.KNATIVE_SERVICE,
        kinds.KNATIVE_REVISION,
        kinds.POD_AUTOSCALER,
        kinds.DEPLOYMENT,
        kinds.REPLICA_SET,
    )
    in_namespace = (*_SERVING_PATH_KINDS, kinds.VIRTUAL_SERVICE, kinds.HTTP_ROUTE, kinds.INGRESS, kinds.SERVING_RUNTIME)
    reader.read_ahead(
        [
            *((kind, namespace, selector) for kind in (*labelled, kinds.POD)),
            *((kind, namespace, None) for kind in in_namespace),
            (kinds.CLUSTER_SERVING_RUNTIME, None, None),
            (kinds.NODE, None, None),
        ]
    )
    for kind in labelled:
        reader.list(kind, namespace, selector)
    pods = reader.list(kinds.POD, namespace, selector)
    for kind in in_namespace:
        reader.list(kind, namespace)
    reader.list(kinds.CLUSTER_SERVING_RUNTIME, None)
    _read_gateways(reader, namespace)

    note("reading cluster-wide objects")
    reader.list(kinds.NODE, None)
    _read_api_services(reader)
    for name in ("config-autoscaler", "config-defaults", "config-deployment"):
        reader.get(kinds.CONFIG_MAP, site.knative_namespace, name)

    note("reading events")
    events = _read_events(reader, namespace, target.isvc, window)

    note("reading logs")
    logs = _read_logs(reader, choose_log_pods(pods), window, site)

    note("querying Prometheus")
    metric_data = _query_metrics(metrics, target, window, reader.records, predictor_hpa_names(reader.objects, target))
    if metrics is not None and not any(data.status in ("unreachable", "timeout") for data in metric_data.values()):
        metric_data.update(_query_triggers(metrics, reader.objects, target.namespace, window))

    objects, events, logs, metric_data, versions, reads = _finish(cluster, reader, events, logs, metric_data)
    isvc = next(obj for obj in objects[kinds.INFERENCE_SERVICE.key] if kube.ref(obj) == isvc_ref)
    kserve_config = next(
        (
            obj
            for obj in objects.get(kinds.CONFIG_MAP.key, ())
            if (kube.namespace(obj), kube.name(obj)) == (site.kserve_namespace, "inferenceservice-config")
        ),
        None,
    )
    mode_raw, mode = detect_deployment_mode(isvc, kserve_config)
    return Evidence(
        target=target,
        window=window,
        observed_at=observed_at,
        isvc=isvc,
        deployment_mode=mode,
        deployment_mode_raw=mode_raw,
        objects=MappingProxyType(objects),
        events=tuple(events),
        logs=tuple(logs),
        metrics=MappingProxyType(metric_data),
        reads=tuple(reads),
        versions=MappingProxyType(versions),
        sources=MappingProxyType({"cluster": cluster.mode, "prometheus": metrics.mode if metrics else "none"}),
        site=site,
    )


def _finish(
    cluster: ClusterSource,
    reader: _Reader,
    events: list[KubeObject],
    logs: list[ContainerLog],
    metric_data: dict[str, MetricData],
) -> tuple[
    dict[str, tuple[KubeObject, ...]],
    list[KubeObject],
    list[ContainerLog],
    dict[str, MetricData],
    dict[str, str],
    list[ReadRecord],
]:
    """Redact everything read, detect the versions and return the redacted read records with them."""
    objects, events, logs, metric_data, secrets = _redact(reader.objects, events, logs, metric_data)
    versions = _detect_versions(cluster, logs, reader.records)
    versions = {name: redact_text(version, secrets) for name, version in versions.items()}
    reads = [ReadRecord(record.what, record.status, redact_text(record.reason, secrets)) for record in reader.records]
    return objects, events, logs, metric_data, versions, reads


def _gather_llmisvc(
    cluster: ClusterSource,
    metrics: MetricsSource | None,
    target: Target,
    window: Window,
    observed_at: datetime,
    site: SiteConfig,
    progress: Callable[[str], None] | None,
) -> Evidence:
    """The same read pass for an LLMInferenceService and the objects KServe renders for it.

    KServe labels every object it renders for ``<name>`` with ``app.kubernetes.io/part-of=llminferenceservice``
    and ``app.kubernetes.io/name=<name>`` (workload_single_node.go singleNodeLabels, scheduler.go
    SchedulerLabels, router.go RouterLabels), so the workloads, their pods and the endpoint picker are one
    labelled list each. The InferencePool's selector is the user's to change, so Services, HTTPRoutes and
    InferencePools are listed for the whole namespace, like the InferenceService path does.
    """
    reader = _Reader(cluster)
    note = progress or (lambda _message: None)
    note("reading the LLMInferenceService")
    reader.keep(kinds.LLM_INFERENCE_SERVICE, [require_llmisvc(cluster, target)])
    target_ref = describe_get(kinds.LLM_INFERENCE_SERVICE, target.namespace, target.isvc)
    reader.records.append(ReadRecord(target_ref, "ok"))

    note("reading the rendered workloads, router and pool")
    namespace = target.namespace
    selector = f"{kube.LLMISVC_PART_OF_LABEL}={kube.LLMISVC_PART_OF},{kube.LLMISVC_NAME_LABEL}={target.isvc}"
    # A multi-node service (spec.worker) renders LeaderWorkerSets instead of Deployments, labelled the same way
    # (workload_multi_node.go); its leader and worker pods carry the labels too, so the pod list holds them.
    for kind in (kinds.DEPLOYMENT, kinds.REPLICA_SET, kinds.LEADER_WORKER_SET):
        reader.list(kind, namespace, selector)
    pods = reader.list(kinds.POD, namespace, selector)
    for kind in (*_SERVING_PATH_KINDS, kinds.HTTP_ROUTE, kinds.INFERENCE_POOL, kinds.INFERENCE_POOL_ALPHA):
        reader.list(kind, namespace)
    _read_gateways(reader, namespace)
    _read_presets(reader, namespace, site.kserve_namespace)

    note("reading cluster-wide objects")
    reader.list(kinds.NODE, None)
    _read_api_services(reader)

    note("reading events")
    events = _read_events(reader, namespace, target.isvc, window, f"{target.isvc}-kserve")

    note("reading logs")
    logs = _read_logs(reader, choose_log_pods(pods, _is_llmisvc_vllm_pod) + _picker_log_pod(pods), window, site)

    note("querying Prometheus")
    metric_data = _query_metrics(
        metrics,
        target,
        window,
        reader.records,
        llmisvc_hpa_names(reader.objects, target),
        llmisvc_prefill_groups(reader.objects, target),
    )
    if metrics is not None and not any(data.status in ("unreachable", "timeout") for data in metric_data.values()):
        metric_data.update(_query_triggers(metrics, reader.objects, target.namespace, window))
    objects, events, logs, metric_data, versions, reads = _finish(cluster, reader, events, logs, metric_data)
    service = next(obj for obj in objects[kinds.LLM_INFERENCE_SERVICE.key] if kube.ref(obj) == target_ref)
    return Evidence(
        target=target,
        window=window,
        observed_at=observed_at,
        isvc=service,
        deployment_mode="unknown",  # an InferenceService notion; the LLMInferenceService has none
        deployment_mode_raw="",
        objects=MappingProxyType(objects),
        events=tuple(events),
        logs=tuple(logs),
        metrics=MappingProxyType(metric_data),
        reads=tuple(reads),
        versions=MappingProxyType(versions),
        sources=MappingProxyType({"cluster": cluster.mode, "prometheus": metrics.mode if metrics else "none"}),
        site=site,
    )


def _redact(
    buckets: dict[str, dict[str, KubeObject]],
    events: list[KubeObject],
    logs: list[ContainerLog],
    metric_data: dict[str, MetricData],
) -> tuple[dict[str, tuple[KubeObject, ...]], list[KubeObject], list[ContainerLog], dict[str, MetricData], set[str]]:
    """Remove plain-text secrets from everything read, before any check or writer sees it.

    Objects and events go through the object rules (util/redaction.py); the values found there are then
    removed from the logs and the metric series too, on top of the text rules. Also returns those values.
    """
    keys = [key for key, bucket in buckets.items() for _ in bucket]
    flat = [obj for bucket in buckets.values() for obj in bucket.values()]
    cleaned, secrets = redact_objects(flat + events)
    objects: dict[str, list[KubeObject]] = {}
    for key, obj in zip(keys, cleaned[: len(flat)], strict=False):
        objects.setdefault(key, []).append(obj)
    clean_logs = [
        ContainerLog(log.namespace, log.pod, log.container, log.previous, redact_text(log.text, secrets))
        for log in logs
    ]
    # The text rules already ran on each answer as it was read (_query_one); here only the values found.
    clean_metrics = (
        {query_id: _redact_metric(data, secrets) for query_id, data in metric_data.items()} if secrets else metric_data
    )
    return (
        {key: tuple(items) for key, items in objects.items()},
        cleaned[len(flat) :],
        clean_logs,
        clean_metrics,
        secrets,
    )


def _redact_metric(data: MetricData, known_secrets: Iterable[str] = ()) -> MetricData:
    """``data`` with its series' label values and its error message redacted."""
    if not data.series and not data.error:
        return data
    series = tuple(SeriesData(redact_labels(item.labels, known_secrets), item.samples) for item in data.series)
    return replace(data, series=series, error=redact_text(data.error, known_secrets))


def require_isvc(cluster: ClusterSource, target: Target) -> KubeObject:
    """The InferenceService, or a ``RunbookError`` naming what is wrong (and the services that exist)."""
    return _require(cluster, target, kinds.INFERENCE_SERVICE)


def require_llmisvc(cluster: ClusterSource, target: Target) -> KubeObject:
    """The LLMInferenceService, or a ``RunbookError`` naming what is wrong (and the services that exist)."""
    return _require(cluster, target, kinds.LLM_INFERENCE_SERVICE)


def _require(cluster: ClusterSource, target: Target, kind: kinds.Kind) -> KubeObject:
    try:
        isvc = cluster.get(kind, target.namespace, target.isvc)
    except ReadFailed as failure:
        if failure.status in ("not_installed", "missing"):
            raise RunbookError(f"the {kind.kind} CRD ({kind.group}) is not installed in this cluster") from None
        raise RunbookError(
            f"cannot read {kind.kind} {target.namespace}/{target.isvc}: {redact_text(failure.reason)}"
        ) from None
    if isvc is None:
        try:
            existing = sorted(kube.name(obj) for obj in cluster.list(kind, target.namespace))
        except ReadFailed:
            existing = []
        known = ", ".join(existing) if existing else "none"
        raise RunbookError(
            f"{kind.kind} {target.isvc!r} not found in namespace {target.namespace!r} (existing: {known})"
        )
    return isvc


_MODE_NAMES = {
    "serverless": "Serverless",
    "knative": "Serverless",
    "rawdeployment": "RawDeployment",
    "standard": "RawDeployment",
    "modelmesh": "ModelMesh",
}


def detect_deployment_mode(isvc: KubeObject, config: KubeObject | None) -> tuple[str, str]:
    """(raw name, normalized name): annotation, else status, else the KServe default (docs/upstream-facts.md)."""
    raw = kube.annotations(isvc).get(kube.DEPLOYMENT_MODE_ANNOTATION) or str(
        (isvc.get("status") or {}).get("deploymentMode") or ""
    )
    if not raw and config is not None:
        try:
            deploy = load_json(str((config.get("data") or {}).get("deploy") or "{}"))
        except (ValueError, LimitExceeded):
            deploy = {}
        raw = str(deploy.get("defaultDeploymentMode") or "") if isinstance(deploy, dict) else ""
    if not raw:
        return "", "unknown"
    return raw, _MODE_NAMES.get(raw.lower(), "unknown")


def _read_gateways(reader: _Reader, namespace: str) -> None:
    """GET each Gateway named by a VirtualService or HTTPRoute in the namespace (once per name)."""
    wanted: set[tuple[kinds.Kind, str, str]] = set()
    for service in reader.objects.get(kinds.VIRTUAL_SERVICE.key, {}).values():
        for gateway in (service.get("spec") or {}).get("gateways") or []:
            if gateway == "mesh":
                continue
            gw_namespace, _, gw_name = str(gateway).rpartition("/")
            wanted.add((kinds.ISTIO_GATEWAY, gw_namespace or namespace, gw_name))
    for route in reader.objects.get(kinds.HTTP_ROUTE.key, {}).values():
        for parent in (route.get("spec") or {}).get("parentRefs") or []:
            if parent.get("kind", "Gateway") == "Gateway":
                wanted.add((kinds.GATEWAY_API_GATEWAY, parent.get("namespace") or namespace, parent["name"]))
    for kind, gw_namespace, gw_name in sorted(wanted, key=lambda item: (item[0].key, item[1], item[2])):
        reader.get(kind, gw_namespace, gw_name)


def _read_api_services(reader: _Reader) -> None:
    """APIServices, and the Services and Deployments behind the metrics APIs."""
    api_services = reader.list(kinds.API_SERVICE, None)
    backing: set[tuple[str, str]] = set()
    for api_service in api_services:
        if not kube.name(api_service).endswith("metrics.k8s.io"):
            continue
        service_ref = (api_service.get("spec") or {}).get("service") or {}
        if service_ref.get("name"):
            backing.add((service_ref.get("namespace") or "default", service_ref["name"]))
    for service_namespace, service_name in sorted(backing):
        reader.get(kinds.SERVICE, service_namespace, service_name)
    for service_namespace in sorted({ns for ns, _ in backing}):
        reader.list(kinds.DEPLOYMENT, service_namespace)
        reader.list(kinds.CONFIG_MAP, service_namespace, "app.kubernetes.io/name=prometheus-adapter")


def _related(event: KubeObject, isvc: str, names: set[str], prefix: str) -> bool:
    involved = event.get("involvedObject") or event.get("regarding") or {}
    name = str(involved.get("name") or "")
    return name in names or name.startswith(prefix) or name == isvc


def _read_events(
    reader: _Reader, namespace: str, isvc: str, window: Window, prefix: str | None = None
) -> list[KubeObject]:
    """The window's events about the objects read, or about any object named ``prefix...`` (default
    ``<isvc>-predictor``: pods that no longer exist leave events behind)."""
    names = {kube.name(obj) for bucket in reader.objects.values() for obj in bucket.values()}
    related = []
    for event in reader.list(kinds.EVENT, namespace):
        first, last = kube.event_interval(event)
        if not _related(event, isvc, names, prefix or f"{isvc}-predictor"):
            continue
        if last is not None and last < window.start:
            continue
        if first is not None and first >= window.end:
            continue
        related.append(event)
    reader.objects.pop(kinds.EVENT.key, None)
    related.sort(key=lambda event: (kube.event_interval(event)[0] or window.start, kube.name(event)))
    return related


def _read_presets(reader: _Reader, namespace: str, kserve_namespace: str) -> None:
    """The LLMInferenceServiceConfigs a service can be merged over: KServe looks a name up in the service's namespace
    first, then in its own (config_merge.go getConfig), so both namespaces are listed."""
    for where in dict.fromkeys((namespace, kserve_namespace)):
        reader.list(kinds.LLM_INFERENCE_SERVICE_CONFIG, where)


def _is_llmisvc_vllm_pod(pod: KubeObject) -> bool:
    """A vLLM pod of an LLMInferenceService: the workload's, or a LeaderWorkerSet's leader or worker (a worker next to
    a leader template carries no ``kserve.io/component=workload``)."""
    return kube.is_llmisvc_workload(pod) or kube.LWS_NAME_LABEL in kube.labels(pod)


def _picker_log_pod(pods: list[KubeObject]) -> list[KubeObject]:
    """One endpoint picker pod, a not-ready one first: its log says why the picker is down."""
    pickers = [
        pod for pod in pods if kube.labels(pod).get(kube.LLMISVC_COMPONENT_LABEL) == kube.LLMISVC_SCHEDULER_COMPONENT
    ]
    pickers.sort(key=lambda pod: (kube.pod_ready(pod), kube.name(pod)))
    return pickers[:1]


def choose_log_pods(
    pods: list[KubeObject], serving: Callable[[KubeObject], bool] = kube.is_predictor
) -> list[KubeObject]:
    """At most three serving pods (``serving``: predictor pods by default): most restarts, newest not ready,
    one healthy; slots left go to the other not-ready pods, newest first. A step that judges a pod by its log
    (still loading, or serving but kept out of rotation) otherwise knows nothing of the second unready pod."""
    predictors = [pod for pod in pods if serving(pod)]
    chosen: list[KubeObject] = []

    def add(pod: KubeObject | None) -> None:
        if pod is not None and all(kube.name(pod) != kube.name(other) for other in chosen):
            chosen.append(pod)

    restarting = [pod for pod in predictors if kube.restart_count(pod) > 0]
    add(max(restarting, key=lambda pod: (kube.restart_count(pod), kube.name(pod)), default=None))
    not_ready = [pod for pod in predictors if not kube.pod_ready(pod)]
    add(max(not_ready, key=lambda pod: (kube.created(pod) or "", kube.name(pod)), default=None))
    healthy = sorted((pod for pod in predictors if kube.pod_ready(pod)), key=kube.name)
    add(healthy[0] if healthy else None)
    for pod in sorted(not_ready, key=lambda pod: (kube.created(pod) or "", kube.name(pod)), reverse=True):
        add(pod)
    return chosen[:MAX_LOG_PODS]


_LOG_TIMESTAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d))\s")


def filter_log_to_window(text: str, window: Window) -> str:
    """Keep lines whose kubelet timestamp prefix lies in the window (unstamped lines are kept)."""
    kept = []
    for line in text.splitlines():
        match = _LOG_TIMESTAMP.match(line)
        moment = parse_k8s_time(match.group(1)) if match else None
        if moment is None or window.contains(moment):
            kept.append(line)
    return "\n".join(kept) + ("\n" if kept else "")


def _has_run(status: Mapping[str, Any]) -> bool:
    """False only for a container known to wait for its first start (PodInitializing, ContainerCreating,
    CreateContainerConfigError, an image back-off): the kubelet has no log for it and answers 400 "is waiting
    to start". A status that does not say (no state at all) is asked for its log."""
    waiting = "waiting" in (status.get("state") or {})
    ran_before = int(status.get("restartCount") or 0) > 0 or bool((status.get("lastState") or {}).get("terminated"))
    return not waiting or ran_before


def _log_statuses(pod: KubeObject) -> list[Mapping[str, Any]]:
    """The containers whose logs are read: every container that has run, and the init containers that failed
    (their log holds the error: a refused download, a wrong storageUri, no space). One that completed or has not
    run is skipped."""
    status = pod.get("status") or {}
    failed_init = []
    for init in status.get("initContainerStatuses") or []:
        terminated = [(init.get(key) or {}).get("terminated") or {} for key in ("state", "lastState")]
        if any(t and int(t.get("exitCode") or 0) != 0 for t in terminated):
            failed_init.append(init)
    return [*failed_init, *(s for s in status.get("containerStatuses") or [] if _has_run(s))]


def _read_logs(reader: _Reader, chosen: list[KubeObject], window: Window, site: SiteConfig) -> list[ContainerLog]:
    logs = []
    for pod in chosen:
        for status in _log_statuses(pod):
            container = str(status.get("name"))
            wanted = [False] + ([True] if int(status.get("restartCount") or 0) > 0 else [])
            for previous in wanted:
                request = LogRequest(
                    kube.namespace(pod), kube.name(pod), container, previous, site.log_tail_lines, site.log_limit_bytes
                )
                what = describe_logs(request)
                text = reader.attempt(what, partial(reader.cluster.logs, request))
                if text is not None:
                    logs.append(
                        ContainerLog(
                            request.namespace, request.pod, container, previous, filter_log_to_window(text, window)
                        )
                    )
    return logs


def predictor_hpa_names(buckets: Mapping[str, Mapping[str, KubeObject]], target: Target) -> tuple[str, ...]:
    """HPAs in the namespace that scale one of the predictor's Deployments (named by KServe or by hand)."""
    deployments = {
        kube.name(obj)
        for obj in buckets.get(kinds.DEPLOYMENT.key, {}).values()
        if kube.labels(obj).get(kube.ISVC_LABEL) == target.isvc
    }
    names = []
    for hpa in buckets.get(kinds.HPA.key, {}).values():
        scaled = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
        scaled_name = str(scaled.get("name") or "")
        if scaled_name in deployments or scaled_name.startswith(f"{target.isvc}-predictor"):
            names.append(kube.name(hpa))
    return tuple(sorted(names))


def llmisvc_hpa_names(buckets: Mapping[str, Mapping[str, KubeObject]], target: Target) -> tuple[str, ...]:
    """HPAs in the namespace that scale an LLMInferenceService's vLLM Deployments ``<name>-kserve`` and
    ``<name>-kserve-prefill`` (KServe's ``<name>-kserve-hpa``, or the ``keda-hpa-<name>-kserve-keda`` KEDA generates
    for its ScaledObject: pkg/controller/v1alpha2/llmisvc/scaling.go)."""
    deployments = {f"{target.isvc}-kserve", f"{target.isvc}-kserve-prefill"}
    names = [
        kube.name(hpa)
        for hpa in buckets.get(kinds.HPA.key, {}).values()
        if str(((hpa.get("spec") or {}).get("scaleTargetRef") or {}).get("name") or "") in deployments
    ]
    return tuple(sorted(names))


def llmisvc_prefill_groups(buckets: Mapping[str, Mapping[str, KubeObject]], target: Target) -> bool:
    """The service runs its prefill role multi-node: the LeaderWorkerSet ``<name>-kserve-mn-prefill``
    (workload_multi_node.go), whose leaders ``catalog.render`` must add to the vLLM pods."""
    wanted = f"{target.isvc}-kserve-mn-prefill"
    return any(
        kube.name(lws) == wanted and kube.namespace(lws) == target.namespace
        for lws in buckets.get(kinds.LEADER_WORKER_SET.key, {}).values()
    )


def _query_metrics(
    metrics: MetricsSource | None,
    target: Target,
    window: Window,
    records: list[ReadRecord],
    hpa_names: Sequence[str] = (),
    prefill_groups: bool = False,
) -> dict[str, MetricData]:
    if metrics is None:
        records.append(ReadRecord("prometheus", "skipped", "no Prometheus configured (--prometheus)"))
        return {}
    step = query_step_seconds(window)
    results: dict[str, MetricData] = {}
    unreachable: str | None = None
    answers = _answers(metrics, lambda spec: _query_one(metrics, spec, target, window, step, hpa_names, prefill_groups))
    for spec in catalog.CATALOG:
        if unreachable is not None:
            results[spec.id] = MetricData(spec.id, "", 0, step, "unreachable", error=unreachable)
            continue
        results[spec.id] = next(answers)
        if results[spec.id].status in ("unreachable", "timeout"):
            unreachable = results[spec.id].error
            records.append(ReadRecord("prometheus", results[spec.id].status, unreachable))
    answers.close()  # queries still in flight are waited for, none is sent any more
    if unreachable is not None:
        return results
    for status in ("error", "missing"):
        affected = sorted(data.id for data in results.values() if data.status == status)
        if affected:
            example = results[affected[0]].error
            records.append(
                ReadRecord("prometheus queries", status, f"{len(affected)} queries ({', '.join(affected)}): {example}")
            )
    if not any(record.what == "prometheus queries" for record in records):
        records.append(ReadRecord("prometheus", "ok"))
    if results and all(data.status == "empty" for data in results.values()):
        # Every query answered, none with a series: a wrong Prometheus or relabelled pods. Saying so keeps
        # a report without a single metric from reading as "every read succeeded".
        records.append(
            ReadRecord(
                "prometheus series",
                "empty",
                f"none of the {len(results)} queries returned a series for {target.namespace}/{target.isvc} "
                "in the window: check that this Prometheus scrapes the service",
            )
        )
    return results


def _answers(metrics: MetricsSource, ask: Callable[[catalog.QuerySpec], MetricData]) -> Generator[MetricData]:
    """The catalog's answers in catalog order, asked lazily one by one, or (``metrics.parallel_queries`` > 1)
    after the first answers, that many at once.

    Either way a Prometheus that cannot be reached costs one timeout, not one per query: the caller stops
    taking answers at the first unreachable one, and in parallel the first query goes alone as the probe.
    """
    specs = list(catalog.CATALOG)
    if metrics.parallel_queries <= 1:
        yield from (ask(spec) for spec in specs)
        return
    first = ask(specs[0])
    yield first
    if first.status in ("unreachable", "timeout"):
        return
    with ThreadPoolExecutor(max_workers=metrics.parallel_queries, thread_name_prefix="promql") as pool:
        yield from pool.map(ask, specs[1:])


def _query_triggers(
    metrics: MetricsSource,
    buckets: Mapping[str, Mapping[str, KubeObject]],
    namespace: str,
    window: Window,
) -> dict[str, MetricData]:
    """The PromQL of the KEDA prometheus triggers in the namespace, over the window (:mod:`nbhelpers.metrics.triggers`).

    A failed query is kept with its status for the check to report; it is not a lost read of the run (the
    trigger may name another Prometheus than the one configured here)."""
    step = query_step_seconds(window)
    results: dict[str, MetricData] = {}
    scaled_objects = sorted(buckets.get(kinds.SCALED_OBJECT.key, {}).values(), key=kube.name)
    for scaled_object in scaled_objects:
        if kube.namespace(scaled_object) != namespace:
            continue
        for index, promql in triggers.prometheus_queries(scaled_object):
            if len(results) >= triggers.MAX_QUERIES:
                return results
            query_id = triggers.query_id(kube.name(scaled_object), index)
            try:
                answer = metrics.query_range(query_id, promql, window.start, window.end, step)
            except ReadFailed as failure:
                results[query_id] = _redact_metric(
                    MetricData(query_id, promql, 0, step, failure.status, error=failure.reason)
                )
                continue
            status = "ok" if answer.series else "empty"
            results[query_id] = _redact_metric(MetricData(query_id, promql, 0, step, status, answer.series))
    return results


def _query_one(
    metrics: MetricsSource,
    spec: catalog.QuerySpec,
    target: Target,
    window: Window,
    step: int,
    hpa_names: Sequence[str] = (),
    prefill_groups: bool = False,
) -> MetricData:
    first: MetricData | None = None
    for index in range(len(spec.templates)):
        promql = catalog.render(
            spec, index, target.namespace, target.isvc, step, hpa_names, target.is_llmisvc, prefill_groups
        )
        try:
            answer = metrics.query_range(spec.id, promql, window.start, window.end, step)
        except ReadFailed as failure:
            status = failure.status if failure.status in ("unreachable", "timeout", "missing") else "error"
            return _redact_metric(MetricData(spec.id, promql, index, step, status, error=failure.reason))
        data = _redact_metric(
            MetricData(spec.id, promql, index, step, "ok" if answer.series else "empty", answer.series)
        )
        if answer.series:
            return data
        first = first or data
    assert first is not None
    return first


_VLLM_VERSION = re.compile(r"vLLM API server version (\d+\.\d+(?:\.\d+)?\S*)")


def _detect_versions(cluster: ClusterSource, logs: list[ContainerLog], records: list[ReadRecord]) -> dict[str, str]:
    versions: dict[str, str] = {}
    try:
        kubernetes_version = cluster.server_version()
    except ReadFailed as failure:
        records.append(ReadRecord("version", failure.status, failure.reason))
        kubernetes_version = None
    if kubernetes_version:
        versions["kubernetes"] = kubernetes_version
    for log in logs:
        match = _VLLM_VERSION.search(log.text)
        if match:
            versions["vllm"] = match.group(1)
            break
    return versions
