"""Spec -> evidence bundle files, through the project's own capture path.

The generated cluster and Prometheus are served as in-memory sources, and the
real ``gather()`` reads them exactly as it reads a live cluster: the same
reads (recorded in the manifest, including the 404s of CRDs the scenario's
cluster does not have), the same event and log filtering, the same
redaction. ``capture.bundle_files`` then lays the bundle out, so a scenario
bundle cannot drift from what ``kserve-runbook capture`` writes. Two extra
files make the bundle self-describing for training and for the Prometheus
test harness: ``scenario/spec.yaml`` and ``scenario/metrics.om`` (the raw
series as OpenMetrics, for ``promtool tsdb create-blocks-from openmetrics``).
"""

from __future__ import annotations

from datetime import datetime

from nbhelpers.errors import ReadFailed
from nbhelpers.evidence.capture import bundle_files
from nbhelpers.evidence.gather import gather
from nbhelpers.evidence.model import Target
from nbhelpers.metrics import catalog, openmetrics
from nbhelpers.scenarios import blocked, disagg, knative_status, llmisvc, multinode, routes
from nbhelpers.scenarios.answers import RawStore, answer
from nbhelpers.scenarios.events import build_events
from nbhelpers.scenarios.logs import queue_proxy_log, vllm_log
from nbhelpers.scenarios.objects import AGENT_CONTAINER, ObjectBuilder
from nbhelpers.scenarios.spec import ScenarioSpec
from nbhelpers.scenarios.state import Plan, custom_metrics_api_missing, plan, stale_hpa_target
from nbhelpers.scenarios.traffic import Simulation, simulate
from nbhelpers.sources import kinds, kube
from nbhelpers.sources.base import LogRequest, RangeResult, describe_get, describe_list, describe_logs
from nbhelpers.sources.bundle import ObjectStore
from nbhelpers.sources.kube import KubeObject

TOOL_VERSION = "scenario"
SPEC_FILE = "scenario/spec.yaml"
RAW_METRICS_FILE = "scenario/metrics.om"


class ScenarioCluster:
    """A :class:`~nbhelpers.sources.base.ClusterSource` over generated objects and logs."""

    mode = "bundle"
    parallel_reads = 1  # everything is in memory: nothing to wait for

    def __init__(self, spec: ScenarioSpec, objects: list[KubeObject], logs: dict[tuple[str, str, str, bool], str]):
        self.spec = spec
        self.logs_by_key = logs
        self.store = ObjectStore()
        for obj in objects:
            if not self.store.add(obj):
                raise ValueError(f"scenario object of an unregistered kind: {obj['apiVersion']} {obj['kind']}")

    def close(self) -> None:
        """Nothing to release: everything is in memory."""

    def server_version(self) -> str | None:
        return self.spec.cluster.kubernetes

    def _served(self, kind: kinds.Kind, what: str) -> None:
        if kind.group in self.spec.cluster.missing_crd_groups:
            raise ReadFailed(what, "not_installed", f"API group {kind.group} is not installed (no CRD)")

    def list(self, kind: kinds.Kind, namespace: str | None, label_selector: str | None = None) -> list[KubeObject]:
        self._served(kind, describe_list(kind, namespace, label_selector))
        return self.store.list(kind, namespace, label_selector)

    def get(self, kind: kinds.Kind, namespace: str | None, name: str) -> KubeObject | None:
        self._served(kind, describe_get(kind, namespace, name))
        return self.store.get(kind, namespace, name)

    def logs(self, request: LogRequest) -> str:
        text = self.logs_by_key.get((request.namespace, request.pod, request.container, request.previous))
        if text is None:
            raise ReadFailed(describe_logs(request), "missing", "previous terminated container not found")
        return text


class ScenarioMetrics:
    """A :class:`~nbhelpers.sources.base.MetricsSource` answering catalog queries from the raw series."""

    mode = "bundle"
    parallel_queries = 1  # answers are computed in memory: nothing to wait for

    def __init__(self, spec: ScenarioSpec, store: RawStore) -> None:
        self.spec = spec
        self.store = store

    def close(self) -> None:
        """Nothing to release: everything is in memory."""

    def query_range(self, query_id: str, promql: str, start: datetime, end: datetime, step_seconds: int) -> RangeResult:
        spec = catalog.BY_ID.get(query_id)
        # A query of the cluster's own (a KEDA trigger's PromQL): the raw series answer the catalog only.
        if spec is None:
            raise ReadFailed(query_id, "missing", "the scenario simulator answers the metric catalog's queries only")
        isvc = self.spec.isvc
        first = catalog.render(spec, 0, isvc.namespace, isvc.name, step_seconds, llmisvc=isvc.is_llmisvc)
        if promql != first:
            return RangeResult(promql=promql)  # the raw series use the newest metric names only
        series = answer(self.store, query_id, start.timestamp(), end.timestamp(), step_seconds)
        return RangeResult(promql=promql, series=series)


