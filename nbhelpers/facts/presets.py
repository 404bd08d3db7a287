"""The LLMInferenceServiceConfig presets an LLMInferenceService is merged over, and which one sets a value.

KServe merges, lowest precedence first, its well-known presets for the service's shape, then ``spec.baseRefs`` in
order, then the service's own spec (pkg/controller/v1alpha2/llmisvc/config_merge.go ``combineBaseRefsConfig``), and
records what it applied in ``status.appliedConfigs``. A name is looked up in the service's namespace, then in
KServe's (``getConfig``). A value of the vLLM container that a preset sets is changed by setting it in the
service's ``spec.template`` (docs/upstream-facts.md#llminferenceserviceconfig-presets).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nbhelpers.evidence.model import Evidence
from nbhelpers.sources import kinds, kube
from nbhelpers.sources.kube import KubeObject

PRESET = "Preset"
USER_REF = "UserRef"
SERVICE = "service"
# The well-known template KServe applies by shape when status.appliedConfigs is not there to say (config_merge.go).
SINGLE_NODE_TEMPLATE = "kserve-config-llm-template"
MULTI_NODE_TEMPLATE = "kserve-config-llm-worker-data-parallel"
PROBE_FIELDS = ("readinessProbe", "livenessProbe", "startupProbe")


@dataclass(frozen=True)
class Layer:
    """One step of the merge: a config (found or not) or the service's own spec."""

    name: str
    namespace: str
    source: str  # Preset | UserRef | service
    obj: KubeObject | None  # the config, the service, or None for a config that was not found

    def describe(self) -> str:
        if self.source == SERVICE:
            return f"the LLMInferenceService's own spec ({self.name})"
        return f"LLMInferenceServiceConfig {self.namespace}/{self.name} ({self.source})"


def layers(evidence: Evidence) -> list[Layer]:
    """The merge, lowest precedence first, ending with the service itself."""
    service = evidence.isvc
    applied = kube.status(service).get("appliedConfigs") or []
    if applied:
        named = [
            (str(entry.get("name")), str(entry.get("source") or PRESET), entry.get("namespace")) for entry in applied
        ]
    else:
        spec = kube.spec(service)
        well_known = MULTI_NODE_TEMPLATE if spec.get("worker") else SINGLE_NODE_TEMPLATE
        named = [(well_known, PRESET, None)]
        named += [(str(ref.get("name")), USER_REF, None) for ref in spec.get("baseRefs") or [] if ref.get("name")]
    found = []
    for name, source, namespace in named:
        config = _lookup(evidence, name, str(namespace) if namespace else None)
        where = kube.namespace(config) if config is not None else str(namespace or evidence.target.namespace)
        found.append(Layer(name, where, source, config))
    found.append(Layer(kube.name(service), kube.namespace(service), SERVICE, service))
    return found


def _lookup(evidence: Evidence, name: str, namespace: str | None) -> KubeObject | None:
    """The config ``name``: in ``namespace`` when KServe recorded it, else the service's namespace, then KServe's."""
    order = [namespace] if namespace else [evidence.target.namespace, evidence.site.kserve_namespace]
    configs = evidence.of(kinds.LLM_INFERENCE_SERVICE_CONFIG)
    for where in order:
        for config in configs:
            if kube.name(config) == name and kube.namespace(config) == where:
                return config
    return None


def missing_base_refs(evidence: Evidence) -> list[str]:
    """``spec.baseRefs`` names found in neither namespace, when both were read: KServe cannot render the service
    (``PresetsCombined=False``, reason ``ConfigNotFound``)."""
    namespaces = dict.fromkeys((evidence.target.namespace, evidence.site.kserve_namespace))
    for where in namespaces:
        if evidence.failure(f"{kinds.LLM_INFERENCE_SERVICE_CONFIG.key} in {where}") is not None:
            return []
    refs = [str(ref.get("name")) for ref in kube.spec(evidence.isvc).get("baseRefs") or [] if ref.get("name")]
    return [name for name in refs if _lookup(evidence, name, None) is None]


def _container(obj: Mapping[str, Any], section: str, name: str) -> Mapping[str, Any] | None:
    pod_spec = kube.spec(obj).get(section) or {}
    return next((c for c in kube.containers(pod_spec) if c.get("name") == name), None)


def field_origin(evidence: Evidence, field: str, section: str = "template") -> Layer | None:
    """The last layer that sets ``field`` on the vLLM container of ``section`` (template, worker): the one whose
    value the pods run with."""
    chosen = None
    for layer in layers(evidence):
        if layer.obj is None:
            continue
        container = _container(layer.obj, section, kube.LLMISVC_CONTAINER)
        if container is not None and field in container:
            chosen = layer
    return chosen


def template_origin(evidence: Evidence, section: str = "template") -> Layer | None:
    """The layer that supplied the vLLM container (the last one that gives it an image or a command)."""
    chosen = None
    for layer in layers(evidence):
        container = _container(layer.obj, section, kube.LLMISVC_CONTAINER) if layer.obj is not None else None
        if container is not None and any(key in container for key in ("image", "command", "args")):
            chosen = layer
    return chosen


def origin_line(evidence: Evidence, fields: Sequence[str]) -> str | None:
    """``container main: template from <layer>; readinessProbe from <layer>; ...`` for an LLMInferenceService, or
    None when no layer is known (an InferenceService, or nothing read)."""
    if not evidence.target.is_llmisvc:
        return None
    parts = []
    template = template_origin(evidence)
    if template is not None:
        parts.append(f"template from {template.describe()}")
    by_layer: dict[str, list[str]] = {}
    for field in fields:
        layer = field_origin(evidence, field)
        if layer is not None:
            by_layer.setdefault(layer.describe(), []).append(field)
    parts += [f"{', '.join(names)} from {where}" for where, names in by_layer.items()]
    missing = missing_base_refs(evidence)
    if missing:
        parts.append(f"spec.baseRefs not found in either namespace: {', '.join(missing)}")
    if not parts:
        return None
    return (
        f"container {kube.LLMISVC_CONTAINER}: "
        + "; ".join(parts)
        + " (a value set in the LLMInferenceService's spec.template overrides a preset's)"
    )
