"""The ``probes`` step: load-time measurement, a failing fixture per code in both modes, healthy fixtures
(including a pod inside a correctly sized startup window), and patches that make each code go away."""

from __future__ import annotations

import copy
import json
import shlex
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from check_cases import (
    apply_patch,
    assert_valid_patch,
    codes,
    evidence_of,
    json_merge_patch,
    load_case,
    only,
    rollout,
    serious,
)

from nbhelpers.checks import probes
from nbhelpers.checks.probes._facts import ProbeFacts
from nbhelpers.errors import EvidenceMissing, StepSkipped
from nbhelpers.evidence.gather import gather
from nbhelpers.evidence.model import Target
from nbhelpers.facts import common
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding
from nbhelpers.metrics import catalog
from nbhelpers.models import load_time
from nbhelpers.models.load_time import ProbeBudget
from nbhelpers.scenarios import load_spec, scenario_bundle
from nbhelpers.sources.bundle import open_bundle

ISVC_REF = "InferenceService.serving.kserve.io/llm/vllm-llm"
RAW_POD_NAME = "vllm-llm-predictor-6d5f8b7c9-q8w2e"
RAW_POD = f"Pod/llm/{RAW_POD_NAME}"
KNATIVE_POD_NAME = "vllm-llm-predictor-00001-deployment-7f9c6d-x2k4p"
KNATIVE_POD = f"Pod/llm/{KNATIVE_POD_NAME}"
RAW = "checks/healthy/raw.yaml"
SERVERLESS = "checks/healthy/serverless.yaml"
UTC = timezone.utc


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def stamped(start: str, lines: list[tuple[float, str]]) -> str:
    """Log text with the kubelet's RFC 3339 prefix, ``lines`` as (seconds after ``start``, message)."""
    origin = at(start)
    out = []
    for offset, message in lines:
        moment = origin + timedelta(seconds=offset)
        out.append(moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond:06d}000Z {message}")
    return "\n".join(out) + "\n"


def vllm_start(model: str) -> list[tuple[float, str]]:
    """The first lines of a vLLM V1 start, as the API server and engine core print them."""
    return [
        (2.1, "INFO 01-15 11:54:14 [__init__.py:241] Automatically detected platform cuda."),
        (5.3, "(APIServer pid=1) INFO 01-15 11:54:17 [api_server.py:1805] vLLM API server version 0.10.1"),
        (
            15.3,
            f"(EngineCore_0 pid=245) INFO 01-15 11:54:27 [core.py:74] Initializing a V1 LLM engine (v0.10.1) "
            f"with config: model='{model}'",
        ),
        (
            17.9,
            f"(EngineCore_0 pid=245) INFO 01-15 11:54:29 [gpu_model_runner.py:1953] Starting to load model {model}...",
        ),
        (
            18.6,
            "(EngineCore_0 pid=245) INFO 01-15 11:54:30 [weight_utils.py:296] Using model weights format "
            "['*.safetensors']",
        ),
    ]


def served_tail(weights_at: float, ready_at: float) -> list[tuple[float, str]]:
    return [
        (weights_at - 0.6, "(EngineCore_0 pid=245) INFO [default_loader.py:262] Loading weights took 41.32 seconds"),
        (
            weights_at,
            "(EngineCore_0 pid=245) INFO [gpu_model_runner.py:2007] Model loading took 14.9889 GiB and 42.031 seconds",
        ),
        (
            ready_at - 2,
            "(EngineCore_0 pid=245) INFO [core.py:214] init engine (profile, create kv cache, warmup "
            "model) took 30.50 seconds",
        ),
        (ready_at - 1, "(APIServer pid=1) INFO [api_server.py:1880] Starting vLLM API server 0 on http://0.0.0.0:8080"),
        (ready_at, "(APIServer pid=1) INFO:     Application startup complete."),
    ]


# The previous run of the raw restart loop: killed 32 s after its start, in the middle of the shards.
RAW_KILLED_LOG = stamped(
    "2026-01-15T11:54:12",
    [
        *vllm_start("meta-llama/Llama-3.1-8B-Instruct"),
        (31.1, "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:12<00:12,  6.21s/it]"),
    ],
)
# The previous run of the 70B restart loop: weights done at 141 s, killed during CUDA graph capture at 205 s.
SERVERLESS_KILLED_LOG = stamped(
    "2026-01-15T11:52:20",
    [
        *vllm_start("/mnt/models"),
        (
            160.2,
            "(EngineCore_0 pid=245) INFO [gpu_model_runner.py:2007] Model loading took 32.9000 GiB and 141.302 seconds",
        ),
        (188.0, "(EngineCore_0 pid=245) INFO [monitor.py:34] torch.compile takes 24.13 s in total"),
        (204.5, "Capturing CUDA graph shapes:  40%|████      | 27/67 [00:11<00:17,  2.31it/s]"),
    ],
)


def _run(*files: str, drop: tuple[str, ...] = (), **options: Any) -> list[Finding]:
    return probes.run(evidence_of(load_case(*files, drop=drop), **options))


def _knative_rollout(objects: list[dict]) -> list[dict]:
    """``rollout`` plus what Knative does to the pod: the user's readiness probe (else a TCP probe on the user
    port) moves from the serving container into queue-proxy's SERVING_READINESS_PROBE."""
    result = rollout(objects)
    for obj in result:
        if obj.get("kind") != "Pod":
            continue
        containers = {c["name"]: c for c in obj["spec"]["containers"]}
        if "queue-proxy" not in containers:
            continue
        user = containers["kserve-container"]
        probe = user.pop("readinessProbe", None) or {"tcpSocket": {"port": 8080}, "successThreshold": 1}
        for handler in ("httpGet", "tcpSocket"):
            if handler in probe:
                probe[handler]["host"] = "127.0.0.1"
        env = [e for e in containers["queue-proxy"]["env"] if e["name"] != "SERVING_READINESS_PROBE"]
        containers["queue-proxy"]["env"] = [*env, {"name": "SERVING_READINESS_PROBE", "value": json.dumps(probe)}]
    return result


def _after_patch(objects: list[dict], finding: Finding, knative: bool = False, **options: Any) -> list[Finding]:
    patched = apply_patch(objects, finding)
    rolled = _knative_rollout(patched) if knative else rollout(patched)
    return serious(probes.run(evidence_of(rolled, **options)))


def _patch_body(finding: Finding) -> dict:
    assert finding.patch is not None
    body = yaml.safe_load(finding.patch.body)
    assert isinstance(body, dict)
    return body


def _valid_pod(objects: list[dict]) -> None:
    """The rolled-out pods are valid Pods for the Kubernetes API (unknown fields fail)."""
    for obj in objects:
        if obj.get("kind") == "Pod":
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": obj["metadata"]["name"]},
                "spec": obj["spec"],
            }
            kubernetes_validate.validate(pod, "1.31", strict=True)


# --- probe budgets and load times (pure) ---------------------------------------------------------------