def build_objects(scenario: Plan) -> list[KubeObject]:
    if scenario.llmisvc:
        return llmisvc.build_objects(scenario)
    builder = ObjectBuilder(scenario)
    isvc = scenario.spec.isvc
    objects = [builder.inference_service(), builder.serving_runtime()]
    if scenario.serverless:
        objects += [builder.knative_service(), builder.revision(), builder.pod_autoscaler()]
    objects += [builder.deployment(), builder.replica_set()]
    objects += [
        blocked.pod_object(builder, pod) if blocked.is_blocked(scenario, pod) else builder.pod(pod)
        for pod in scenario.live_pods
    ]
    services = builder.services()
    objects += services
    activators = [("10.244.0.31", "activator-7c9f6b8d4d-x2k8p"), ("10.244.1.44", "activator-7c9f6b8d4d-qv7mz")]
    for service in services:
        pair = builder.endpoints(service, activators)
        if pair is not None:
            objects += list(pair)
    if scenario.serverless:
        if scenario.spec.cluster.ingress == "istio":
            objects += builder.virtual_services() + builder.istio_gateways()
    else:
        objects.append(builder.ingress())
        if isvc.autoscaler_class == "hpa":
            objects.append(builder.hpa())
        elif scenario.hpa_name:
            objects.append(builder.user_hpa())
            if not custom_metrics_api_missing(scenario.spec):
                objects += builder.prometheus_adapter()
    if stale_hpa_target(scenario.spec) is not None:
        objects += builder.stale_copy()
    objects += builder.nodes() + builder.api_services() + builder.metrics_server() + builder.config_maps()
    objects = knative_status.apply(scenario, blocked.adjust_objects(builder, objects))
    objects = routes.adjust_objects(builder, objects)
    return objects + build_events(scenario)


def build_logs(scenario: Plan, simulation: Simulation) -> dict[tuple[str, str, str, bool], str]:
    namespace = scenario.spec.isvc.namespace
    logs = {}
    for pod in scenario.live_pods:  # the logs of a pod that is gone cannot be read any more
        if not pod.runs:
            if pod.config_error_syncs and scenario.serverless:  # queue-proxy runs beside a container never created
                logs[(namespace, pod.name, "queue-proxy", False)] = queue_proxy_log(scenario, pod)
            continue  # never scheduled, or never created: no serving container, no log
        states = simulation.pod_states.get(pod.name, ())
        # The kubelet serves the running container's log, else the last terminated one's; ``previous`` is
        # the last terminated container (lastState.terminated): the same run while the pod waits in back-off.
        terminated = [run for run in pod.runs if run.ended is not None]
        current = pod.runs[-1]
        logs[(namespace, pod.name, scenario.container, False)] = vllm_log(scenario, pod, current, states)
        if terminated:
            logs[(namespace, pod.name, scenario.container, True)] = vllm_log(scenario, pod, terminated[-1], states)
        if scenario.serverless:
            logs[(namespace, pod.name, "queue-proxy", False)] = queue_proxy_log(scenario, pod)
        if pod.sidecar_started is not None:
            logs[(namespace, pod.name, AGENT_CONTAINER, False)] = ""  # nothing the evidence needs from it
    logs.update(blocked.init_logs(scenario))
    logs.update(multinode.leader_logs(scenario))
    logs.update(disagg.prefill_logs(scenario, simulation))
    if scenario.llmisvc and scenario.spec.router is not None and scenario.spec.router.scheduler:
        picker = llmisvc.LlmObjectBuilder(scenario)
        text = llmisvc.picker_log(picker)
        logs[(namespace, picker.picker_pod, kube.LLMISVC_CONTAINER, False)] = text
        if picker.state.picker_restarts:
            logs[(namespace, picker.picker_pod, kube.LLMISVC_CONTAINER, True)] = text
    return logs


def target(spec: ScenarioSpec) -> Target:
    """The service the scenario's capture triages, of the spec's kind."""
    return Target(spec.isvc.namespace, spec.isvc.name, spec.isvc.kind)


def scenario_plan(spec: ScenarioSpec) -> Plan:
    """The plan of every pod, with what a blocking fault, a multi-node service and a prefill workload make of it."""
    return disagg.apply(multinode.apply(blocked.apply(plan(spec))))


def generate(spec: ScenarioSpec) -> dict[str, bytes]:
    """Every file of the scenario's evidence bundle; the same spec always gives the same bytes."""
    scenario = scenario_plan(spec)
    simulation = simulate(scenario)
    cluster = ScenarioCluster(spec, build_objects(scenario), build_logs(scenario, simulation))
    metrics = ScenarioMetrics(spec, RawStore(simulation.families))
    timeline = spec.timeline
    evidence = gather(cluster, metrics, target(spec), timeline.window, timeline.captured_at)
    files = bundle_files(evidence, timeline.captured_at, tool_version=TOOL_VERSION)
    files[SPEC_FILE] = spec.source_text.encode()
    files[RAW_METRICS_FILE] = openmetrics.render(simulation.families).encode()
    return files
