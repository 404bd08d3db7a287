"""An LLMInferenceService triaged live (fixture API server over HTTP, real kubernetes client) and from the bundle
that run captured; the CLI's target options (issue #18)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from builders import FIXTURES, comparable, load_yaml
from fakeapi import FakeApiServer, crds_for_every_kind_read, write_kubeconfig
from promharness import prometheus_serving

from nbhelpers.checks import STEPS, check_for
from nbhelpers.evidence.capture import write_bundle
from nbhelpers.evidence.gather import gather
from nbhelpers.render.findings_json import validate_findings
from nbhelpers.scenarios import load_spec, scenario_bundle
from nbhelpers.scenarios.generator import (
    RAW_METRICS_FILE,
    build_logs,
    build_objects,
    generate,
    scenario_plan,
    target,
)
from nbhelpers.scenarios.traffic import simulate
from nbhelpers.sources import kinds
from nbhelpers.sources.cluster_live import LiveCluster
from nbhelpers.sources.metrics_live import LiveMetrics
from nbhelpers.triage import TriageResult, params_from_text, run, run_step

pytestmark = pytest.mark.integration

WINDOW = {"start": "2026-01-15T11:00:00Z", "end": "2026-01-15T12:00:00Z"}
COMMON = FIXTURES / "cluster" / "common"
HEALTHY = "checks/healthy/llmisvc.yaml"
POD = "llama-llmd-kserve-6d8f7c9b5-4xk2p"
LOG = (
    "2026-01-15T10:10:31.000000000Z (APIServer pid=1) INFO 01-15 10:10:31 [api_server.py:1805] "
    "vLLM API server version 0.11.0\n"
    '2026-01-15T11:30:00.000000000Z (APIServer pid=1) INFO:     10.0.3.9:41234 - "POST /v1/completions HTTP/1.1" 200 OK\n'
)
PICKER_LOG = (
    '2026-01-15T11:49:59.000000000Z {"level":"error","msg":"Failed to watch","error":"failed to list '
    "*v1alpha2.InferenceObjective: inferenceobjectives.inference.networking.x-k8s.io is forbidden: User "
    'system:serviceaccount:llm:llama-llmd-epp-sa cannot list resource inferenceobjectives"}\n'
)
# The groups only an LLMInferenceService triage reads, plus the Gateway API it hangs on.
GROUPS = {
    "serving.kserve.io",
    "inference.networking.k8s.io",
    "inference.networking.x-k8s.io",
    "gateway.networking.k8s.io",
}


def load_llmisvc_cluster(
    server: FakeApiServer, *overrides: str, with_pool_crds: bool = True, with_lws_crd: bool = False
) -> FakeApiServer:
    """KServe's common fixtures, the CRDs the llm-d stack needs and the healthy stack (``overrides`` replace objects);
    ``with_lws_crd`` installs LeaderWorkerSet too."""
    server.load(COMMON)
    present = server.cluster.objects[("apiextensions.k8s.io", "customresourcedefinitions")]
    groups = GROUPS | ({kinds.LEADER_WORKER_SET.group} if with_lws_crd else set())
    wanted = [
        crd
        for crd in crds_for_every_kind_read()
        if crd["spec"]["group"] in groups
        and ("", crd["metadata"]["name"]) not in present
        and (with_pool_crds or crd["spec"]["names"]["kind"] != "InferencePool")
    ]
    server.cluster.add_all(wanted)
    objects: dict[tuple[str, str, str, str], dict] = {}
    for obj in load_yaml(HEALTHY, *overrides):
        key = (obj["apiVersion"], obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        objects[key] = obj
    server.cluster.add_all(obj for obj in objects.values() if with_pool_crds or obj["kind"] != "InferencePool")
    server.cluster.add_log("llm", POD, "main", LOG)
    return server


def triage(server: FakeApiServer, tmp_path: Path, **extra: str) -> TriageResult:
    config = write_kubeconfig(tmp_path / "kubeconfig", server.url, token=server.token)
    return run(
        params_from_text({"kubeconfig": str(config), "namespace": "llm", "llmisvc": "llama-llmd", **WINDOW, **extra})
    )


def test_a_healthy_service_is_triaged_live_and_from_its_bundle(fake_api: FakeApiServer, tmp_path: Path) -> None:
    result = triage(load_llmisvc_cluster(fake_api), tmp_path)

    document = result.to_json()
    validate_findings(document)
    assert document["target"]["kind"] == "LLMInferenceService"
    assert document["target"]["isvc"] == "llama-llmd"
    assert result.root_causes == ()
    assert result.step("endpoints").status == "ok"
    # Every step reads the llm-d stack (issue #18); without spec.scaling no autoscaler reads a metric.
    assert {step.id: step.status for step in result.steps if step.status != "ok"} == {"metric_pipeline": "skipped"}
    assert "no HPA or ScaledObject acts on the vLLM workload" in result.step("metric_pipeline").reason
    assert result.partial is False
    evidence = result.evidence
    assert {kind.key for kind in (kinds.LLM_INFERENCE_SERVICE, kinds.INFERENCE_POOL)} <= set(evidence.objects)
    assert len(evidence.of(kinds.POD)) == 3  # two vLLM pods and the endpoint picker, by KServe's labels
    # One vLLM pod (the healthy one) and the endpoint picker: the main container of each.
    assert sorted((log.pod, log.container) for log in evidence.logs) == [
        (POD, "main"),
        ("llama-llmd-kserve-router-scheduler-7c9d8b6f4-k2m4p", "main"),
    ]
    vllm_log = next(log for log in evidence.logs if log.pod == POD)
    assert "POST /v1/completions" in vllm_log.text and "version 0.11.0" not in vllm_log.text  # window

    bundle = write_bundle(evidence, tmp_path / "evidence.tar.gz", evidence.observed_at)
    assert json.loads(_manifest(bundle))["target"]["kind"] == "LLMInferenceService"
    replay = run(params_from_text({"bundle": str(bundle)}))
    assert comparable(replay.to_json()) | {"sources": None} == comparable(document) | {"sources": None}


def _manifest(bundle: Path) -> str:
    import tarfile

    with tarfile.open(bundle) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith("manifest.json"))
        handle = archive.extractfile(member)
        assert handle is not None
        return handle.read().decode()


def test_a_picker_down_under_failclose_is_the_root_cause_live(fake_api: FakeApiServer, tmp_path: Path) -> None:
    server = load_llmisvc_cluster(fake_api, "checks/ENDPOINTS_PICKER_NOT_READY/llmisvc_failclose.yaml")
    picker = "llama-llmd-kserve-router-scheduler-7c9d8b6f4-k2m4p"
    server.cluster.add_log("llm", picker, "main", PICKER_LOG)
    server.cluster.add_log("llm", picker, "main", PICKER_LOG, previous=True)
    result = triage(server, tmp_path)
    assert result.root_causes[:2] == ("ENDPOINTS_PICKER_NOT_READY", "LLMISVC_NOT_READY")
    assert {(log.pod, log.previous) for log in result.evidence.logs if log.pod == picker} == {
        (picker, False),
        (picker, True),
    }
    finding = next(f for f in result.findings if f.code == "ENDPOINTS_PICKER_NOT_READY")
    assert any("cannot list resource" in line for line in finding.evidence)


def test_without_the_inference_extension_the_pool_is_not_installed(fake_api: FakeApiServer, tmp_path: Path) -> None:
    result = triage(load_llmisvc_cluster(fake_api, with_pool_crds=False), tmp_path)
    statuses = {record.what: record.status for record in result.evidence.reads}
    assert statuses["InferencePool.inference.networking.k8s.io in llm"] == "not_installed"
    assert result.partial is False
    pool = next(finding for finding in result.findings if finding.code == "ROUTING_POOL_NOT_ACCEPTED")
    assert "not installed" in pool.summary


def test_an_unknown_llmisvc_lists_the_existing_ones(fake_api: FakeApiServer, tmp_path: Path) -> None:
    from nbhelpers.errors import RunbookError

    with pytest.raises(
        RunbookError, match=r"LLMInferenceService 'nope' not found in namespace 'llm' \(existing: llama-llmd\)"
    ):
        triage(load_llmisvc_cluster(fake_api), tmp_path, llmisvc="nope")


def kserve_runbook(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nbhelpers", *arguments], capture_output=True, text=True, timeout=120, cwd=cwd
    )


def test_the_cli_takes_one_target_kind(tmp_path: Path) -> None:
    both = kserve_runbook("triage", "-n", "llm", "--isvc", "a", "--llmisvc", "b", cwd=tmp_path)
    assert both.returncode == 2 and both.stderr.strip().splitlines() == [both.stderr.strip()]
    assert "give either --isvc or --llmisvc, not both" in both.stderr
    neither = kserve_runbook("triage", "-n", "llm", cwd=tmp_path)
    assert neither.returncode == 2 and "--llmisvc instead of --isvc" in neither.stderr


def test_the_cli_triages_an_llmisvc_live(fake_api: FakeApiServer, tmp_path: Path) -> None:
    server = load_llmisvc_cluster(fake_api, "checks/ENDPOINTS_POOL_SELECTS_NO_POD/llmisvc_label_changed.yaml")
    # The v1 pool is gone: only the x-k8s.io pool with the changed selector remains.
    del server.cluster.objects[("inference.networking.k8s.io", "inferencepools")][("llm", "llama-llmd-inference-pool")]
    config = write_kubeconfig(tmp_path / "kubeconfig", server.url, token=server.token)
    out = tmp_path / "out"
    result = kserve_runbook(
        "triage",
        "--kubeconfig",
        str(config),
        "-n",
        "llm",
        "--llmisvc",
        "llama-llmd",
        "--start",
        WINDOW["start"],
        "--end",
        WINDOW["end"],
        "--out",
        str(out),
        "--no-report",
        cwd=tmp_path,
    )
    assert result.returncode == 1, result.stderr
    assert "ENDPOINTS_POOL_SELECTS_NO_POD" in result.stdout
    findings = json.loads((out / "findings.json").read_text())
    assert findings["target"]["kind"] == "LLMInferenceService"
    assert findings["root_causes"][0] == "ENDPOINTS_POOL_SELECTS_NO_POD"
    assert "Triage of LLMInferenceService llm/llama-llmd over" in (out / "summary.md").read_text()


def test_capture_then_triage_the_bundle_from_the_cli(fake_api: FakeApiServer, tmp_path: Path) -> None:
    server = load_llmisvc_cluster(fake_api, "checks/ROUTING_GATEWAY_NOT_PROGRAMMED/llmisvc_no_address.yaml")
    config = write_kubeconfig(tmp_path / "kubeconfig", server.url, token=server.token)
    bundle = tmp_path / "incident.tar.gz"
    window = ("--start", WINDOW["start"], "--end", WINDOW["end"])
    captured = kserve_runbook(
        "capture", "--kubeconfig", str(config), "-n", "llm", "--llmisvc", "llama-llmd", *window, "--out", str(bundle),
        cwd=tmp_path,
    )  # fmt: skip
    assert captured.returncode == 0, captured.stderr
    out = tmp_path / "out"
    replay = kserve_runbook("triage", "--bundle", str(bundle), "--out", str(out), "--no-report", cwd=tmp_path)
    assert replay.returncode == 1, replay.stderr
    findings = json.loads((out / "findings.json").read_text())
    assert findings["target"] == {
        "namespace": "llm",
        "isvc": "llama-llmd",
        "deployment_mode": "unknown",
        "deployment_mode_raw": "",
        "kind": "LLMInferenceService",
    }
    assert findings["root_causes"][0] == "ROUTING_GATEWAY_NOT_PROGRAMMED"


def test_the_llmisvc_gather_stays_within_its_request_budget(fake_api: FakeApiServer, tmp_path: Path) -> None:
    """Few batched reads (docs/architecture.md#data-flow): lists by kind, one GET per Gateway, logs per chosen pod."""
    server = load_llmisvc_cluster(fake_api)
    server.clear_requests()
    triage(server, tmp_path)
    paths = [request.path for request in server.requests]
    assert {request.method for request in server.requests} == {"GET"}
    per_pod = [path for path in paths if path.startswith("/api/v1/namespaces/llm/pods/")]
    assert sorted(path.rsplit("/", 2)[-2] for path in per_pod) == [
        POD,
        "llama-llmd-kserve-router-scheduler-7c9d8b6f4-k2m4p",
    ]
    assert all(path.endswith("/log") for path in per_pod)
    reads = [path for path in paths if not path.endswith("/log")]
    # discovery, version, the service, 3 labelled lists (not LeaderWorkerSets: LWS is not installed, discovery says
    # so), 7 namespace lists (nor ScaledObject: no KEDA), 1 Gateway, the presets in the service's and KServe's
    # namespaces, nodes, APIServices and the metrics-server's Service, Deployments and adapter ConfigMaps, events.
    assert len(reads) == 22, reads
    assert "/apis/serving.kserve.io/v1alpha2/namespaces/kserve/llminferenceserviceconfigs" in paths
    assert "/apis/gateway.networking.k8s.io/v1/namespaces/kserve/gateways/kserve-ingress-gateway" in paths


# A multi-node service (docs/upstream-facts.md#leaderworkerset): the single-node Deployment and pods of the healthy
# stack are replaced by KServe's LeaderWorkerSet and its leader and worker.
MULTINODE = "checks/healthy/llmisvc_multinode.yaml"
WORKER_PENDING = "checks/WORKLOAD_GROUP_INCOMPLETE/llmisvc_worker_pending.yaml"
SINGLE_NODE = (
    ("apps", "deployments", "llama-llmd-kserve"),
    ("", "pods", "llama-llmd-kserve-6d8f7c9b5-4xk2p"),
    ("", "pods", "llama-llmd-kserve-6d8f7c9b5-9tq7m"),
)


def load_multinode_cluster(server: FakeApiServer, *overrides: str) -> FakeApiServer:
    load_llmisvc_cluster(server, MULTINODE, *overrides, with_lws_crd=True)
    for group, plural, name in SINGLE_NODE:
        del server.cluster.objects[(group, plural)][("llm", name)]
    return server


def test_a_multi_node_group_missing_a_worker_live_and_from_its_bundle(fake_api: FakeApiServer, tmp_path: Path) -> None:
    """From vllm-project/production-stack#653: the worker never starts, the leader waits, the Gateway has no endpoint."""
    server = load_multinode_cluster(fake_api, WORKER_PENDING)
    result = triage(server, tmp_path)

    statuses = {record.what: record.status for record in result.evidence.reads}
    assert statuses["LeaderWorkerSet.leaderworkerset.x-k8s.io in llm (app.kubernetes.io/part-of=llminferenceservice,"
                    "app.kubernetes.io/name=llama-llmd)"] == "ok"  # fmt: skip
    assert result.root_causes[0] == "WORKLOAD_GROUP_INCOMPLETE"
    assert {"ENDPOINTS_NONE_READY", "LLMISVC_NOT_READY"} <= set(result.root_causes[1:])
    finding = next(f for f in result.findings if f.code == "WORKLOAD_GROUP_INCOMPLETE")
    assert "worker 1" in finding.title and "Insufficient nvidia.com/gpu" in finding.summary
    assert "kserve/kserve-config-llm-worker-data-parallel (Preset)" in finding.evidence[-1]

    bundle = write_bundle(result.evidence, tmp_path / "evidence.tar.gz", result.evidence.observed_at)
    replay = run(params_from_text({"bundle": str(bundle)}))
    assert comparable(replay.to_json()) | {"sources": None} == comparable(result.to_json()) | {"sources": None}


def test_a_complete_multi_node_group_is_healthy_live(fake_api: FakeApiServer, tmp_path: Path) -> None:
    result = triage(load_multinode_cluster(fake_api), tmp_path)
    assert result.root_causes == ()
    assert {
        kube_name for kube_name in (obj["metadata"]["name"] for obj in result.evidence.of(kinds.LEADER_WORKER_SET))
    } == {"llama-llmd-kserve-mn"}


def test_a_preset_found_nowhere_is_the_cause_live(fake_api: FakeApiServer, tmp_path: Path) -> None:
    """From kserve/kserve#5047: KServe stops at PresetsCombined=False and renders nothing of the stack."""
    server = load_llmisvc_cluster(fake_api, "checks/LLMISVC_PRESET_NOT_FOUND/llmisvc_pipeline_preset_missing.yaml")
    rendered = {
        ("apps", "deployments"): ("llama-llmd-kserve", "llama-llmd-kserve-router-scheduler"),
        ("", "pods"): (*(name for _, _, name in SINGLE_NODE[1:]), "llama-llmd-kserve-router-scheduler-7c9d8b6f4-k2m4p"),
        ("", "services"): ("llama-llmd-kserve-workload-svc", "llama-llmd-epp-service"),
        ("gateway.networking.k8s.io", "httproutes"): ("llama-llmd-kserve-route",),
        ("inference.networking.k8s.io", "inferencepools"): ("llama-llmd-inference-pool",),
    }
    for (group, plural), names in rendered.items():
        for name in names:
            del server.cluster.objects[(group, plural)][("llm", name)]
    result = triage(server, tmp_path)
    assert result.root_causes[0] == "LLMISVC_PRESET_NOT_FOUND"
    finding = next(f for f in result.findings if f.code == "LLMISVC_PRESET_NOT_FOUND")
    assert "kserve-config-llm-worker-pipeline-parallel" in finding.title


# Issue #18's "done when": LLMInferenceService scenarios triaged live, the generated cluster served over HTTP by the
# fixture API server and the scenario's raw series by a real Prometheus (backfilled with promtool), give the findings
# of the scenario's bundle.
REAL_PROMETHEUS_SCENARIOS = {
    "llmisvc-pd-prefill-saturated": "QUEUE_SATURATION",  # read from the prefill pods' vLLM series
    "llmisvc-ready-false-while-serving": "LLMISVC_NOT_READY",  # info: the vLLM pods' request counters say it serves
}


@pytest.mark.parametrize("name", sorted(REAL_PROMETHEUS_SCENARIOS))
def test_llmisvc_scenarios_live_with_a_real_prometheus_give_the_bundles_findings(
    name: str, fake_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    spec = load_spec(name)
    scenario = scenario_plan(spec)
    simulation = simulate(scenario)
    objects, logs = build_objects(scenario), build_logs(scenario, simulation)
    missing = set(spec.cluster.missing_crd_groups)
    fake_api.cluster.add_all([crd for crd in crds_for_every_kind_read() if crd["spec"]["group"] not in missing])
    fake_api.cluster.add_all(objects)
    for (namespace, pod, container, previous), text in logs.items():
        fake_api.cluster.add_log(namespace, pod, container, text, previous)
    raw_series = generate(spec)[RAW_METRICS_FILE].decode()
    with (
        prometheus_serving(raw_series, tmp_path) as prometheus,
        LiveCluster(str(kubeconfig), None, 5.0) as cluster,
    ):
        metrics = LiveMetrics(prometheus.url, None, None, {}, True, 10.0)
        live = gather(cluster, metrics, target(spec), spec.timeline.window, spec.timeline.captured_at)
    assert [record for record in live.failures() if record.status != "not_installed"] == []
    assert {name for name, origin in live.sources.items() if origin == "live"} >= {"cluster", "prometheus"}
    live_findings = [
        finding.to_json() for step in STEPS for finding in run_step(step, check_for(step.id), live).findings
    ]
    from_bundle = run(params_from_text({"bundle": str(scenario_bundle(name))}))
    assert live_findings == [finding.to_json() for finding in from_bundle.findings]
    assert REAL_PROMETHEUS_SCENARIOS[name] in {finding["code"] for finding in live_findings}
