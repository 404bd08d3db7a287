"""gather() over LiveCluster against the fixture clusters: request budget, unknown service, bundle round trip."""

from __future__ import annotations

import tarfile
import threading
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from fakeapi import DEFAULT_TOKEN, FakeApiServer

from nbhelpers.errors import RunbookError
from nbhelpers.evidence.capture import write_bundle
from nbhelpers.evidence.gather import gather
from nbhelpers.evidence.model import Evidence, Target
from nbhelpers.sources import kinds, kube
from nbhelpers.sources.bundle import open_bundle
from nbhelpers.sources.cluster_live import LiveCluster
from nbhelpers.sources.kube import KubeObject
from nbhelpers.util.redaction import REDACTED
from nbhelpers.util.times import Window

pytestmark = pytest.mark.integration

Connect = Callable[..., LiveCluster]
OBSERVED_AT = datetime(2026, 1, 15, 12, 0, 0, tzinfo=timezone.utc)
WINDOW = Window(OBSERVED_AT - timedelta(hours=1), OBSERVED_AT)  # every fixture time lies in 11:00-12:00
SERVERLESS_SECRETS = ("sk-kv7Qm2Xr9LpT4wZs8NbHc3Fd", "hf_QpWxRtYuIoPaSdFgHjKlZxCvBnMq12", DEFAULT_TOKEN)
RAW_SECRETS = ("sk-raw5Hn8Vb2Qe7Ty4Uk1Mz6Px", DEFAULT_TOKEN)

# The reads gather() makes against any cluster (docs/architecture.md#data-flow: few, batched reads):
DISCOVERY = 1  # GET /apis, once, for every non-core group
VERSION = 1  # GET /version
ISVC_AND_CONFIG = 2  # GET the InferenceService, GET kserve/inferenceservice-config
SELECTOR_LISTS = 6  # ksvc, Revision, PodAutoscaler, Deployment, ReplicaSet, Pod (by the ISVC label)
NAMESPACE_LISTS = (
    9  # Service, Endpoints, EndpointSlice, HPA, ScaledObject, VirtualService, HTTPRoute, Ingress, ServingRuntime
)
CLUSTER_LISTS = 3  # ClusterServingRuntime, Node, APIService
METRICS_API_BACKING = 3  # GET kube-system/metrics-server Service, list kube-system Deployments and adapter ConfigMaps
KNATIVE_CONFIG = 3  # GET config-autoscaler, config-defaults, config-deployment
EVENTS = 1  # one list of the namespace's events
BASE_READS = (
    DISCOVERY
    + VERSION
    + ISVC_AND_CONFIG
    + SELECTOR_LISTS
    + NAMESPACE_LISTS
    + CLUSTER_LISTS
    + METRICS_API_BACKING
    + KNATIVE_CONFIG
    + EVENTS
)


def requests_of(server: FakeApiServer) -> list[tuple[str, str]]:
    return [(request.method, request.path) for request in server.requests]


def assert_only_logs_are_per_pod(server: FakeApiServer, namespace: str) -> None:
    per_pod = [path for _, path in requests_of(server) if path.startswith(f"/api/v1/namespaces/{namespace}/pods/")]
    assert per_pod and all(path.endswith("/log") for path in per_pod)


def test_serverless_gather_stays_within_its_request_budget(
    serverless_api: FakeApiServer, kubeconfig: Path, connect: Connect
) -> None:
    evidence = gather(connect(kubeconfig), None, Target("llm", "vllm-llm"), WINDOW, OBSERVED_AT)

    # All of BASE_READS are sent, except the lists of groups that are not installed (ScaledObject: no KEDA,
    # HTTPRoute: no Gateway API), plus one GET per Istio Gateway the VirtualServices name (ingress and local)
    # and the logs of one pod (two ready pods, no restarts: only the first healthy pod) x 2 containers.
    missing_crd_lists = 2
    gateway_gets = 2
    log_reads = 1 * 2
    expected = BASE_READS - missing_crd_lists + gateway_gets + log_reads
    assert expected == 31
    assert len(serverless_api.requests) == expected
    assert {method for method, _ in requests_of(serverless_api)} == {"GET"}
    assert_only_logs_are_per_pod(serverless_api, "llm")

    assert evidence.deployment_mode == "Serverless"
    assert dict(evidence.versions) == {"kubernetes": "1.31", "vllm": "0.10.1"}
    assert sorted(kube.name(pod) for pod in evidence.of(kinds.POD)) == [
        "vllm-llm-predictor-00001-deployment-7d9c5f6b8d-4xk2p",
        "vllm-llm-predictor-00001-deployment-7d9c5f6b8d-9tq7m",
    ]
    assert [(log.container, log.previous) for log in evidence.logs] == [
        ("kserve-container", False),
        ("queue-proxy", False),
    ]
    assert evidence.failures() == ()
    assert {record.what: record.status for record in evidence.not_seen()} == {
        "ScaledObject.keda.sh in llm": "not_installed",
        "HTTPRoute.gateway.networking.k8s.io in llm": "not_installed",
        "prometheus": "skipped",
    }
    # Events of other workloads in the namespace (a batch job) are left out.
    assert len(evidence.events) == 8
    assert all("batch-eval" not in kube.name(event) for event in evidence.events)


