"""Findings and root-cause ranking (docs/contracts.md#findingsjson-v1).

Every finding's code comes from the code catalog, :data:`nbhelpers.findings.catalog.CATALOG`
(docs/contracts.md#finding-codes), which gives its default severity and its step; ranking follows the catalog's
cause graph (:func:`nbhelpers.findings.catalog.reachable`). This module imports the catalog,
never the reverse, so the two stay free of an import cycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nbhelpers.findings.patches import PatchPlan

from nbhelpers.findings.catalog import CATALOG, Severity, reachable


@dataclass(frozen=True)
class Patch:
    target: str
    body: str
    type: str = "merge"

    def to_json(self) -> dict[str, str]:
        return {"target": self.target, "type": self.type, "body": self.body}


@dataclass(frozen=True, kw_only=True)
class Fix:
    """What to change, and when a merge patch does it, the patch with the commands that apply and roll it back.

    ``manifest`` is an object to create once the patch is applied (``kubectl apply -f``), when the change needs one.
    """

    what: str
    patch: Patch | None = None
    apply_command: str = ""
    rollback_command: str = ""
    manifest: dict[str, Any] | None = None

    @classmethod
    def from_plan(
        cls, what: str, plan: PatchPlan | None, *, no_patch: str = "", manifest: dict[str, Any] | None = None
    ) -> Fix:
        """``what`` done by ``plan``; without a plan, ``what`` followed by ``no_patch``, the reason there is none."""
        if plan is None:
            return cls(what=f"{what} {no_patch}" if no_patch else what, manifest=manifest)
        return cls(
            what=what,
            patch=plan.patch,
            apply_command=plan.apply_command,
            rollback_command=plan.rollback_command,
            manifest=manifest,
        )

    @property
    def remediation(self) -> str:
        if not self.apply_command:
            return self.what
        return f"{self.what}\nApply:\n  {self.apply_command}\nRoll back:\n  {self.rollback_command}"


@dataclass(frozen=True, kw_only=True)
class Finding:
    code: str
    title: str
    summary: str
    objects: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    fix: Fix | None = None
    severity: Severity | None = None  # None: the catalog default

    def __post_init__(self) -> None:
        if self.code not in CATALOG:
            raise ValueError(f"unknown finding code {self.code}")
        if self.severity is None:
            object.__setattr__(self, "severity", CATALOG[self.code].severity)

    @property
    def step(self) -> str:
        return CATALOG[self.code].step

    @property
    def level(self) -> Severity:
        assert self.severity is not None
        return self.severity

    @property
    def remediation(self) -> str:
        return self.fix.remediation if self.fix is not None else ""

    @property
    def patch(self) -> Patch | None:
        return self.fix.patch if self.fix is not None else None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "code": self.code,
            "step": self.step,
            "severity": self.level.value,
            "title": self.title,
            "summary": self.summary,
            "objects": list(self.objects),
            "evidence": list(self.evidence),
            "remediation": self.remediation,
        }
        if self.patch is not None:
            body["patch"] = self.patch.to_json()
        return body


def apply_ignores(findings: Sequence[Finding], ignored: dict[str, str]) -> list[Finding]:
    """Report ignored codes as ``info`` with who ignored them; ``ignored`` maps code -> origin."""
    result = []
    for finding in findings:
        origin = ignored.get(finding.code)
        if origin:
            finding = replace(finding, severity=Severity.INFO, summary=f"{finding.summary} (ignored by {origin})")
        result.append(finding)
    return result


def rank_root_causes(findings: Iterable[Finding], step_order: Sequence[str]) -> list[str]:
    """Order the distinct critical/warning codes as docs/contracts.md#ranking says.

    A code that explains another comes first; ties go by severity, then by ``step_order`` (the
    order of the checks), then by name.
    """
    best: dict[str, Severity] = {}
    for finding in findings:
        if finding.level is Severity.INFO:
            continue
        current = best.get(finding.code)
        if current is None or finding.level.rank < current.rank:
            best[finding.code] = finding.level
    present = set(best)

    def tie_key(code: str) -> tuple[int, int, str]:
        return (best[code].rank, step_order.index(CATALOG[code].step), code)

    explains = {code: reachable(code) & present for code in present}
    ordered: list[str] = []
    remaining = set(present)
    while remaining:
        # A code is free when no remaining code explains it; cycles fall back to the tie key.
        free = [code for code in remaining if not any(code in explains[other] for other in remaining - {code})]
        chosen = min(free or remaining, key=tie_key)
        ordered.append(chosen)
        remaining.discard(chosen)
    return ordered
