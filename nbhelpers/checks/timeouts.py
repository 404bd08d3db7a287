"""Step 9, ``timeouts``: are the timeouts aligned from the client to the server, and against real latency?

Every layer on the request path is collected with its timeout and where it was read (or ``default`` and
the default's value), see :mod:`nbhelpers.facts.timeout_path`:

- client: ``--client-timeout`` (the notebook parameter ``client_timeout``), else the optional
  InferenceService annotation ``kserve-runbook/client-timeout`` (seconds or a duration such as ``10m``);
- edge: Ingresses of class ``alb`` (AWS ALB idle timeout), ingress-nginx (``proxy-read-timeout``;
  ``proxy-send-timeout`` is listed but only bounds the upload of the request), ``gce`` (GKE's backend
  timeout: the BackendConfig is not read, so its default is assumed), ``istio`` (no timeout), and Gateway
  API HTTPRoutes (``timeouts.request`` / ``backendRequest``, else the implementation's default);
- mesh: Istio VirtualService http routes' ``timeout``;
- Knative (Serverless): the Revision's ``timeoutSeconds`` / ``responseStartTimeoutSeconds`` /
  ``idleTimeoutSeconds``, else the InferenceService's ``spec.predictor.timeout`` (KServe passes it to the
  revision), else ``config-defaults``.

Two comparisons make findings: an outer layer that gives up before an inner one, and a layer whose timeout
the window's long requests reach (vLLM's end-to-end p99; cold start is not measured yet). A default
LB/ingress/gateway value is ``TIMEOUT_LB_DEFAULT``, anything else ``TIMEOUT_MISALIGNED``. 504s are
attributed from ingress-nginx, Istio (response flag UT; in Serverless mode also the external gateway's answers
towards knative-local-gateway, by request host when the series carry it) and Knative counts (queue-proxy outside
its revision timeout and the activator, see :func:`nbhelpers.facts.traffic.knative_layers`) and from a latency
plateau at a layer's value. A p99 on the top bucket of vLLM's histogram (60 s before vllm-project/vllm PR #15202)
is only a lower bound: it blames no layer at or above it, makes no plateau, and a value derived from it is given
as a floor (:mod:`nbhelpers.facts.latency_buckets`). The severity follows what the window shows at that layer:

- critical only when measured 504s in the window are attributed to it: the summary says requests *are* cut;
- information when the layer is an idle timeout that long requests are seen to pass, streamed (ingress-nginx
  counted none of its own 504s while vLLM's p99 ran past its value with a quick first token, see
  :func:`nbhelpers.facts.timeout_path.passed_streamed`): nginx's proxy_read_timeout bounds the silence between
  two reads, not the whole response, so only a non-streamed or stalled request is at risk and the layer is no
  cause of this window's errors;
- otherwise a warning about the risk: requests *would be* cut, none is counted (or countable) at this layer.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nbhelpers.errors import EvidenceMissing
from nbhelpers.evidence.model import Evidence
from nbhelpers.facts import common, latency_buckets, traffic
from nbhelpers.facts import timeout_path as chain
from nbhelpers.facts.timeout_layers import (
    ALB_ATTRIBUTES,
    ALB_IDLE_KEY,
    CLIENT_TIMEOUT_ANNOTATION,
    NGINX_READ,
    NGINX_SEND,
    Chain,
    Placed,
    collect,
    kserve_owned,
    max_revision_timeout,
)
from nbhelpers.facts.timeout_path import Layer
from nbhelpers.findings import patches
from nbhelpers.findings.catalog import Severity
from nbhelpers.findings.model import Finding, Fix
from nbhelpers.findings.steps import StepInfo
from nbhelpers.metrics.series import MetricData
from nbhelpers.sources import kinds, kube
from nbhelpers.util.times import duration_seconds

STEP = StepInfo(
    "timeouts",
    "Timeouts",
    "Are timeouts aligned from the client to the server, against observed latency?",
)


def run(evidence: Evidence) -> list[Finding]:
    common.skip_modelmesh(evidence)
    _require_routing_reads(evidence)
    path = collect(evidence)
    if not any(layer.finite for layer in path.layers):
        return []
    p99 = evidence.metrics.get("vllm_e2e_p99")
    e2e, queue, ttft = (
        _peak(p99),
        _peak(evidence.metrics.get("vllm_queue_time_p95")),
        _peak(evidence.metrics.get("vllm_ttft_p95")),
    )
    observed = chain.Observed(
        e2e,
        queue,
        ttft,
        cold_start=None,  # the cold_start step does not measure it yet: the budget is the latency alone
        e2e_top=_on_top(evidence, latency_buckets.E2E, e2e),
        queue_top=_on_top(evidence, latency_buckets.QUEUE, queue),
        ttft_top=_on_top(evidence, latency_buckets.TTFT, ttft),
    )
    cut = _cut_504s(evidence)
    plateau = chain.plateau_at(_values(p99), path.layers)
    if plateau is not None and observed.e2e_top is not None and _near(plateau, observed.e2e_top):
        plateau = None  # the p99 flattens at the end of vLLM's histogram, not at this layer's timeout
    judge = TimeoutJudge(evidence, path, observed, cut, plateau, _latency_note(p99, observed))
    return [finding for item in path.placed if (finding := judge.finding(item)) is not None]


def _on_top(evidence: Evidence, histogram: str, peak: float | None) -> float | None:
    """The histogram's top finite bucket when the window's peak quantile sits on it, else None."""
    top = latency_buckets.top_bucket(evidence, histogram)
    return top.seconds if top is not None and top.holds(peak) else None


def _near(layer: Layer, seconds: float) -> bool:
    return layer.seconds is not None and abs(layer.seconds - seconds) <= chain.PLATEAU_TOLERANCE * layer.seconds


def _require_routing_reads(evidence: Evidence) -> None:
    """Without any routing object the chain cannot be told: raise only when every routing read was lost."""
    failures = [evidence.failure(kind.key) for kind in (kinds.INGRESS, kinds.VIRTUAL_SERVICE, kinds.HTTP_ROUTE)]
    lost = [failure for failure in failures if failure is not None and failure.lost]
    if len(lost) == 3:
        raise EvidenceMissing(lost[0].what, "; ".join(f"{f.what}: {f.status}" for f in lost))


def _values(data: MetricData | None) -> list[float]:
    if data is None or data.status != "ok":
        return []
    return [value for series in data.series for _, value in series.samples if math.isfinite(value)]


def _peak(data: MetricData | None) -> float | None:
    values = _values(data)
    return max(values) if values else None


def _latency_note(data: MetricData | None, observed: chain.Observed) -> str | None:
    if observed.e2e_top is not None:
        return (
            f"end-to-end latency (vllm_e2e_p99): its peak is {chain.format_seconds(observed.e2e_top)}, the top bucket "
            "of vLLM's e2e histogram (before vllm-project/vllm PR #15202 the buckets end at 60 s): requests took at "
            "least that long, how much longer is unknown. A flat p99 there is the histogram's end, not a timeout, "
            "and no timeout is derived from it"
        )
    if data is not None and data.status == "ok" and _values(data):
        return None
    status = "no Prometheus data" if data is None else data.status
    return f"end-to-end latency (vllm_e2e_p99): {status}; timeouts compared with each other only"


def _count(
    data: MetricData | None, code_label: str, keep: Callable[[Mapping[str, str]], bool], code: str | None = "504"
) -> float | None:
    """Requests answered ``code`` (any code when None) in the window: the per-second rates summed over the
    samples times the step."""
    if data is None or data.status not in ("ok", "empty"):
        return None
    return sum(
        value * data.step
        for series in data.series
        if (code is None or series.labels.get(code_label) == code) and keep(series.labels)
        for _, value in series.samples
        if math.isfinite(value)
    )


def _flags(labels: Mapping[str, str]) -> set[str]:
    return set(str(labels.get("response_flags") or "").split(","))


def _cut_504s(evidence: Evidence) -> chain.Cut504s:
    istio = evidence.metrics.get("istio_requests_by_code")
    nginx = evidence.metrics.get("nginx_requests_by_status")
    layers = traffic.knative_layers(evidence)
    outer = _outer_gateway(evidence)
    return chain.Cut504s(
        nginx=_count(nginx, "status", lambda _: True),
        nginx_requests=_count(nginx, "status", lambda _: True, code=None),
        istio_upstream_timeout=_count(istio, "response_code", lambda labels: "UT" in _flags(labels)),
        istio_passed_through=_count(istio, "response_code", lambda labels: "UT" not in _flags(labels)),
        # Knative's cut requests are 504 outside its timeout handlers (queue-proxy's revision_request_count, the
        # activator) and 502 inside (revision_app_request_count): read the outer counters when they were read.
        knative=layers.timeouts
        if layers is not None
        else _count(evidence.metrics.get("knative_requests_by_code"), "response_code", lambda _: True),
        outer_gateway_timeouts=outer.timeouts if outer is not None else None,
        outer_by_host=outer is not None and outer.by_host,
    )


def _outer_gateway(evidence: Evidence) -> traffic.OuterGateway | None:
    """Serverless only: the external gateway's answers towards knative-local-gateway."""
    if common.effective_mode(evidence) != common.SERVERLESS:
        return None
    url = str(kube.status(evidence.isvc).get("url") or "")
    return traffic.outer_gateway(evidence, url.partition("://")[2].split("/")[0].split(":")[0].lower())


