"""summary.md: the postmortem-style draft of an incident, from a :class:`~nbhelpers.triage.TriageResult`.

Coverage (what could not be seen and why), a summary paragraph, the impact with numbers, root causes,
findings with their evidence, action items with patches, a timeline (events, metric changes, the
incident bounds) and the steps table. Its text helpers (``utc_text``, ``window_text``,
``coverage_line``, ``impact_lines``, ``ordered_findings``...) are reused by the notebook display,
training and the fleet index so every view words things the same way.

The impact and the timeline read the metrics through :mod:`nbhelpers.facts.traffic`, as the
charts do, so the numbers in summary.md and the charts agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import pairwise
from typing import Any

from nbhelpers.evidence.model import Evidence, ReadRecord
from nbhelpers.facts.traffic import finite, peak_sample, restart_increases, status_rates, sum_by_time, usable
from nbhelpers.findings.catalog import CATALOG, Severity
from nbhelpers.findings.model import Finding
from nbhelpers.metrics.series import SamplePairs
from nbhelpers.sources import kinds, kube
from nbhelpers.sources.kube import event_interval
from nbhelpers.triage import TriageResult
from nbhelpers.util.times import Window

EVENT_TTL_SECONDS = 3600
MAX_TIMELINE_EVENTS = 60
MAX_ITEMS_PER_GROUP = 8


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


def utc_text(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _number(value: float) -> str:
    if value >= 100 or value == int(value):
        return f"{value:,.0f}"
    return f"{value:.2f}" if value >= 1 else f"{value:.3g}"


def impact_lines(evidence: Evidence) -> list[str]:
    """What users and pods went through, with numbers (metrics first, then the objects' current state)."""
    lines: list[str] = []
    rates = status_rates(evidence)
    if rates is not None:
        errors, everything = rates.matching("5"), rates.matching("")
        peak = peak_sample(errors)
        failed = sum(v for _, v in errors) * rates.step
        served = sum(v for _, v in everything) * rates.step
        if peak is not None and peak[1] > 0:
            share = f" ({failed / served:.1%} of all requests)" if served else ""
            codes = ", ".join(
                code for code in rates.by_code if code.startswith("5") and peak_sample(rates.by_code[code])
            )
            lines.append(
                f"5xx responses at {rates.where}: about {_number(failed)} in the window{share}, "
                f"peak {_number(peak[1])}/s at {utc_text(_utc(peak[0]))} (codes {codes})."
            )
        else:
            lines.append(f"No 5xx responses recorded at {rates.where} ({_number(served)} requests in the window).")
    latency_parts = []
    for query_id, name in (("vllm_e2e_p95", "end-to-end p95"), ("vllm_ttft_p95", "time-to-first-token p95")):
        data = usable(evidence, query_id)
        peak = peak_sample(sum_by_time(data.series)) if data else None
        if peak is not None:
            latency_parts.append(f"{name} peaked at {_number(peak[1])} s ({utc_text(_utc(peak[0]))})")
    if latency_parts:
        lines.append("vLLM latency: " + "; ".join(latency_parts) + ".")
    waiting = usable(evidence, "vllm_waiting")
    waiting_peak = peak_sample(sum_by_time(waiting.series)) if waiting else None
    if waiting_peak is not None and waiting_peak[1] > 0:
        lines.append(f"Requests waiting in vLLM's queue peaked at {_number(waiting_peak[1])}.")
    restarts = restart_increases(evidence)
    if restarts:
        restarted = {pod for _, _, pod in restarts}
        total = sum(delta for _, delta, _ in restarts)
        lines.append(f"{_number(total)} container restarts in the window across {len(restarted)} pod(s).")
    ready = usable(evidence, "pod_ready")
    ready_samples = sum_by_time(ready.series) if ready else []
    if ready_samples:
        low, high = min(v for _, v in ready_samples), max(v for _, v in ready_samples)
        if low == high:
            lines.append(f"Ready {evidence.target.pods_noun}: {_number(low)} throughout the window.")
        else:
            lines.append(f"Ready {evidence.target.pods_noun} ranged from {_number(low)} to {_number(high)}.")
    pods = [pod for pod in evidence.of(kinds.POD) if kube.is_predictor(pod)]
    if pods:
        ready_now = sum(1 for pod in pods if kube.pod_ready(pod))
        restarts_now = sum(kube.restart_count(pod) for pod in pods)
        lines.append(
            f"At {utc_text(evidence.observed_at)}: {len(pods)} {evidence.target.pods_noun[:-1]}(s), {ready_now} ready, "
            f"{restarts_now} restart(s) in their container statuses."
        )
    return lines


# -------------------------------------------------------------------------------------------- coverage


def _kind_of(what: str) -> str:
    return what.split(" ", 1)[0].split("/", 1)[0]


def _group(notes: dict[str, list[str]], heading: str, item: str) -> None:
    items = notes.setdefault(heading, [])
    if item not in items:
        items.append(item)


def _classify(record: ReadRecord, notes: dict[str, list[str]]) -> None:
    what, status = record.what, record.status
    if what == "prometheus" and status == "skipped":
        _group(notes, "no Prometheus configured: no metrics were read", "")
    elif what.startswith("prometheus"):
        _group(notes, f"metrics {status}", record.reason or what)
    elif what.startswith("logs ") and status == "missing":
        _group(notes, "logs not available (the pod or its previous container is gone)", what.removeprefix("logs "))
    elif status == "forbidden":
        _group(notes, "forbidden (403)", what)
    elif status == "not_installed":
        _group(notes, "not installed (CRD missing)", _kind_of(what))
    elif status == "missing":
        _group(notes, "not found (404)", what)
    elif status == "skipped":
        _group(notes, "not read", f"{what} ({record.reason})" if record.reason else what)
    else:
        _group(notes, f"read failed ({status})", f"{what}: {record.reason}" if record.reason else what)


def _event_ttl_note(evidence: Evidence) -> str:
    if evidence.window.seconds <= EVENT_TTL_SECONDS:
        return ""
    hours = evidence.window.seconds / 3600
    if evidence.sources.get("cluster") == "bundle":
        return (
            f"events: the window spans {hours:.1f} h but Kubernetes keeps events about an hour, so this bundle "
            "holds only the events still alive when it was captured"
        )
    return (
        f"events: the window spans {hours:.1f} h but Kubernetes keeps events about an hour; older events are "
        "only in a bundle captured during the incident"
    )


def coverage_notes(result: TriageResult) -> list[str]:
    """What the triage could not see and why, one note per cause."""
    grouped: dict[str, list[str]] = {}
    for record in result.evidence.not_seen():
        _classify(record, grouped)
    notes = []
    for heading, items in grouped.items():
        shown = [item for item in items if item][:MAX_ITEMS_PER_GROUP]
        more = len([item for item in items if item]) - len(shown)
        listed = ", ".join(shown) + (f" and {more} more" if more > 0 else "")
        notes.append(f"{heading}: {listed}" if listed else heading)
    notes.extend(f"step {step.id} could not complete: {step.reason}" for step in result.steps if step.status == "error")
    if result.deadline_hit:
        notes.append("the deadline stopped the run before every step ran")
    ttl = _event_ttl_note(result.evidence)
    if ttl:
        notes.append(ttl)
    return notes


def coverage_line(result: TriageResult) -> str:
    notes = coverage_notes(result)
    if not notes:
        return "Coverage: complete: every read succeeded."
    if not result.partial:
        return "Coverage: every read succeeded; not covered: " + "; ".join(notes) + "."
    return "Coverage: could not see everything: " + "; ".join(notes) + "."


# -------------------------------------------------------------------------------------------- timeline


@dataclass(frozen=True)
class TimelineEntry:
    at: datetime
    text: str


def _event_entry(event: dict[str, Any]) -> TimelineEntry | None:
    first, last = event_interval(event)
    if first is None:
        return None
    involved = event.get("involvedObject") or event.get("regarding") or {}
    count = int(event.get("count") or (event.get("series") or {}).get("count") or 1)
    repeat = f" (x{count}, last {utc_text(last)})" if count > 1 and last is not None and last != first else ""
    message = " ".join(str(event.get("message") or event.get("note") or "").split())
    return TimelineEntry(
        first,
        f"event {event.get('type', 'Normal')} {event.get('reason', '')} on "
        f"{involved.get('kind', '?')}/{involved.get('name', '?')}: {message}{repeat}",
    )


def _transitions(samples: SamplePairs, name: str) -> list[TimelineEntry]:
    """Ready pods dropping to zero and coming back."""
    entries = []
    for (_, before), (t, after) in pairwise(samples):
        if before > 0 and after == 0:
            entries.append(TimelineEntry(_utc(t), f"{name} dropped to 0 (from {_number(before)})"))
        elif before == 0 and after > 0:
            entries.append(TimelineEntry(_utc(t), f"{name} back to {_number(after)}"))
    if samples and samples[0][1] == 0:
        entries.insert(0, TimelineEntry(_utc(samples[0][0]), f"{name} at 0 when the window opens"))
    return entries


def metric_timeline(evidence: Evidence) -> list[TimelineEntry]:
    """Notable changes in the metrics: first/last 5xx, ready pods at zero, restarts, queueing, full KV cache."""
    entries: list[TimelineEntry] = []
    rates = status_rates(evidence)
    if rates is not None:
        errors = [(t, v) for t, v in rates.matching("5") if v > 0]
        if errors:
            entries.append(TimelineEntry(_utc(errors[0][0]), f"first 5xx at {rates.where} ({_number(errors[0][1])}/s)"))
            peak = peak_sample(errors)
            assert peak is not None
            entries.append(TimelineEntry(_utc(peak[0]), f"5xx peak at {rates.where} ({_number(peak[1])}/s)"))
            entries.append(
                TimelineEntry(_utc(errors[-1][0]), f"last 5xx at {rates.where} ({_number(errors[-1][1])}/s)")
            )
    ready = usable(evidence, "pod_ready")
    if ready is not None:
        entries.extend(_transitions(sum_by_time(ready.series), f"ready {evidence.target.pods_noun}"))
    restarts = restart_increases(evidence)
    if restarts:
        first_t, _, first_pod = restarts[0]
        entries.append(TimelineEntry(_utc(first_t), f"first container restart in the window ({first_pod})"))
        if len(restarts) > 1:
            last_t, _, last_pod = restarts[-1]
            total = sum(delta for _, delta, _ in restarts)
            entries.append(
                TimelineEntry(_utc(last_t), f"last container restart ({last_pod}); {_number(total)} in total")
            )
    waiting = usable(evidence, "vllm_waiting")
    queued = [(t, v) for t, v in sum_by_time(waiting.series) if v > 0] if waiting else []
    if queued:
        entries.append(
            TimelineEntry(_utc(queued[0][0]), f"requests start waiting in vLLM's queue ({_number(queued[0][1])})")
        )
    kv = usable(evidence, "vllm_kv_cache_usage")
    full = [(t, v) for item in (kv.series if kv else ()) for t, v in finite(item.samples) if v >= 0.95]
    if full:
        moment, value = min(full)
        entries.append(TimelineEntry(_utc(moment), f"KV cache usage reaches {value:.0%}"))
    return entries


def timeline(result: TriageResult) -> list[TimelineEntry]:
    """Events, metric changes and the incident bounds, by time."""
    events = [entry for entry in map(_event_entry, result.evidence.events) if entry is not None]
    entries = events[:MAX_TIMELINE_EVENTS] + metric_timeline(result.evidence)
    if result.incident is not None:
        entries.append(TimelineEntry(result.incident.start, "incident starts (as reported)"))
        entries.append(TimelineEntry(result.incident.end, "incident ends (as reported)"))
    entries.sort(key=lambda entry: entry.at)
    if len(events) > MAX_TIMELINE_EVENTS:
        entries.append(
            TimelineEntry(events[-1].at, f"... and {len(events) - MAX_TIMELINE_EVENTS} later events not listed")
        )
    return entries


# --------------------------------------------------------------------------------------------- summary


def findings_by_code(result: TriageResult) -> dict[str, Finding]:
    """The most severe finding of each code."""
    chosen: dict[str, Finding] = {}
    for finding in result.findings:
        current = chosen.get(finding.code)
        if current is None or finding.level.rank < current.level.rank:
            chosen[finding.code] = finding
    return chosen


def ordered_findings(result: TriageResult) -> list[Finding]:
    """Findings in root-cause order, then the rest (info) by step order."""
    rank = {code: index for index, code in enumerate(result.root_causes)}
    return sorted(
        result.findings,
        key=lambda finding: (rank.get(finding.code, len(rank)), finding.level.rank, finding.code),
    )


def window_text(window: Window) -> str:
    minutes = window.seconds / 60
    length = f"{minutes / 60:.1f} h" if minutes >= 90 else f"{minutes:.0f} min"
    return f"{utc_text(window.start)} to {utc_text(window.end)} ({length})"


def _summary_paragraph(result: TriageResult) -> str:
    evidence = result.evidence
    counts = {level: sum(1 for f in result.findings if f.level is level) for level in Severity}
    ran = sum(1 for step in result.steps if step.status in ("ok", "findings"))
    mode = "" if evidence.target.is_llmisvc else f" (deployment mode {evidence.deployment_mode})"
    text = (
        f"Triage of {evidence.target.kind} {evidence.target.namespace}/{evidence.target.isvc}"
        f"{mode} over {window_text(evidence.window)}, "
        f"from {evidence.sources.get('cluster', '?')} cluster data and "
        f"{evidence.sources.get('prometheus', 'no')} metrics. "
        f"{ran} of {len(result.steps)} steps ran; {counts[Severity.CRITICAL]} critical, "
        f"{counts[Severity.WARNING]} warning and {counts[Severity.INFO]} info finding(s)."
    )
    if result.root_causes:
        top = findings_by_code(result)[result.root_causes[0]]
        text += f" Most likely root cause: {top.code}: {top.title}."
    else:
        text += " No critical or warning finding."
    if result.partial:
        text += " The result is partial (see coverage)."
    return text


_MARKUP = str.maketrans({"<": "&lt;", ">": "&gt;", "[": "\\[", "]": "\\]", "`": "\\`", "\\": "\\\\"})


def inline(text: str) -> str:
    """Text from the cluster as plain markdown: no HTML, link, image or code span can start in it, and no
    control character (terminal escapes, newlines) survives. Names and messages are set by whoever can write
    to the cluster; summary.md is pasted into tickets and chat, where markup would render."""
    return "".join(char if char.isprintable() else " " for char in text).translate(_MARKUP)


def _lines(text: str) -> str:
    """:func:`inline` for each line of a text whose line breaks are ours (remediation: what, Apply, Roll back)."""
    return "\n".join(inline(line) for line in text.split("\n"))


def _fence(body: str) -> str:
    """A code fence longer than any run of backticks in ``body``, so the body cannot close it."""
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    return "`" * max(3, longest + 1)


def _finding_markdown(finding: Finding) -> list[str]:
    lines = [f"### {finding.code} ({finding.level.value}, step {finding.step})", "", f"**{inline(finding.title)}**", ""]
    lines += [inline(finding.summary), ""]
    if finding.objects:
        lines += ["Objects: " + ", ".join(inline(ref) for ref in finding.objects), ""]
    if finding.evidence:
        lines += ["Evidence:", ""] + [f"- {inline(item)}" for item in finding.evidence] + [""]
    lines += [f"Why it matters: {CATALOG[finding.code].why}", ""]
    return lines


def _code_block(language: str, body: str) -> list[str]:
    """``body`` verbatim in a fenced block of a list item: copyable as is, and it cannot close its fence."""
    fence = _fence(body)
    return [f"   {fence}{language}", *[f"   {line}" for line in body.splitlines()], f"   {fence}"]


def _action_markdown(index: int, finding: Finding) -> list[str]:
    fix = finding.fix
    if fix is None:
        return [f"{index}. **{finding.code}**: {_lines(finding.remediation) or 'no remediation recorded'}"]
    lines = [f"{index}. **{finding.code}**: {inline(fix.what) or 'no remediation recorded'}"]
    if fix.apply_command:
        lines += ["", "   Apply:", "", *_code_block("sh", fix.apply_command)]
        lines += ["", "   Roll back:", "", *_code_block("sh", fix.rollback_command)]
    if fix.patch is not None:
        lines += ["", f"   Patch ({fix.patch.type}) for {inline(fix.patch.target)}:", ""]
        lines += _code_block("yaml", fix.patch.body.rstrip("\n"))
    return lines


def summary_markdown(result: TriageResult) -> str:
    """A postmortem-style draft: coverage, summary, impact, causes, evidence, actions, timeline."""
    evidence = result.evidence
    target = f"{evidence.target.namespace}/{evidence.target.isvc}"
    lines = [f"# Incident draft: {inline(target)}", "", f"_{inline(coverage_line(result))}_", "", "## Summary", ""]
    lines += [inline(_summary_paragraph(result)), ""]
    lines += [f"- Analysis window: {window_text(evidence.window)}"]
    if result.incident is not None:
        lines += [f"- Incident window: {window_text(result.incident)}"]
    versions = ", ".join(f"{name} {value}" for name, value in sorted(evidence.versions.items()))
    lines += [
        f"- Versions seen: {inline(versions) or 'none detected'}",
        f"- Generated: {utc_text(result.generated_at)}",
        "",
    ]

    lines += ["## Impact", ""]
    impact = impact_lines(evidence)
    lines += (
        [f"- {inline(line)}" for line in impact] if impact else ["- No metrics or pods to measure the impact from."]
    )
    lines += [""]

    lines += ["## Root causes (most likely first)", ""]
    by_code = findings_by_code(result)
    if result.root_causes:
        for index, code in enumerate(result.root_causes, 1):
            finding = by_code[code]
            lines += [f"{index}. **{code}** ({finding.level.value}): {inline(finding.title)}"]
    else:
        lines += ["No critical or warning finding."]
    lines += ["", "## Findings and evidence", ""]
    ordered = ordered_findings(result)
    for finding in ordered:
        lines += _finding_markdown(finding)
    if not ordered:
        lines += ["None.", ""]

    lines += ["## Action items", ""]
    actionable = [finding for finding in ordered if finding.level is not Severity.INFO]
    for index, finding in enumerate(actionable, 1):
        lines += _action_markdown(index, finding)
    if not actionable:
        lines += ["None."]
    lines += [""]

    lines += ["## Timeline (UTC)", ""]
    entries = timeline(result)
    lines += [f"- {utc_text(entry.at)}: {inline(entry.text)}" for entry in entries] or [
        "- Nothing timestamped in the window."
    ]
    lines += ["", "## Steps", "", "| step | status | seconds | reason |", "|---|---|---|---|"]
    for step in result.steps:
        reason = inline(step.reason).replace("|", "\\|")
        lines += [f"| {step.id} | {step.status} | {step.seconds:.2f} | {reason} |"]
    return "\n".join(lines).rstrip("\n") + "\n"
