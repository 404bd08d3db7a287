"""KServe's routes as its ingress reconcilers leave them.

KServe creates a RawDeployment's Ingress (or HTTPRoute) only once the predictor is ready:
``createRawIngress`` in kserve/kserve
pkg/controller/v1beta1/inferenceservice/reconcilers/ingress/kube_ingress_reconciler.go starts with
``if !isvc.Status.IsConditionReady(v1beta1.PredictorReady)``, sets IngressReady=False with the reason
"Predictor ingress not created" and returns no Ingress; the reconciler then returns before it writes
``status.url`` and ``status.address``. A predictor that was never ready therefore has no route and no URL.

Serverless behaves alike: ``createIngress`` in
pkg/controller/v1beta1/inferenceservice/reconcilers/ingress/ingress_reconciler.go returns no top-level
VirtualService ``<isvc>`` while PredictorReady is not true and sets IngressReady=False with the same reason;
``PropagateStatus`` (pkg/apis/serving/v1beta1/inference_service_status.go) copies the Knative Service's URL and
address into the predictor's component status only once that Service is Ready, so the reconciler finds no host,
writes no ``status.url`` and leaves IngressReady as it is. Knative's own VirtualServices for the revision
(``<ksvc>-ingress``, ``<ksvc>-mesh``) exist all the same.

With ``disableIngressCreation`` (kserve/kserve PR #3436) the reconciler skips the Ingress entirely and still writes
the URL from its domain template and IngressReady=True; owners then route with an Ingress of their own, often on a
host of their own (kserve/kserve#3286): ``isvc.user_ingress`` in the spec.
"""

from __future__ import annotations

import json

from nbhelpers.scenarios.objects import ObjectBuilder
from nbhelpers.scenarios.spec import ScenarioSpec
from nbhelpers.scenarios.state import Plan
from nbhelpers.sources.kube import KubeObject

NOT_CREATED_REASON = "Predictor ingress not created"


def never_ready(plan: Plan) -> bool:
    """No predictor pod was ever ready: KServe never saw PredictorReady=True."""
    return not any(pod.ready_at is not None for pod in plan.pods)


def nginx_route(spec: ScenarioSpec) -> tuple[str, str]:
    """The Ingress ingress-nginx routes the service's requests through, and its host: (name, host)."""
    isvc = spec.isvc
    if isvc.user_ingress is not None:
        return isvc.user_ingress["name"], isvc.user_ingress["host"]
    return isvc.name, f"{isvc.name}-{isvc.namespace}.example.com"


def adjust_objects(builder: ObjectBuilder, objects: list[KubeObject]) -> list[KubeObject]:
    """KServe's routes as its reconciler leaves them: no Ingress (RawDeployment) or top-level VirtualService
    (Serverless with Istio) yet for a predictor never ready, none at all (and the owner's Ingress instead) with
    disableIngressCreation."""
    plan = builder.plan
    if plan.spec.isvc.user_ingress is not None:
        return _user_managed(builder, objects)
    if not never_ready(plan) or not plan.routed:
        return objects
    if plan.serverless and not plan.expects_virtual_service:
        return objects
    name = plan.spec.isvc.name
    route_kind = "VirtualService" if plan.serverless else "Ingress"
    kept = []
    for obj in objects:
        if obj["kind"] == route_kind and _owned_by(obj, name):
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
    predictor = (status.get("components") or {}).get("predictor") or {}
    if "latestCreatedRevision" in predictor:  # Serverless: the Knative URL is copied only once the ksvc is Ready
        predictor.pop("url", None)
        predictor.pop("address", None)
    for condition in status.get("conditions") or []:
        if condition["type"] == "IngressReady":
            condition["status"] = "False"
            condition["reason"] = NOT_CREATED_REASON
            condition.pop("message", None)


def _user_managed(builder: ObjectBuilder, objects: list[KubeObject]) -> list[KubeObject]:
    """disableIngressCreation: no KServe Ingress, the owner's own one beside it; URL and IngressReady as usual."""
    name = builder.plan.spec.isvc.name
    kept = [obj for obj in objects if not (obj["kind"] == "Ingress" and _owned_by(obj, name))]
    for obj in kept:
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == "inferenceservice-config":
            ingress = json.loads(obj["data"]["ingress"])
            obj["data"]["ingress"] = json.dumps({**ingress, "disableIngressCreation": True}, sort_keys=True)
    return [*kept, _owner_ingress(builder)]


def _owner_ingress(builder: ObjectBuilder) -> KubeObject:
    """The owner's Ingress: KServe's would-be Ingress under the owner's name and host, no owner reference, with
    the owner's ingress-nginx timeouts and the external-dns host annotation of kserve/kserve#3286."""
    spec = builder.plan.spec
    name, host = nginx_route(spec)
    ingress = builder.ingress()
    metadata = ingress["metadata"]
    metadata["name"] = name
    metadata.pop("ownerReferences", None)
    metadata["annotations"] = {**metadata.get("annotations", {}), "external-dns.alpha.kubernetes.io/hostname": host}
    ingress["spec"]["rules"][0]["host"] = host
    return ingress