def test_probe_budget_uses_api_defaults_and_a_timeout_worst_case() -> None:
    default = ProbeBudget.of("livenessProbe", {"httpGet": {"path": "/health", "port": 8080}})
    assert (default.initial_delay, default.period, default.failure_threshold, default.timeout) == (0, 10, 3, 1)
    assert default.seconds == 30
    assert default.worst_case_seconds == 31
    slow = ProbeBudget.of(
        "startupProbe", {"initialDelaySeconds": 20, "periodSeconds": 5, "timeoutSeconds": 8, "failureThreshold": 4}
    )
    # Attempts never overlap: 4 attempts at least 8 s apart, the last one's own timeout on top.
    assert slow.seconds == 40
    assert slow.worst_case_seconds == 20 + 4 * 8 + 8


def test_nearest_rank_p95_and_startup_threshold() -> None:
    assert load_time.nearest_rank([100, 120, 180], 0.95) == 180
    assert load_time.nearest_rank(list(range(1, 101)), 0.95) == 95
    assert load_time.startup_failure_threshold(110, 10) == 17  # 165 s rounded up to a period
    assert load_time.startup_failure_threshold(120, 10) == 18


@pytest.mark.parametrize(
    ("name", "billions"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", 8),
        ("hf://meta-llama/Llama-3.1-70B-Instruct", 70),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", 56),
        ("Qwen/Qwen2.5-0.5B-Instruct", 0.5),
        ("/mnt/models", None),
        ("--max-model-len=8192", None),
    ],
)
def test_parameter_count_in_model_names(name: str, billions: float | None) -> None:
    assert load_time.parameter_count_billion(name) == billions


def test_log_timeline_reads_vllm_v1_milestones() -> None:
    text = stamped("2026-01-15T11:10:00", [*vllm_start("m"), *served_tail(weights_at=61.0, ready_at=148.0)])
    timeline = load_time.parse_log_timeline(text)
    assert timeline.load_started_at == at("2026-01-15T11:10:17.900000")
    assert timeline.weights_gib == pytest.approx(14.9889)
    assert timeline.weights_seconds == pytest.approx(42.031)
    assert timeline.engine_init_seconds == pytest.approx(30.5)
    assert timeline.api_server_at == at("2026-01-15T11:12:27")
    assert timeline.serving_at == at("2026-01-15T11:12:28")
    assert timeline.serving_marker == "Application startup complete."


def test_measure_current_run_from_log_and_from_ready_transition() -> None:
    status = {
        "name": "kserve-container",
        "ready": True,
        "restartCount": 0,
        "state": {"running": {"startedAt": "2026-01-15T11:10:00Z"}},
    }
    observed = at("2026-01-15T12:00:00")
    log = stamped("2026-01-15T11:10:00", [*vllm_start("m"), *served_tail(61.0, 148.0)])
    (from_log,) = load_time.measure_container("p", status, at("2026-01-15T11:12:30"), log, None, observed)
    assert (from_log.outcome, from_log.seconds) == (load_time.SERVED, 148.0)
    (from_ready,) = load_time.measure_container("p", status, at("2026-01-15T11:12:30"), None, None, observed)
    assert (from_ready.outcome, from_ready.seconds, from_ready.source) == (
        load_time.SERVED,
        150.0,
        "pod Ready transition",
    )
    # Without a probe that asks the server, Ready only says the container runs.
    (blind,) = load_time.measure_container("p", status, at("2026-01-15T11:10:06"), None, None, observed, False)
    assert blind.outcome == load_time.UNKNOWN


def test_measure_previous_run_that_ends_mid_load() -> None:
    status = {
        "name": "kserve-container",
        "ready": False,
        "restartCount": 6,
        "state": {"running": {"startedAt": "2026-01-15T11:59:44Z"}},
        "lastState": {
            "terminated": {
                "exitCode": 137,
                "reason": "Error",
                "startedAt": "2026-01-15T11:54:12Z",
                "finishedAt": "2026-01-15T11:54:44Z",
            }
        },
    }
    current, previous = load_time.measure_container("p", status, None, None, RAW_KILLED_LOG, at("2026-01-15T12:00:00"))
    assert (current.outcome, current.seconds) == (load_time.LOADING, 16.0)
    assert previous.outcome == load_time.CUT and previous.ended_mid_load
    assert (previous.seconds, previous.exit_code) == (32.0, 137)
    assert "Loading safetensors checkpoint shards:  50% Completed" in previous.source
    stats = load_time.load_stats([current, previous], None)
    # A run that is still loading is no lower bound; the one that was cut is.
    assert (stats.complete, stats.lower_bound) == ((), 32.0)
    # tqdm's bar on the last line: 2 of 4 shards after 31 s, 12 s to go; the engine start is an assumption.
    assert previous.projected_weights_seconds == pytest.approx(43.1)
    seconds, how = stats.sizing() or (0.0, "")
    assert seconds == pytest.approx(103.1)
    assert how.startswith("the weights alone would take 43 s by the shard progress of a cut run")
    assert load_time.load_stats([current], None).sizing() is None


def test_estimate_is_labelled_and_spelled_out() -> None:
    estimate = load_time.estimate_from_names(["/mnt/models", "meta-llama/Llama-3.1-8B-Instruct"])
    assert estimate is not None
    assert estimate.seconds == pytest.approx(20 + 8e9 * 2 / 2**30 / 0.5 + 60)
    assert estimate.basis.startswith("estimate, not a measurement")
    assert "8B parameters in 'meta-llama/Llama-3.1-8B-Instruct'" in estimate.basis


# --- healthy fixtures -------------------------------------------------------------------------------------

STARTUP_SIZED_LOG = {
    (RAW_POD_NAME, "kserve-container"): stamped(
        "2026-01-15T11:10:00", [*vllm_start("meta-llama/Llama-3.1-8B-Instruct"), *served_tail(61.0, 148.0)]
    )
}

HEALTHY = {
    "serverless, Knative's default TCP readiness": ((SERVERLESS,), (), {}),
    "raw": ((RAW,), (), {}),
    "serverless with agent sidecar": ((SERVERLESS, "checks/healthy/serverless_agent.yaml"), (), {}),
    "serverless scaled to zero": (
        (SERVERLESS, "checks/healthy/serverless_scaled_to_zero.yaml"),
        (KNATIVE_POD,),
        {},
    ),
    "startupProbe sized above the measured load": (
        (RAW, "checks/healthy/probes_startup_sized.yaml"),
        (),
        {"logs": STARTUP_SIZED_LOG},
    ),
    "pod inside a correctly sized startup window": ((RAW, "checks/healthy/probes_inside_startup_window.yaml"), (), {}),
    "readiness blip after days of serving": ((RAW, "checks/healthy/probes_readiness_blip.yaml"), (), {}),
}


@pytest.mark.parametrize("case", sorted(HEALTHY))
def test_healthy_fixtures_have_no_probe_problem(case: str) -> None:
    files, drop, options = HEALTHY[case]
    assert serious(_run(*files, drop=drop, **options)) == []


def test_sized_startup_probe_is_silent_and_the_measurement_is_the_log() -> None:
    evidence = evidence_of(load_case(RAW, "checks/healthy/probes_startup_sized.yaml"), logs=STARTUP_SIZED_LOG)
    assert probes.run(evidence) == []
    context = ProbeFacts(evidence, common.current_workload(evidence))
    assert context.stats.complete == (148.0,)
    assert context.stats.p95 == 148.0


