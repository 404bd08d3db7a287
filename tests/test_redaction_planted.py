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
import hashlib
import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CLUSTER_FIXTURES
from fakeapi import DEFAULT_TOKEN, FakeApiServer, FakePrometheus, write_kubeconfig

from nbhelpers import triage
from nbhelpers.evidence import capture
from nbhelpers.evidence.gather import gather
from nbhelpers.evidence.model import Target
from nbhelpers.render.summary import inline, summary_markdown
from nbhelpers.scenarios import scenario_bundle
from nbhelpers.sources import kinds
from nbhelpers.sources.base import describe_list
from nbhelpers.sources.bundle import open_bundle, write_bundle_files
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


# The tests that read ``outputs`` share one xdist worker, so that its three CLI runs (about 10 s) happen once
# rather than once on each worker.
READS_THE_RUNS = pytest.mark.xdist_group("redaction-planted-runs")


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


@READS_THE_RUNS
def test_the_planted_secrets_were_served_and_used(planted: Planted, outputs: dict[str, bytes]) -> None:
    """The test is not vacuous: the cluster served the secrets and Prometheus received the token and header."""
    assert any(API_KEY in str(pod) for pod in planted.api.cluster.objects[("", "pods")].values())
    headers = [request.headers for request in planted.prometheus.requests]
    assert headers and all(h.get("Authorization") == f"Bearer {PROMETHEUS_TOKEN}" for h in headers)
    assert all(h.get("X-Auth-Token") == PROMETHEUS_HEADER_SECRET for h in headers)
    names = {Path(name.split("!")[0]).name for name in outputs}
    assert {"report.html", "triage.ipynb", "findings.json", "summary.md", "bundle.tar.gz", "fleet.json"} <= names


@READS_THE_RUNS
def test_no_byte_of_a_planted_secret_is_written_or_printed(outputs: dict[str, bytes]) -> None:
    assert leaks(outputs) == {}


@READS_THE_RUNS
def test_the_evidence_around_the_secrets_is_kept_redacted(outputs: dict[str, bytes]) -> None:
    """The secrets were removed, not the objects and log lines that held them."""
    bundle = {name.split("!", 1)[1]: data for name, data in outputs.items() if "bundle.tar.gz!" in name}
    (pods,) = [data for name, data in bundle.items() if name.endswith("objects/Pod.yaml")]
    assert b"name: DB_PASSWORD\n" in pods and f"value: {REDACTED}".encode() in pods
    assert b"secretKeyRef" in pods  # the reference is kept; its value was never read
    (log,) = [data for name, data in bundle.items() if name.endswith(f"{READ_POD}/kserve-container.log")]
    assert log.count(REDACTED.encode()) >= 8 and b"non-default args" in log and b"alerts go to" in log


@READS_THE_RUNS
def test_secrets_are_never_requested(planted: Planted, outputs: dict[str, bytes]) -> None:
    assert outputs
    assert not [request.path for request in planted.api.requests if "/secrets" in request.path]


@READS_THE_RUNS
def test_the_executed_notebook_reads_the_redacted_evidence_not_the_cluster(outputs: dict[str, bytes]) -> None:
    """The report is rendered from evidence.tar.gz: its parameters name no credential, not even a variable."""
    (notebook,) = [data for name, data in outputs.items() if name.endswith("triage.ipynb")]
    assert b"evidence.tar.gz" in notebook
    assert b'prometheus_token_env = \\"\\"' in notebook and b'prometheus_headers_env = \\"\\"' in notebook


# --- The planted-secret corpus (issue #19) ------------------------------------------------------------
#
# Every form of secret the redaction policy names, each planted in every place it can appear in a bundle,
# with its own value: an env value and an argument of the serving container, an annotation and a
# condition message of the InferenceService, an event's message and note, a log line and a JSON log line,
# a Prometheus label value, a failed read's reason and a query's error. The bundle goes through the real
# gather() (the evidence is then laid out again as bundle files) and through a triage whose findings.json
# and summary.md are rendered; no secret, nor its last 12 characters, may appear in any of them. Each case
# carries a tag (c001...) next to its secret: the tag must survive, so the place was read and kept.

CORPUS_SCENARIO = "port-mismatch"  # its findings quote the container arguments and the ISVC conditions
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _chars(seed: str, length: int, alphabet: str = _ALNUM) -> str:
    """``length`` characters of ``alphabet``, fixed by ``seed`` (and different for every seed)."""
    digest = b""
    counter = 0
    while len(digest) < length:
        digest += hashlib.sha256(f"{seed}#{counter}".encode()).digest()
        counter += 1
    return "".join(alphabet[byte % len(alphabet)] for byte in digest[:length])