def _describe_cut(cut: chain.Cut504s) -> str:
    def show(value: float | None) -> str:
        return "no metric" if value is None else f"≈{value:.0f}"

    return (
        f"504s in the window: ingress-nginx {show(cut.nginx)}; Istio with flag UT {show(cut.istio_upstream_timeout)}; "
        f"Istio passed through {show(cut.istio_passed_through)}; Knative {show(cut.knative)}; cloud load balancers "
        "and Envoy Gateway: not in Prometheus"
    )


def _layer_lines(evidence: Evidence) -> list[str]:
    """Knative's 5xx by layer and the external gateway's, when those counters were read."""
    layers = traffic.knative_layers(evidence)
    outer = _outer_gateway(evidence)
    return [item.describe() for item in (layers, outer) if item is not None]


# --- findings -------------------------------------------------------------------------------------


class TimeoutJudge:
    """Decides, layer by layer, whether its timeout is misaligned, and writes the finding."""

    def __init__(
        self,
        evidence: Evidence,
        path: Chain,
        observed: chain.Observed,
        cut: chain.Cut504s,
        plateau: Layer | None,
        latency_note: str | None,
    ) -> None:
        self.evidence = evidence
        self.path = path
        self.layers = path.layers
        self.observed = observed
        self.cut = cut
        self.plateau = plateau
        self.latency_note = latency_note

    def finding(self, item: Placed) -> Finding | None:
        layer = item.layer
        if not layer.finite:
            return None
        inner = chain.undercut(layer, self.layers)
        slow = chain.cuts_latency(layer, self.observed)
        if not slow and self.observed.e2e_top is not None:
            # The p99 only says "at least the top bucket": 504s counted at this layer still show the cut.
            slow = chain.attribute(layer, self.cut, None).measured
        if not inner and not slow:
            return None
        lb_default = layer.is_default and layer.role in chain.EDGE_ROLES
        attribution = chain.attribute(layer, self.cut, self.plateau) if slow else None
        streamed = slow and chain.passed_streamed(layer, self.observed, self.cut)
        severity: Severity | None = None
        if lb_default and not slow:
            severity = Severity.INFO  # a latent default: nothing in the window came near it
        elif attribution is not None and attribution.measured:
            severity = Severity.CRITICAL
        elif streamed:
            severity = Severity.INFO  # long requests passed it streamed: a risk, not a cause of this window's errors
        code = "TIMEOUT_LB_DEFAULT" if lb_default else "TIMEOUT_MISALIGNED"
        cutting = attribution is not None and (attribution.measured or self.plateau == layer)
        target = chain.recommended_seconds(layer, self.layers, self.observed, self._ceiling(layer), cutting)
        summary = self._summary(layer, inner, slow, attribution, severity, streamed)
        fix = self._fix(item, target)
        if slow and self.observed.e2e_top is not None:
            fix = dataclasses.replace(fix, what=fix.what + " " + self._floor_only(target))
        objects = [kube.ref(self.evidence.isvc), *(ref for ref in [layer.obj, *(i.obj for i in inner)] if ref)]
        return Finding(
            code=code,
            title=self._title(layer, inner, slow, streamed),
            summary=summary,
            objects=tuple(dict.fromkeys(objects)),
            evidence=tuple(self._evidence_lines(attribution)),
            fix=fix,
            severity=severity,
        )

    def _floor_only(self, target: int) -> str:
        """Why a value derived from a p99 on the histogram's top bucket is only a floor."""
        top = chain.format_seconds(self.observed.e2e_top or 0)
        return (
            f"vLLM's e2e histogram ends at {top} here, so {target} s only clears the latency the window can show: "
            "the long requests may take longer. Measure them first (client-side timings, or a vLLM whose buckets "
            "reach further: vllm-project/vllm PR #15202) and set the timeout from that."
        )

    def _long_requests(self) -> str:
        """The window's long-request latency, as a lower bound when the p99 is the histogram's top bucket."""
        assert self.observed.budget is not None
        if self.observed.e2e_top is not None:
            return f"at least {chain.format_seconds(self.observed.e2e_top)}"
        return chain.format_seconds(round(self.observed.budget, 1))

    def _ceiling(self, layer: Layer) -> float | None:
        return max_revision_timeout(self.evidence) if layer.role == "knative" else None

    def _title(self, layer: Layer, inner: Sequence[Layer], slow: bool, streamed: bool) -> str:
        value = chain.format_seconds(layer.seconds or 0)
        default = " (default)" if layer.is_default else ""
        if streamed:
            assert self.observed.e2e_p99 is not None
            return (
                f"{layer.name} {value}{default}: long requests "
                f"({chain.format_seconds(round(self.observed.e2e_p99, 1))} p99) pass it streamed, "
                "non-streamed ones would be cut"
            )
        if slow:
            return f"{layer.name} {value}{default} is below the long requests ({self._long_requests()} p99)"
        longest = max(inner, key=lambda other: other.seconds or 0.0)
        return (
            f"{layer.name} {value}{default} gives up before {longest.name} {chain.format_seconds(longest.seconds or 0)}"
        )

    def _summary(
        self,
        layer: Layer,
        inner: Sequence[Layer],
        slow: bool,
        attribution: chain.Attribution | None,
        severity: Severity | None,
        streamed: bool = False,
    ) -> str:
        value = chain.format_seconds(layer.seconds or 0)
        where = f" on {layer.obj}" if layer.obj else ""
        setting = (
            f"left at its default of {value} ({layer.source})"
            if layer.is_default
            else f"set to {value} ({layer.source})"
        )
        parts = [f"The {layer.name}{where} is {setting}."]
        if slow and self.observed.e2e_top is not None:
            parts.append(
                f"The window's long requests take {self._long_requests()}: vLLM's end-to-end p99 sits on the top "
                "bucket of its histogram, so the latency above it is unknown"
                + self._consequence(layer, attribution, streamed)
            )
        elif slow:
            assert self.observed.budget is not None and self.observed.e2e_p99 is not None
            parts.append(
                f"The window's long requests take {chain.format_seconds(round(self.observed.budget, 1))} "
                f"(vLLM end-to-end p99 {chain.format_seconds(round(self.observed.e2e_p99, 1))}, queue time p95 "
                f"{chain.describe_seconds(self.observed.queue_p95)} of it; cold start not measured)"
                + self._consequence(layer, attribution, streamed)
            )
        if inner:
            names = ", ".join(f"{i.name} {chain.format_seconds(i.seconds or 0)}" for i in inner)
            parts.append(
                f"It also gives up before the layers behind it ({names}): their longer timeouts never take effect, "
                "and a request past this layer's limit keeps the layers behind it and the GPU busy for nobody."
            )
        if attribution is not None and attribution.reasons:
            parts.append("Attribution: " + "; ".join(attribution.reasons) + ".")
        if severity is Severity.CRITICAL:
            assert attribution is not None
            parts.append(
                f"Raised to critical: ≈{attribution.count:.0f} 504s in the window are attributed to this layer."
            )
        elif severity is Severity.INFO and not streamed and self.observed.e2e_top is not None:
            parts.append(
                f"vLLM's end-to-end p99 sits on the top bucket of its histogram "
                f"({chain.format_seconds(self.observed.e2e_top)}), so whether long requests reach this layer is "
                "unknown; none of its 504s is counted, so this is reported for information only."
            )
        elif severity is Severity.INFO and not streamed:
            parts.append("No request in the window came near it, so this is reported for information only.")
        return " ".join(parts)

    def _consequence(self, layer: Layer, attribution: chain.Attribution | None, streamed: bool) -> str:
        """What this layer does to the long requests, worded after what the window shows at this layer."""
        value = chain.format_seconds(layer.seconds or 0)
        measured = attribution is not None and attribution.measured
        if layer.kind == chain.REQUEST:
            cut = "are cut" if measured else "would be cut"
            return (
                f", so requests longer than {value} {cut} by this layer with a 504 (a request timeout bounds the "
                "whole exchange, streamed or not), while the layers behind it (and vLLM) may go on working on them."
                + ("" if measured else " " + self._unmeasured(layer))
            )
        silence = (
            f"responses silent for {value} (a non-streamed one until its last token, a stream before its first token "
            "or between two tokens)"
            if layer.kind == chain.IDLE
            else f"responses whose first byte takes longer than {value} (a non-streamed one sends it with its last "
            "token)"
        )
        if measured:
            return (
                f", so {silence} are cut by this layer with a 504, while the layers behind it (and vLLM) may go on "
                "working on them."
            )
        if streamed:
            assert self.observed.ttft_p95 is not None
            return (
                ". This idle timeout bounds the silence between two reads from the server, not the whole response, "
                "and it "
                f"counted none of its own 504s among ≈{self.cut.nginx_requests or 0:.0f} requests although the p99 "
                f"ran past {value}, with the first token after "
                f"{chain.format_seconds(round(self.observed.ttft_p95, 1))} (p95): the long requests were streamed and "
                f"passed it. Only {silence} would be cut: a "
                "risk for non-streamed clients, not a cause of this window's errors, so this is reported for "
                "information."
            )
        return f", so {silence} would be cut by this layer with a 504. " + self._unmeasured(layer)

    def _unmeasured(self, layer: Layer) -> str:
        """Why a layer with no measured 504s is a risk, and how much the window says about it."""
        if self.plateau == layer:
            return "No 504 of this layer is counted, but the latency flattening at its value suggests it cuts them."
        if layer.inferred_504s:
            return "This layer's own 504s are not in Prometheus: a risk inferred from the latency, not a measured cut."
        if chain.is_nginx(layer) and self.cut.nginx is None:
            return "ingress-nginx's request counts are not available: a risk, not a measured cut."
        return "No 504 of this layer is counted in the window: a risk, not a measured cut."

    def _evidence_lines(self, attribution: chain.Attribution | None) -> list[str]:
        lines = [f"chain: {chain.describe_chain(self.layers)}"]
        lines += [layer.describe() for layer in self.layers]
        lines.append(self.observed.describe())
        if self.latency_note:
            lines.append(self.latency_note)
        lines.append(_describe_cut(self.cut))
        lines += _layer_lines(self.evidence)
        if attribution is not None:
            lines += [f"attribution: {reason}" for reason in attribution.reasons]
        lines.append(chain.streaming_note(self.observed, self.layers, self.cut))
        lines += self.path.notes
        return lines

    # --- fixes ------------------------------------------------------------------------------------

    def _fix(self, item: Placed, target: int) -> Fix:
        layer = item.layer
        if layer.role == "client":
            return Fix(
                what=f"Raise the client's timeout to at least {target} s, or lower the layers behind it below the "
                "client's so that they answer a clean 504 before it gives up. The client is not a cluster object: "
                f"update its configuration and the annotation {CLIENT_TIMEOUT_ANNOTATION} that records it."
            )
        if layer.role == "knative" and layer.kind == chain.IDLE:
            return Fix(
                what=f"Raise or remove the revision's idleTimeoutSeconds (at least {target} s, 0 for none). KServe owns the "
                "Knative Service and does not expose it: change revision-idle-timeout-seconds in "
                f"{self.evidence.site.knative_namespace}/config-defaults (cluster-wide) instead."
            )
        if layer.role == "knative":
            return self._isvc_timeout_fix(layer, target)
        assert item.obj is not None
        if layer.role == "lb" and layer.name.startswith("GKE"):
            return Fix(
                what=f"Create a BackendConfig with spec.timeoutSec: {target} and reference it from the predictor Service "
                "with the annotation cloud.google.com/backend-config (its default is 30 s). This tool does not read "
                "BackendConfigs, so check first whether one already sets it. Roll back by removing the annotation."
            )
        if layer.role in ("lb", "ingress"):
            return self._ingress_fix(layer, item.obj, target)
        if layer.role == "gateway":
            return self._http_route_fix(layer, item.obj, target)
        return self._virtual_service_fix(layer, item.obj, target)

    def _isvc_timeout_fix(self, layer: Layer, target: int) -> Fix:
        ceiling = max_revision_timeout(self.evidence)
        what = (
            f"Set spec.predictor.timeout: {target} on the InferenceService: KServe owns the Knative Service and "
            "passes it to the revision's timeoutSeconds (and, in newer versions, responseStartTimeoutSeconds)."
        )
        if layer.role == "gateway":
            what = (
                f"Set spec.predictor.timeout: {target} on the InferenceService: KServe generates {layer.obj} and "
                "writes "
                "that value into its timeouts.request (a direct edit of the route is reverted)."
            )
        elif self.observed.budget is not None and target < self.observed.budget * chain.SAFETY_FACTOR:
            what += (
                f" {target} s is Knative's max-revision-timeout-seconds ({ceiling:g} s in "
                f"{self.evidence.site.knative_namespace}/config-defaults): a longer timeout needs a cluster "
                "administrator to raise it there (and the activator's terminationGracePeriodSeconds with it)."
            )

        def set_timeout(isvc: common.KubeObject) -> None:
            isvc.setdefault("spec", {}).setdefault("predictor", {})["timeout"] = target

        return Fix.from_plan(what, patches.plan_patch(self.evidence.isvc, set_timeout))

    def _ingress_fix(self, layer: Layer, ingress: Mapping[str, Any], target: int) -> Fix:
        alb = layer.name.startswith("AWS ALB")
        annotations = kube.annotations(ingress)
        if alb:
            attributes = chain.parse_alb_attributes(annotations.get(ALB_ATTRIBUTES, ""))
            attributes[ALB_IDLE_KEY] = str(target)
            wanted = {ALB_ATTRIBUTES: chain.format_alb_attributes(attributes)}
            what = f"Set the ALB idle timeout to {target} s ({ALB_ATTRIBUTES}: {wanted[ALB_ATTRIBUTES]})."
        else:
            wanted = {NGINX_READ: str(target), NGINX_SEND: str(target)}
            what = f"Set ingress-nginx's proxy-read-timeout (and proxy-send-timeout) to {target} s on {layer.obj}."
        owner = common.controller_owner(ingress)
        if owner is None:
            return Fix.from_plan(
                what,
                patches.plan_patch(ingress, lambda obj: obj["metadata"].setdefault("annotations", {}).update(wanted)),
            )
        if kserve_owned(ingress):
            # KServe copies the InferenceService's annotations onto the Ingress it generates
            # (kserve/kserve raw_ingress_reconciler.go generateMetadata: "get annotations from isvc").
            what += (
                f" {layer.obj} is generated by {owner}, which copies the InferenceService's annotations onto it: "
                "annotate the InferenceService (KServe also copies them to the predictor's other objects)."
            )
            return Fix.from_plan(
                what,
                patches.plan_patch(
                    self.evidence.isvc, lambda obj: obj["metadata"].setdefault("annotations", {}).update(wanted)
                ),
            )
        return Fix(what=what + f" {layer.obj} is generated by {owner}: change the object it is generated from.")

    def _http_route_fix(self, layer: Layer, route: Mapping[str, Any], target: int) -> Fix:
        if self.evidence.target.is_llmisvc and kserve_owned(route):
            # KServe renders the route from spec.router.route.http.spec merged over its preset
            # (config/llmisvcconfig/config-llm-router-route.yaml, whose every rule sets timeouts.request and
            # backendRequest to 0s: no timeout).
            return Fix(
                what=f"Set timeouts.request (and backendRequest) to {target}s, or 0s for none as KServe's route "
                "preset does, on every rule of the route in the LLMInferenceService's spec.router.route.http.spec: "
                f"KServe renders {layer.obj} from it, so the change belongs there rather than on the route. A Gateway "
                "implementation's own default applies only to rules without timeouts. (No patch yet for an "
                "LLMInferenceService.)"
            )
        if kserve_owned(route):
            return self._isvc_timeout_fix(layer, target)
        owner = common.controller_owner(route)
        what = f"Set timeouts.request (and any shorter backendRequest) of {layer.obj} to {target}s."
        if owner is not None:
            return Fix(what=what + f" The route is generated by {owner}: change the object it is generated from.")

        def set_timeouts(obj: common.KubeObject) -> None:
            for rule in obj["spec"].get("rules") or []:
                timeouts = rule.setdefault("timeouts", {})
                for key in ("request", "backendRequest"):
                    current = duration_seconds(timeouts.get(key))
                    if key == "request" or (current is not None and current < target):
                        timeouts[key] = f"{target}s"

        return Fix.from_plan(what, patches.plan_patch(route, set_timeouts))

    def _virtual_service_fix(self, layer: Layer, service: Mapping[str, Any], target: int) -> Fix:
        what = f"Raise the route timeout of {layer.obj} to {target}s on every http route that sets a shorter one."
        owner = common.controller_owner(service)
        if owner is not None:
            return Fix(
                what=what + f" It is generated by {owner}, which would revert a direct edit: KServe and Knative derive "
                "route timeouts from the InferenceService's spec.predictor.timeout, so set that instead."
            )

        def set_timeout(obj: common.KubeObject) -> None:
            for http in obj["spec"].get("http") or []:
                current = duration_seconds(http.get("timeout"))
                if current and current < target:
                    http["timeout"] = f"{target}s"

        return Fix.from_plan(what, patches.plan_patch(service, set_timeout))
