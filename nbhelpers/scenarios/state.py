"""The state a scenario's faults leave the service in: names, effective flags, pods and their lives.

Everything the generator writes (objects, events, logs, metrics) is derived
from this one plan, so the pieces agree with each other by construction.
"""

from __future__ import annotations

import math
import random
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from nbhelpers.scenarios.spec import SERVER_PORT_FLAGS, GpuNode, ScenarioSpec

BLOCK_SIZE = 16
# Kubernetes' alphabet for generated name suffixes and pod-template hashes (no vowels, no look-alikes).
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def rng_for(spec: ScenarioSpec, purpose: str) -> random.Random:
    """A random generator per purpose, so adding one draw never shifts another's values."""
    return random.Random(f"{spec.seed}:{purpose}")


def make_uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def name_suffix(rng: random.Random, length: int) -> str:
    return "".join(rng.choice(NAME_ALPHABET) for _ in range(length))


def flag_value(args: tuple[str, ...], flag: str) -> str | None:
    """The value of ``--flag VALUE`` or ``--flag=VALUE`` (the last one wins, as argparse does)."""
    found = None
    for index, arg in enumerate(args):
        if arg == flag and index + 1 < len(args):
            found = args[index + 1]
        elif arg.startswith(flag + "="):
            found = arg.split("=", 1)[1]
    return found


def without_flag(args: tuple[str, ...], flag: str) -> tuple[str, ...]:
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg == flag:
            skip = True
            continue
        if not arg.startswith(flag + "="):
            kept.append(arg)
    return tuple(kept)


@dataclass(frozen=True)
class KvCache:
    """vLLM's start-up arithmetic: how much KV cache one replica gets (DESIGN §6)."""

    bytes_per_token: int
    available_gib: float
    num_blocks: int
    max_model_len: int
    max_num_seqs: int
    gpu_memory_utilization: float

    @property
    def tokens(self) -> int:
        return self.num_blocks * BLOCK_SIZE

    @property
    def max_concurrency(self) -> float:
        return self.tokens / self.max_model_len


@dataclass(frozen=True)
class PodPlan:
    """One predictor pod's life: when it was created, started, listened and (maybe) became ready."""

    name: str
    uid: str
    ip: str
    node: GpuNode
    template_hash: str
    created: datetime
    started: datetime
    listening: datetime
    ready_at: datetime | None
    probe_failures: tuple[datetime, ...]

    def ready(self, moment: datetime) -> bool:
        return self.ready_at is not None and moment >= self.ready_at


@dataclass(frozen=True)
class Plan:
    spec: ScenarioSpec
    args: tuple[str, ...]
    listen_port: int
    probe_port: int
    kv: KvCache
    ksvc: str  # Serverless only ("" otherwise)
    revision: str  # Serverless only
    deployment: str
    replica_set: str
    template_hash: str
    uids: dict[str, str]
    pods: tuple[PodPlan, ...]

    @property
    def serverless(self) -> bool:
        return self.spec.isvc.deployment_mode == "Serverless"

    def ready_pods(self, moment: datetime) -> list[PodPlan]:
        return [pod for pod in self.pods if pod.ready(moment)]


def apply_faults(spec: ScenarioSpec) -> tuple[str, ...]:
    """The serving container's args after the spec's faults are applied to the baseline."""
    args = spec.isvc.args
    flag, default_port = SERVER_PORT_FLAGS[spec.isvc.server]
    for fault in spec.faults:
        if fault.type == "port_mismatch":
            port = int(fault.params["listen_port"])
            args = without_flag(args, flag)
            if port != default_port:
                args = (*args, flag, str(port))
    return args


def listen_port(server: str, args: tuple[str, ...]) -> int:
    flag, default_port = SERVER_PORT_FLAGS[server]
    value = flag_value(args, flag)
    return int(value) if value else default_port


def probe_port(spec: ScenarioSpec) -> int:
    """The port the readiness check connects to (the containerPort when no probe names one)."""
    probe: Any = spec.isvc.readiness_probe or {}
    for handler in ("httpGet", "tcpSocket", "grpc"):
        if handler in probe and "port" in probe[handler]:
            return int(probe[handler]["port"])
    return spec.isvc.container_port