def _mixed(seed: str, length: int) -> str:
    """Random-looking letters and digits with at least one upper-case letter and one digit."""
    return "Q7" + _chars(seed, length - 2)


def _basic(seed: str) -> str:
    return base64.b64encode(f"svc-{_chars(seed, 6).lower()}:{_mixed(seed, 20)}".encode()).decode()


@dataclass(frozen=True)
class Form:
    name: str
    secret: Callable[[str], str]  # a seed -> this form's secret (unique per seed)
    text: Callable[[str], str]  # the secret -> the text that carries it


def _generic(seed: str) -> str:
    return _mixed(seed, 24)


FORMS = (
    Form("URL userinfo", _generic, lambda s: f"fetching https://svc-user:{s}@models.example.com/v1/models"),
    Form("postgres:// connection string", _generic, lambda s: f"db postgres://app:{s}@db.example.com:5432/app"),
    Form("mysql:// connection string", _generic, lambda s: f"db mysql://root:{s}@mysql.db:3306/app"),
    Form("mongodb+srv:// connection string", _generic, lambda s: f"mongodb+srv://admin:{s}@c0.example.net/app?w=1"),
    Form("redis:// password only", _generic, lambda s: f"cache at redis://:{s}@cache:6379/0"),
    Form("DATABASE_URL=", _generic, lambda s: f"DATABASE_URL=app:{s}@tcp(db:3306)/app"),
    Form("?token=", _generic, lambda s: f"GET https://hooks.example.com/cb?token={s}&attempt=2"),
    Form("?access_token=", _generic, lambda s: f"GET https://api.example.com/v1/me?access_token={s}"),
    Form("?api_key=", _generic, lambda s: f"GET https://api.example.com/v1/models?api_key={s}&limit=5"),
    Form("?key=", _generic, lambda s: f"GET https://maps.example.com/geo?q=here&key={s}"),
    Form("password=", _generic, lambda s: f"connecting to the cache with password={s} user=app"),
    Form("token: value", _generic, lambda s: f"token: {s}"),
    Form('client_secret="…"', _generic, lambda s: f'oauth client_secret="{s}" scope=read'),
    Form("X-Api-Key header", _generic, lambda s: f"X-Api-Key: {s}"),
    Form("X-Auth-Token header", _generic, lambda s: f"upstream sent X-Auth-Token: {s}"),
    Form("Authorization: Basic", _basic, lambda s: f"Authorization: Basic {s}"),
    Form("Authorization: Bearer", _generic, lambda s: f"request headers Authorization: Bearer {s}"),
    Form("Proxy-Authorization", _basic, lambda s: f"Proxy-Authorization: Basic {s}"),
    Form("Cookie header", _generic, lambda s: f"Cookie: theme=dark; session={s}"),
    Form("Authorization: Basic in JSON", _basic, lambda s: f'{{"headers": {{"Authorization": "Basic {s}"}}}}'),
    Form("GitHub ghp_", lambda seed: "ghp_" + _chars(seed, 36), lambda s: f"git push with {s} failed"),
    Form(
        "GitHub github_pat_",
        lambda seed: f"github_pat_{_chars(seed, 22)}_{_chars(seed + 'b', 59)}",
        lambda s: f"using {s} for the model repo",
    ),
    Form(
        "AWS access key id",
        lambda seed: "AKIA" + _chars(seed, 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"),
        lambda s: f"s3 client with {s} in us-east-1",
    ),
    Form(
        "Slack xoxb-",
        lambda seed: f"xoxb-{_chars(seed, 12, '0123456789')}-{_chars(seed, 24)}",
        lambda s: f"alerting with {s}",
    ),
    Form(
        "Slack xoxp-",
        lambda seed: f"xoxp-{_chars(seed, 12, '0123456789')}-{_chars(seed, 24)}",
        lambda s: f"alerting with {s}",
    ),
    Form("OpenAI-style sk-", lambda seed: "sk-proj-" + _mixed(seed, 40), lambda s: f"upstream key {s} rejected"),
    Form("Hugging Face hf_", lambda seed: "hf_" + _mixed(seed, 34), lambda s: f"downloading with {s}"),
    Form(
        "vLLM api_key list",
        lambda seed: "sk-" + _mixed(seed, 32),
        lambda s: f"non-default args: {{'model_tag': '/mnt/models', 'port': 8080, 'api_key': ['{s}']}}",
    ),
    Form(
        "vLLM api_key list, plain value",
        _generic,
        lambda s: f"non-default args: {{'model': '/mnt/models', 'api_key': ['{s}', 'second-{s[:6]}'], 'port': 8080}}",
    ),
    Form(
        "vLLM Namespace api_key=",
        _generic,
        lambda s: f"args: Namespace(model='/mnt/models', api_key='{s}', port=8080)",
    ),
    Form("--api-key flag", _generic, lambda s: f"started with --port 8080 --api-key {s} --max-num-seqs 64"),
    Form(
        "Slack webhook URL",
        lambda seed: f"https://hooks.slack.com/services/T{_chars(seed, 8)}/B{_chars(seed + 'b', 8)}/{_chars(seed, 24)}",
        lambda s: f"alerts go to {s}",
    ),
    Form(
        "JSON Web Token",
        lambda seed: f"eyJhbGciOiJSUzI1NiJ9.eyJ{_chars(seed, 30)}.{_chars(seed + 's', 43)}",
        lambda s: f"session {s} expired",
    ),
    Form(
        "PEM private key",
        lambda seed: _chars(seed, 64, _ALNUM + "+/"),
        lambda s: f"-----BEGIN PRIVATE KEY-----\n{s}\n-----END PRIVATE KEY-----",
    ),
)
PLACES = (
    "env value",
    "args",
    "annotation",
    "condition message",
    "event message",
    "event note",
    "log line",
    "JSON log line",
    "Prometheus label value",
    "read failure reason",
    "query error",
)


@dataclass(frozen=True)
class Case:
    tag: str
    form: str
    place: str
    secret: str
    text: str  # the tag, then the form's text with the secret in it


def _cases() -> tuple[Case, ...]:
    cases = []
    for form in FORMS:
        for place in PLACES:
            tag = f"c{len(cases) + 1:03d}"
            secret = form.secret(f"{form.name}/{place}")
            cases.append(Case(tag, form.name, place, secret, f"{tag} {form.text(secret)}"))
    return tuple(cases)


CASES = _cases()


def _in(place: str) -> list[Case]:
    return [case for case in CASES if case.place == place]


def _plant_container(container: dict[str, Any]) -> None:
    container["env"] = [
        *(container.get("env") or []),
        *({"name": f"PLANTED_{case.tag.upper()}", "value": case.text} for case in _in("env value")),
    ]
    container["args"] = [*(container.get("args") or []), *(case.text for case in _in("args"))]


def _plant_objects(node: Any) -> None:
    if isinstance(node, list):
        for item in node:
            _plant_objects(item)
    elif isinstance(node, dict):
        if node.get("name") == "kserve-container" and "image" in node:
            _plant_container(node)
        for value in node.values():
            _plant_objects(value)


def _event(case: Case, isvc: dict[str, Any], field: str, at: str) -> dict[str, Any]:
    """A Warning event on the InferenceService at ``at`` (the start of the window: first in the timeline)."""
    metadata = isvc["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{metadata['name']}.planted-{case.tag}", "namespace": metadata["namespace"]},
        "involvedObject": {"apiVersion": isvc["apiVersion"], "kind": "InferenceService", "name": metadata["name"]},
        "reason": "Planted",
        field: case.text,
        "type": "Warning",
        "firstTimestamp": at,
        "lastTimestamp": at,
        "count": 1,
    }


