"""Planted secrets never reach an output (issue #9, docs/contracts.md#evidence-bundle).

The fixture cluster is the serverless one with secrets planted where real clusters leak them: literal env
values (HF_TOKEN, *_API_KEY, *_PASSWORD, a webhook shared secret), ``--api-key`` in the vLLM arguments and
in the log line where vLLM prints its arguments, bearer tokens and a Slack webhook URL in annotations and
logs, a Secret referenced through secretKeyRef, the kubeconfig's bearer token, the Prometheus bearer token
(named by --prometheus-token-env) and a secret Prometheus header. ``triage`` (executed notebook, HTML,
findings.json, summary.md), ``capture`` (a .tar.gz bundle) and ``fleet`` run through the CLI, and no byte of
any planted value may appear in what they write or print. papermill stores the parameters in the executed
notebook, so this also shows that no secret travels as a parameter.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import CLUSTER_FIXTURES
from fakeapi import DEFAULT_TOKEN, FakeApiServer, FakePrometheus, write_kubeconfig

from nbhelpers.util.redaction import REDACTED

pytestmark = pytest.mark.integration

API_KEY = "sk-planted4Fq9Zr2Lm7Xw1Vb8NcQ3"
HF_TOKEN = "hf_PlantedTokenValue0123456789ab"
DB_PASSWORD = "Pl4nted-pw-9f3c1e"  # no well-known shape: only its env name gives it away
SERVICE_API_KEY = "ak-plain-7c2e9b1d4f"
WEBHOOK_SECRET = "whsec-plant-5e8a2c7f"
ANNOTATION_BEARER = "plantedbearer.eyJzdWIiOiJ4In0.sig1234"
NOTE_BEARER = "plantedNoteBearer0A1B2C3D"
SLACK_URL = "https://hooks.slack.com/services/TPLANT01/BPLANT02/plantedSlack0123"
SECRET_KEY_REF_VALUE = "secretkeyref-planted-value-77"
PROMETHEUS_TOKEN = "prom-planted-token-31f7a9"
PROMETHEUS_HEADER_SECRET = "hdr-planted-8d2b6e"
SECRETS = {
    "API key": API_KEY,
    "HF token": HF_TOKEN,
    "DB password": DB_PASSWORD,
    "service API key": SERVICE_API_KEY,
    "webhook shared secret": WEBHOOK_SECRET,
    "annotation bearer": ANNOTATION_BEARER,
    "bearer in a note": NOTE_BEARER,
    "Slack URL": SLACK_URL,
    "secretKeyRef value": SECRET_KEY_REF_VALUE,
    "kubeconfig token": DEFAULT_TOKEN,
    "Prometheus token": PROMETHEUS_TOKEN,
    "Prometheus header": PROMETHEUS_HEADER_SECRET,
}
READ_POD = "vllm-llm-predictor-00001-deployment-7d9c5f6b8d-4xk2p"  # the pod whose logs the triage reads
WINDOW = ["--start", "2026-01-15T11:00:00Z", "--end", "2026-01-15T12:00:00Z"]
PLANTED_LOG = (
    "2026-01-15T11:00:51.100000000Z (APIServer pid=1) INFO 01-15 11:00:51 [utils.py:326] non-default args: "
    f"{{'model_tag': '/mnt/models', 'port': 8080, 'api_key': ['{API_KEY}'], 'hf_token': '{HF_TOKEN}'}}\n"
    "2026-01-15T11:00:51.200000000Z (APIServer pid=1) INFO 01-15 11:00:51 [api_server.py:1] args: "
    f"Namespace(model='/mnt/models', api_key='{API_KEY}', port=8080)\n"
    f"2026-01-15T11:00:52.000000000Z INFO connecting to the cache with password={DB_PASSWORD} key {SERVICE_API_KEY}\n"
    f"2026-01-15T11:00:53.000000000Z INFO alerts go to {SLACK_URL} signed with {WEBHOOK_SECRET}\n"
    f"2026-01-15T11:00:54.000000000Z DEBUG upstream said Authorization: Bearer {NOTE_BEARER}\n"
)


def without_flag(args: list[str], flag: str) -> list[str]:
    """``args`` without ``flag`` and the value after it."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if arg == flag:
            skip = True
        elif skip:
            skip = False
        else:
            kept.append(arg)
    return kept