def test_the_startup_window_fixture_is_flagged_with_a_short_budget() -> None:
    """The healthy window case is silent because of its budget, not by accident: at 60 s it is flagged."""
    objects = load_case(RAW, "checks/healthy/probes_inside_startup_window.yaml")
    for obj in objects:
        if obj["kind"] in ("InferenceService", "Pod"):
            containers = obj["spec"]["predictor"]["containers"] if obj["kind"] != "Pod" else obj["spec"]["containers"]
            containers[0]["startupProbe"]["failureThreshold"] = 6
    finding = only(probes.run(evidence_of(objects)), "PROBE_STARTUP_BUDGET_SHORT")
    assert finding.level is Severity.WARNING
    assert "estimated load time 110 s" in finding.title


def test_serverless_default_tcp_probe_counts_as_readiness() -> None:
    evidence = evidence_of(load_case(SERVERLESS))
    context = ProbeFacts(evidence, common.current_workload(evidence))
    (readiness,) = context.probes
    assert (readiness.kind, readiness.run_by, readiness.target()) == (
        "readinessProbe",
        "queue-proxy",
        "tcpSocket port 8080",
    )
    assert "PROBE_READINESS_MISSING" not in codes(probes.run(evidence))


# --- PROBE_LIVENESS_KILLS_DURING_LOAD ---------------------------------------------------------------------

RAW_LOOP = (RAW, "checks/PROBE_LIVENESS_KILLS_DURING_LOAD/raw_restart_loop.yaml")
RAW_LOOP_LOGS = {
    (RAW_POD_NAME, "kserve-container.previous"): RAW_KILLED_LOG,
    (RAW_POD_NAME, "kserve-container"): stamped(
        "2026-01-15T11:59:44", vllm_start("meta-llama/Llama-3.1-8B-Instruct")[:3]
    ),
}


def test_raw_restart_loop_with_liveness_kills_mid_load() -> None:
    objects = load_case(*RAW_LOOP)
    finding = only(probes.run(evidence_of(objects, logs=RAW_LOOP_LOGS)), "PROBE_LIVENESS_KILLS_DURING_LOAD")
    assert finding.level is Severity.CRITICAL
    assert finding.objects == (ISVC_REF, RAW_POD)
    assert finding.title == "livenessProbe kills the container during the model load (30 s budget)"
    assert "gives the model 30 s to load" in finding.summary
    assert "restarted 6 time(s)" in finding.summary
    assert "the kubelet killed the container for failed probes (liveness ×6)" in finding.summary
    assert "No startupProbe holds the liveness probe back" in finding.summary
    evidence = "\n".join(finding.evidence)
    assert (
        "livenessProbe: initialDelaySeconds 0 + periodSeconds 10 × failureThreshold 3 = 30 s (worst case 31 s"
        in evidence
    )
    assert "previous run (started 2026-01-15T11:54:12Z): ended after 32 s with exit code 137 (Error)" in evidence
    assert "'Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:12<00:12,  6.21s/it]'" in evidence
    assert "event Killing on Pod vllm-llm-predictor-6d5f8b7c9-q8w2e (kserve-container) ×6" in evidence
    assert "load time estimate: estimate, not a measurement" in evidence
    # Sized from the estimate (110 s) × 1.5, rounded up to the period: 17 × 10 s.
    (container,) = _patch_body(finding)["spec"]["predictor"]["containers"]
    assert container["startupProbe"] == {
        "httpGet": {"path": "/health", "port": 8080, "scheme": "HTTP"},
        "periodSeconds": 10,
        "failureThreshold": 17,
    }
    assert container["image"] == "vllm/vllm-openai:v0.10.1" and container["livenessProbe"]  # whole list copied
    assert "periodSeconds 10 × failureThreshold 17 = 170 s" in finding.remediation
    assert "kubectl patch inferenceservices.serving.kserve.io vllm-llm -n llm --type merge -p" in finding.remediation
    patched = rollout(apply_patch(objects, finding))
    _valid_pod(patched)
    assert _after_patch(objects, finding, logs=RAW_LOOP_LOGS) == []


# vllm-project/vllm#25263: with --tensor-parallel-size above the pod's GPUs the engine waits for a Ray placement group
# that never forms; the liveness probe kills a start-up that was never loading, and ENGINE_START_FAILED names why.
def _tensor_parallel_wait(size: str) -> tuple[list[dict[str, Any]], dict[tuple[str, str], str]]:
    objects = load_case(*RAW_LOOP)
    pod = next(obj for obj in objects if obj["kind"] == "Pod")
    pod["spec"]["containers"][0]["args"] = [*pod["spec"]["containers"][0]["args"], "--tensor-parallel-size", size]
    waiting = (
        "(EngineCore_0 pid=213) INFO 01-15 11:54:41 [ray_utils.py:427] Waiting for creating a placement group of "
        "specs for 10 seconds. specs=[{'GPU': 1.0, 'node:10.0.4.21': 0.001}, {'GPU': 1.0}]."
    )
    warning = (
        "(EngineCore_0 pid=213) WARNING 01-15 11:54:29 [ray_utils.py:352] Tensor parallel size (2) exceeds available "
        "GPUs (1). This may result in Ray placement group allocation failures."
    )
    log = stamped(
        "2026-01-15T11:54:12", [*vllm_start("meta-llama/Llama-3.1-8B-Instruct")[:3], (16.1, warning), (28.4, waiting)]
    )
    return objects, {**RAW_LOOP_LOGS, (RAW_POD_NAME, "kserve-container.previous"): log}


def test_kills_of_an_engine_waiting_for_gpus_it_lacks_are_not_a_load_budget_problem() -> None:
    objects, logs = _tensor_parallel_wait("2")
    assert "PROBE_LIVENESS_KILLS_DURING_LOAD" not in codes(probes.run(evidence_of(objects, logs=logs)))


def test_the_ray_warning_within_the_pods_gpus_leaves_the_kills_to_the_probe_budget() -> None:
    """Multi-node Ray prints the warning with the world size (vllm-project/vllm#31005): with --tensor-parallel-size
    within the pod's GPUs an engine killed while it loads is still a probe budget problem."""
    objects, logs = _tensor_parallel_wait("1")
    warning = logs[(RAW_POD_NAME, "kserve-container.previous")].splitlines()[3].split(" ", 1)[1]
    logs[(RAW_POD_NAME, "kserve-container.previous")] = (
        stamped("2026-01-15T11:54:12", [(0.5, warning)]) + RAW_KILLED_LOG
    )
    assert "PROBE_LIVENESS_KILLS_DURING_LOAD" in codes(probes.run(evidence_of(objects, logs=logs)))


def test_rollback_restores_the_original_isvc() -> None:
    objects = load_case(*RAW_LOOP)
    finding = only(probes.run(evidence_of(objects, logs=RAW_LOOP_LOGS)), "PROBE_LIVENESS_KILLS_DURING_LOAD")
    rollback = finding.remediation.split("Roll back:\n", 1)[1].strip()
    words = shlex.split(rollback)
    body = json.loads(words[words.index("-p") + 1])
    isvc = next(obj for obj in objects if obj["kind"] == "InferenceService")
    patched = next(obj for obj in apply_patch(objects, finding) if obj["kind"] == "InferenceService")
    assert json_merge_patch(patched, body) == isvc


