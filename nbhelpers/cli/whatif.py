"""``kserve-runbook whatif hpa|kpa``: replay a metric series through an autoscaler (docs/contracts.md#what-if-replay).

The command reads plain files so it works on anything an SRE can export: an
HPA or InferenceService manifest (``kubectl get -o yaml``), an optional
Knative ``config-autoscaler`` ConfigMap, and SERIES.csv with the header
``t,metric,value`` (t in seconds from the replay's start). It writes one CSV
row per controller sync (HPA) or autoscaler tick (KPA) to ``--out`` or stdout.
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import click
import yaml

from nbhelpers.errors import RunbookError
from nbhelpers.util.files import write_atomic
from nbhelpers.util.times import parse_duration

Series = dict[str, list[tuple[float, float]]]
SERIES_HEADER = ("t", "metric", "value")


def _number(text: str, what: str, line: int) -> float:
    try:
        value = float(text)
    except ValueError:
        raise RunbookError(f"series line {line}: {what} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise RunbookError(f"series line {line}: {what} {text!r} is not a finite number")
    return value


def parse_series_csv(text: str) -> Series:
    """SERIES.csv → {metric: [(t, value), ...]} sorted by t; duplicate times keep the last row."""
    rows = csv.reader(io.StringIO(text))
    header = next(rows, None)
    if header is None or tuple(cell.strip() for cell in header) != SERIES_HEADER:
        raise RunbookError("series: the first line must be the header 't,metric,value'")
    by_metric: dict[str, dict[float, float]] = defaultdict(dict)
    for line, row in enumerate(rows, start=2):
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(row) != 3:
            raise RunbookError(f"series line {line}: expected 3 columns t,metric,value, got {len(row)}")
        t = _number(row[0], "time", line)
        if t < 0:
            raise RunbookError(f"series line {line}: time {row[0]!r} is negative (t counts seconds from the start)")
        metric = row[1].strip()
        if not metric:
            raise RunbookError(f"series line {line}: the metric name is empty")
        by_metric[metric][t] = _number(row[2], "value", line)
    if not by_metric:
        raise RunbookError("series: no data rows after the header")
    return {metric: sorted(samples.items()) for metric, samples in by_metric.items()}


def read_text(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RunbookError(f"{what} {path!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        raise RunbookError(f"cannot read {what} {path!r}: {error}") from None


def load_manifest(path: str, what: str, kind: str) -> dict[str, Any]:
    """The first document of ``kind`` in a YAML file (a ``kind: List`` from kubectl works too)."""
    try:
        documents = [doc for doc in yaml.safe_load_all(read_text(path, what)) if doc]
    except yaml.YAMLError as error:
        raise RunbookError(f"{what} {path!r} is not valid YAML: {str(error).splitlines()[0]}") from None
    candidates: list[Any] = []
    for document in documents:
        items = document.get("items") if isinstance(document, dict) and document.get("kind") == "List" else None
        candidates.extend(items if isinstance(items, list) else [document])
    for candidate in candidates:
        if isinstance(candidate, dict) and candidate.get("kind") == kind:
            return candidate
    raise RunbookError(f"{what} {path!r} holds no {kind}")


def seconds(text: str, option: str) -> float:
    try:
        value = parse_duration(text).total_seconds()
    except RunbookError as error:
        raise RunbookError(f"{option}: {error}") from None
    if value < 0:
        raise RunbookError(f"{option} must not be negative")
    return value


def format_rows(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow([_cell(value) for value in row])
    return buffer.getvalue()


def _cell(value: object) -> object:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def emit(text: str, out: str) -> None:
    if not out:
        click.echo(text, nl=False)
        return
    target = Path(out)
    if target.is_dir():
        raise RunbookError(f"--out {out!r} is a directory; give a file name such as replay.csv")
    if not target.parent.is_dir():
        raise RunbookError(f"--out {out!r}: folder {str(target.parent)!r} does not exist")
    write_atomic(target, text.encode())
    click.echo(f"wrote {target}", err=True)


def _check_replicas(initial_replicas: int) -> None:
    if initial_replicas < 0:
        raise RunbookError("--initial-replicas must be 0 or more")


def _check_hpa_metrics(needed: Sequence[str], series: Series) -> None:
    """A metric the HPA reads but the series lacks gives no proposal, as upstream; none at all is a mistake."""
    missing = [name for name in needed if name not in series]
    if not missing:
        return
    given = ", ".join(sorted(series))
    if len(missing) == len(needed):
        raise RunbookError(f"series: the HPA reads {', '.join(needed)}, but the series only has {given}")
    click.echo(f"kserve-runbook: note: series has no {', '.join(missing)}; the HPA gets no proposal from it", err=True)


def _series_option(path: str) -> Series:
    return parse_series_csv(read_text(path, "series"))


@click.group()
def whatif() -> None:
    """Replay a metric series through the HPA or Knative KPA autoscaler (docs/contracts.md#what-if-replay)."""


@whatif.command("hpa")
@click.option("--hpa", "hpa_path", required=True, help="HorizontalPodAutoscaler manifest (autoscaling/v2 YAML).")
@click.option(
    "--series", "series_path", required=True, help="CSV t,metric,value (t in s; metric = cpu/memory or name)."
)
@click.option("--initial-replicas", required=True, type=int, help="Replicas at t = 0.")
@click.option(
    "--pod-ready-delay", default="0s", show_default=True, help="A new replica counts as ready this long after."
)
@click.option("--sync-period", default="15s", show_default=True, help="Controller sync period.")
@click.option("--out", default="", help="CSV to write (t,current_replicas,desired_replicas); default stdout.")
def whatif_hpa(
    hpa_path: str, series_path: str, initial_replicas: int, pod_ready_delay: str, sync_period: str, out: str
) -> None:
    """Replay SERIES through the HPA controller: one row per sync from t = 0 to the last series time.

    \b
    Output columns:
      t                 seconds since the start; the first sync is at t = 0
      current_replicas  the replica count in effect after this sync's decision
      desired_replicas  what the controller writes to status.desiredReplicas
    """
    from nbhelpers.models.hpa import hpa_spec_from_manifest, replay_hpa, series_key

    _check_replicas(initial_replicas)
    period = seconds(sync_period, "--sync-period")
    if period <= 0:
        raise RunbookError("--sync-period must be longer than 0s")
    spec = hpa_spec_from_manifest(load_manifest(hpa_path, "--hpa", "HorizontalPodAutoscaler"))
    series = _series_option(series_path)
    _check_hpa_metrics([series_key(metric) for metric in spec.metrics], series)
    syncs = replay_hpa(
        spec,
        series,
        initial_replicas,
        pod_ready_delay=seconds(pod_ready_delay, "--pod-ready-delay"),
        sync_period=period,
    )
    rows = ((sync.t, sync.current_replicas, sync.desired_replicas) for sync in syncs)
    emit(format_rows(("t", "current_replicas", "desired_replicas"), rows), out)


@whatif.command("kpa")
@click.option("--isvc", "isvc_path", required=True, help="InferenceService manifest (its autoscaling annotations).")
@click.option("--config-autoscaler", "config_path", default="", help="Knative config-autoscaler ConfigMap YAML.")
@click.option("--series", "series_path", required=True, help="CSV t,metric,value with metric concurrency or rps.")
@click.option("--initial-replicas", required=True, type=int, help="Ready pods at t = 0.")
@click.option("--pod-ready-delay", default="0s", show_default=True, help="A new pod is ready this long after.")
@click.option("--tick", default="2s", show_default=True, help="Autoscaler tick interval.")
@click.option("--out", default="", help="CSV to write (t,ready_pods,desired_pods,panic); default stdout.")
def whatif_kpa(
    isvc_path: str,
    config_path: str,
    series_path: str,
    initial_replicas: int,
    pod_ready_delay: str,
    tick: str,
    out: str,
) -> None:
    """Replay SERIES through Knative's KPA: one row per autoscaler tick.

    \b
    Output columns:
      t             seconds since the start; the first tick is at t = 0
      ready_pods    pods serving at this tick
      desired_pods  the autoscaler's decision at this tick
      panic         true while the autoscaler is in panic mode
    """
    from nbhelpers.models.kpa import kpa_spec_from_manifests, replay_kpa

    _check_replicas(initial_replicas)
    interval = seconds(tick, "--tick")
    if interval <= 0:
        raise RunbookError("--tick must be longer than 0s")
    isvc = load_manifest(isvc_path, "--isvc", "InferenceService")
    config: Mapping[str, Any] | None = (
        load_manifest(config_path, "--config-autoscaler", "ConfigMap") if config_path else None
    )
    series = _series_option(series_path)
    unknown = sorted(set(series) - {"concurrency", "rps"})
    if unknown:
        raise RunbookError(f"series: the KPA reads metric concurrency or rps, not {', '.join(unknown)}")
    spec = kpa_spec_from_manifests(isvc, config)
    if spec.metric not in series:
        raise RunbookError(
            f"series: this revision scales on {spec.metric}, but the series only has {', '.join(series)}"
        )
    ticks = replay_kpa(
        spec,
        series,
        initial_replicas,
        pod_ready_delay=seconds(pod_ready_delay, "--pod-ready-delay"),
        tick=interval,
    )
    rows = ((t.t, t.ready_pods, t.desired_pods, t.panic) for t in ticks)
    emit(format_rows(("t", "ready_pods", "desired_pods", "panic"), rows), out)
