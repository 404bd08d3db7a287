"""The timeouts on a request's path to the model server, and how they compare (pure logic, no I/O).

A request crosses, from the outside in: the client, an edge (a cloud load balancer, an ingress
controller or a Gateway API gateway: alternatives, not a series), an Istio route, the Knative
revision, then the server. Each layer that gives up answers 504 (or drops the connection), while
the layers behind it keep working on a request nobody waits for. So an outer layer should outlast
every inner one, and every layer should outlast the long requests the service really serves.

Kinds of timeout matter: a *request* timeout (Envoy route timeout, Gateway API ``timeouts.request``,
Knative ``timeoutSeconds``) bounds the whole exchange; an *idle* timeout (AWS ALB idle timeout,
nginx ``proxy_read_timeout``, Knative ``idleTimeoutSeconds``) only bounds silence, so it cuts a
non-streamed response (silent until the whole generation is done) but not a stream whose tokens
keep flowing; a *first-byte* timeout (Knative ``responseStartTimeoutSeconds``) bounds the wait for
the first byte.

nginx documents ``proxy_read_timeout`` as "set only between two successive read operations, not for
the transmission of the whole response" (nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_read_timeout),
and ingress-nginx's ``proxy-read-timeout`` sets exactly that directive, with the same sentence
(kubernetes/ingress-nginx docs/user-guide/nginx-configuration/configmap.md, "proxy-read-timeout"). So a
streamed completion whose tokens keep coming passes a 60 s ingress-nginx whatever its total length, while
a non-streamed one is cut at 60 s (BerriAI/litellm issue #9551: "504 Gateway Time-out ... for Long
Non-Streaming Requests (Streaming Works)").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# --- defaults (docs/upstream-facts.md), each checked against the project's own documentation -------------------

# AWS: "By default, ELB sets the idle timeout value for your load balancer to 60 seconds"
# (docs.aws.amazon.com/elasticloadbalancing/latest/application/edit-load-balancer-attributes.html). The AWS Load
# Balancer Controller sets it from the Ingress annotation
# ``alb.ingress.kubernetes.io/load-balancer-attributes: idle_timeout.timeout_seconds=N`` (the older
# ``connection-idle-timeout`` annotation had no effect: kubernetes-sigs/aws-load-balancer-controller issue #727).
ALB_IDLE_DEFAULT = 60.0
# ingress-nginx: proxy-read-timeout and proxy-send-timeout default to nginx's 60 s; the per-Ingress annotations
# ``nginx.ingress.kubernetes.io/proxy-{read,send}-timeout`` take unitless seconds (ingress-nginx user guide,
# annotations "Custom timeouts", as the maintainers point to in kubernetes/ingress-nginx issue #6189; issue #3976:
# "504 Gateway time out (if the backend takes more than 60 seconds)").
NGINX_PROXY_DEFAULT = 60.0
# GKE Ingress (class gce): the backend service timeout "default is 30 seconds" (Compute Engine BackendService
# timeoutSec); it is changed through a BackendConfig, which this tool does not read.
GKE_BACKEND_DEFAULT = 30.0
# KServe v0.15+ writes ``timeouts.request: 60s`` into every HTTPRoute it generates unless the component sets
# ``timeout`` (kserve/kserve httproute_reconciler.go ``DefaultTimeout = toGatewayAPIDuration(60)``; issue #5311).
KSERVE_HTTPROUTE_DEFAULT = 60.0
# Envoy Gateway: "The default request timeout is set to 15 seconds in Envoy Proxy" unless the HTTPRoute sets
# ``timeouts`` (gateway.envoyproxy.io docs, tasks/traffic/http-timeouts).
ENVOY_GATEWAY_DEFAULT = 15.0
# Istio: "By default, the request timeout is disabled" (istio.io docs/tasks/traffic-management/request-timeouts).
# Knative config-defaults: revision-timeout-seconds "300", max-revision-timeout-seconds "600",
# revision-idle-timeout-seconds "0" (infinite) (knative.dev docs/serving/configuration/config-defaults).
KNATIVE_REVISION_DEFAULT = 300.0
KNATIVE_MAX_REVISION_DEFAULT = 600.0

# A layer whose timeout is within this fraction of the observed latency is counted as cutting it: requests
# at p99 are a distribution's edge, and a timeout that cuts them also flattens the latency at its value.
HEADROOM = 0.9
# A latency within this fraction of a layer's value sits "at" it (a plateau); clearly above it is beyond it.
PLATEAU_TOLERANCE = 0.1
# Recommended timeouts leave this factor above the observed long-request latency, rounded up to ROUND_TO.
SAFETY_FACTOR = 1.5
ROUND_TO = 30
# A layer that is cutting requests caps the latency the window can show at its own value: the longest
# requests were never measured. Its replacement is then at least this multiple of the current value.
CUT_FACTOR = 2.0

# Tiers from the outside in; edge layers are alternatives (different entry points), never compared with
# each other.
CLIENT, EDGE, MESH, KNATIVE = 0, 1, 2, 3

REQUEST, IDLE, FIRST_BYTE = "request", "idle", "first byte"

# Roles whose default values are "LB/ingress/gateway defaults" (TIMEOUT_LB_DEFAULT).
EDGE_ROLES = frozenset({"lb", "ingress", "gateway"})


@dataclass(frozen=True)
class Layer:
    """One timeout on the path.

    ``seconds`` is None when the layer has no timeout (Istio's default, Knative idle 0); ``source`` says
    where the value was read, or ``default`` and why; ``obj`` is the object that carries (or would carry)
    the setting.
    """

    name: str  # "ingress-nginx proxy-read-timeout", "Knative revision timeoutSeconds", ...
    tier: int
    role: str  # client | lb | ingress | gateway | mesh | knative
    kind: str  # REQUEST | IDLE | FIRST_BYTE
    seconds: float | None
    source: str
    is_default: bool
    obj: str | None = None
    inferred_504s: bool = False  # its own 504s never reach Prometheus (cloud load balancers, Envoy Gateway)

    @property
    def finite(self) -> bool:
        return self.seconds is not None

    def describe(self) -> str:
        value = "no timeout" if self.seconds is None else f"{format_seconds(self.seconds)} {self.kind}"
        where = f" on {self.obj}" if self.obj else ""
        return f"{self.name}{where}: {value} ({self.source})"


@dataclass(frozen=True)
class Observed:
    """What the window shows about request durations (seconds; None: not available).

    vLLM's end-to-end latency runs from the request's arrival at the engine to its last token, so it already
    holds the engine's queue time: ``queue_p95`` explains it, it is not added to it. ``cold_start`` is the hook
    for the wait of a request that arrives while no replica is ready; nothing measures it yet, so callers
    leave it None and the budget is the latency alone.
    """

    e2e_p99: float | None
    queue_p95: float | None = None
    ttft_p95: float | None = None
    cold_start: float | None = None
    # The top finite bucket of vLLM's histogram when the quantile sits on it (older vLLM: 60 s for e2e and
    # queue time, 10 s for TTFT, see nbhelpers.facts.latency_buckets): the value is then only a lower bound.
    e2e_top: float | None = None
    queue_top: float | None = None
    ttft_top: float | None = None

    @property
    def capped(self) -> bool:
        """Whether the end-to-end p99 is the end of vLLM's histogram, not a measured latency."""
        return self.e2e_top is not None

    @property
    def budget(self) -> float | None:
        """The longest a real request takes through the server: p99 latency plus cold start when known."""
        if self.e2e_p99 is None:
            return None
        return self.e2e_p99 + (self.cold_start or 0.0)

    def describe(self) -> str:
        parts = [f"end-to-end p99 {_bounded(self.e2e_p99, self.e2e_top)}"]
        parts.append(f"queue time p95 {_bounded(self.queue_p95, self.queue_top)} (part of the end-to-end time)")
        parts.append(f"time to first token p95 {_bounded(self.ttft_p95, self.ttft_top)}")
        parts.append(
            "cold start "
            + (format_seconds(self.cold_start) if self.cold_start is not None else "not measured (not added)")
        )
        return "observed: " + "; ".join(parts)


@dataclass(frozen=True)
class Cut504s:
    """504 answers in the window by the layer that reported them (counts; None: no such metric)."""

    nginx: float | None = None
    istio_upstream_timeout: float | None = None  # Envoy response flag UT: the route timeout fired
    istio_passed_through: float | None = None  # 504 without UT: an upstream answered 504
    knative: float | None = None  # queue-proxy / activator answer 504 when the revision timeout fires
    nginx_requests: float | None = None  # every request ingress-nginx counted for the service, any status
    # Serverless: 504 with flag UT at the external gateway, whose destination is knative-local-gateway; they are
    # this service's only when the series carry its host (``outer_by_host``), else every service's behind it.
    outer_gateway_timeouts: float | None = None
    outer_by_host: bool = False

    def behind_edge(self) -> float:
        return (self.istio_upstream_timeout or 0.0) + (self.istio_passed_through or 0.0) + (self.knative or 0.0)


@dataclass(frozen=True)
class Attribution:
    """Why a layer is held responsible for cut requests: ``count`` measured 504s (0 when only inferred)."""

    count: float
    reasons: tuple[str, ...]

    @property
    def measured(self) -> bool:
        return self.count >= 1


# --- parsing ---------------------------------------------------------------------------------------


def format_seconds(seconds: float) -> str:
    return f"{seconds:g} s" if seconds < 100 or seconds != int(seconds) else f"{int(seconds)} s"


def describe_seconds(seconds: float | None) -> str:
    """Rounded to a tenth, or ``not available``."""
    return "not available" if seconds is None else format_seconds(round(seconds, 1))


def _bounded(seconds: float | None, top: float | None) -> str:
    """``describe_seconds``, or ``at least 60 s (the top bucket of vLLM's histogram: unknown above)``."""
    if top is None:
        return describe_seconds(seconds)
    return f"at least {format_seconds(top)} (the top bucket of vLLM's histogram: unknown above)"


def parse_alb_attributes(text: str) -> dict[str, str]:
    """``key=value,key=value`` as the AWS Load Balancer Controller reads its attributes annotation."""
    attributes: dict[str, str] = {}
    for item in text.split(","):
        key, separator, value = item.strip().partition("=")
        if separator and key:
            attributes[key.strip()] = value.strip()
    return attributes


def format_alb_attributes(attributes: dict[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in attributes.items())


# --- comparing the chain ---------------------------------------------------------------------------


def describe_chain(layers: Sequence[Layer]) -> str:
    """``client 900 s → edge: a | b → mesh: c → Knative: d``, outside in."""
    tiers = []
    for tier in (CLIENT, EDGE, MESH, KNATIVE):
        here = [layer for layer in layers if layer.tier == tier]
        if here:
            tiers.append(" | ".join(_short(layer) for layer in here))
    return " → ".join(tiers) + " → server"


def _short(layer: Layer) -> str:
    value = "none" if layer.seconds is None else format_seconds(layer.seconds)
    return f"{layer.name} {value}" + (" (default)" if layer.is_default else "")


def undercut(outer: Layer, layers: Iterable[Layer]) -> list[Layer]:
    """The inner layers with a finite timeout longer than ``outer``'s: ``outer`` gives up before them.

    An inner layer without a timeout is not counted: the outer one is then simply the effective limit.
    """
    if outer.seconds is None:
        return []
    return [
        inner
        for inner in layers
        if inner.tier > outer.tier and inner.seconds is not None and inner.seconds > outer.seconds
    ]


def cuts_latency(layer: Layer, observed: Observed) -> bool:
    """Whether long requests reach this layer's timeout (within the headroom).

    Idle and first-byte timeouts are judged as for non-streamed responses, silent until the last token: the
    worst case, since the client's requests cannot be seen (see :func:`streaming_note`).
    """
    budget = observed.budget
    if layer.seconds is None or budget is None:
        return False
    if observed.e2e_top is not None:
        # The p99 only says "at least the top bucket": a layer clearly below it is reached, one at or above it
        # may or may not be (vllm-project/vllm issue #15167), so the latency says nothing about it.
        return layer.seconds < observed.e2e_top * (1 - PLATEAU_TOLERANCE)
    return budget >= HEADROOM * layer.seconds


def recommended_seconds(
    layer: Layer, layers: Sequence[Layer], observed: Observed, ceiling: float | None, cutting: bool = False
) -> int:
    """A timeout for ``layer`` that outlasts the observed long requests and every inner layer.

    ``cutting``: the layer is shown to cut requests (504s attributed to it, or the latency flattening at its
    value), so the observed latency is censored at the layer's value and the result is at least
    :data:`CUT_FACTOR` times it. ``ceiling`` caps it (Knative's max-revision-timeout-seconds) when the layer
    has one.
    """
    wanted = 0.0
    if observed.budget is not None:
        wanted = observed.budget * SAFETY_FACTOR
    if cutting and layer.seconds is not None:
        wanted = max(wanted, layer.seconds * CUT_FACTOR)
    inner = [other.seconds for other in layers if other.tier > layer.tier and other.seconds is not None]
    wanted = max([wanted, *inner])
    rounded = int(math.ceil(wanted / ROUND_TO) * ROUND_TO) if wanted > 0 else ROUND_TO
    if ceiling is not None:
        rounded = min(rounded, int(ceiling))
    return rounded


def plateau_at(samples: Sequence[float], layers: Sequence[Layer], tolerance: float = PLATEAU_TOLERANCE) -> Layer | None:
    """The finite layer whose value the latency series sits at (at least three samples within ``tolerance``
    of it, and none clearly above it): the timing of a timeout that cuts requests."""
    finite = [value for value in samples if math.isfinite(value)]
    if not finite:
        return None
    top = max(finite)
    for layer in sorted((layer for layer in layers if layer.seconds), key=lambda layer: layer.seconds or 0.0):
        assert layer.seconds is not None
        near = [value for value in finite if abs(value - layer.seconds) <= tolerance * layer.seconds]
        if len(near) >= 3 and top <= layer.seconds * (1 + tolerance):
            return layer
    return None


def attribute(layer: Layer, cut: Cut504s, plateau: Layer | None) -> Attribution:
    """The 504s in the window that this layer most likely produced, and why.

    - ingress-nginx answers 504 itself when proxy_read_timeout fires; its 504s beyond those the layers behind
      it reported are its own.
    - Istio marks the answers of a route timeout with the response flag UT.
    - Knative's queue-proxy and activator answer 504 when the revision timeout fires.
    - Cloud load balancers (and Envoy Gateway, whose metrics are not in the catalog) do not report to
      Prometheus: their cuts are inferred from the latency alone.
    """
    reasons: list[str] = []
    count = 0.0
    if is_nginx(layer) and cut.nginx:
        own = nginx_own_504s(cut)
        if own >= 1:
            count = own
            behind = cut.behind_edge()
            reported = f"beyond the ≈{behind:.0f} reported" if behind >= 1 else "none reported"
            reasons.append(f"≈{own:.0f} 504s at ingress-nginx, {reported} by the layers behind it")
    elif layer.role == "mesh" and (cut.istio_upstream_timeout or cut.outer_gateway_timeouts):
        if cut.istio_upstream_timeout:
            count = cut.istio_upstream_timeout
            reasons.append(f"≈{count:.0f} 504s with Envoy response flag UT (upstream request timeout) at Istio")
        outer = cut.outer_gateway_timeouts or 0.0
        if outer >= 1 and cut.outer_by_host:
            count += outer
            reasons.append(
                f"≈{outer:.0f} 504s with flag UT at the external gateway towards knative-local-gateway for this "
                "service's host"
            )
        elif outer >= 1:
            reasons.append(
                f"≈{outer:.0f} 504s with flag UT at the external gateway towards knative-local-gateway, attributed by "
                "gateway only (the series carry no request_host, and every Serverless service shares that "
                "destination): not counted for this service"
            )
    elif layer.role == "gateway" and not layer.inferred_504s and cut.istio_upstream_timeout:
        count = cut.istio_upstream_timeout
        reasons.append(f"≈{count:.0f} 504s with Envoy response flag UT (upstream request timeout) at the gateway")
    elif layer.role == "knative" and cut.knative:
        count = cut.knative
        reasons.append(f"≈{count:.0f} 504s answered by Knative (queue-proxy / activator request timeout)")
    if plateau is not None and plateau == layer:
        reasons.append(f"the p99 latency flattens at {format_seconds(layer.seconds or 0)}, this layer's value")
    if layer.inferred_504s:
        reasons.append("inferred: this layer's own 504s are not in Prometheus, so the cut requests cannot be counted")
    return Attribution(count, tuple(reasons))


def is_nginx(layer: Layer) -> bool:
    return layer.role == "ingress" and layer.name.startswith("ingress-nginx")


def nginx_own_504s(cut: Cut504s) -> float:
    """The 504s ingress-nginx answered itself: its count beyond those the layers behind it reported."""
    return max(0.0, (cut.nginx or 0.0) - cut.behind_edge())


def passed_streamed(layer: Layer, observed: Observed, cut: Cut504s) -> bool:
    """Whether the window shows long requests passing this idle timeout, which only streams can do.

    Evidence, all of it required: the layer is an idle timeout whose own answers are counted (ingress-nginx:
    ``nginx_ingress_controller_requests`` by status); it counted requests for the service and none of its own
    504s; vLLM's end-to-end p99 lies clearly above the timeout (beyond the plateau tolerance), so requests that
    lasted longer than it finished; and the first token comes well before it. A non-streamed response is
    silent until its last token and would have been cut, so those long requests were streamed (or stalled
    for less than the timeout between two chunks). Layers whose 504s are not in Prometheus (cloud load
    balancers) never qualify: the long requests might have reached vLLM by another path.
    """
    if layer.kind != IDLE or layer.seconds is None or not is_nginx(layer):
        return False
    if observed.e2e_p99 is None or observed.ttft_p95 is None or observed.ttft_top is not None:
        return False  # a TTFT on its histogram's top bucket does not show a quick first token
    if cut.nginx is None or not cut.nginx_requests or cut.nginx_requests < 1 or nginx_own_504s(cut) >= 1:
        return False
    return observed.e2e_p99 > layer.seconds * (1 + PLATEAU_TOLERANCE) and observed.ttft_p95 < HEADROOM * layer.seconds


def streaming_note(observed: Observed, layers: Sequence[Layer], cut: Cut504s) -> str:
    """What the evidence says about streamed vs non-streamed requests (the client's requests are not visible)."""
    note = (
        "streaming: vLLM's metrics do not tell streamed from non-streamed requests, and the clients' requests are "
        "not visible here. Idle timeouts (ALB idle, nginx proxy-read, Knative idle / response-start) cut a "
        "non-streamed response, silent until its last token, after their value; a stream only when its first token "
        "or a gap between tokens takes longer. Request timeouts cut both."
    )
    idle = [layer for layer in layers if layer.kind in (IDLE, FIRST_BYTE) and layer.seconds is not None]
    if observed.ttft_p95 is None or not idle:
        return note
    shortest = min(idle, key=lambda layer: layer.seconds or 0.0)
    assert shortest.seconds is not None
    if observed.ttft_p95 >= HEADROOM * shortest.seconds:
        return note + (
            f" The time to first token p95 ({format_seconds(round(observed.ttft_p95, 1))}) already reaches "
            f"{shortest.name}: streaming would not avoid the cut."
        )
    if observed.ttft_top is not None:  # at least the top bucket, which is short of this layer
        return note + (
            f" The time to first token p95 sits on the top bucket of vLLM's histogram ({format_seconds(observed.ttft_top)}"
            "): how long the first token takes above it is unknown, so whether streams pass "
            f"{shortest.name} cannot be told."
        )
    if passed_streamed(shortest, observed, cut):
        assert observed.e2e_p99 is not None
        return note + (
            f" {shortest.name} counted no 504 of its own among ≈{cut.nginx_requests or 0:.0f} requests while the "
            f"end-to-end p99 reached {format_seconds(round(observed.e2e_p99, 1))}, past its "
            f"{format_seconds(shortest.seconds)}, with the first token after "
            f"{format_seconds(round(observed.ttft_p95, 1))} (p95): the long requests were streamed."
        )
    if is_nginx(shortest) and nginx_own_504s(cut) >= 1:
        return note + (
            f" 504s at {shortest.name} although the first token comes after "
            f"{format_seconds(round(observed.ttft_p95, 1))} (p95): the cut requests were most likely not streamed."
        )
    return note + (
        f" With the first token after {format_seconds(round(observed.ttft_p95, 1))} (p95), streamed requests would "
        f"pass {shortest.name}; only non-streamed ones (or stalled streams) are at risk."
    )