def test_kill_without_events_is_inferred_from_exit_code_and_log() -> None:
    """Events live an hour; the status and the previous log still tell the story."""
    objects = [obj for obj in load_case(*RAW_LOOP) if obj["kind"] != "Event"]
    finding = only(probes.run(evidence_of(objects, logs=RAW_LOOP_LOGS)), "PROBE_LIVENESS_KILLS_DURING_LOAD")
    assert "the previous run was killed (exit code 137) while loading" in finding.summary


def test_oom_kills_are_not_probe_kills() -> None:
    objects = [obj for obj in load_case(*RAW_LOOP) if obj["kind"] != "Event"]
    pod = next(obj for obj in objects if obj["kind"] == "Pod")
    pod["status"]["containerStatuses"][0]["lastState"]["terminated"]["reason"] = "OOMKilled"
    assert "PROBE_LIVENESS_KILLS_DURING_LOAD" not in codes(probes.run(evidence_of(objects, logs=RAW_LOOP_LOGS)))


def test_a_cut_previous_log_of_a_long_run_is_not_a_kill_during_load() -> None:
    """Issue #14 (truncated logs): a previous log cut by tailLines / limitBytes, from a container that served 6.5 h,
    was read as "the log ends before the server started". Before: PROBE_LIVENESS_KILLS_DURING_LOAD critical, first;
    after: no load conclusion from a log that does not reach the engine's start, and the attempt says it was cut."""
    objects = load_case(*RAW_LOOP)
    pod = next(obj for obj in objects if obj["kind"] == "Pod")
    pod["status"]["containerStatuses"][0]["lastState"]["terminated"]["startedAt"] = "2026-01-15T05:24:44Z"
    tail = stamped(
        "2026-01-15T11:53:40",
        [
            (0, 'INFO:     10.0.3.7:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK'),
            (10, "INFO 01-15 11:53:50 [loggers.py:123] Engine 000: Avg prompt throughput: 812.4 tokens/s"),
        ],
    )
    logs = {**RAW_LOOP_LOGS, (RAW_POD_NAME, "kserve-container.previous"): tail}
    evidence = evidence_of(objects, logs=logs)
    assert "PROBE_LIVENESS_KILLS_DURING_LOAD" not in codes(probes.run(evidence))
    context = ProbeFacts(evidence, common.current_workload(evidence))
    (load,) = context.loads
    assert load.previous is not None and load.previous.log_cut
    assert "its log was cut" in load.previous.describe()


SERVERLESS_LOOP = (SERVERLESS, "checks/PROBE_LIVENESS_KILLS_DURING_LOAD/serverless_70b_restart_loop.yaml")
SERVERLESS_LOOP_LOGS = {(KNATIVE_POD_NAME, "kserve-container.previous"): SERVERLESS_KILLED_LOG}


def test_serverless_70b_killed_during_graph_capture() -> None:
    objects = load_case(*SERVERLESS_LOOP)
    finding = only(probes.run(evidence_of(objects, logs=SERVERLESS_LOOP_LOGS)), "PROBE_LIVENESS_KILLS_DURING_LOAD")
    assert finding.objects == (ISVC_REF, KNATIVE_POD)
    assert "gives the model 210 s to load (initialDelaySeconds 180" in finding.summary
    evidence = "\n".join(finding.evidence)
    assert "ended after 205 s with exit code 137 (Error) before serving" in evidence
    assert "engine reported weights 32.9 GiB in 141.3 s" in evidence
    assert "32.9 GiB of weights (reported by vLLM" in evidence  # the estimate uses vLLM's own number
    body = _patch_body(finding)
    # No run finished: sized at twice the longest cut run (410 s) × 1.5 = 615 s, rounded up to 620 s. Knative's
    # 600 s progress deadline would fail the revision first: raised to 621 s worst case + 60 s, rounded to minutes.
    assert body == {
        "metadata": {"annotations": {"serving.knative.dev/progress-deadline": "720s"}},
        "spec": {
            "predictor": {
                "model": {
                    "startupProbe": {
                        "httpGet": {"path": "/health", "port": 8080, "scheme": "HTTP"},
                        "periodSeconds": 10,
                        "failureThreshold": 62,
                    }
                }
            }
        },
    }
    assert "progress deadline (600 s from Knative's default)" in finding.remediation
    patched = _knative_rollout(apply_patch(objects, finding))
    _valid_pod(patched)
    assert _after_patch(objects, finding, knative=True, logs=SERVERLESS_LOOP_LOGS) == []


def test_progress_deadline_already_long_enough_is_left_alone() -> None:
    objects = load_case(*SERVERLESS_LOOP)
    isvc = next(obj for obj in objects if obj["kind"] == "InferenceService")
    isvc["metadata"]["annotations"]["serving.knative.dev/progress-deadline"] = "30m"
    finding = only(probes.run(evidence_of(objects, logs=SERVERLESS_LOOP_LOGS)), "PROBE_LIVENESS_KILLS_DURING_LOAD")
    assert "metadata" not in _patch_body(finding)


# --- PROBE_STARTUP_BUDGET_SHORT ---------------------------------------------------------------------------


def test_rollout_cut_the_startup_budget_below_the_measured_load() -> None:
    objects = load_case(RAW, "checks/PROBE_STARTUP_BUDGET_SHORT/raw_rollout_shorter_budget.yaml")
    finding = only(probes.run(evidence_of(objects)), "PROBE_STARTUP_BUDGET_SHORT")
    assert finding.level is Severity.WARNING
    assert finding.objects == (ISVC_REF, "Pod/llm/vllm-llm-predictor-7b4c9d8f6-k3m7n")
    assert finding.title == "startupProbe budget 120 s is below the measured load time 180 s"
    assert "p95 180 s, max 180 s" in finding.summary
    assert "No pod has been killed for it in the window yet" in finding.summary
    assert (
        "Pod vllm-llm-predictor-6d5f8b7c9-q8w2e kserve-container current run (started 2026-01-15T11:10:00Z): "
        "serving after 180 s (pod Ready transition)"
    ) in finding.evidence
    (container,) = _patch_body(finding)["spec"]["predictor"]["containers"]
    # An existing startupProbe keeps its handler; only the count grows: 180 × 1.5 = 270 s.
    assert container["startupProbe"] == {
        "httpGet": {"path": "/health", "port": 8080},
        "periodSeconds": 10,
        "failureThreshold": 27,
    }
    assert _after_patch(objects, finding) == []


def test_estimated_load_of_a_70b_model_against_a_two_minute_startup() -> None:
    objects = load_case(RAW, "checks/PROBE_STARTUP_BUDGET_SHORT/raw_estimated_70b.yaml")
    finding = only(probes.run(evidence_of(objects)), "PROBE_STARTUP_BUDGET_SHORT")
    assert finding.title == "startupProbe budget 120 s is below the estimated load time 341 s"
    assert "estimate, not a measurement" in finding.summary
    assert "70B parameters in 'meta-llama/Llama-3.1-70B-Instruct'" in finding.summary
    (container,) = _patch_body(finding)["spec"]["predictor"]["containers"]
    assert container["startupProbe"]["failureThreshold"] == 52  # 341 s × 1.5 = 511 s → 520 s
    assert _after_patch(objects, finding) == []