def plant(node: Any) -> None:
    """Add the planted env, arguments and annotations to every serving container and predictor object."""
    if isinstance(node, list):
        for item in node:
            plant(item)
        return
    if not isinstance(node, dict):
        return
    if node.get("name") == "kserve-container" and "image" in node:
        node["args"] = [*without_flag(node.get("args") or [], "--api-key"), "--api-key", API_KEY]
        node["env"] = [
            *(entry for entry in node.get("env") or [] if entry.get("name") != "HF_TOKEN"),
            {"name": "HF_TOKEN", "value": HF_TOKEN},
            {"name": "DB_PASSWORD", "value": DB_PASSWORD},
            {"name": "MY_SERVICE_API_KEY", "value": SERVICE_API_KEY},
            {"name": "WEBHOOK_SHARED_SECRET", "value": WEBHOOK_SECRET},
            {"name": "OPENAI_API_KEY", "valueFrom": {"secretKeyRef": {"name": "vllm-secrets", "key": "openai"}}},
        ]
    metadata = node.get("metadata")
    if isinstance(metadata, dict) and "predictor" in str(metadata.get("name", "")) + str(metadata.get("labels", "")):
        metadata.setdefault("annotations", {}).update(
            {
                "example.com/auth": f"Bearer {ANNOTATION_BEARER}",
                "example.com/notes": f"call it with Authorization: Bearer {NOTE_BEARER}",
                "alerts.example.com/slack": SLACK_URL,
            }
        )
    for value in node.values():
        plant(value)


@dataclass(frozen=True)
class Planted:
    api: FakeApiServer
    prometheus: FakePrometheus
    kubeconfig: Path


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Planted]:
    with FakeApiServer() as api, FakePrometheus() as prometheus:
        api.load(CLUSTER_FIXTURES / "common", CLUSTER_FIXTURES / "serverless")
        for bucket in api.cluster.objects.values():
            plant(list(bucket.values()))
        secret_data = {"openai": base64.b64encode(SECRET_KEY_REF_VALUE.encode()).decode()}
        api.cluster.add(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "vllm-secrets", "namespace": "llm"},
                "data": secret_data,
            }
        )
        log = api.cluster.logs[("llm", READ_POD, "kserve-container", False)]
        assert isinstance(log, str)
        api.cluster.add_log("llm", READ_POD, "kserve-container", PLANTED_LOG + log)
        yield Planted(api, prometheus, write_kubeconfig(tmp_path_factory.mktemp("kube") / "config", api.url))


def kserve_runbook(planted: Planted, *arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    live = ["--kubeconfig", str(planted.kubeconfig), "--prometheus", planted.prometheus.url]
    prometheus_auth = [
        "--prometheus-token-env",
        "PLANTED_PROMETHEUS_TOKEN",
        "--prometheus-header",
        f"X-Auth-Token: {PROMETHEUS_HEADER_SECRET}",
    ]
    return subprocess.run(
        [sys.executable, "-m", "nbhelpers", *arguments, *live, *prometheus_auth, *WINDOW],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "PLANTED_PROMETHEUS_TOKEN": PROMETHEUS_TOKEN},
    )


