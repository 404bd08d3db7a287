"""``RESOURCES_IMAGE_PULL_FAILED``: an image of the predictor cannot be pulled (any container, init and sidecars
included) or, on Serverless, Knative cannot resolve its tag to a digest, so no pod ever runs it.

Knative resolves tags to digests in its controller's pod, not on the node: a Revision whose image it cannot resolve
is ``ContainerMissing`` ("failed to resolve image to digest") and gets no pod at all, even when the nodes could pull
the image (config-deployment's registries-skipping-tag-resolving lists the registries it skips)."""

from __future__ import annotations

import re

from nbhelpers.checks.resources._facts import ResourceFacts
from nbhelpers.facts import common
from nbhelpers.facts.init_containers import IMAGE_WAITING
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.sources import kinds, kube

_BARE_REASON = re.compile(r"Error: \w+")
_DIGEST = re.compile(r"failed to resolve image to digest|Unable to fetch image", re.IGNORECASE)
_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("registry unreachable", re.compile(r"connection refused|no such host|i/o timeout|dial tcp|TLS|x509", re.I)),
    ("access denied", re.compile(r"\b40[13]\b|unauthori[sz]ed|denied|forbidden|authentication required", re.I)),
    ("not found", re.compile(r"\b404\b|not found|manifest unknown|name unknown|does not exist", re.I)),
    ("invalid name", re.compile(r"InvalidImageName|invalid reference format|couldn't parse image", re.I)),
)

_FIX = {
    "registry unreachable": "Make the registry reachable from where the pull happens (DNS, firewall, proxy, the "
    "registry's TLS certificate trusted).",
    "access denied": "Give the pull credentials: an imagePullSecret on the pod's service account (or the "
    "InferenceService's imagePullSecrets) for that registry; if the registry denies the repository itself, the "
    "image is gone or private: point at an image that exists (kserve#6215: the preset's image was no longer "
    "pullable).",
    "not found": "Correct the image reference (registry, repository, tag): the registry has no such image.",
    "invalid name": "Correct the image reference: it is not a valid image name.",
    "unknown": "Read the pull error (kubectl describe pod <pod>, the Failed events) and fix the image reference or "
    "the pull credentials.",
}


def _classify(text: str) -> str:
    return next((name for name, pattern in _CLASSES if pattern.search(text)), "unknown")


def image_pull_failed(facts: ResourceFacts) -> Finding | None:
    lines: list[str] = []
    objects: list[str] = []
    texts: list[str] = []
    digest = False
    event_lines: list[str] = []
    event_texts: list[str] = []
    for name in _revision_names(facts):
        revision = common.named(facts.evidence, kinds.KNATIVE_REVISION, name)
        if revision is None:
            continue
        for condition_type in ("ContainerHealthy", "Ready"):
            condition = kube.condition(revision, condition_type)
            if condition is None or str(condition.get("status")) != "False":
                continue
            message = str(condition.get("message") or "")
            if condition.get("reason") == "ContainerMissing" or _DIGEST.search(message):
                digest = True
                lines.append(f"{kube.ref(revision)} condition {kube.describe_condition(condition)}")
                objects.append(kube.ref(revision))
                texts.append(message)
                break
    for pod in facts.pods:
        status = kube.status(pod)
        for field in ("initContainerStatuses", "containerStatuses"):
            for container in status.get(field) or []:
                waiting = (container.get("state") or {}).get("waiting") or {}
                reason = str(waiting.get("reason") or "")
                if reason not in IMAGE_WAITING:
                    continue
                message = str(waiting.get("message") or "")
                lines.append(
                    f"Pod {kube.name(pod)} container {container.get('name')} ({container.get('image') or '?'}): "
                    f"waiting {reason}" + (f": {message!r}" if message else "")
                )
                objects.append(kube.ref(pod))
                texts.append(f"{reason} {message}")
        for event in facts.evidence.events_about("Pod", kube.name(pod)):
            message = str(event.get("message") or event.get("note") or "")
            # The kubelet pairs each "Failed to pull image ...: <error>" with a bare "Error: ErrImagePull" (and
            # "Error: ImagePullBackOff" while it backs off): only the first says why.
            if _BARE_REASON.fullmatch(message.strip()):
                continue
            if event.get("reason") in ("Failed", "ErrImagePull") and "pull" in message.lower():
                event_lines.append(f"event {event.get('reason')} on Pod {kube.name(pod)}: {common.shorten(message)!r}")
                event_texts.append(message)
    if not lines:  # a pull that failed once and then succeeded is no finding
        return None
    lines.extend(event_lines)
    texts = [*event_texts, *texts]
    cause = _classify(" ".join(texts))
    where = "Knative's controller cannot resolve the image to a digest" if digest else "the kubelet cannot pull it"
    quoted = next((t.strip() for t in texts if t.strip()), "")
    if len(quoted) > 300:  # the image is named first and the registry's answer ends the message: keep both ends
        quoted = quoted[:100] + "…" + quoted[-200:]
    summary = (
        f"An image of the predictor is unavailable: {where} ({cause}). "
        + (f"The error: {quoted!r}. " if quoted else "")
        + "No container runs it, so no pod becomes Ready: the revision, the endpoints and the InferenceService stay "
        "not ready however long one waits; routing and timeouts are not at fault."
    )
    fix = _FIX[cause]
    if digest:
        fix = (
            "Knative resolves tags to digests from its controller's pod: make the registry reachable and readable "
            "from there (its pull secret on the Revision's service account), or list the registry under "
            "registries-skipping-tag-resolving in the config-deployment ConfigMap (knative-serving), or reference "
            "the image by digest. " + fix
        )
    return Finding(
        code="RESOURCES_IMAGE_PULL_FAILED",
        title=f"image cannot be {'resolved' if digest else 'pulled'} ({cause})",
        summary=summary,
        objects=(facts.isvc_ref, *dict.fromkeys(objects)),
        evidence=tuple(dict.fromkeys(lines)),
        fix=Fix(what=fix),
    )


def _revision_names(facts: ResourceFacts) -> list[str]:
    names = [name for name, _ in common.traffic_revisions(facts.evidence)]
    latest = common.latest_revision_name(facts.evidence)
    if latest and latest not in names:
        names.append(latest)
    return names
