"""The live cluster source: read-only GET requests to a Kubernetes API server.

Requests go through the official ``kubernetes`` client's REST client, so
kubeconfig handling, TLS, client certificates, exec credential plugins and
proxies behave as they do for every other tool built on it. Answers are
decoded to plain dicts (the same camelCase JSON kubectl shows); the client's
generated models are not used, so custom resources and built-in kinds are
handled alike.

Only GET is ever sent. Every failure becomes a :class:`ReadFailed` with one of
the statuses the evidence pass records (``forbidden``, ``not_installed``,
``missing``, ``error``, ``timeout``, ``unreachable``); configuration problems that stop the run become
a :class:`RunbookError` with one line saying what to fix.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import urllib3
import yaml
from kubernetes import config as kube_config
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from urllib3.util.retry import Retry

from nbhelpers.errors import ReadFailed, RunbookError
from nbhelpers.sources import kube
from nbhelpers.sources.base import (
    LogRequest,
    describe_get,
    describe_list,
    describe_logs,
    request_timeout,
)
from nbhelpers.sources.kinds import Kind
from nbhelpers.sources.kube import KubeObject
from nbhelpers.util import limits
from nbhelpers.util.safe_load import load_json

PAGE_SIZE = 500
DEFAULT_KUBECONFIG = "~/.kube/config"
DEFAULT_CREDENTIAL_TIMEOUT = 30.0  # seconds an exec credential plugin may take
# A refused or reset connection is retried twice; a read that timed out is not,
# so a slow API server costs one timeout per read, not four.
_RETRIES = Retry(total=2, connect=2, read=0, status=0, redirect=0, other=0)
_UNKNOWN_RESOURCE = "the server could not find the requested resource"


# --- configuration ---------------------------------------------------------------------------


def load_configuration(
    kubeconfig: str | None, context: str | None, credential_timeout: float = DEFAULT_CREDENTIAL_TIMEOUT
) -> Configuration:
    """A client configuration from ``kubeconfig`` (or KUBECONFIG / ~/.kube/config), else in-cluster.

    Loading runs a kubeconfig's exec credential plugin, which the kubernetes client starts with no
    timeout: a plugin waiting for an interactive login would hang the run, so it gets ``credential_timeout``.
    """
    configuration = Configuration()
    files = kubeconfig_files(kubeconfig)
    if not files:
        if context:
            raise RunbookError(
                f"--context {context} needs a kubeconfig, and none was found (KUBECONFIG, ~/.kube/config)"
            )
        try:
            kube_config.load_incluster_config(client_configuration=configuration)
        except ConfigException as error:
            raise RunbookError(
                f"no kubeconfig found (--kubeconfig, KUBECONFIG, ~/.kube/config) and not running in a pod ({error})"
            ) from None
        return configuration
    shown = os.pathsep.join(files)
    chosen = choose_context(files, context)
    loading = _in_background(
        lambda: kube_config.load_kube_config(
            config_file=shown, context=chosen, client_configuration=configuration, persist_config=False
        )
    )
    loading.join(credential_timeout)
    if loading.is_alive():
        raise RunbookError(
            f"kubeconfig {shown}, context {chosen}: the credential plugin gave no token within "
            f"{credential_timeout:g}s (is it waiting for an interactive login? run 'kubectl get ns' once first)"
        )
    failure = loading.error
    if isinstance(failure, (ConfigException, OSError, ValueError, TypeError, KeyError, AttributeError)):
        raise RunbookError(f"kubeconfig {shown} cannot be used: {_first_line(failure)}") from None
    if failure is not None:
        raise failure
    return configuration


class _Background(threading.Thread):
    """A daemon thread that keeps the exception its work raised (a stuck one must not block exit)."""

    def __init__(self, work: Callable[[], object]) -> None:
        super().__init__(daemon=True, name="kubeconfig-load")
        self._work = work
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._work()
        except BaseException as error:  # handed to the caller, which decides what is a user error
            self.error = error


def _in_background(work: Callable[[], object]) -> _Background:
    thread = _Background(work)
    thread.start()
    return thread


def kubeconfig_files(explicit: str | None) -> list[str]:
    """The kubeconfig files to merge, in kubectl's order of precedence; empty means in-cluster."""
    if explicit:
        path = os.path.expanduser(explicit)
        if not os.path.isfile(path):
            raise RunbookError(f"kubeconfig {explicit} not found")
        return [path]
    from_environment = os.environ.get("KUBECONFIG", "")
    if from_environment:
        existing = [
            os.path.expanduser(part)
            for part in from_environment.split(os.pathsep)
            if part and os.path.isfile(os.path.expanduser(part))
        ]
        if not existing:
            raise RunbookError(f"KUBECONFIG={from_environment} names no existing file")
        return existing
    default = os.path.expanduser(DEFAULT_KUBECONFIG)
    return [default] if os.path.isfile(default) else []


