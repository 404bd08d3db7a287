"""Which services a scope holds: InferenceServices and LLMInferenceServices, one LIST per kind.

``fleet`` and the notebook's service picker both start here. A kind whose CRD is not installed is a
fact about the cluster (``not_installed``), not a failure: the other kind is still listed. Any other
failure (403, timeout) is kept with its reason for the caller to report; only this module decides
what each kind's LIST answered, the callers decide what to do about it.
"""

from __future__ import annotations

from dataclasses import dataclass

from nbhelpers.errors import ReadFailed
from nbhelpers.evidence.model import INFERENCE_SERVICE, LLM_INFERENCE_SERVICE, TARGET_KINDS, Target
from nbhelpers.sources import kinds, kube
from nbhelpers.sources.base import ClusterSource
from nbhelpers.util.redaction import redact_text

API_KINDS: dict[str, kinds.Kind] = {
    INFERENCE_SERVICE: kinds.INFERENCE_SERVICE,
    LLM_INFERENCE_SERVICE: kinds.LLM_INFERENCE_SERVICE,
}


@dataclass(frozen=True)
class KindListed:
    """What the LIST of one kind answered: ``ok`` with ``count`` services, or a ``ReadFailed`` status."""

    kind: str  # InferenceService | LLMInferenceService
    status: str  # ok | not_installed | forbidden | timeout | unreachable | error
    count: int = 0
    reason: str = ""  # redacted, one line

    @property
    def installed(self) -> bool:
        return self.status != "not_installed"

    @property
    def failed(self) -> bool:
        """True when the kind may hold services nobody saw (not for a CRD that is not installed)."""
        return self.status not in ("ok", "not_installed")

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "status": self.status, "services": self.count, "reason": self.reason}


@dataclass(frozen=True)
class Listing:
    """The services found, sorted by namespace, name and kind, and what each kind's LIST answered."""

    targets: tuple[Target, ...]
    kinds: tuple[KindListed, ...]

    def of(self, kind: str) -> KindListed:
        return next(listed for listed in self.kinds if listed.kind == kind)


def list_kind(cluster: ClusterSource, kind: str, namespace: str | None) -> list[Target]:
    """The services of one kind in ``namespace`` (``None``: every namespace). Raises ``ReadFailed``."""
    found = cluster.list(API_KINDS[kind], namespace)
    return [Target(kube.namespace(obj), kube.name(obj), kind) for obj in found]


def target_order(target: Target) -> tuple[str, str, int]:
    """Namespace, then name, then InferenceService before LLMInferenceService."""
    return (target.namespace, target.isvc, TARGET_KINDS.index(target.kind))


def list_targets(cluster: ClusterSource, namespace: str | None) -> Listing:
    """Both kinds in ``namespace`` (``None``: every namespace); a failed LIST is recorded, never raised."""
    targets: list[Target] = []
    answered = []
    for kind in TARGET_KINDS:
        try:
            found = list_kind(cluster, kind, namespace)
        except ReadFailed as failure:
            answered.append(_failed(kind, failure))
            continue
        targets += found
        answered.append(KindListed(kind, "ok", len(found)))
    return Listing(tuple(sorted(targets, key=target_order)), tuple(answered))


def _failed(kind: str, failure: ReadFailed) -> KindListed:
    """A LIST that failed. 404 on a collection means the API group is served (another CRD of it is
    installed) but not this resource: its CRD is not installed, e.g. KServe before 0.16 has no
    LLMInferenceService."""
    if failure.status == "missing":
        api = API_KINDS[kind]
        return KindListed(
            kind, "not_installed", reason=f"no {api.plural} in API group {api.group} (404): CRD not installed"
        )
    return KindListed(kind, failure.status, reason=" ".join(redact_text(failure.reason).split()))
