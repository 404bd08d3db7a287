"""Shared pytest fixtures. Each block belongs to one area; add new blocks below, not inside others."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _pytest.nodeid import NodeId
from fakeapi import FakeApiServer, crds_for_every_kind_read, write_kubeconfig
from scenario_cache import session_cache_dir, shared_bundle, shared_bundles, shipped_specs

from nbhelpers.sources.cluster_live import LiveCluster
from nbhelpers.triage import TriageParams, TriageResult, run

# --- fixture Kubernetes API server (tests/fakeapi.py, tests/fixtures/cluster) ---------------------

CLUSTER_FIXTURES = Path(__file__).parent / "fixtures" / "cluster"


@pytest.fixture
def fake_api() -> Iterator[FakeApiServer]:
    """An empty fixture API server on 127.0.0.1 (load objects with ``fake_api.load`` or ``fake_api.cluster.add``)."""
    with FakeApiServer() as server:
        yield server


@pytest.fixture
def kubeconfig(fake_api: FakeApiServer, tmp_path: Path) -> Path:
    """A kubeconfig whose current context points at ``fake_api`` with its bearer token."""
    return write_kubeconfig(tmp_path / "kubeconfig", fake_api.url, token=fake_api.token)


@pytest.fixture
def serverless_api(fake_api: FakeApiServer) -> FakeApiServer:
    """The Serverless cluster: KServe + Knative + Istio, ``llm/vllm-llm`` healthy with 2 pods."""
    return fake_api.load(CLUSTER_FIXTURES / "common", CLUSTER_FIXTURES / "serverless")


GATEWAY_API_OBJECTS = [
    {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "inference-gateway", "namespace": "gateways"},
        "spec": {"gatewayClassName": "envoy", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
    },
    {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "vllm-llm-extra", "namespace": "llm"},
        "spec": {"parentRefs": [{"name": "inference-gateway", "namespace": "gateways"}]},
    },
]


def load_serverless_with_every_kind(server: FakeApiServer) -> FakeApiServer:
    """The Serverless cluster with every CRD the tool reads installed (KEDA, Gateway API too) and a
    Gateway and HTTPRoute, so that every kind gather() reads answers."""
    server.load(CLUSTER_FIXTURES / "common", CLUSTER_FIXTURES / "serverless")
    crds = server.cluster.objects[("apiextensions.k8s.io", "customresourcedefinitions")]
    server.cluster.add_all([crd for crd in crds_for_every_kind_read() if ("", crd["metadata"]["name"]) not in crds])
    server.cluster.add_all(GATEWAY_API_OBJECTS)
    return server


@pytest.fixture
def raw_api(fake_api: FakeApiServer) -> FakeApiServer:
    """The RawDeployment cluster: KServe only, ``raw/vllm-raw`` with one pod restarted 3 times."""
    return fake_api.load(CLUSTER_FIXTURES / "common", CLUSTER_FIXTURES / "raw")


@pytest.fixture
def connect() -> Iterator[Callable[..., LiveCluster]]:
    """``connect(kubeconfig, context=None, timeout=5.0)`` opens a LiveCluster that is closed after the test.

    Closing matters: pooled sockets left to the garbage collector raise ResourceWarning (an error here).
    """
    opened: list[LiveCluster] = []

    def open_cluster(config: Path | str | None, context: str | None = None, timeout: float = 5.0) -> LiveCluster:
        cluster = LiveCluster(None if config is None else str(config), context, timeout)
        opened.append(cluster)
        return cluster

    yield open_cluster
    for cluster in opened:
        cluster.close()


# --- end of the fixture API server block ------------------------------------------------------------


# --- fleet cluster (tests/test_fleet.py): several InferenceServices in two namespaces ----------------

FLEET_LOG_FORBIDDEN = "/api/v1/namespaces/llm/pods/vllm-llm-predictor-*/log"


@pytest.fixture
def fleet_api(fake_api: FakeApiServer) -> FakeApiServer:
    """Four services in two namespaces: ``llm/vllm-llm`` healthy but its logs forbidden (a partial run),
    ``llm/qwen-chat`` scaled to zero with no GPU requested (critical), ``team-b/summarize`` healthy,
    ``team-b/chat`` listening on 8000 behind containerPort 8080 (PORT_MISMATCH, critical)."""
    fake_api.load(CLUSTER_FIXTURES / "common", CLUSTER_FIXTURES / "serverless", CLUSTER_FIXTURES / "fleet")
    fake_api.inject(FLEET_LOG_FORBIDDEN, status=403)
    return fake_api


# --- end of the fleet cluster block ------------------------------------------------------------------


# --- the shipped scenarios' bundles, generated once per session (tests/scenario_cache.py) ----------------


@pytest.fixture(scope="session")
def scenario_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's scenario bundle cache, shared by the xdist workers (pass it as ``scenario_bundle``'s
    ``cache_dir``, or use ``shipped_bundle``)."""
    return session_cache_dir(tmp_path_factory)


@pytest.fixture(scope="session")
def shipped_bundle(scenario_cache: Path) -> Callable[[str], Path]:
    """``shipped_bundle(name)``: the bundle directory of a shipped scenario, generated once per session."""
    return lambda name: shared_bundle(scenario_cache, name)


@pytest.fixture(scope="session")
def shipped_bundles(scenario_cache: Path) -> dict[str, Path]:
    """Every shipped scenario's bundle directory by name (the workers split the generation)."""
    return shared_bundles(scenario_cache, [spec.name for spec in shipped_specs()])


@pytest.fixture(scope="session")
def shipped_result(shipped_bundle: Callable[[str], Path]) -> Callable[[str], TriageResult]:
    """``shipped_result(name)``: ``run`` on a shipped scenario's bundle with the default parameters, once per
    process for every module that only reads the result."""

    @functools.cache
    def result(name: str) -> TriageResult:
        return run(TriageParams(bundle=str(shipped_bundle(name))))

    return result


# --- end of the scenario bundle block -----------------------------------------------------------------


def _xdist_group_suffix(item: pytest.Item) -> str | None:
    """``@name`` for an item marked ``xdist_group(name)``, as pytest-xdist appends it to the node id."""
    names = sorted(
        {
            str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
            for mark in item.iter_markers("xdist_group")
        }
    )
    return f"@{'_'.join(names)}" if names else None


def _keep_xdist_groups(items: list[pytest.Item]) -> None:
    """Put the ``xdist_group`` suffix into the node ids again (on an xdist worker under ``--dist loadgroup``).

    pytest-xdist 3.8 tells the scheduler an item's group by writing ``item._nodeid``; from pytest 9.2 the node id
    is ``item._id`` and that write is lost, so a group's tests were spread over the workers like any others (the
    browser group was not kept on one worker, a costly module fixture ran on each worker):
    https://github.com/pytest-dev/pytest-xdist/issues/1386. Once xdist writes the suffix itself, this does nothing.
    """
    for item in items:
        suffix = _xdist_group_suffix(item)
        if suffix is None or item.nodeid.endswith(suffix) or not isinstance(getattr(item, "_id", None), NodeId):
            continue
        grouped = dataclasses.replace(item._id)  # the same path, names and parameters ...
        object.__setattr__(grouped, "_str_cache", item.nodeid + suffix)  # ... and the string xdist schedules by
        item._id = grouped


@pytest.hookimpl(trylast=True)  # after pytest-xdist's own hook
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` run first: under pytest-xdist a minutes-long test that a worker picks up last would
    leave the other workers idle while it runs on. Under ``--dist loadgroup`` the groups are kept (see above)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    if getattr(config.option, "loadgroup", False):
        _keep_xdist_groups(items)