def planted_bundle_files(source: Path) -> dict[str, bytes]:
    """The scenario bundle at ``source`` with every case of the corpus planted in it."""
    files = {path.relative_to(source).as_posix(): path.read_bytes() for path in source.rglob("*") if path.is_file()}
    files = {name: data for name, data in files.items() if not name.startswith("scenario/")}
    manifest = json.loads(files["manifest.json"])
    namespace = manifest["target"]["namespace"]
    for name in [name for name in files if name.startswith("objects/") and name != "objects/Event.yaml"]:
        documents = list(yaml.safe_load_all(files[name]))
        _plant_objects(documents)
        for document in documents:
            if document.get("kind") == "InferenceService":
                isvc = document
                isvc["metadata"].setdefault("annotations", {}).update(
                    {f"example.com/planted-{case.tag}": case.text for case in _in("annotation")}
                )
                isvc["status"]["conditions"] += [
                    {"type": f"Planted{case.tag}", "status": "False", "reason": "Planted", "message": case.text}
                    for case in _in("condition message")
                ]
        files[name] = yaml.safe_dump_all(documents, sort_keys=False).encode()
    events = [
        *yaml.safe_load_all(files.get("objects/Event.yaml", b"")),
        *(_event(case, isvc, "message", manifest["window"]["start"]) for case in _in("event message")),
        *(_event(case, isvc, "note", manifest["window"]["start"]) for case in _in("event note")),
    ]
    files["objects/Event.yaml"] = yaml.safe_dump_all([event for event in events if event], sort_keys=False).encode()
    lines = [case.text for case in _in("log line")]
    lines += [json.dumps({"level": "info", "case": case.tag, "msg": case.text}) for case in _in("JSON log line")]
    for name in [name for name in files if name.endswith("/kserve-container.log")]:
        files[name] += ("\n".join(lines) + "\n").encode()
    for name in sorted(name for name in files if name.startswith("metrics/") and name != "metrics/index.json"):
        answer = json.loads(files[name])
        if answer["data"]["result"]:
            labels = {f"planted_{case.tag}": case.text for case in _in("Prometheus label value")}
            answer["data"]["result"][0]["metric"].update(labels)
            files[name] = json.dumps(answer).encode()
    index = json.loads(files["metrics/index.json"])
    index["nginx_requests_by_status"].update(status="error", error="\n".join(case.text for case in _in("query error")))
    files["metrics/index.json"] = json.dumps(index).encode()
    manifest["reads"].append(
        {
            "what": describe_list(kinds.INGRESS, namespace),
            "status": "error",
            "reason": "\n".join(case.text for case in _in("read failure reason")),
        }
    )
    files["manifest.json"] = json.dumps(manifest).encode()
    return files