def written_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root``; a .tar.gz also contributes each member, decompressed."""
    files: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        files[str(path)] = path.read_bytes()
        if path.name.endswith(".tar.gz"):
            with tarfile.open(path, "r:gz") as archive:
                for member in archive.getmembers():
                    extracted = archive.extractfile(member)
                    if extracted is not None:
                        files[f"{path}!{member.name}"] = extracted.read()
    return files


def leaks(outputs: dict[str, bytes]) -> dict[str, list[str]]:
    """Which planted secret (or its last 12 characters, to catch a half-redacted one) appears where."""
    found: dict[str, list[str]] = {}
    for label, secret in SECRETS.items():
        for needle in {secret, secret[-12:]}:
            places = [name for name, data in outputs.items() if needle.encode() in data]
            if places:
                found.setdefault(label, []).extend(places)
    return found


@pytest.fixture(scope="module")
def outputs(planted: Planted, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Run triage, capture and fleet once; everything they wrote and printed."""
    work = tmp_path_factory.mktemp("runs")
    runs = {
        "triage": kserve_runbook(
            planted, "triage", "-n", "llm", "--isvc", "vllm-llm", "--out", str(work / "triage"), cwd=work
        ),
        "capture": kserve_runbook(
            planted, "capture", "-n", "llm", "--isvc", "vllm-llm", "--out", str(work / "bundle.tar.gz"), cwd=work
        ),
        "fleet": kserve_runbook(planted, "fleet", "-n", "llm", "--out", str(work / "fleet"), cwd=work),
    }
    for command, result in runs.items():
        assert result.returncode in (0, 1), f"{command}: {result.stderr}"
    files = written_bytes(work)
    for command, result in runs.items():
        files[f"{command} stdout"] = result.stdout.encode()
        files[f"{command} stderr"] = result.stderr.encode()
    return files


def test_the_planted_secrets_were_served_and_used(planted: Planted, outputs: dict[str, bytes]) -> None:
    """The test is not vacuous: the cluster served the secrets and Prometheus received the token and header."""
    assert any(API_KEY in str(pod) for pod in planted.api.cluster.objects[("", "pods")].values())
    headers = [request.headers for request in planted.prometheus.requests]
    assert headers and all(h.get("Authorization") == f"Bearer {PROMETHEUS_TOKEN}" for h in headers)
    assert all(h.get("X-Auth-Token") == PROMETHEUS_HEADER_SECRET for h in headers)
    names = {Path(name.split("!")[0]).name for name in outputs}
    assert {"report.html", "triage.ipynb", "findings.json", "summary.md", "bundle.tar.gz", "fleet.json"} <= names


def test_no_byte_of_a_planted_secret_is_written_or_printed(outputs: dict[str, bytes]) -> None:
    assert leaks(outputs) == {}


def test_the_evidence_around_the_secrets_is_kept_redacted(outputs: dict[str, bytes]) -> None:
    """The secrets were removed, not the objects and log lines that held them."""
    bundle = {name.split("!", 1)[1]: data for name, data in outputs.items() if "bundle.tar.gz!" in name}
    (pods,) = [data for name, data in bundle.items() if name.endswith("objects/Pod.yaml")]
    assert b"name: DB_PASSWORD\n" in pods and f"value: {REDACTED}".encode() in pods
    assert b"secretKeyRef" in pods  # the reference is kept; its value was never read
    (log,) = [data for name, data in bundle.items() if name.endswith(f"{READ_POD}/kserve-container.log")]
    assert log.count(REDACTED.encode()) >= 8 and b"non-default args" in log and b"alerts go to" in log


def test_secrets_are_never_requested(planted: Planted, outputs: dict[str, bytes]) -> None:
    assert outputs
    assert not [request.path for request in planted.api.requests if "/secrets" in request.path]


def test_the_executed_notebook_names_secrets_only_by_their_variables(outputs: dict[str, bytes]) -> None:
    (notebook,) = [data for name, data in outputs.items() if name.endswith("triage.ipynb")]
    assert b'prometheus_token_env = \\"PLANTED_PROMETHEUS_TOKEN\\"' in notebook
    assert b'prometheus_headers_env = \\"KSERVE_RUNBOOK_PROMETHEUS_HEADERS\\"' in notebook