def kv_cache(spec: ScenarioSpec, args: tuple[str, ...]) -> KvCache:
    model = spec.isvc.model
    node = spec.cluster.nodes[0]
    tensor_parallel = int(flag_value(args, "--tensor-parallel-size") or 1)
    utilization = float(flag_value(args, "--gpu-memory-utilization") or 0.9)
    bytes_per_token = 2 * model.layers * max(1, model.kv_heads // tensor_parallel) * model.head_dim * model.dtype_bytes
    available_gib = node.memory_gib * utilization - model.weights_gib - model.activation_gib
    blocks = math.floor(available_gib * 2**30 / (bytes_per_token * BLOCK_SIZE))
    default_seqs = 1024 if node.memory_gib >= 70 and "A100" not in node.product else 256
    max_model_len = int(flag_value(args, "--max-model-len") or flag_value(args, "--max_model_len") or 32768)
    return KvCache(
        bytes_per_token=bytes_per_token,
        available_gib=round(available_gib, 2),
        num_blocks=blocks,
        max_model_len=max_model_len,
        max_num_seqs=int(flag_value(args, "--max-num-seqs") or default_seqs),
        gpu_memory_utilization=utilization,
    )


def _probe_schedule(spec: ScenarioSpec) -> tuple[float, float]:
    """(initial delay, period) of the readiness check in seconds, with Kubernetes' defaults."""
    probe: Any = spec.isvc.readiness_probe or {}
    return float(probe.get("initialDelaySeconds", 0)), float(probe.get("periodSeconds", 10))


def _pod_plan(
    spec: ScenarioSpec, index: int, rng: random.Random, name: str, template_hash: str, ready: bool
) -> PodPlan:
    created = spec.timeline.deployed_at + timedelta(seconds=3 + 2 * index)
    started = created + timedelta(seconds=spec.isvc.image_pull_seconds + 2 + rng.uniform(0.2, 0.9))
    listening = started + timedelta(seconds=spec.isvc.model.load_seconds * rng.uniform(0.95, 1.05))
    delay, period = _probe_schedule(spec)
    failures: list[datetime] = []
    ready_at = None
    probe = started + timedelta(seconds=delay + rng.uniform(0.1, period))
    while probe < spec.timeline.captured_at:
        if ready and probe >= listening:
            ready_at = probe
            break
        failures.append(probe)
        probe += timedelta(seconds=period)
    node = spec.cluster.nodes[index % len(spec.cluster.nodes)]
    return PodPlan(
        name=name,
        uid=make_uid(rng),
        ip=f"10.244.{rng.randint(1, 30)}.{rng.randint(2, 250)}",
        node=node,
        template_hash=template_hash,
        created=created,
        started=started,
        listening=listening,
        ready_at=ready_at,
        probe_failures=tuple(failures),
    )


def plan(spec: ScenarioSpec) -> Plan:
    args = apply_faults(spec)
    isvc = spec.isvc
    port = listen_port(isvc.server, args)
    checked_port = probe_port(spec)
    rng = rng_for(spec, "names")
    uids = {kind: make_uid(rng) for kind in ("isvc", "ksvc", "configuration", "revision", "deployment", "replicaset")}
    template_hash = name_suffix(rng, 10)
    if isvc.deployment_mode == "Serverless":
        ksvc = f"{isvc.name}-predictor"
        revision = f"{ksvc}-00001"
        deployment = f"{revision}-deployment"
    else:
        ksvc = revision = ""
        deployment = f"{isvc.name}-predictor"
    replica_set = f"{deployment}-{template_hash}"
    pods = tuple(
        _pod_plan(spec, index, rng, f"{replica_set}-{name_suffix(rng, 5)}", template_hash, port == checked_port)
        for index in range(isvc.min_replicas)
    )
    return Plan(
        spec=spec,
        args=args,
        listen_port=port,
        probe_port=checked_port,
        kv=kv_cache(spec, args),
        ksvc=ksvc,
        revision=revision,
        deployment=deployment,
        replica_set=replica_set,
        template_hash=template_hash,
        uids=uids,
        pods=pods,
    )