def corpus_leaks(outputs: Mapping[str, str]) -> list[str]:
    """``form in place -> output`` for each planted secret (or its last 12 characters) found in an output."""
    return [
        f"{case.tag} {case.form} in {case.place} -> {name}"
        for case in CASES
        for name, text in outputs.items()
        if case.secret in text or case.secret[-12:] in text
    ]


@pytest.fixture(scope="module")
def corpus_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    files = planted_bundle_files(scenario_bundle(CORPUS_SCENARIO))
    return write_bundle_files(files, tmp_path_factory.mktemp("corpus") / "bundle")


@pytest.fixture(scope="module")
def corpus_evidence_files(corpus_bundle: Path) -> dict[str, str]:
    """What the real gather() kept from the planted bundle, laid out again as bundle files."""
    cluster, metrics, manifest = open_bundle(corpus_bundle)
    target = Target(manifest.namespace, manifest.isvc)
    evidence = gather(cluster, metrics, target, manifest.window, manifest.captured_at)
    return {name: data.decode() for name, data in capture.bundle_files(evidence, manifest.captured_at).items()}


@pytest.fixture(scope="module")
def corpus_rendered(corpus_bundle: Path) -> dict[str, str]:
    result = triage.run(triage.params_from_text({"bundle": str(corpus_bundle)}))
    return {"summary.md": summary_markdown(result), "findings.json": json.dumps(result.to_json())}


def test_the_corpus_covers_every_form_in_every_place() -> None:
    assert len(CASES) >= 40
    assert {(case.form, case.place) for case in CASES} == {(form.name, place) for form in FORMS for place in PLACES}
    secrets = [case.secret for case in CASES]
    assert len(set(secrets)) == len(secrets) and len({secret[-12:] for secret in secrets}) == len(secrets)


def test_the_planted_bundle_holds_every_secret(corpus_bundle: Path) -> None:
    """Not vacuous: every secret is in the bundle that gather() reads."""
    planted = "\n".join(path.read_text() for path in corpus_bundle.rglob("*") if path.is_file())
    assert [
        case.tag for case in CASES if case.secret not in planted and json.dumps(case.secret)[1:-1] not in planted
    ] == []


def test_gather_keeps_no_planted_secret(corpus_evidence_files: dict[str, str]) -> None:
    assert corpus_leaks(corpus_evidence_files) == []


def test_gather_keeps_the_evidence_around_the_secrets(corpus_evidence_files: dict[str, str]) -> None:
    """Every case's tag survives: its place was read, and only the secret was cut out of it."""
    kept = "\n".join(corpus_evidence_files.values())
    assert [f"{case.tag} ({case.form} in {case.place})" for case in CASES if case.tag not in kept] == []
    assert kept.count(REDACTED) >= len(CASES)


def test_triage_outputs_hold_no_planted_secret(corpus_rendered: dict[str, str]) -> None:
    assert corpus_leaks(corpus_rendered) == []


def test_triage_outputs_quote_the_planted_evidence(corpus_rendered: dict[str, str]) -> None:
    """Not vacuous: the findings quote the conditions and arguments, the summary also the events and failed reads."""

    def quoted(output: str, place: str) -> int:
        return sum(case.tag in corpus_rendered[output] for case in _in(place))

    for place in ("condition message", "read failure reason", "query error"):
        assert quoted("summary.md", place) == len(FORMS), place
    assert quoted("findings.json", "condition message") == len(FORMS)
    assert quoted("findings.json", "args") > 0 and quoted("summary.md", "args") > 0
    assert quoted("summary.md", "event message") + quoted("summary.md", "event note") >= len(FORMS)
    # summary.md shows cluster text as markdown text: the placeholder is written &lt;redacted&gt; there
    assert inline(REDACTED) in corpus_rendered["summary.md"] and REDACTED in corpus_rendered["findings.json"]