def choose_context(files: list[str], context: str | None) -> str:
    """The context to use: ``context``, else the first current-context set (kubectl's rule).

    Fails with one clear line when a kubeconfig is malformed or the context is not defined in it.
    """
    names: list[str] = []
    current = ""
    for path in files:
        document = read_kubeconfig(path)
        for entry in document.get("contexts") or []:
            if isinstance(entry, dict) and entry.get("name") and str(entry["name"]) not in names:
                names.append(str(entry["name"]))
        current = current or str(document.get("current-context") or "")
    shown = os.pathsep.join(files)
    available = ", ".join(names) if names else "none"
    if context is not None and context not in names:
        raise RunbookError(f"context {context!r} not in kubeconfig {shown} (contexts: {available})")
    if context is None and current not in names:
        problem = f"current-context {current!r} is not defined" if current else "no current-context"
        raise RunbookError(f"kubeconfig {shown} has {problem}: pass --context (contexts: {available})")
    return context if context is not None else current


def read_kubeconfig(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            document = yaml.safe_load(handle)
    except yaml.YAMLError as error:
        raise RunbookError(f"kubeconfig {path} is not valid YAML ({_first_line(error)})") from None
    except (OSError, UnicodeDecodeError) as error:
        raise RunbookError(f"kubeconfig {path} cannot be read ({error})") from None
    if not isinstance(document, dict) or not isinstance(document.get("contexts") or [], list):
        raise RunbookError(f"kubeconfig {path} is not a kubeconfig (expected clusters, contexts and users)")
    return document


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# --- transport -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Answer:
    status: int
    body: bytes

    def message(self) -> str:
        """The API server's own message from a ``Status`` body, else the start of the body."""
        try:
            document = load_json(self.body)
        except (ValueError, limits.LimitExceeded):  # JSONDecodeError, UnicodeDecodeError
            document = None
        if isinstance(document, dict) and document.get("message"):
            return str(document["message"])
        return self.body.decode("utf-8", errors="replace").strip()[:200]


class _Transport:
    """GET requests through the kubernetes client's REST client, authenticated as the client would.

    Every request has a timeout: ``timeout_seconds``, shortened to what is left before ``deadline``
    (a ``time.monotonic()`` moment) so that the run's --deadline also bounds a read in flight.
    """

    def __init__(self, configuration: Configuration, timeout_seconds: float, deadline: float | None = None) -> None:
        settings: Any = configuration  # the stubs do not declare retries as a Retry, nor auth_settings()
        settings.retries = _RETRIES
        self.settings = settings
        self.server = str(settings.host)
        self.timeout_seconds = timeout_seconds
        self.deadline = deadline
        self.client: Any = ApiClient(configuration)

    def get(self, what: str, path: str, query: dict[str, str] | None = None, max_bytes: int | None = None) -> _Answer:
        """One GET; with ``max_bytes``, at most that many bytes of the body are read (the rest is dropped)."""
        url = self.server.rstrip("/") + path + (f"?{urlencode(query)}" if query else "")
        timeout = request_timeout(what, self.timeout_seconds, self.deadline)
        try:
            response = self.client.rest_client.request("GET", url, headers=self._headers(), _request_timeout=timeout)
            return _Answer(int(response.status), _body_of(response, max_bytes))
        except ApiException as error:
            if not error.status:  # TLS failures arrive as status 0
                reason = f"cannot talk to the API server {self.server}: {error.reason}"
                raise ReadFailed(what, "unreachable", reason) from None
            # Older clients raise for non-2xx answers instead of returning them.
            return _Answer(int(error.status), str(error.body or "").encode())
        except urllib3.exceptions.HTTPError as error:
            raise self._transport_failure(what, error, timeout) from None

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json, */*", "User-Agent": "kserve-vllm-runbooks"}
        for setting in self.settings.auth_settings().values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[str(setting["key"])] = str(setting["value"])
        return headers

    def _transport_failure(self, what: str, error: urllib3.exceptions.HTTPError, timeout: float) -> ReadFailed:
        cause: BaseException = error
        if isinstance(error, urllib3.exceptions.MaxRetryError) and error.reason is not None:
            cause = error.reason
        # NewConnectionError subclasses ConnectTimeoutError: test the narrower class first.
        if isinstance(cause, urllib3.exceptions.NewConnectionError):
            detail = _first_line(cause.__cause__ or cause)
            return ReadFailed(what, "unreachable", f"cannot connect to the API server {self.server}: {detail}")
        if isinstance(cause, urllib3.exceptions.ConnectTimeoutError):
            return ReadFailed(what, "unreachable", f"no answer from the API server {self.server} within {timeout:g}s")
        if isinstance(cause, (urllib3.exceptions.TimeoutError, TimeoutError)):
            if timeout < self.timeout_seconds:
                return ReadFailed(what, "timeout", f"the API server {self.server} did not answer before the --deadline")
            return ReadFailed(what, "timeout", f"the API server {self.server} did not answer within {timeout:g}s")
        if isinstance(cause, (urllib3.exceptions.ProtocolError, ConnectionError)):
            return ReadFailed(what, "unreachable", f"connection to the API server {self.server} failed: {cause}")
        return ReadFailed(what, "error", f"request to the API server {self.server} failed: {_first_line(cause)}")

    def close(self) -> None:
        self.client.close()


def _body_of(response: Any, max_bytes: int | None = None) -> bytes:
    data = response.data
    stream = getattr(response, "response", None)  # the urllib3 answer, not read yet on newer clients
    if data is None and max_bytes is not None and stream is not None:
        return _read_at_most(stream, max_bytes)
    if data is None:  # newer clients read the body lazily
        data = response.read()
    data = data if isinstance(data, bytes) else str(data).encode()
    return data if max_bytes is None else data[:max_bytes]


def _read_at_most(stream: Any, limit: int) -> bytes:
    """At most ``limit`` bytes of a body. A server that sends more than it was asked for (a log
    past ``limitBytes``) is cut off: the connection is closed instead of read to its end."""
    data = bytes(stream.read(limit + 1))
    if len(data) > limit:
        stream.close()
        data = data[:limit]
    stream.release_conn()
    return data


def _http_failure(what: str, answer: _Answer) -> ReadFailed:
    message = answer.message()
    if answer.status == 401:
        return ReadFailed(what, "forbidden", f"unauthorized (401): the API server rejected the credentials: {message}")
    if answer.status == 403:
        return ReadFailed(what, "forbidden", message or "forbidden (403)")
    if answer.status == 404:
        return ReadFailed(what, "missing", message or "not found (404)")
    return ReadFailed(what, "error", f"HTTP {answer.status} from the API server: {message}")


def _decode_json(what: str, answer: _Answer) -> dict[str, Any]:
    try:
        document = load_json(answer.body)
    except limits.LimitExceeded as error:
        raise ReadFailed(what, "error", f"answer from the API server refused: {error}") from None
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
        raise ReadFailed(what, "error", f"malformed answer from the API server (not JSON: {error})") from None
    if not isinstance(document, dict):
        raise ReadFailed(what, "error", "malformed answer from the API server (not a JSON object)")
    return document


def _well_formed(what: str, obj: KubeObject) -> KubeObject:
    """``obj``, or ``ReadFailed`` when the server broke a field its schema types (:func:`kube.shape_problem`)."""
    problem = kube.shape_problem(obj)
    if problem is not None:
        raise ReadFailed(what, "error", f"malformed answer from the API server ({problem})")
    return obj


# --- the source ------------------------------------------------------------------------------


class LiveCluster:
    """A :class:`~nbhelpers.sources.base.ClusterSource` over a live API server (read-only)."""

    mode = "live"
    # Each read waits on a round trip to the API server, not on this process: four in flight cut a triage's
    # ~20 reads' wall time about fourfold on a real control plane, and keep its load on the server small.
    parallel_reads = 4

    def __init__(
        self, kubeconfig: str | None, context: str | None, timeout_seconds: float, deadline: float | None = None
    ) -> None:
        configuration = load_configuration(kubeconfig, context, credential_timeout=timeout_seconds)
        self._transport = _Transport(configuration, timeout_seconds, deadline)
        self._group_versions: dict[str, tuple[str, ...]] | None = None

    @property
    def server(self) -> str:
        return self._transport.server

    def close(self) -> None:
        """Close pooled connections (a run holds one LiveCluster for its whole life)."""
        self._transport.close()

    def __enter__(self) -> LiveCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def server_version(self) -> str | None:
        document = self._get_json("version", "/version")
        major = re.sub(r"\D", "", str(document.get("major") or ""))
        minor = re.sub(r"\D", "", str(document.get("minor") or ""))  # "31+" on some distributions
        return f"{major}.{minor}" if major and minor else None

    def list(self, kind: Kind, namespace: str | None, label_selector: str | None = None) -> list[KubeObject]:
        what = describe_list(kind, namespace, label_selector)
        version = self._served_version(kind, what)
        path = _collection_path(kind, version, namespace)
        api_version = f"{kind.group}/{version}" if kind.group else version
        items: list[KubeObject] = []
        seen_tokens: set[str] = set()
        token = ""
        max_pages, max_items = limits.MAX_LIST_PAGES.value, limits.MAX_LIST_ITEMS.value
        for _page in range(max_pages):
            query = {"limit": str(PAGE_SIZE)}
            if label_selector:
                query["labelSelector"] = label_selector
            if token:
                query["continue"] = token
            page = self._get_json(what, path, query)
            page_items = page.get("items") or []
            if not isinstance(page_items, list):
                raise ReadFailed(what, "error", "malformed answer from the API server (items is not a list)")
            for item in page_items:
                if not isinstance(item, dict):
                    raise ReadFailed(
                        what, "error", "malformed answer from the API server (a list item is not an object)"
                    )
                # Items of a list answer carry no apiVersion/kind; the checks need both.
                item["apiVersion"], item["kind"] = api_version, kind.kind
                items.append(_well_formed(what, item))
            if len(items) > max_items:
                finding = f"the API server sent more than {max_items:,} objects for one list"
                raise ReadFailed(what, "error", str(limits.MAX_LIST_ITEMS.exceeded(finding)))
            metadata = page.get("metadata")
            token = str((metadata if isinstance(metadata, dict) else {}).get("continue") or "")
            if not token:
                return items
            if token in seen_tokens:
                raise ReadFailed(what, "error", "the API server repeated a continue token while paging")
            seen_tokens.add(token)
        finding = f"the API server still sent a continue token after {max_pages:,} pages"
        raise ReadFailed(what, "error", str(limits.MAX_LIST_PAGES.exceeded(finding)))

    def get(self, kind: Kind, namespace: str | None, name: str) -> KubeObject | None:
        what = describe_get(kind, namespace, name)
        version = self._served_version(kind, what)
        path = f"{_collection_path(kind, version, namespace)}/{quote(name, safe='')}"
        answer = self._transport.get(what, path)
        if answer.status == 404 and answer.message() != _UNKNOWN_RESOURCE:
            return None
        return _well_formed(what, self._expect_json(what, answer))

    def logs(self, request: LogRequest) -> str:
        what = describe_logs(request)
        path = f"/api/v1/namespaces/{quote(request.namespace, safe='')}/pods/{quote(request.pod, safe='')}/log"
        query = {
            "container": request.container,
            "previous": "true" if request.previous else "false",
            "tailLines": str(request.tail_lines),
            "limitBytes": str(request.limit_bytes),
            # The kubelet's RFC 3339 prefix lets gather() keep only the lines inside the window.
            "timestamps": "true",
        }
        answer = self._transport.get(what, path, query, max_bytes=request.limit_bytes)
        if answer.status in (400, 404):
            # 400 is how the API server says "no previous container" or "container not started yet".
            raise ReadFailed(what, "missing", answer.message() or f"no log ({answer.status})")
        if answer.status != 200:
            raise _http_failure(what, answer)
        return answer.body.decode("utf-8", errors="replace")

    def _get_json(self, what: str, path: str, query: dict[str, str] | None = None) -> dict[str, Any]:
        return self._expect_json(what, self._transport.get(what, path, query))

    @staticmethod
    def _expect_json(what: str, answer: _Answer) -> dict[str, Any]:
        if answer.status != 200:
            raise _http_failure(what, answer)
        return _decode_json(what, answer)

    def _served_version(self, kind: Kind, what: str) -> str:
        """The first of ``kind.versions`` the server serves; ``missing`` without a request when none is."""
        if not kind.group:
            return kind.versions[0]  # the core group always serves v1
        served = self._discover(what).get(kind.group)
        if served is None:
            raise ReadFailed(what, "not_installed", f"API group {kind.group} is not installed (no CRD)")
        for version in kind.versions:
            if version in served:
                return version
        raise ReadFailed(
            what,
            "not_installed",
            f"API group {kind.group} serves {', '.join(served)}, none of {', '.join(kind.versions)}",
        )

    def _discover(self, what: str) -> dict[str, tuple[str, ...]]:
        """Served versions by API group, from one ``/apis`` request (repeated only after a failure)."""
        if self._group_versions is None:
            try:
                document = self._get_json("discovery", "/apis")
            except ReadFailed as failure:
                raise ReadFailed(what, failure.status, f"API discovery (/apis) failed: {failure.reason}") from None
            self._group_versions = {
                str(group.get("name")): tuple(
                    str(entry.get("version")) for entry in group.get("versions") or [] if isinstance(entry, dict)
                )
                for group in document.get("groups") or []
                if isinstance(group, dict)
            }
        return self._group_versions


def _collection_path(kind: Kind, version: str, namespace: str | None) -> str:
    base = f"/apis/{kind.group}/{version}" if kind.group else f"/api/{version}"
    if kind.namespaced and namespace:
        return f"{base}/namespaces/{quote(namespace, safe='')}/{kind.plural}"
    return f"{base}/{kind.plural}"
