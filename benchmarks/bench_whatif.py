"""Time the what-if replays on a day of metrics (no cluster needed).

    .venv/bin/python benchmarks/bench_whatif.py [--specs 1000] [--reference-specs 20] [--hours 24]

HPA: one day of 15 s samples (5,760 syncs) of a vLLM-like load (total requests running, CPU
utilization, a queue length), replayed under N candidate HPA specs that vary min/max replicas,
targets, metric kinds, stabilization windows, policies and the legacy path. It prints the wall time
of the fast path (``replay_hpa_batch``, all N specs at once) and of the reference (``replay_hpa``) on a
subset, extrapolated to N, and checks that the subset's results agree.

Each autoscaler has one ``bench_*`` function returning printable lines; add another (e.g. KPA) to
``BENCHMARKS`` and it runs with ``--only NAME`` or by default with the others.
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections.abc import Callable

from nbhelpers.models.hpa import Behavior, HpaSpec, ScalingPolicy, ScalingRules, make_metric, replay_hpa
from nbhelpers.models.hpa_batch import replay_hpa_batch

SAMPLE_SECONDS = 15.0
POD_READY_DELAY = 120.0  # a vLLM pod loading its model
Series = dict[str, list[tuple[float, float]]]


def day_of_load(hours: float, seed: int = 7) -> Series:
    """A diurnal request curve with bursts: total running requests, CPU % per ready pod, queue length."""
    rng = random.Random(seed)
    running: list[tuple[float, float]] = []
    cpu: list[tuple[float, float]] = []
    queue: list[tuple[float, float]] = []
    burst = 0.0
    for index in range(int(hours * 3600 / SAMPLE_SECONDS)):
        t = index * SAMPLE_SECONDS
        daily = 60 + 50 * math.sin(2 * math.pi * (t / 86400 - 0.3))
        burst = max(0.0, burst * 0.9 + (rng.expovariate(1 / 40) if rng.random() < 0.01 else 0.0))
        load = max(0.0, daily + burst + rng.gauss(0, 5))
        running.append((t, round(load, 1)))
        cpu.append((t, round(min(400.0, 30 + load * 0.8 + rng.gauss(0, 4)), 0)))
        queue.append((t, round(max(0.0, load - 80 + rng.gauss(0, 3)), 1)))
    return {"vllm:num_requests_running": running, "cpu": cpu, "queue": queue}


def candidate_specs(count: int, seed: int = 11) -> list[HpaSpec]:
    """``count`` HPA specs a what-if study could compare."""
    rng = random.Random(seed)
    metrics = [
        *(make_metric("Pods", "vllm:num_requests_running", "AverageValue", str(n)) for n in (4, 8, 12, 16, 24, 32)),
        *(make_metric("Resource", "cpu", "Utilization", p) for p in (50, 60, 70, 80)),
        *(make_metric("External", "queue", "Value", str(v)) for v in (5, 10, 20)),
        *(make_metric("External", "queue", "AverageValue", str(v)) for v in (2, 4)),
    ]
    specs = []
    for _ in range(count):
        minimum = rng.choice([1, 1, 2, 3])
        behavior = None
        if rng.random() > 0.15:
            up = ScalingRules(
                rng.choice([0, 0, 30, 60, 120]),
                rng.choice(["Max", "Max", "Min"]),
                (ScalingPolicy("Pods", rng.choice([1, 2, 4, 8]), rng.choice([15, 30, 60])),)
                + ((ScalingPolicy("Percent", rng.choice([50, 100, 200]), 15),) if rng.random() < 0.6 else ()),
                rng.choice([None, 0.05]),
            )
            down = ScalingRules(
                rng.choice([60, 120, 300, 600, 900]),
                "Max",
                (
                    ScalingPolicy(
                        rng.choice(["Pods", "Percent"]), rng.choice([1, 2, 10, 50, 100]), rng.choice([15, 60])
                    ),
                ),
                rng.choice([None, 0.2]),
            )
            behavior = Behavior(up, down)
        specs.append(
            HpaSpec(
                max_replicas=rng.choice([8, 16, 24, 32, 48]),
                min_replicas=minimum,
                metrics=(rng.choice(metrics),),
                behavior=behavior,
            )
        )
    return specs


def bench_hpa(args: argparse.Namespace) -> list[str]:
    series = day_of_load(args.hours)
    specs = candidate_specs(args.specs)
    options = {"pod_ready_delay": POD_READY_DELAY, "per_pod_from_total": True}

    started, cpu_started = time.perf_counter(), time.process_time()
    batch = replay_hpa_batch(specs, series, 2, **options)  # type: ignore[arg-type]
    fast_wall, fast_cpu = time.perf_counter() - started, time.process_time() - cpu_started

    subset = specs[: args.reference_specs]
    started = time.perf_counter()
    references = [replay_hpa(spec, series, 2, **options) for spec in subset]  # type: ignore[arg-type]
    reference_wall = time.perf_counter() - started
    mismatches = sum(batch.syncs(index) != reference for index, reference in enumerate(references))
    per_spec = reference_wall / max(1, len(subset))
    syncs = len(batch.times)
    return [
        f"hpa: {len(specs)} specs x {syncs} syncs ({args.hours:g} h of {SAMPLE_SECONDS:g} s samples)",
        f"  fast path   (replay_hpa_batch): {fast_wall:7.2f} s wall, {fast_cpu:6.2f} s CPU",
        f"  reference   (replay_hpa):       {reference_wall:7.2f} s for {len(subset)} specs, "
        f"{per_spec * 1000:.0f} ms per spec -> ~{per_spec * len(specs):.0f} s for {len(specs)} (extrapolated)",
        f"  agreement on the reference subset: {len(subset) - mismatches}/{len(subset)} specs identical",
    ]


BENCHMARKS: dict[str, Callable[[argparse.Namespace], list[str]]] = {"hpa": bench_hpa}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--specs", type=int, default=1000, help="candidate specs for the fast path")
    parser.add_argument("--reference-specs", type=int, default=20, help="specs replayed by the reference")
    parser.add_argument("--hours", type=float, default=24.0, help="length of the replayed series")
    parser.add_argument("--only", choices=sorted(BENCHMARKS), action="append", help="run only these benchmarks")
    args = parser.parse_args()
    for name in args.only or BENCHMARKS:
        for line in BENCHMARKS[name](args):
            print(line)


if __name__ == "__main__":
    main()
