"""Disaggregated prefill/decode (llm-d P/D) for an LLMInferenceService with ``llmisvc.prefill_replicas``.

KServe then renders two vLLM Deployments (pkg/controller/v1alpha2/llmisvc/workload_single_node.go):

- the main one ``<name>-kserve``, role ``decode``, from the decode preset (config-llm-decode-template.yaml): vLLM on
  8001 behind the native sidecar ``llm-d-routing-sidecar`` on 8000, which sends each request to a prefill pod first
  (``max_tokens=1``), then to its local vLLM, which pulls the KV cache the prefill pod computed;
- ``<name>-kserve-prefill``, role ``prefill``, from the prefill preset (vLLM on 8000), with its own replicas and
  container (``spec.prefill``);

and the endpoint picker gets the P/D scheduling profiles (scheduler.go: prefill-filter, decode-filter and the
always-disagg decider, so every request is prefilled remotely).

The prefill workload has its own plan (``Plan.prefill``), made from the same spec with the prefill replicas and args
and requests that end at their first token: the traffic simulator runs both plans on the same demand, so each role's
queue, KV cache and latency follow from the traffic model. The decode plan keeps the whole request (its service time
still counts the prompt's prefill, an upper bound where the KV cache arrives computed).
"""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from nbhelpers.scenarios.events import EventBuilder, build_events
from nbhelpers.scenarios.logs import vllm_log
from nbhelpers.scenarios.objects import _condition
from nbhelpers.scenarios.spec import ScenarioSpec
from nbhelpers.scenarios.state import Plan, plan, rng_for
from nbhelpers.sources import kube
from nbhelpers.sources.kube import KubeObject
from nbhelpers.util.times import format_time

if TYPE_CHECKING:
    from nbhelpers.scenarios.llmisvc import LlmObjectBuilder
    from nbhelpers.scenarios.traffic import Simulation

ROUTING_SIDECAR = "llm-d-routing-sidecar"
SIDECAR_IMAGE = "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0"
SIDECAR_PORT = 8000  # the pool's target port: the sidecar receives, vLLM listens on 8001 (decode preset)
PREFILL_PORT = 8000  # the prefill preset's vLLM port
SIDECAR_LEAD_SECONDS = 1.0  # a native sidecar starts (and must be started) before the pod's containers
PREFILL_SEED_OFFSET = 1_000_003  # the prefill plan's names, uids and noise differ from the decode plan's
# The picker's configuration for a service with a prefill workload (KServe scheduler.go, the llm-d P/D baseline).
PD_CONFIG = """apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: disagg-headers-handler
- type: prefill-filter
- type: decode-filter
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: active-request-scorer
- type: prefix-cache-scorer
- type: max-score-picker
- type: always-disagg-pd-decider
- type: disagg-profile-handler
  parameters:
    deciders:
      prefill: always-disagg-pd-decider
schedulingProfiles:
- name: prefill
  plugins:
  - pluginRef: prefill-filter
  - pluginRef: prefix-cache-scorer
    weight: 3
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: kv-cache-utilization-scorer
    weight: 2
  - pluginRef: max-score-picker
- name: decode
  plugins:
  - pluginRef: decode-filter
  - pluginRef: active-request-scorer
    weight: 2
  - pluginRef: prefix-cache-scorer
    weight: 3
  - pluginRef: max-score-picker
"""


def apply(main: Plan) -> Plan:
    """The main plan with its prefill workload's plan, when the service has one."""
    router = main.spec.router
    if not main.llmisvc or router is None or not router.prefill_replicas:
        return main
    return replace(main, prefill=prefill_plan(main))


def prefill_spec(spec: ScenarioSpec) -> ScenarioSpec:
    """The spec the prefill workload is planned from: its replicas, its args and probes on its port, and requests that
    end at their first token (the sidecar asks the prefill pod for one token: max_tokens=1)."""
    router = spec.router
    assert router is not None
    isvc = spec.isvc
    return replace(
        spec,
        seed=spec.seed + PREFILL_SEED_OFFSET,
        isvc=replace(
            isvc,
            min_replicas=router.prefill_replicas,
            max_replicas=router.prefill_replicas,
            args=router.prefill_args or isvc.args,
            container_port=PREFILL_PORT,
            readiness_probe=_on_port(isvc.readiness_probe, PREFILL_PORT),
            liveness_probe=_on_port(isvc.liveness_probe, PREFILL_PORT),
        ),
        traffic=replace(spec.traffic, output_tokens=1),
    )