def test_an_estimate_contradicted_by_a_ready_pod_is_not_used() -> None:
    objects = load_case(RAW, "checks/PROBE_STARTUP_BUDGET_SHORT/raw_estimated_70b.yaml")
    pod = next(obj for obj in objects if obj["kind"] == "Pod")
    pod["status"]["conditions"][1] = {"type": "Ready", "status": "True"}
    pod["status"]["containerStatuses"][0]["ready"] = True
    findings = probes.run(evidence_of(objects))
    assert serious(findings) == []
    note = only(findings, "PROBE_LOAD_TIME_UNKNOWN")
    assert note.level is Severity.INFO
    assert (
        "became Ready within its startupProbe budget of 120 s, which the estimate of 341 s contradicts" in note.summary
    )


def test_serverless_liveness_only_with_an_estimate_raises_the_progress_deadline() -> None:
    objects = load_case(SERVERLESS, "checks/PROBE_STARTUP_BUDGET_SHORT/serverless_estimated_liveness.yaml")
    finding = only(probes.run(evidence_of(objects)), "PROBE_STARTUP_BUDGET_SHORT")
    assert finding.objects == (ISVC_REF, KNATIVE_POD)
    assert finding.title == "livenessProbe budget 90 s is below the estimated load time 341 s"
    body = _patch_body(finding)
    startup = body["spec"]["predictor"]["model"]["startupProbe"]
    assert (startup["periodSeconds"], startup["failureThreshold"]) == (10, 52)
    # 521 s worst case + 30 s before the container started (scheduling, pull) + 60 s, rounded up to minutes.
    assert body["metadata"] == {"annotations": {"serving.knative.dev/progress-deadline": "660s"}}
    assert _after_patch(objects, finding, knative=True) == []


# --- PROBE_NOT_MODEL_AWARE --------------------------------------------------------------------------------


def test_liveness_probe_on_the_agent_sidecar() -> None:
    objects = load_case(RAW, "checks/PROBE_NOT_MODEL_AWARE/raw_liveness_on_agent.yaml")
    finding = only(probes.run(evidence_of(objects)), "PROBE_NOT_MODEL_AWARE")
    assert finding.level is Severity.WARNING
    assert finding.objects == (ISVC_REF, RAW_POD)
    assert "checks port 9081, which belongs to the agent sidecar" in finding.summary
    (container,) = _patch_body(finding)["spec"]["predictor"]["containers"]
    assert container["livenessProbe"] == {
        "httpGet": {"path": "/health", "port": 8080},
        "periodSeconds": 30,
        "failureThreshold": 5,
    }
    assert _after_patch(objects, finding) == []


EXEC_CASE = (RAW, "checks/PROBE_NOT_MODEL_AWARE/raw_exec_process_check.yaml")
# vLLM needed 115 s; the process check let the pod turn Ready after 6 s.
EXEC_LOGS = {
    (RAW_POD_NAME, "kserve-container"): stamped(
        "2026-01-15T11:20:10", [*vllm_start("/mnt/models"), *served_tail(61.0, 115.0)]
    )
}


def _istio_promql() -> str:
    spec = next(spec for spec in catalog.CATALOG if spec.id == "istio_requests_by_code")
    return catalog.render(spec, 0, "llm", "vllm-llm", 15)


_T0 = at("2026-01-15T11:20:00").timestamp()
EDGE_503 = {
    "istio_requests_by_code": {
        "promql": _istio_promql(),
        "result": [
            {
                "metric": {"response_code": "503", "response_flags": "URX"},
                "values": [[_T0, "0"], [_T0 + 60, "2.5"], [_T0 + 120, "0"]],
            },
            {"metric": {"response_code": "200", "response_flags": "-"}, "values": [[_T0 + 120, "4"]]},
        ],
    }
}


def test_exec_process_check_is_not_model_aware() -> None:
    objects = load_case(*EXEC_CASE)
    finding = only(probes.run(evidence_of(objects, logs=EXEC_LOGS)), "PROBE_NOT_MODEL_AWARE")
    assert finding.level is Severity.WARNING
    assert "runs 'pgrep -f vllm.entrypoints.openai.api_server'" in finding.summary
    (container,) = _patch_body(finding)["spec"]["predictor"]["containers"]
    assert container["readinessProbe"] == {"httpGet": {"path": "/health", "port": 8080}, "periodSeconds": 5}
    assert _after_patch(objects, finding, logs=EXEC_LOGS) == []


def test_ready_before_serving_with_edge_503s_is_raised_to_critical() -> None:
    objects = load_case(*EXEC_CASE)
    finding = only(probes.run(evidence_of(objects, logs=EXEC_LOGS, metrics=EDGE_503)), "PROBE_NOT_MODEL_AWARE")
    assert finding.level is Severity.CRITICAL
    assert "Raised to critical: Pod vllm-llm-predictor-6d5f8b7c9-q8w2e turned Ready at 2026-01-15T11:20:16Z, 109 s" in (
        finding.summary
    )
    assert "5xx at the Istio proxies (503 peak 2.50/s)" in finding.summary


def test_serverless_runtime_probe_on_a_v2_path_vllm_does_not_serve() -> None:
    objects = load_case(SERVERLESS, "checks/PROBE_NOT_MODEL_AWARE/serverless_runtime_v2_path.yaml")
    finding = only(probes.run(evidence_of(objects)), "PROBE_NOT_MODEL_AWARE")
    assert finding.title == "readinessProbe httpGet /v2/health/ready port 8080 does not test the engine"
    assert "asks '/v2/health/ready', a path vllm does not serve" in finding.summary
    # KServe merges the ISVC's fields into the runtime's probe and cannot drop its path: the runtime is patched.
    assert finding.patch is not None and finding.patch.target == "ServingRuntime.serving.kserve.io/llm/vllm-runtime"
    (container,) = _patch_body(finding)["spec"]["containers"]
    assert container["readinessProbe"] == {
        "httpGet": {"path": "/health", "port": 8080},
        "periodSeconds": 10,
        "failureThreshold": 3,
    }
    assert container["args"] == ["--port=8080", "--model=/mnt/models", "--served-model-name={{.Name}}"]
    assert _after_patch(objects, finding, knative=True) == []


def _istio_rewritten(original: dict) -> list[dict]:
    objects = load_case(RAW)
    pod = next(obj for obj in objects if obj["kind"] == "Pod")
    pod["spec"]["containers"][0]["livenessProbe"] = {
        "httpGet": {"path": "/app-health/kserve-container/livez", "port": 15020},
        "periodSeconds": 30,
    }
    probers = {"/app-health/kserve-container/livez": original}
    pod["spec"]["containers"].append(
        {
            "name": "istio-proxy",
            "image": "istio/proxyv2:1.22",
            "ports": [{"containerPort": 15090, "name": "http-envoy-prom"}],
            "env": [{"name": "ISTIO_KUBE_APP_PROBERS", "value": json.dumps(probers)}],
        }
    )
    return objects


def test_istio_probe_rewrite_is_judged_by_the_original_probe() -> None:
    fine = _istio_rewritten({"httpGet": {"path": "/health", "port": 8080}, "timeoutSeconds": 1})
    assert "PROBE_NOT_MODEL_AWARE" not in codes(probes.run(evidence_of(fine)))
    wrong = _istio_rewritten({"httpGet": {"path": "/healthz", "port": 8080}, "timeoutSeconds": 1})
    finding = only(probes.run(evidence_of(wrong)), "PROBE_NOT_MODEL_AWARE")
    assert "asks '/healthz'" in finding.summary


