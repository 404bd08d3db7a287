"""Property tests (hypothesis): the parsers take any input and fail only in their documented way (issue #9).

Documented failures: quantities raise ``ValueError``; durations, timestamps and windows ``RunbookError``;
the bundle reader ``BundleError``/``RunbookError``; the rest (probe specs, vLLM command lines, log lines,
label selectors) never raise. Inputs mix random text with the grammar each parser expects, so both the
paths that parse and the ones that refuse are exercised. Examples are few and deadlines off: the 2-core
test machine runs them in seconds.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import CAPTURED_AT, WINDOW, bundle_files
from conftest import CLUSTER_FIXTURES
from fakeapi import read_yaml_objects
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbhelpers.errors import RunbookError
from nbhelpers.evidence.gather import filter_log_to_window, gather
from nbhelpers.evidence.model import Target
from nbhelpers.facts import vllm_args, vllm_log
from nbhelpers.models import load_time
from nbhelpers.render.findings_json import findings_json_bytes
from nbhelpers.render.summary import summary_markdown
from nbhelpers.scenarios import scenario_bundle
from nbhelpers.sources import kube
from nbhelpers.sources.bundle import BundleFiles, open_bundle, write_bundle_files
from nbhelpers.triage import TriageParams, params_from_text, run
from nbhelpers.util.quantities import parse_quantity, try_parse
from nbhelpers.util.redaction import REDACTED, redact_objects, redact_text
from nbhelpers.util.safe_paths import MAX_COMPONENT_CHARS, inside, safe_component
from nbhelpers.util.times import parse_duration, parse_k8s_time, parse_time, resolve_window

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NOW = datetime(2026, 1, 15, 12, 0, tzinfo=timezone.utc)


def pieces(*alphabet: str) -> st.SearchStrategy[str]:
    """Strings built from grammar pieces and random text."""
    return st.lists(st.one_of(st.sampled_from(alphabet), st.text(max_size=4)), max_size=8).map("".join)


# --- Kubernetes quantities --------------------------------------------------------------------------

QUANTITY = pieces(
    *"0123456789", ".", "e", "E", "+", "-", "Ki", "Mi", "Gi", "m", "k", "M", "G", "n", " ", "1e308", "9" * 30
)


@FUZZ
@given(QUANTITY)
def test_quantities_parse_or_raise_value_error(text: str) -> None:
    try:
        value = parse_quantity(text)
    except ValueError:
        assert try_parse(text) is None
    else:
        assert isinstance(value, Decimal) and try_parse(text) == value


@FUZZ
@given(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(), st.lists(st.integers())))
def test_try_parse_never_raises(value: object) -> None:
    assert try_parse(value) is None or isinstance(try_parse(value), Decimal)


# --- durations, timestamps, windows ------------------------------------------------------------------

DURATION = pieces(*"0123456789", ".", "ms", "s", "m", "h", "d", "w", " ", "-", "²", "١", "9" * 400)
ISO_TIME = st.one_of(
    st.datetimes(timezones=st.timezones()).map(datetime.isoformat),
    st.datetimes().map(datetime.isoformat),
    pieces("9999-12-31T23:59:59", "0001-01-01T00:00:00", "2026-01-15T11:00:00", "Z", "+14:00", "-12:00", "z", "T"),
)


@FUZZ
@given(DURATION)
def test_durations_parse_or_raise_runbook_error(text: str) -> None:
    try:
        value = parse_duration(text)
    except RunbookError as error:
        assert "\n" not in str(error)
    else:
        assert isinstance(value, timedelta) and value >= timedelta(0)


@FUZZ
@given(ISO_TIME)
def test_timestamps_parse_or_raise_runbook_error(text: str) -> None:
    try:
        moment = parse_time(text)
    except RunbookError:
        pass
    else:
        assert moment.tzinfo == timezone.utc
    parsed = parse_k8s_time(text)
    assert parsed is None or parsed.tzinfo == timezone.utc


@FUZZ
@given(st.one_of(st.none(), DURATION), st.one_of(st.none(), ISO_TIME), st.one_of(st.none(), ISO_TIME))
def test_windows_resolve_or_raise_runbook_error(since: str | None, start: str | None, end: str | None) -> None:
    try:
        text = {name: value for name, value in (("since", since), ("start", start), ("end", end)) if value is not None}
        params = params_from_text(text)
        window = resolve_window(NOW, params.since, params.start, params.end)
    except RunbookError:
        return
    assert window.start < window.end <= NOW + timedelta(seconds=1)
    assert window.seconds <= 7 * 86400


# --- probe specs -------------------------------------------------------------------------------------

JSON_VALUE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8,
)
PROBE_FIELDS = ("initialDelaySeconds", "periodSeconds", "failureThreshold", "timeoutSeconds", "successThreshold")
PROBE = st.dictionaries(
    st.sampled_from([*PROBE_FIELDS, "httpGet", "tcpSocket", "exec", "grpc"]),
    st.one_of(JSON_VALUE, st.integers(-(10**30), 10**30), st.sampled_from(["10", "", "1e3", "∞", "9" * 5000])),
    max_size=6,
)


@FUZZ
@given(st.sampled_from(load_time.PROBE_KINDS), PROBE)
def test_probe_budgets_never_raise(kind: str, spec: dict[str, Any]) -> None:
    budget = load_time.ProbeBudget.of(kind, spec)
    assert budget.period > 0 and budget.failure_threshold > 0 and budget.timeout > 0
    assert budget.seconds >= 0 and budget.describe()


# --- vLLM command lines ------------------------------------------------------------------------------

TOKEN = st.one_of(
    st.sampled_from(
        [
            "vllm", "serve", "python", "-m", "vllm.entrypoints.openai.api_server", "huggingfaceserver",
            "--port", "--port=8000", "8000", "--http_port", "--max-num-seqs", "--max_num_seqs", "256", "-tp", "2",
            "-tp=4", "--tensor-parallel-size", "--api-key", "sk-abc", "$(PORT)", "$$", "$(MISSING", "--", "²",
            "9" * 5000, "--enforce-eager", "sh", "-c", "exec vllm serve /m --port $PORT && echo 'x", "'", '"',
            "--port=²", "--port=" + "9" * 5000, "--max-num-seqs=²", "-tp=" + "9" * 5000, "--port=$(PORT)",
        ]
    ),
    st.text(max_size=10),
)  # fmt: skip
CONTAINER = st.fixed_dictionaries(
    {},
    optional={
        "command": st.lists(TOKEN, max_size=6),
        "args": st.lists(TOKEN, max_size=10),
        "image": st.sampled_from(["vllm/vllm-openai:v0.10.1", "kserve/huggingfaceserver:v0.15", "", "x"]),
        "env": st.lists(
            st.fixed_dictionaries({"name": st.sampled_from(["PORT", "HF_TOKEN", "X", ""])}, optional={"value": TOKEN}),
            max_size=3,
        ),
    },
)


@FUZZ
@given(CONTAINER)
def test_vllm_command_lines_never_raise(container: dict[str, Any]) -> None:
    command = vllm_args.parse_container(container)
    assert command.server in (vllm_args.VLLM, vllm_args.HUGGINGFACESERVER, vllm_args.UNKNOWN)
    assert command.port is None or command.port >= 0
    for flag in ("--max-num-seqs", "--tensor-parallel-size", "--port", "--api-key"):
        value = vllm_args.int_flag(command, flag)
        assert value is None or value >= 0


# --- log lines ---------------------------------------------------------------------------------------

NUMBER = st.one_of(
    st.integers(-(10**12), 10**12).map(lambda n: f"{n:,}"),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda f: f"{f:.2f}"),
    st.sampled_from([",", ",,", "-", "1,,2", "-,", "9" * 4400, "1" * 310 + ".5", "١٢", "0"]),
)
# The lines the log parsers look for (vLLM V0/V1 memory and start-up lines, kubelet timestamps), with any number.
LOG_TEMPLATES = (
    "GPU KV cache size: {} tokens",
    "Maximum concurrency for {} tokens per request: {}x",
    "# GPU blocks: {}",
    "Model loading took {} GiB and {} seconds",
    "Loading model weights took {} GB",
    "Available KV cache memory: {} GiB",
    "max seq len ({}) is larger than the maximum number of tokens that can be stored in KV cache ({})",
    "max seq len ({}), ({} GiB KV cache is needed, which is larger than the available KV cache memory ({} GiB). "
    "Based on the available memory, the estimated maximum model length is {}",
    "Loading safetensors checkpoint shards: {}% Completed | {}/{} [00:{}<00:00,  1.0it/s]",
    "Application startup complete.",
    "vLLM API server version {}",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {} GiB",
    "non-default args: {{'api_key': '{}'}}",
    "{}",
)
LOG_LINE = st.tuples(
    st.sampled_from(["2026-01-15T11:00:00.123456789Z ", "9999-99-99T99:99:99Z ", "2026-01-15T11:30:00+05:00 ", ""]),
    st.sampled_from(LOG_TEMPLATES),
    st.lists(st.one_of(NUMBER, st.text(max_size=6)), min_size=4, max_size=4),
).map(lambda parts: parts[0] + parts[1].format(*parts[2]))
LOG = st.lists(LOG_LINE, max_size=8).map("\n".join)


@FUZZ
@given(LOG)
def test_log_parsers_never_raise(text: str) -> None:
    facts = vllm_log.parse_engine_log(text)
    assert facts.kv_cache_tokens is None or isinstance(facts.kv_cache_tokens, int)
    load_time.parse_log_timeline(text)
    kept = filter_log_to_window(text, WINDOW)
    assert len(kept) <= len(text) + 1
    redact_text(text)


@FUZZ
@given(LOG, st.sets(st.text(min_size=4, max_size=12), max_size=3))
def test_redaction_removes_every_known_secret(text: str, secrets: set[str]) -> None:
    planted = text + "".join(f" {secret} " for secret in secrets)
    cleaned = redact_text(planted, secrets)
    assert not [secret for secret in secrets if secret in cleaned and secret not in REDACTED]


@FUZZ
@given(
    st.lists(
        st.dictionaries(st.sampled_from(["metadata", "spec", "env", "args", "name", "value"]), JSON_VALUE), max_size=3
    )
)
def test_redacting_objects_never_raises(objects: list[dict[str, Any]]) -> None:
    cleaned, found = redact_objects(objects)
    assert len(cleaned) == len(objects) and all(isinstance(secret, str) for secret in found)


# --- label selectors ---------------------------------------------------------------------------------

SELECTOR = pieces(
    "app", "=", "==", "!=", ",", " in ", " notin ", "(", ")", "!", "x", "y", " ", "serving.kserve.io/inferenceservice"
)


@FUZZ
@given(
    SELECTOR,
    st.dictionaries(
        st.sampled_from(["app", "x", "y", "serving.kserve.io/inferenceservice"]), st.sampled_from(["x", "y", ""])
    ),
)
def test_label_selectors_never_raise(selector: str, labels: dict[str, str]) -> None:
    assert kube.label_selector_matches(selector, labels) in (True, False)
    assert kube.label_selector_matches("", labels) is True


# --- the bundle reader -------------------------------------------------------------------------------

ISVC = {
    "apiVersion": "serving.kserve.io/v1beta1",
    "kind": "InferenceService",
    "metadata": {"name": "x", "namespace": "llm"},
}
OBJECT = st.fixed_dictionaries(
    {
        "apiVersion": st.sampled_from(["v1", "apps/v1", "serving.kserve.io/v1beta1", "autoscaling/v2", "x/y"]),
        "kind": st.sampled_from(["Pod", "Deployment", "InferenceService", "HorizontalPodAutoscaler", "Event", "List"]),
        "metadata": st.fixed_dictionaries(
            {"name": st.sampled_from(["x", "x-predictor-1", ""]), "namespace": st.sampled_from(["llm", "other"])},
            optional={
                "labels": st.dictionaries(
                    st.sampled_from([kube.ISVC_LABEL, "component"]), st.sampled_from(["x", "predictor"])
                )
            },
        ),
    },
    optional={"spec": JSON_VALUE, "status": JSON_VALUE, "items": st.lists(JSON_VALUE, max_size=2)},
)
FILE = st.one_of(
    st.binary(max_size=64),
    st.lists(OBJECT, max_size=3).map(lambda objects: yaml.safe_dump_all(objects).encode()),
    JSON_VALUE.map(lambda value: json.dumps(value).encode()),
)
MANIFEST_FIELD = st.sampled_from(["bundle_version", "captured_at", "window", "target", "reads"])


@FEW
@given(
    st.dictionaries(MANIFEST_FIELD, JSON_VALUE, max_size=2),
    st.dictionaries(st.sampled_from(["objects/a.yaml", "objects/b.json", "metrics/index.json", "metrics/vllm_running.json", "logs/llm/x-predictor-1/kserve-container.log"]), FILE, max_size=4),
)  # fmt: skip
def test_the_bundle_reader_and_gather_raise_only_runbook_errors(
    manifest_changes: dict[str, Any], files: dict[str, bytes]
) -> None:
    bundle = bundle_files([ISVC], "llm", "x")
    manifest = {**json.loads(bundle["manifest.json"]), **manifest_changes}
    bundle.update(files)
    bundle["manifest.json"] = json.dumps(manifest).encode()
    try:
        cluster, metrics, opened = open_bundle(Path("<fuzz>"), bundle)
        evidence = gather(
            cluster, metrics if metrics.index else None, Target("llm", "x"), opened.window, opened.captured_at
        )
    except RunbookError as error:
        assert "\n" not in str(error).strip()
        return
    assert evidence.target == Target("llm", "x")


@FEW
@given(objects=st.lists(OBJECT, max_size=4), log=LOG)
def test_a_triage_of_any_bundle_writes_a_valid_findings_json(
    objects: list[dict[str, Any]], log: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.mktemp("fuzz")
    files = bundle_files([ISVC, *objects], "llm", "x", logs={("x-predictor-1", "kserve-container"): log})
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    try:
        result = run(TriageParams(bundle=str(folder)), clock=lambda: CAPTURED_AT)
    except RunbookError:
        return
    assert json.loads(findings_json_bytes(result))["target"]["isvc"] == "x"


# --- realistic objects with one field of the wrong type ---------------------------------------------


def fixture_objects() -> list[dict[str, Any]]:
    """The serverless fixture cluster's objects (as a bundle holds them), without the CRDs."""
    objects: list[dict[str, Any]] = []
    for folder in ("common", "serverless"):
        for path in sorted((CLUSTER_FIXTURES / folder).glob("*.yaml")):
            objects.extend(read_yaml_objects(path))
    return [obj for obj in objects if obj.get("kind") != "CustomResourceDefinition"]


