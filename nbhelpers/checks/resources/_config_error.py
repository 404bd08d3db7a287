"""``RESOURCES_CONTAINER_CONFIG_ERROR``: the kubelet cannot build a container's configuration (a Secret or ConfigMap,
or a key in one, that an env ``valueFrom``, ``envFrom`` or a volume names does not exist), so the container is never
created: ``CreateContainerConfigError`` (``Init:CreateContainerConfigError`` on an init container)."""

from __future__ import annotations

import re

from nbhelpers.checks.resources._facts import ResourceFacts
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.sources import kube

_REASONS = frozenset({"CreateContainerConfigError"})
_MISSING = re.compile(
    r'(?:secrets?|configmaps?) "([^"]+)" not found|couldn\'t find key (\S+) in (Secret|ConfigMap) ([\w./-]+)',
    re.IGNORECASE,
)


def container_config_error(facts: ResourceFacts) -> Finding | None:
    lines: list[str] = []
    missing: list[str] = []
    objects: list[str] = []
    for pod in facts.pods:
        for field, kind in (("initContainerStatuses", "init container"), ("containerStatuses", "container")):
            for status in kube.status(pod).get(field) or []:
                waiting = (status.get("state") or {}).get("waiting") or {}
                if waiting.get("reason") not in _REASONS:
                    continue
                message = str(waiting.get("message") or "")
                lines.append(
                    f"Pod {kube.name(pod)} {kind} {status.get('name')}: waiting {waiting.get('reason')}"
                    + (f": {message!r}" if message else "")
                )
                objects.append(kube.ref(pod))
                if match := _MISSING.search(message):
                    if match.group(1):
                        missing.append(f"{match.group(0).split(' ')[0].rstrip('s')} {match.group(1)}")
                    else:
                        missing.append(f"key {match.group(2)} in {match.group(3)} {match.group(4)}")
    if not lines:
        return None
    what = ", ".join(dict.fromkeys(missing)) or "a Secret or ConfigMap it references"
    namespace = kube.namespace(facts.evidence.isvc)
    return Finding(
        code="RESOURCES_CONTAINER_CONFIG_ERROR",
        title=f"container cannot be created: missing {what}",
        summary=(
            f"The kubelet cannot create the container: {what} does not exist (CreateContainerConfigError). The "
            "container never runs, so the pod never becomes Ready; it retries until the reference resolves."
        ),
        objects=(facts.isvc_ref, *dict.fromkeys(objects)),
        evidence=tuple(lines),
        fix=Fix(
            what=f"Create the missing {what} in namespace {namespace} (or correct the name/key the pod references, "
            "or mark the reference optional: true if the container can run without it). The pod starts by itself "
            "once it resolves."
        ),
    )