def test_raw_gather_reads_the_previous_log_of_the_restarted_pod(
    raw_api: FakeApiServer, kubeconfig: Path, connect: Connect
) -> None:
    evidence = gather(connect(kubeconfig), None, Target("raw", "vllm-raw"), WINDOW, OBSERVED_AT)

    # No Knative, Istio, KEDA or Gateway API here: 3 selector lists and 3 namespace lists are answered
    # from discovery alone, and no Gateway is named. One pod, restarted: current + previous log of its
    # only container.
    missing_crd_lists = 3 + 3
    log_reads = 1 * 2
    expected = BASE_READS - missing_crd_lists + log_reads
    assert expected == 25
    assert len(raw_api.requests) == expected
    assert {method for method, _ in requests_of(raw_api)} == {"GET"}
    assert_only_logs_are_per_pod(raw_api, "raw")
    assert not any("knative.dev" in path or "istio.io" in path for _, path in requests_of(raw_api))

    assert evidence.deployment_mode == "RawDeployment"
    assert [(log.container, log.previous) for log in evidence.logs] == [
        ("kserve-container", False),
        ("kserve-container", True),
    ]
    previous = evidence.logs[1].text
    assert "Loading safetensors checkpoint shards:   0% Completed" in previous
    assert "Application startup complete" not in previous


def test_an_unknown_isvc_lists_the_existing_ones(
    serverless_api: FakeApiServer, kubeconfig: Path, connect: Connect
) -> None:
    with pytest.raises(RunbookError) as failure:
        gather(connect(kubeconfig), None, Target("llm", "llama"), WINDOW, OBSERVED_AT)
    assert str(failure.value) == "InferenceService 'llama' not found in namespace 'llm' (existing: qwen-chat, vllm-llm)"
    assert {method for method, _ in requests_of(serverless_api)} == {"GET"}


@pytest.mark.parametrize(
    ("cluster", "target", "secrets"),
    [
        ("serverless_api", Target("llm", "vllm-llm"), SERVERLESS_SECRETS),
        ("raw_api", Target("raw", "vllm-raw"), RAW_SECRETS),
    ],
)
def test_a_captured_bundle_gives_the_same_evidence_without_secrets(
    cluster: str,
    target: Target,
    secrets: tuple[str, ...],
    request: pytest.FixtureRequest,
    kubeconfig: Path,
    connect: Connect,
    tmp_path: Path,
) -> None:
    request.getfixturevalue(cluster)
    live = gather(connect(kubeconfig), None, target, WINDOW, OBSERVED_AT)
    archive = write_bundle(live, tmp_path / "b.tar.gz", OBSERVED_AT)

    bundle_cluster, _, manifest = open_bundle(archive)
    offline = gather(bundle_cluster, None, target, manifest.window, manifest.captured_at)

    assert comparable(offline) == comparable(live)
    assert offline.events == live.events
    assert offline.logs == live.logs
    assert offline.reads == live.reads
    assert offline.deployment_mode == live.deployment_mode

    contents = bundle_bytes(archive)
    for secret in secrets:
        assert not any(secret.encode() in data for data in contents.values()), secret
    # The api key line is still there, redacted, so the secret was removed and not the evidence.
    server_logs = [data for name, data in contents.items() if name.endswith("/kserve-container.log")]
    assert server_logs and all(b"non-default args" in data and REDACTED.encode() in data for data in server_logs)


def comparable(evidence: Evidence) -> dict[str, list[KubeObject]]:
    """Objects by kind in reference order (the order of reads is not part of the evidence)."""
    return {key: sorted(objects, key=kube.ref) for key, objects in evidence.objects.items()}


def bundle_bytes(archive: Path) -> dict[str, bytes]:
    """Every file of the bundle, decompressed, plus the archive's own bytes."""
    contents = {"<archive>": archive.read_bytes()}
    with tarfile.open(archive, "r:gz") as bundle:
        for member in bundle.getmembers():
            extracted = bundle.extractfile(member)
            if extracted is not None:
                contents[member.name] = extracted.read()
    return contents


def test_a_live_gather_reads_its_independent_lists_ahead_and_records_them_in_order(
    serverless_api: FakeApiServer, kubeconfig: Path, connect: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against a live API server the lists that depend on nothing read so far go out LiveCluster.parallel_reads at a
    time (a round trip each on a real control plane); the records and objects are those of one read after another."""
    threads: list[str] = []
    plain_list = LiveCluster.list

    def recording_list(self: LiveCluster, *arguments: object) -> list[KubeObject]:
        threads.append(threading.current_thread().name)
        return plain_list(self, *arguments)  # type: ignore[arg-type]

    monkeypatch.setattr(LiveCluster, "list", recording_list)
    evidence = gather(connect(kubeconfig), None, Target("llm", "vllm-llm"), WINDOW, OBSERVED_AT)
    ahead = [name for name in threads if name.startswith("kube-read")]
    assert len(ahead) == SELECTOR_LISTS + NAMESPACE_LISTS + 2  # + ClusterServingRuntime and Node
    listed = [record.what for record in evidence.reads if " in llm" in record.what and "=" in record.what]
    assert [what.split(".")[0].split(" ")[0] for what in listed] == [
        "Service",
        "Revision",
        "PodAutoscaler",
        "Deployment",
        "ReplicaSet",
        "Pod",
    ]
