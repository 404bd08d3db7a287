"""KServe's routes as its RawDeployment ingress reconciler leaves them.

KServe creates a RawDeployment's Ingress (or HTTPRoute) only once the predictor is ready:
``createRawIngress`` in kserve/kserve
pkg/controller/v1beta1/inferenceservice/reconcilers/ingress/kube_ingress_reconciler.go starts with
``if !isvc.Status.IsConditionReady(v1beta1.PredictorReady)``, sets IngressReady=False with the reason
"Predictor ingress not created" and returns no Ingress; the reconciler then returns before it writes
``status.url`` and ``status.address``. A predictor that was never ready therefore has no route and no URL.
(With ``disableIngressCreation`` KServe creates nothing and reports the URL and IngressReady=True at once.)
"""

from __future__ import annotations

from nbhelpers.scenarios.state import Plan
from nbhelpers.sources.kube import KubeObject

NOT_CREATED_REASON = "Predictor ingress not created"


def never_ready(plan: Plan) -> bool:
    """No predictor pod was ever ready: KServe never saw PredictorReady=True."""
    return not any(pod.ready_at is not None for pod in plan.pods)


def adjust_objects(plan: Plan, objects: list[KubeObject]) -> list[KubeObject]:
    """A RawDeployment whose predictor was never ready: no KServe Ingress, IngressReady=False, no URL yet."""
    if plan.serverless or not never_ready(plan) or not plan.routed:
        return objects
    name = plan.spec.isvc.name
    kept = []
    for obj in objects:
        if obj["kind"] == "Ingress" and _owned_by(obj, name):
            continue
        if obj["kind"] == "InferenceService" and obj["status"]:
            _awaiting_predictor(obj["status"])
        kept.append(obj)
    return kept


def _owned_by(obj: KubeObject, isvc: str) -> bool:
    return any(
        owner.get("kind") == "InferenceService" and owner.get("name") == isvc
        for owner in obj["metadata"].get("ownerReferences") or []
    )


def _awaiting_predictor(status: KubeObject) -> None:
    status.pop("url", None)
    status.pop("address", None)
    for condition in status.get("conditions") or []:
        if condition["type"] == "IngressReady":
            condition["status"] = "False"
            condition["reason"] = NOT_CREATED_REASON
            condition.pop("message", None)
