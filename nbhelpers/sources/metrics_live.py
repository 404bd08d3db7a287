"""Range queries against a live Prometheus (or a Prometheus-compatible API such as Thanos or Mimir).

Built on ``prometheus-api-client``: its ``PrometheusConnect`` sends the query
with the caller's headers (bearer token, ``X-Scope-OrgID``), TLS settings,
timeout and retry policy. Every failure becomes a :class:`ReadFailed` whose
status tells the run what happened (docs/contracts.md#findingsjson-v1); the token never appears in
a message, and the URL appears only through ``redact_url`` (no userinfo, no
credential query parameter).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import requests
import urllib3
from prometheus_api_client.exceptions import PrometheusApiClientException
from prometheus_api_client.prometheus_connect import PrometheusConnect
from urllib3.exceptions import InsecureRequestWarning
from urllib3.util.retry import Retry

from nbhelpers.errors import ReadFailed, RunbookError
from nbhelpers.sources.base import RangeResult, request_timeout, series_from_matrix
from nbhelpers.util.limits import MAX_NESTING_DEPTH, LimitExceeded
from nbhelpers.util.redaction import redact_text, redact_url
from nbhelpers.util.safe_load import check_depth, load_json

# Answers worth a second try: overload and gateway errors in front of Prometheus. Not 503: Prometheus
# answers 503 for a query that timed out or was cancelled, and running it again costs the same time.
_RETRY_STATUSES = (429, 502, 504)
_AUTH_HINT = "check --prometheus-token-env / --prometheus-header"


class LiveMetrics:
    """A :class:`~nbhelpers.sources.base.MetricsSource` that asks a Prometheus HTTP API."""

    mode = "live"
    # gather() sends this many range queries at once: each waits on Prometheus, not on this process. Four keep
    # a triage's load on Prometheus small while cutting the ~20 round trips' wall time about fourfold.
    parallel_queries = 4

    def __init__(
        self,
        url: str,
        token: str | None,
        ca_file: str | None,
        headers: dict[str, str],
        verify: bool,
        timeout_seconds: float,
        retries: int = 2,
        deadline: float | None = None,
    ) -> None:
        self._url = _checked_url(url)
        self.url = redact_url(self._url)  # what messages and records show; the client gets the real one
        self._verify = verify
        self._timeout_seconds = timeout_seconds
        self._deadline = deadline  # a time.monotonic() moment: no query is sent, or waited for, past it
        if not verify:
            # The user asked for no verification (--prometheus-insecure): do not repeat it per query. Set once
            # for the process rather than per query: warning filters are global, and queries run in threads.
            urllib3.disable_warnings(InsecureRequestWarning)
        request_headers = dict(headers)
        if token:
            request_headers["Authorization"] = f"Bearer {token}"
        session = requests.Session()
        session.verify = ca_file if (ca_file and verify) else verify
        session.hooks["response"].append(_raise_for_http_error)
        self._client = PrometheusConnect(
            url=self._url,
            headers=request_headers,
            session=session,
            retry=_retry_policy(retries),
            # requests takes fractional seconds; the library's annotation says int.
            timeout=timeout_seconds,  # type: ignore[arg-type]
        )

    def __repr__(self) -> str:
        return f"LiveMetrics({self.url!r})"

    def close(self) -> None:
        """Release the HTTP connection pool."""
        self._client.close()

    def query_range(self, query_id: str, promql: str, start: datetime, end: datetime, step_seconds: int) -> RangeResult:
        """The matrix answer of ``promql`` over [start, end]; ``ReadFailed`` when there is none."""
        timeout = request_timeout(query_id, self._timeout_seconds, self._deadline)
        try:
            # requests takes fractional seconds; the library's annotation says int.
            result = self._client.custom_query_range(
                promql,
                start,
                end,
                str(step_seconds),
                timeout=timeout,  # type: ignore[arg-type]
            )
            if not isinstance(result, list):
                raise TypeError("data.result is not a list")
            check_depth(result)
            return series_from_matrix({"data": {"resultType": "matrix", "result": result}}, promql)
        except requests.HTTPError as failure:
            raise _http_failure(query_id, failure.response) from None
        except RecursionError:  # the JSON decoder's own depth limit, far above ours
            error = MAX_NESTING_DEPTH.exceeded("a document nested too deep to parse")
            raise ReadFailed(query_id, "error", f"answer from {self.url} refused: {error}") from None
        except LimitExceeded as failure:
            raise ReadFailed(query_id, "error", f"answer from {self.url} refused: {failure}") from None
        except requests.Timeout:
            raise ReadFailed(query_id, "timeout", f"no answer from {self.url} within the timeout") from None
        except requests.exceptions.SSLError as failure:
            raise ReadFailed(
                query_id,
                "unreachable",
                f"TLS handshake with {self.url} failed ({_root_cause(failure)}): "
                "use --prometheus-ca-file, or --prometheus-insecure",
            ) from None
        except requests.ConnectionError as failure:
            raise ReadFailed(
                query_id, "unreachable", f"cannot connect to {self.url} ({_root_cause(failure)})"
            ) from None
        except (ValueError, KeyError, TypeError, OverflowError, PrometheusApiClientException) as failure:
            # A body that is not JSON (ValueError), JSON without a matrix in data.result, samples that are not numbers.
            detail = f"no {failure} field" if isinstance(failure, KeyError) else _first_line(failure)
            raise ReadFailed(query_id, "error", f"malformed answer from {self.url}: {redact_text(detail)}") from None
        except requests.RequestException as failure:  # e.g. a connection dropped in the middle of the body
            raise ReadFailed(
                query_id, "error", f"request to {self.url} failed: {redact_text(_first_line(failure))}"
            ) from None


def _checked_url(url: str) -> str:
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise RunbookError(
            f"--prometheus {redact_url(url)!r} is not an http(s) URL: use e.g. http://prometheus.monitoring:9090"
        )
    return url.strip().rstrip("/")


def _retry_policy(retries: int) -> Retry:
    """Retry refused connections and overload answers, never a read timeout (a slow query stays slow)."""
    return Retry(
        total=retries,
        connect=retries,
        read=False,
        status=retries,
        other=0,
        backoff_factor=0.2,
        status_forcelist=_RETRY_STATUSES,
        allowed_methods=frozenset({"GET"}),
        respect_retry_after_header=False,
        raise_on_status=False,
    )


def _raise_for_http_error(response: requests.Response, *_args: Any, **_kwargs: Any) -> None:
    """A session hook: turn a 4xx/5xx answer into ``HTTPError`` that carries the answer's body.

    The body is read and the connection released first: the hook runs before requests reads it.
    """
    if response.status_code < 400:
        return
    _ = response.content
    response.close()
    response.raise_for_status()


def _http_failure(query_id: str, response: requests.Response | None) -> ReadFailed:
    if response is None:
        return ReadFailed(query_id, "error", "HTTP error without a response")
    code = response.status_code
    if code in (401, 403):
        return ReadFailed(query_id, "forbidden", f"HTTP {code} from {_origin(response)}: {_AUTH_HINT}")
    error_type, message = _prometheus_error(response)
    message = redact_text(message)
    if error_type == "timeout":
        return ReadFailed(query_id, "timeout", f"Prometheus gave up on the query: {message}")
    return ReadFailed(query_id, "error", f"HTTP {code}: {message}")


def _prometheus_error(response: requests.Response) -> tuple[str, str]:
    """(errorType, error) from Prometheus' JSON error body, else ("", the start of the body)."""
    try:
        body = load_json(response.content)
    except (ValueError, LimitExceeded):
        body = None
    if isinstance(body, dict) and body.get("error"):
        return str(body.get("errorType") or ""), str(body["error"])
    text = " ".join(response.text.split())[:200]
    return "", text or response.reason or "no body"


def _origin(response: requests.Response) -> str:
    parts = urlsplit(response.url)
    return redact_url(f"{parts.scheme}://{parts.netloc}")


def _root_cause(failure: requests.RequestException) -> str:
    """The innermost reason of a connection failure, without urllib3's object reprs and the query string."""
    inner = failure.args[0] if failure.args else failure
    reason = getattr(inner, "reason", inner)
    return redact_text(_first_line(reason).rsplit("): ", 1)[-1].rsplit(">: ", 1)[-1])


def _first_line(failure: object) -> str:
    text = str(failure).strip()
    return text.splitlines()[0][:200] if text else type(failure).__name__