def field_paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*prefix, key)
            yield from field_paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield (*prefix, index)
            yield from field_paths(value, (*prefix, index))


OBJECTS = fixture_objects()
FIELDS = [(index, path) for index, obj in enumerate(OBJECTS) for path in field_paths(obj)]
WRONG = st.sampled_from([None, True, 0, -1, 1e308, "x", "9" * 40, [], [1], {}, {"a": 1}])


@FEW
@given(mutations=st.lists(st.tuples(st.sampled_from(FIELDS), WRONG), min_size=1, max_size=3))
def test_a_bundle_with_a_field_of_the_wrong_type_gives_a_report_or_one_line(
    mutations: list[tuple[tuple[int, tuple[Any, ...]], Any]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Checks may fail on such a field (their step records the error), the run as a whole may not."""
    objects = copy.deepcopy(OBJECTS)
    for (index, path), value in mutations:
        node: Any = objects[index]
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    folder = write_bundle_files(bundle_files(objects, "llm", "vllm-llm"), tmp_path_factory.mktemp("wrong") / "b")
    try:
        result = run(TriageParams(bundle=str(folder)), clock=lambda: CAPTURED_AT)
    except RunbookError as error:
        assert "\n" not in str(error)
        return
    document = json.loads(findings_json_bytes(result))
    assert [step["id"] for step in document["steps"]] == [step.id for step in result.steps]


# --- bundle members: any JSON or YAML value at any key of a real bundle (issue #19) -----------------


@functools.cache
def scenario_files(name: str) -> dict[str, bytes]:
    """Every file of a shipped scenario's bundle: manifest, objects, events, logs, metric index and answers."""
    return BundleFiles(scenario_bundle(name)).files


def deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


HOSTILE_VALUE = st.one_of(
    JSON_VALUE,
    st.integers(),
    st.sampled_from(
        [
            float("inf"), float("nan"), -1e308, 10**99, "9" * 40, "1e400", "../../x", "a/../../b", "\x00\x1b[2J", "",
            "2026-01-15T11:30:00Z", [], {}, [None], [{}], {"count": "x"}, deep(40), deep(200), 10**150,
        ]
    ),
)  # fmt: skip


def key_paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in ``node`` a value can go: each existing key or index, and a new key in each map."""
    if isinstance(node, dict):
        yield (*prefix, "x-fuzz")
        for key, value in node.items():
            yield (*prefix, key)
            yield from key_paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield (*prefix, index)
            yield from key_paths(value, (*prefix, index))


def with_value_at(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    changed = copy.deepcopy(document)
    node = changed
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return changed


def parsed_member(name: str, data: bytes) -> list[Any]:
    """A member's documents: one for JSON, each YAML document for YAML."""
    if name.endswith(".json"):
        return [json.loads(data)]
    return list(yaml.safe_load_all(data))


def written_member(name: str, documents: list[Any]) -> bytes:
    if name.endswith(".json"):
        return json.dumps(documents[0]).encode()
    return yaml.safe_dump_all(documents, sort_keys=False).encode()


MEMBER_SCENARIOS = ("port-mismatch", "hpa-at-max-spike")


@FEW
@given(data=st.data())
def test_any_value_at_any_key_of_a_bundle_member_gives_a_report_or_one_line(
    data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The manifest, the metric index and answers, every object file: one value replaced or added anywhere.

    The run ends in a report whose findings.json and summary.md render, or in one line (a refusal that
    names the file, the field or the limit): never a traceback.
    """
    files = dict(scenario_files(data.draw(st.sampled_from(MEMBER_SCENARIOS), label="scenario")))
    names = sorted(name for name in files if name.endswith((".json", ".yaml")) and not name.startswith("scenario/"))
    for _ in range(data.draw(st.integers(1, 3), label="changes")):
        name = data.draw(st.sampled_from(names), label="member")
        documents = parsed_member(name, files[name])
        index = data.draw(st.integers(0, len(documents) - 1), label="document")
        path = data.draw(st.sampled_from(list(key_paths(documents[index])) or [()]), label="key")
        documents[index] = with_value_at(documents[index], path, data.draw(HOSTILE_VALUE, label="value"))
        files[name] = written_member(name, documents)
    folder = write_bundle_files(files, tmp_path_factory.mktemp("member") / "b")
    try:
        result = run(TriageParams(bundle=str(folder)), clock=lambda: CAPTURED_AT)
    except RunbookError as error:
        assert str(error).strip() and "\n" not in str(error).strip()
        return
    document = json.loads(findings_json_bytes(result))
    assert [step["id"] for step in document["steps"]] == [step.id for step in result.steps]
    assert summary_markdown(result).startswith("# ")


# --- names from outside as file names ---------------------------------------------------------------


@FUZZ
@given(st.one_of(st.text(), st.sampled_from(["..", ".", "", "../../x", "a/../../b", "/etc/passwd", "x" * 300, "\x00"])))
def test_any_name_becomes_one_safe_path_component(name: str) -> None:
    component = safe_component(name)
    assert component and component not in (".", "..") and "/" not in component and "\x00" not in component
    assert component.isprintable() and len(component) <= MAX_COMPONENT_CHARS
    assert safe_component(component) == component  # already safe names are kept as they are
    root = Path("/nonexistent-fuzz-root")
    assert inside(root, component) == root / component