# --- PROBE_READINESS_MISSING ------------------------------------------------------------------------------


def test_raw_container_without_readiness_probe() -> None:
    objects = load_case(RAW, "checks/PROBE_READINESS_MISSING/raw_liveness_only.yaml")
    finding = only(probes.run(evidence_of(objects)), "PROBE_READINESS_MISSING")
    assert finding.level is Severity.WARNING
    assert finding.objects == (ISVC_REF, RAW_POD)
    assert "declares no readinessProbe, startupProbe" in "\n".join(finding.evidence)
    (container,) = _patch_body(finding)["spec"]["predictor"]["containers"]
    assert container["readinessProbe"] == {
        "httpGet": {"path": "/health", "port": 8080},
        "periodSeconds": 10,
        "failureThreshold": 3,
    }
    patched = rollout(apply_patch(objects, finding))
    _valid_pod(patched)
    assert "PROBE_READINESS_MISSING" not in codes(_after_patch(objects, finding))


def test_missing_readiness_with_edge_503s_while_loading_is_critical() -> None:
    objects = load_case(RAW, "checks/PROBE_READINESS_MISSING/raw_liveness_only.yaml")
    findings = probes.run(evidence_of(objects, logs=EXEC_LOGS, metrics=EDGE_503))
    finding = only(findings, "PROBE_READINESS_MISSING")
    assert finding.level is Severity.CRITICAL
    assert "109 s before its log shows the server serving" in finding.summary


# --- step plumbing ----------------------------------------------------------------------------------------


def test_pods_forbidden_is_missing_evidence() -> None:
    reads = [
        {"what": "Pod in llm (serving.kserve.io/inferenceservice=vllm-llm)", "status": "forbidden", "reason": "RBAC"}
    ]
    with pytest.raises(EvidenceMissing, match="forbidden"):
        probes.run(evidence_of(load_case(RAW), reads=reads))


