"""``LLMISVC_PRESET_NOT_FOUND``: an LLMInferenceServiceConfig the service is merged over exists in neither the
service's namespace nor KServe's, so KServe stops at ``PresetsCombined=False`` (reason ``ConfigNotFound``) and renders
nothing for it (pkg/controller/v1alpha2/llmisvc/config_merge.go ``reconcileBaseRefs``, ``getConfig``).

Reports: kserve/kserve#5047 (``parallelism.pipeline`` needs ``kserve-config-llm-worker-pipeline-parallel``, a
preset KServe does not ship), kserve/kserve#5035 (``kserve-config-llm-template`` missing after an install: the
service never turns ready). Without this finding the missing pool or route KServe never created ranked first.
"""

from __future__ import annotations

import re

from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import presets
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.sources import kinds, kube

# KServe's messages: 'LLMInferenceServiceConfig "<name>" not found in namespaces [...]' (current) and
# 'failed to get LLMInferenceServiceConfig "<name>" from namespaces [...]' (before 0.17).
_NAMED = re.compile(r'LLMInferenceServiceConfig \\?"([^"\\]+)\\?" (?:not found|from namespaces)')
WELL_KNOWN_PREFIX = "kserve-config-llm-"


def preset_not_found(evidence: Evidence) -> Finding | None:
    condition = kube.condition(evidence.isvc, "PresetsCombined")
    named: list[str] = []
    if condition is not None and str(condition.get("status")) == "False":
        named = _NAMED.findall(str(condition.get("message") or ""))
    missing = list(dict.fromkeys([*named, *presets.missing_base_refs(evidence)]))
    if not missing:
        return None
    namespace, system = evidence.target.namespace, evidence.site.kserve_namespace
    lines = [f"condition {kube.describe_condition(condition)}"] if condition is not None else []
    refs = [str(ref.get("name")) for ref in kube.spec(evidence.isvc).get("baseRefs") or [] if ref.get("name")]
    if refs:
        lines.append(f"spec.baseRefs: {', '.join(refs)}")
    for where in dict.fromkeys((namespace, system)):
        present = sorted(
            kube.name(obj) for obj in evidence.of(kinds.LLM_INFERENCE_SERVICE_CONFIG) if kube.namespace(obj) == where
        )
        lines.append(f"LLMInferenceServiceConfigs in {where}: {', '.join(present) or 'none'}")
    names = ", ".join(missing)
    return Finding(
        code="LLMISVC_PRESET_NOT_FOUND",
        title=f"LLMInferenceServiceConfig {names} not found: KServe renders nothing for the service",
        summary=f"The service is merged over LLMInferenceServiceConfig {names}, which exists neither in {namespace} "
        f"nor in {system}. KServe stops there (PresetsCombined=False, ConfigNotFound) and creates no vLLM "
        "workload, HTTPRoute or InferencePool, so every request fails; the missing route and pool are this, "
        "not faults of their own.",
        objects=(kube.ref(evidence.isvc),),
        evidence=tuple(lines),
        fix=Fix(what=_remedy(missing, refs, namespace, system)),
    )


def _remedy(missing: list[str], refs: list[str], namespace: str, system: str) -> str:
    parts = []
    chosen = [name for name in missing if name in refs]
    well_known = [name for name in missing if name not in refs and name.startswith(WELL_KNOWN_PREFIX)]
    if chosen:
        parts.append(
            f"create {', '.join(chosen)} in {namespace} (or {system}), or correct or remove it in spec.baseRefs"
        )
    if well_known:
        parts.append(
            f"{', '.join(well_known)} is a preset KServe picks by the service's shape: install the "
            f"LLMInferenceServiceConfig presets of your KServe version in {system}, provide a config of that name in "
            f"{namespace}, or choose a shape whose preset exists (KServe ships data-parallel multi-node presets, not "
            "pipeline-parallel ones)"
        )
    others = [name for name in missing if name not in chosen and name not in well_known]
    if others:
        parts.append(f"create {', '.join(others)} in {namespace} or {system}")
    return "; ".join(parts) + ". KServe renders the service once the merge succeeds."