def _on_port(probe: Any, port: int) -> Any:
    if not probe or "httpGet" not in probe:
        return probe
    moved = copy.deepcopy(dict(probe))
    moved["httpGet"] = {**moved["httpGet"], "port": port}
    return moved


def prefill_plan(main: Plan) -> Plan:
    """The prefill workload's plan, named as KServe names it (``<name>-kserve-prefill``) and owned by the service."""
    found = plan(prefill_spec(main.spec))
    deployment = f"{main.spec.isvc.name}-kserve-prefill"
    replica_set = f"{deployment}-{found.template_hash}"
    pods = tuple(replace(pod, name=pod.name.replace(found.replica_set, replica_set, 1)) for pod in found.pods)
    uids = {**found.uids, "isvc": main.uids["isvc"]}
    return replace(found, deployment=deployment, replica_set=replica_set, pods=pods, uids=uids)


# ---- objects -------------------------------------------------------------------------------------------------------


def routing_sidecar(builder: LlmObjectBuilder) -> KubeObject:
    """The decode preset's native sidecar (an init container that keeps running): it receives on 8000 and proxies to
    vLLM on 8001 after the prefill pod has run the prompt (config-llm-decode-template.yaml)."""
    probe = {"httpGet": {"path": "/health", "port": SIDECAR_PORT, "scheme": "HTTP"}, "successThreshold": 1}
    return {
        "name": ROUTING_SIDECAR,
        "image": SIDECAR_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "restartPolicy": "Always",
        "command": [
            "/app/pd-sidecar",
            f"--port={SIDECAR_PORT}",
            f"--vllm-port={builder.isvc.container_port}",
            "--kv-connector=nixlv2",
            "--enable-ssrf-protection=true",
            "--pool-group=inference.networking.x-k8s.io",
            f"--inference-pool={builder.ns}/{builder.isvc.name}-inference-pool",
            "--secure-proxy=false",
        ],
        "ports": [{"containerPort": SIDECAR_PORT, "protocol": "TCP"}],
        "env": [{"name": "INFERENCE_POOL_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
        "livenessProbe": {
            **probe,
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
            "timeoutSeconds": 10,
            "failureThreshold": 3,
        },
        "readinessProbe": {
            **probe,
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 10,
        },
        "resources": {},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def _prefill_builder(builder: LlmObjectBuilder, prefill: Plan) -> LlmObjectBuilder:
    found = type(builder)(prefill)
    found.role = "prefill"
    return found


def adjust_objects(builder: LlmObjectBuilder, objects: list[KubeObject]) -> list[KubeObject]:
    """The prefill Deployment, ReplicaSet and pods beside the decode ones; the decode pods' sidecar status; the
    prefill pods in the workload Service's endpoints; spec.prefill and PrefillWorkloadReady on the service."""
    prefill = builder.plan.prefill
    if prefill is None:
        return objects
    role = _prefill_builder(builder, prefill)
    role_objects = [role.deployment(), role.replica_set(), *(role.pod(pod) for pod in prefill.live_pods)]
    decode_pods = {pod.name: pod for pod in builder.plan.live_pods}
    service = f"{builder.isvc.name}-kserve-workload-svc"
    adjusted: list[KubeObject] = []
    for obj in objects:
        kind, name = obj["kind"], kube.name(obj)
        if kind == "LLMInferenceService":
            _with_prefill(builder, role, obj)
        elif kind == "Pod" and name in decode_pods:
            _sidecar_status(obj, decode_pods[name].containers_started - timedelta(seconds=SIDECAR_LEAD_SECONDS))
        elif kind in ("Endpoints", "EndpointSlice") and kube.labels(obj).get("kubernetes.io/service-name", name) == (
            service
        ):
            _add_endpoints(role, obj)
        adjusted.append(obj)
        if kind == "ReplicaSet" and name == builder.plan.replica_set:
            adjusted += role_objects
    return adjusted


def _with_prefill(builder: LlmObjectBuilder, role: LlmObjectBuilder, service: KubeObject) -> None:
    prefill = role.plan
    container: KubeObject = {"name": kube.LLMISVC_CONTAINER, "image": builder.isvc.image, "args": list(prefill.args)}
    container["resources"] = dict(builder.isvc.resources)
    service["spec"]["prefill"] = {"replicas": len(prefill.pods), "template": {"containers": [container]}}
    ready = prefill.ready_pods(builder.captured)
    since = min((pod.ready_at for pod in ready if pod.ready_at), default=builder.deployed + timedelta(seconds=3))
    condition = _condition(
        "PrefillWorkloadReady",
        bool(ready),
        since,
        *(("", "") if ready else ("MinimumReplicasUnavailable", "Deployment does not have minimum availability.")),
    )
    conditions = [*service["status"]["conditions"], condition]
    service["status"]["conditions"] = sorted(conditions, key=lambda entry: entry["type"])


def _sidecar_status(pod: KubeObject, started: Any) -> None:
    pod["status"]["initContainerStatuses"] = [
        {
            "name": ROUTING_SIDECAR,
            "image": SIDECAR_IMAGE,
            "imageID": f"{SIDECAR_IMAGE.split(':')[0]}@sha256:{'7' * 64}",
            "ready": True,
            "started": True,
            "restartCount": 0,
            "state": {"running": {"startedAt": format_time(started)}},
        }
    ]


def _add_endpoints(role: LlmObjectBuilder, obj: KubeObject) -> None:
    """The prefill pods match the workload Service's selector too (it selects no role): their addresses join."""
    ready = [pod for pod in role.plan.live_pods if pod.node is not None and pod.ready(role.captured)]
    if obj["kind"] == "Endpoints":
        subset = obj["subsets"][0]
        subset.setdefault("addresses", []).extend(
            {
                "ip": pod.ip,
                "nodeName": pod.node.name,
                "targetRef": {"kind": "Pod", "name": pod.name, "namespace": role.ns, "uid": pod.uid},
            }
            for pod in ready
            if pod.node is not None
        )
        return
    obj.setdefault("endpoints", []).extend(
        {
            "addresses": [pod.ip],
            "conditions": {"ready": True, "serving": True, "terminating": False},
            "nodeName": pod.node.name,
            "targetRef": {"kind": "Pod", "name": pod.name, "namespace": role.ns, "uid": pod.uid},
        }
        for pod in ready
        if pod.node is not None
    )


# ---- events and logs -----------------------------------------------------------------------------------------------


def prefill_events(main: Plan) -> list[KubeObject]:
    """The prefill workload's events (its own plan's), and the decode pods' sidecar starting before vLLM."""
    if main.prefill is None:
        return []
    found = build_events(main.prefill)
    maker = EventBuilder(main)
    maker.rng = rng_for(main.spec, "disagg-events")
    for pod in main.live_pods:
        if pod.node is None:
            continue
        base = {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid, "resourceVersion": "1"}
        for event in maker.container_starts(pod, base, ROUTING_SIDECAR, SIDECAR_IMAGE, -SIDECAR_LEAD_SECONDS):
            event["involvedObject"]["fieldPath"] = f"spec.initContainers{{{ROUTING_SIDECAR}}}"
            found.append(event)
    return found


def prefill_logs(main: Plan, simulation: Simulation) -> dict[tuple[str, str, str, bool], str]:
    """The prefill pods' vLLM logs, from their own plan and their share of the simulation."""
    prefill = main.prefill
    if prefill is None:
        return {}
    namespace = main.spec.isvc.namespace
    logs = {}
    for pod in prefill.live_pods:
        if not pod.runs:
            continue
        states = simulation.pod_states.get(pod.name, ())
        logs[(namespace, pod.name, prefill.container, False)] = vllm_log(prefill, pod, pod.runs[-1], states)
        ended = [run for run in pod.runs if run.ended is not None]
        if ended:
            logs[(namespace, pod.name, prefill.container, True)] = vllm_log(prefill, pod, ended[-1], states)
    return logs