def test_modelmesh_is_skipped() -> None:
    objects = copy.deepcopy(load_case(RAW))
    isvc = next(obj for obj in objects if obj["kind"] == "InferenceService")
    isvc["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] = "ModelMesh"
    with pytest.raises(StepSkipped):
        probes.run(evidence_of(objects))


# --- the shipped scenario -----------------------------------------------------------------------------


def test_liveness_scenario_bundle_gets_a_startup_budget_that_covers_its_real_load(tmp_path: Path) -> None:
    """The generated 'liveness-vs-warmup' bundle, read back as a capture: the step names the kill and sizes a
    startupProbe from the cut logs' shard progress that covers the load the generator really simulates."""
    spec = load_spec("liveness-vs-warmup")
    cluster, _metrics, manifest = open_bundle(scenario_bundle(spec.name, tmp_path))
    evidence = gather(cluster, None, Target(manifest.namespace, manifest.isvc), manifest.window, manifest.captured_at)
    finding = only(probes.run(evidence), "PROBE_LIVENESS_KILLS_DURING_LOAD")
    assert finding.title == "livenessProbe kills the container during the model load (90 s budget)"
    startup = _patch_body(finding)["spec"]["predictor"]["model"]["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= spec.isvc.model.load_seconds


# --- PROBE_SIDECAR_NOT_READY ------------------------------------------------------------------------------

AGENT_404 = (RAW, "checks/PROBE_SIDECAR_NOT_READY/raw_agent_404.yaml")


def test_agent_answering_404_keeps_a_serving_pod_unready() -> None:
    """kserve/kserve#5341: kserve-container ready, the agent's probe on '/' gets 404, the pod stays 1/2."""
    objects = load_case(*AGENT_404)
    findings = probes.run(evidence_of(objects))
    finding = only(findings, "PROBE_SIDECAR_NOT_READY")
    assert finding.level is Severity.CRITICAL
    assert finding.objects == (ISVC_REF, RAW_POD)
    assert finding.title == "agent sidecar not ready while the engine serves"
    assert "kserve-container is ready: its own readiness probe (httpGet /health port 8080) passes" in finding.summary
    assert "here the probe gets 404" in finding.summary
    assert "agent readinessProbe: httpGet / port 9081" in finding.evidence
    (container,) = _patch_body(finding)["spec"]["predictor"]["containers"]
    assert container["readinessProbe"] == {"tcpSocket": {"port": 8080}, "periodSeconds": 10}
    assert_valid_patch(finding, objects)
    assert {f.code for f in serious(findings)} == {"PROBE_SIDECAR_NOT_READY"}


def test_an_unready_agent_while_the_engine_loads_is_not_the_agent_s_fault() -> None:
    """The engine is not shown serving (kserve-container not ready, no log): the agent only mirrors the load."""
    objects = load_case(*AGENT_404)
    pod = next(obj for obj in objects if obj["kind"] == "Pod")
    for status in pod["status"]["containerStatuses"]:
        status["ready"] = False
    assert "PROBE_SIDECAR_NOT_READY" not in codes(probes.run(evidence_of(objects)))


def test_a_sidecar_that_just_started_is_given_time() -> None:
    objects = load_case(*AGENT_404)
    pod = next(obj for obj in objects if obj["kind"] == "Pod")
    pod["status"]["containerStatuses"][0]["state"] = {"running": {"startedAt": "2026-01-15T11:59:30Z"}}
    assert "PROBE_SIDECAR_NOT_READY" not in codes(probes.run(evidence_of(objects)))


def test_a_ready_agent_is_healthy() -> None:
    objects = load_case(*AGENT_404)
    pod = next(obj for obj in objects if obj["kind"] == "Pod")
    for status in pod["status"]["containerStatuses"]:
        status["ready"] = True
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]
    assert serious(probes.run(evidence_of(objects))) == []


def _serverless_pod_with(objects: list[dict], sidecar: str) -> dict:
    pod = next(obj for obj in objects if obj["kind"] == "Pod")
    pod["status"]["conditions"] = [
        {"type": "Ready", "status": "False", "reason": "ContainersNotReady"},
    ]
    statuses = pod["status"]["containerStatuses"]
    names = {status["name"] for status in statuses}
    if sidecar not in names:
        statuses.append(
            {"name": sidecar, "restartCount": 0, "state": {"running": {"startedAt": "2026-01-15T09:00:20Z"}}}
        )
        pod["spec"]["containers"].append({"name": sidecar, "image": "docker.io/istio/proxyv2:1.22.0"})
    for status in statuses:
        status["ready"] = status["name"] != sidecar
        status["state"] = {"running": {"startedAt": "2026-01-15T11:30:00Z"}}
    return pod


SERVING_LOG = {
    (KNATIVE_POD_NAME, "kserve-container"): stamped(
        "2026-01-15T11:30:00", [*vllm_start("/mnt/models"), *served_tail(61.0, 110.0)]
    )
}


@pytest.mark.parametrize(
    ("sidecar", "words"),
    [
        ("queue-proxy", "queue-proxy turns ready only when the readiness probe it runs"),
        ("istio-proxy", "once envoy has received its configuration from istiod"),
    ],
)
def test_serverless_sidecar_unready_after_the_log_shows_serving(sidecar: str, words: str) -> None:
    objects = load_case(SERVERLESS)
    _serverless_pod_with(objects, sidecar)
    finding = only(probes.run(evidence_of(objects, logs=SERVING_LOG)), "PROBE_SIDECAR_NOT_READY")
    assert finding.title == f"{sidecar} sidecar not ready while the engine serves"
    assert "its log shows 'Application startup complete.' at 2026-01-15T11:31:50Z" in finding.summary
    assert words in finding.summary
    assert "SERVING_READINESS_PROBE) asks port" not in finding.summary  # its probe asks the server's own port
    # Without the log, nothing shows the engine serving: queue-proxy and the mesh only mirror a load.
    assert "PROBE_SIDECAR_NOT_READY" not in codes(probes.run(evidence_of(objects)))


def test_queue_proxy_probing_a_port_the_server_does_not_listen_on_is_named() -> None:
    """knative/serving#14021: queue-proxy's probe is refused on a port nothing listens on while the server serves."""
    objects = load_case(SERVERLESS)
    pod = _serverless_pod_with(objects, "queue-proxy")
    queue = next(c for c in pod["spec"]["containers"] if c["name"] == "queue-proxy")
    env = [e for e in queue["env"] if e["name"] != "SERVING_READINESS_PROBE"]
    probe = {"httpGet": {"path": "/health", "port": 8000, "host": "127.0.0.1"}, "successThreshold": 1}
    queue["env"] = [*env, {"name": "SERVING_READINESS_PROBE", "value": json.dumps(probe)}]
    finding = only(probes.run(evidence_of(objects, logs=SERVING_LOG)), "PROBE_SIDECAR_NOT_READY")
    assert "(SERVING_READINESS_PROBE) asks port 8000, while the server listens on 8080" in finding.summary
    assert "a port the KServe agent took" not in finding.summary
    assert finding.fix.what.startswith("Let the readiness probe ask port 8080, where the server listens")


def test_pods_whose_engine_log_was_not_captured_are_named_not_counted() -> None:
    """The capture reads the log of the newest not-ready pod only: an older twin with the same unready queue-proxy
    is named, not counted; a Ready twin is not named."""
    objects = load_case(SERVERLESS)
    pod = _serverless_pod_with(objects, "queue-proxy")
    twin = copy.deepcopy(pod)
    twin["metadata"].update(name=f"{KNATIVE_POD_NAME}-twin", uid="5b0c7a1e-twin")
    objects.append(twin)
    twin_log = {(f"{KNATIVE_POD_NAME}-twin", "kserve-container"): SERVING_LOG[(KNATIVE_POD_NAME, "kserve-container")]}
    finding = only(probes.run(evidence_of(objects, logs=twin_log)), "PROBE_SIDECAR_NOT_READY")
    assert finding.summary.startswith("On 1 pod(s) the queue-proxy container runs but is not ready")
    assert f"1 other pod(s) show queue-proxy unready as long ({KNATIVE_POD_NAME});" in finding.summary
    pod["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    for status in pod["status"]["containerStatuses"]:
        status["ready"] = True
    finding = only(probes.run(evidence_of(objects, logs=twin_log)), "PROBE_SIDECAR_NOT_READY")
    assert "other pod(s) show" not in finding.summary


def test_native_sidecar_istio_proxy_is_read_from_init_container_statuses() -> None:
    objects = load_case(SERVERLESS)
    pod = next(obj for obj in objects if obj["kind"] == "Pod")
    pod["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}]
    pod["spec"]["initContainers"] = [
        {"name": "istio-proxy", "image": "docker.io/istio/proxyv2:1.22.0", "restartPolicy": "Always"}
    ]
    pod["status"]["initContainerStatuses"] = [
        {
            "name": "istio-proxy",
            "ready": False,
            "restartCount": 0,
            "state": {"running": {"startedAt": "2026-01-15T11:29:50Z"}},
        }
    ]
    pod["status"]["containerStatuses"][0]["state"] = {"running": {"startedAt": "2026-01-15T11:30:00Z"}}
    finding = only(probes.run(evidence_of(objects, logs=SERVING_LOG)), "PROBE_SIDECAR_NOT_READY")
    assert finding.title == "istio-proxy sidecar not ready while the engine serves"


# --- PROBE_FAILS_UNDER_LOAD -------------------------------------------------------------------------------

UNDER_LOAD = (RAW, "checks/PROBE_FAILS_UNDER_LOAD/raw_liveness_timeouts_busy.yaml")
UNDER_LOAD_LOGS = {
    (RAW_POD_NAME, "kserve-container.previous"): stamped(
        "2026-01-15T09:00:10",
        [
            *vllm_start("/mnt/models"),
            *served_tail(61.0, 100.0),
            (
                7800.0,
                "(APIServer pid=1) INFO [loggers.py:123] Engine 000: Avg prompt throughput: 812.4 tokens/s, "
                "Avg generation throughput: 1630.2 tokens/s, Running: 31 reqs, Waiting: 0 reqs",
            ),
            (9400.0, '(APIServer pid=1) INFO:     10.0.1.7:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK'),
        ],
    ),
    (RAW_POD_NAME, "kserve-container"): stamped(
        "2026-01-15T11:39:52", [*vllm_start("/mnt/models"), *served_tail(61.0, 98.0)]
    ),
}


def busy_metrics(running: float, waiting: float) -> dict[str, dict[str, Any]]:
    """vLLM's running and waiting requests of the pod, every minute of the window: ``running`` and ``waiting``
    from 11:30 until the kill at 11:39:50, nothing during the reload, then a calmer load."""

    def answer(metric_id: str, busy: float) -> dict[str, Any]:
        spec = next(spec for spec in catalog.CATALOG if spec.id == metric_id)
        values = []
        for minute in range(0, 60):
            moment = at("2026-01-15T11:00:00") + timedelta(minutes=minute)
            if moment < at("2026-01-15T11:30:00"):
                value = busy / 4
            elif moment < at("2026-01-15T11:40:00"):
                value = busy
            elif moment < at("2026-01-15T11:42:00"):
                value = 0.0
            else:
                value = busy / 2
            values.append([moment.timestamp(), str(value)])
        return {
            "promql": catalog.render(spec, 0, "llm", "vllm-llm", 15),
            "result": [{"metric": {"pod": RAW_POD_NAME}, "values": values}],
        }

    return {"vllm_running": answer("vllm_running", running), "vllm_waiting": answer("vllm_waiting", waiting)}


def test_liveness_timeouts_on_a_busy_serving_engine() -> None:
    objects = load_case(*UNDER_LOAD)
    findings = probes.run(evidence_of(objects, logs=UNDER_LOAD_LOGS, metrics=busy_metrics(48, 12)))
    finding = only(findings, "PROBE_FAILS_UNDER_LOAD")
    assert finding.level is Severity.CRITICAL
    assert "PROBE_LIVENESS_KILLS_DURING_LOAD" not in codes(findings)
    assert finding.title == "liveness/readiness probe times out on a busy engine that was serving"
    # The window cut the previous run's start-up lines: it served by having outlived its startupProbe.
    assert "the previous run outlived its startupProbe budget, so the probe had passed by 2026-01-15T09:05:21Z" in (
        finding.summary
    )
    assert "ran up to 48 requests and up to 12 waiting" in finding.summary
    assert "the kubelet killed the container for failed liveness probes ×1" in finding.summary
    (container,) = _patch_body(finding)["spec"]["predictor"]["containers"]
    assert container["livenessProbe"] == {
        "httpGet": {"path": "/health", "port": 8080},
        "periodSeconds": 10,
        "failureThreshold": 6,
        "timeoutSeconds": 10,
    }
    assert "startupProbe does not help" in finding.remediation
    assert_valid_patch(finding, objects)


def test_readiness_timeouts_only_are_a_note() -> None:
    objects = load_case(
        *UNDER_LOAD,
        drop=(
            "Event/llm/vllm-llm-predictor-6d5f8b7c9-q8w2e.liveness",
            "Event/llm/vllm-llm-predictor-6d5f8b7c9-q8w2e.killing",
        ),
    )
    pod = next(obj for obj in objects if obj["kind"] == "Pod")
    status = pod["status"]["containerStatuses"][0]
    status.update(restartCount=0, state={"running": {"startedAt": "2026-01-15T09:00:10Z"}})
    status.pop("lastState")
    logs = {(RAW_POD_NAME, "kserve-container"): UNDER_LOAD_LOGS[(RAW_POD_NAME, "kserve-container.previous")]}
    finding = only(probes.run(evidence_of(objects, logs=logs, metrics=busy_metrics(48, 12))), "PROBE_FAILS_UNDER_LOAD")
    assert finding.level is Severity.INFO  # a busy pod out of rotation for a while: a blip, not a fault
    assert finding.title == "readiness probe times out on a busy engine that was serving"
    (container,) = _patch_body(finding)["spec"]["predictor"]["containers"]
    assert container["readinessProbe"]["timeoutSeconds"] == 10


def test_timeouts_on_an_idle_engine_are_not_load() -> None:
    """Nothing running when the probes timed out: a hang, not a busy engine."""
    objects = load_case(*UNDER_LOAD)
    findings = probes.run(evidence_of(objects, logs=UNDER_LOAD_LOGS, metrics=busy_metrics(0, 0)))
    assert "PROBE_FAILS_UNDER_LOAD" not in codes(findings)


def test_refused_connections_during_the_load_are_not_load() -> None:
    """The restart loop of a model that never served: its failures are refused connections before serving."""
    objects = load_case(*RAW_LOOP)
    assert "PROBE_FAILS_UNDER_LOAD" not in codes(probes.run(evidence_of(objects, logs=RAW_LOOP_LOGS)))


# --- startupProbe gated on the Knative release (knative/serving#10037, PR #15309 in 1.15) -------------------


def _knative_config(labels: dict[str, str]) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "config-deployment", "namespace": "knative-serving", "labels": labels},
        "data": {"queue-sidecar-image": "gcr.io/knative-releases/knative.dev/serving/cmd/queue"},
    }


def test_knative_before_1_15_gets_a_delayed_liveness_probe_not_a_startup_probe() -> None:
    objects = [*load_case(*SERVERLESS_LOOP), _knative_config({"app.kubernetes.io/version": "1.14.2"})]
    finding = only(probes.run(evidence_of(objects, logs=SERVERLESS_LOOP_LOGS)), "PROBE_LIVENESS_KILLS_DURING_LOAD")
    assert finding.remediation.startswith(
        "Knative Serving 1.14.2 (label app.kubernetes.io/version of ConfigMap knative-serving/config-deployment) "
        "rejects a startupProbe"
    )
    body = _patch_body(finding)
    # The same sizing as the startupProbe (620 s), as the liveness probe's delay; the progress deadline covers
    # it and the liveness budget after it (650 s, 651 s worst case) + 60 s, rounded up to minutes.
    assert body == {
        "metadata": {"annotations": {"serving.knative.dev/progress-deadline": "720s"}},
        "spec": {"predictor": {"model": {"livenessProbe": {"initialDelaySeconds": 620}}}},
    }
    patched = _knative_rollout(apply_patch(objects, finding))
    _valid_pod(patched)
    pod = next(obj for obj in patched if obj["kind"] == "Pod")
    assert "startupProbe" not in pod["spec"]["containers"][0]


def test_knative_1_15_and_later_gets_the_startup_probe() -> None:
    objects = [*load_case(*SERVERLESS_LOOP), _knative_config({"app.kubernetes.io/version": "1.15.0"})]
    finding = only(probes.run(evidence_of(objects, logs=SERVERLESS_LOOP_LOGS)), "PROBE_LIVENESS_KILLS_DURING_LOAD")
    assert "startupProbe" in _patch_body(finding)["spec"]["predictor"]["model"]
    assert "Knative accepts a startupProbe only from 1.15" not in finding.remediation


def test_unknown_knative_version_offers_both() -> None:
    objects = [*load_case(*SERVERLESS_LOOP), _knative_config({"app.kubernetes.io/version": "devel"})]
    finding = only(probes.run(evidence_of(objects, logs=SERVERLESS_LOOP_LOGS)), "PROBE_LIVENESS_KILLS_DURING_LOAD")
    assert "startupProbe" in _patch_body(finding)["spec"]["predictor"]["model"]
    assert (
        "Knative accepts a startupProbe only from 1.15 (knative/serving PR #15309) and the version is not visible "
        "here (no release label on knative-serving/config-deployment)" in finding.remediation
    )
    assert "hold the livenessProbe back instead with initialDelaySeconds 620" in finding.remediation


def test_raw_deployment_never_asks_for_the_knative_version() -> None:
    finding = only(
        probes.run(evidence_of(load_case(*RAW_LOOP), logs=RAW_LOOP_LOGS)), "PROBE_LIVENESS_KILLS_DURING_LOAD"
    )
    assert "Knative" not in finding.remediation


def test_a_kill_of_a_serving_engine_without_its_event_is_read_from_the_exit_code() -> None:
    """The Killing event aged out: the previous run, which had served, ended with exit code 137."""
    objects = load_case(*UNDER_LOAD, drop=("Event/llm/vllm-llm-predictor-6d5f8b7c9-q8w2e.killing",))
    findings = probes.run(evidence_of(objects, logs=UNDER_LOAD_LOGS, metrics=busy_metrics(48, 12)))
    finding = only(findings, "PROBE_FAILS_UNDER_LOAD")
    assert finding.level is Severity.CRITICAL
    assert "the previous run, which had served, was killed (exit code 137)" in finding.summary


def test_a_readiness_blip_on_a_busy_engine_is_only_a_note() -> None:
    """healthy-readiness-blip's case in RawDeployment: readiness timed out for 30 s on an engine serving for days."""
    stats = (
        "(APIServer pid=1) INFO [loggers.py:123] Engine 000: Avg prompt throughput: 905.1 tokens/s, "
        "Avg generation throughput: 1702.4 tokens/s, Running: 38 reqs, Waiting: 4 reqs"
    )
    logs = {(RAW_POD_NAME, "kserve-container"): stamped("2026-01-15T11:30:00", [(0.0, stats), (600.0, stats)])}
    objects = load_case(RAW, "checks/healthy/probes_readiness_blip.yaml")
    findings = probes.run(evidence_of(objects, logs=logs))
    assert serious(findings) == []
    note = only(findings, "PROBE_FAILS_UNDER_LOAD")
    assert note.level is Severity.INFO
    assert "the current run logged served requests from 2026-01-15T11:30:00Z" in note.summary
