"""Which pods' logs a triage reads (nbhelpers/evidence/gather.py choose_log_pods): at most three, the telling ones."""

from __future__ import annotations

from typing import Any

from nbhelpers.evidence.gather import MAX_LOG_PODS, choose_log_pods


def _pod(name: str, ready: bool, restarts: int = 0, created: str = "2026-01-15T11:00:00Z") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "llm",
            "creationTimestamp": created,
            "labels": {"serving.kserve.io/inferenceservice": "vllm-llm", "component": "predictor"},
        },
        "status": {
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [{"name": "kserve-container", "restartCount": restarts}],
        },
    }


def _names(pods: list[dict[str, Any]]) -> list[str]:
    return [pod["metadata"]["name"] for pod in choose_log_pods(pods)]


def test_most_restarts_newest_unready_and_one_healthy() -> None:
    pods = [
        _pod("a-ready", True),
        _pod("b-restarting", False, restarts=4),
        _pod("c-unready-old", False, created="2026-01-15T10:00:00Z"),
        _pod("d-unready-new", False, created="2026-01-15T11:30:00Z"),
    ]
    assert _names(pods) == ["b-restarting", "d-unready-new", "a-ready"]


def test_slots_left_go_to_the_other_unready_pods_newest_first() -> None:
    """knative/serving#14021: every pod is unready with no restart; one log alone leaves the others unexplained."""
    pods = [_pod(f"p{index}", False, created=f"2026-01-15T11:0{index}:00Z") for index in range(5)]
    assert _names(pods) == ["p4", "p3", "p2"]
    assert len(_names(pods)) == MAX_LOG_PODS
