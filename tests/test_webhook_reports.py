"""The receiver serves what it writes (issue #17): the report index, run files, /metrics, pruning, HTML reports.

Everything over real HTTP on 127.0.0.1, against the fixture API server; hostile paths are sent raw
(http.client does not normalise or decode them), as a client bent on leaving the output folder would.
"""

from __future__ import annotations

import http.client
import json
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from fakeapi import FakeApiServer
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from test_webhook import NOW, OPTIONS, SLACK_PATH, Clock, SlackReceiver, alert, payload, post_alerts, settings

from nbhelpers.cli import webhook_reports
from nbhelpers.cli.webhook import WebhookServer, parse_public_url, serve, settings_from_options
from nbhelpers.errors import RunbookError
from nbhelpers.triage import TriageParams

RUN = "20260115T120000Z-llm-vllm-llm"
FINDINGS = {
    "target": {"namespace": "llm", "isvc": "vllm-llm"},
    "root_causes": ["QUEUE_SATURATION"],
    "findings": [{"severity": "warning"}, {"severity": "critical"}],
    "partial": False,
}


@dataclass
class Page:
    status: int
    body: bytes
    headers: dict[str, str]


def get(url: str, path: str) -> Page:
    """GET ``path`` exactly as written (no normalisation, no percent-decoding)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        connection.putrequest("GET", path, skip_host=False, skip_accept_encoding=True)
        connection.endheaders()
        response = connection.getresponse()
        return Page(response.status, response.read(), dict(response.getheaders()))
    finally:
        connection.close()


@pytest.fixture
def receivers(kubeconfig: Path, tmp_path: Path) -> Iterator[Any]:
    started: list[WebhookServer] = []

    def start(out: Path | None = None, **changes: Any) -> WebhookServer:
        server = serve(settings(kubeconfig, out or tmp_path / "out", **changes), clock=Clock())
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def planted(tmp_path: Path) -> Path:
    """An output folder with one real run, next to a secret, plus links that point out of it."""
    out = tmp_path / "out"
    run = out / RUN
    run.mkdir(parents=True)
    (run / "findings.json").write_text(json.dumps(FINDINGS))
    (run / "summary.md").write_text("# Incident draft: llm/vllm-llm\n")
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "findings.json").write_text('{"secret": "planted-secret-value"}')
    (secret / "summary.md").write_text("planted-secret-value")
    (out / "20260115T110000Z-llm-linked").symlink_to(secret, target_is_directory=True)  # a run folder that is a link
    (run / "report.html").symlink_to(secret / "summary.md")  # a run file that is a link
    (out / "notes.md").write_text("not a run")
    return out


# ------------------------------------------------------------------------------------ the file guard


HOSTILE_PATHS = [
    "/runs/../secret/summary.md",
    f"/runs/{RUN}/../../secret/summary.md",
    "/runs/%2e%2e/secret/summary.md",
    "/runs/%2E%2E%2Fsecret/summary.md",
    f"/runs/{RUN}/%2e%2e%2f%2e%2e%2fsecret%2fsummary.md",
    f"/runs/{RUN}%2f..%2f..%2fsecret/summary.md",
    "/runs//secret/summary.md",
    "/runs/" + str(Path("/tmp").resolve()) + "/summary.md",
    f"/runs/{RUN}/report.html",  # a link to the secret
    "/runs/20260115T110000Z-llm-linked/summary.md",  # a linked run folder
    f"/runs/{RUN}/evidence.tar.gz",  # allowed name, absent
    f"/runs/{RUN}/triage.ipynb",  # not a served file
    f"/runs/{RUN}",
    "/runs/notes.md/x",
    "/runs/",
    f"/runs/{RUN}/findings.json/",
    f"/runs/{RUN}\\..\\..\\secret/summary.md",
]


@pytest.mark.parametrize("path", HOSTILE_PATHS)
def test_a_path_that_is_not_a_run_file_reads_nothing(tmp_path: Path, path: str) -> None:
    assert webhook_reports.read_run_file(planted(tmp_path), path) is None


_PATH_PIECES = st.sampled_from(
    [
        "/",
        "runs",
        RUN,
        "..",
        ".",
        "%2e",
        "%2f",
        "%2E%2E",
        "\\",
        "secret",
        "summary.md",
        "findings.json",
        "report.html",
        "//",
        "\x00",
    ]
)


@pytest.fixture(scope="module")
def planted_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return planted(tmp_path_factory.mktemp("planted"))


@hypothesis_settings(max_examples=300, deadline=None)
@given(path=st.lists(_PATH_PIECES, max_size=8).map("".join))
def test_any_path_reads_a_served_file_of_the_real_run_or_nothing(planted_out: Path, path: str) -> None:
    found = webhook_reports.read_run_file(planted_out, path)
    assert found is None or path in (f"/runs/{RUN}/summary.md", f"/runs/{RUN}/findings.json")
    assert found is None or b"planted-secret-value" not in found[0]


def test_a_run_file_is_read_with_its_content_type(tmp_path: Path) -> None:
    out = planted(tmp_path)
    assert webhook_reports.read_run_file(out, f"/runs/{RUN}/findings.json") == (
        json.dumps(FINDINGS).encode(),
        "application/json",
    )
    assert webhook_reports.read_run_file(out, f"/runs/{RUN}/summary.md") == (
        b"# Incident draft: llm/vllm-llm\n",
        "text/markdown; charset=utf-8",
    )


def test_the_index_lists_only_real_run_folders_newest_first(tmp_path: Path) -> None:
    out = planted(tmp_path)
    older = out / "20260114T090000Z-llm-qwen-chat"
    older.mkdir()
    (older / "findings.json").write_text("{not json")

    entries = webhook_reports.recent_runs(out)

    assert [entry.folder for entry in entries] == [RUN, older.name]
    first, second = entries
    assert (first.service, first.top_cause, first.severity, first.coverage) == (
        "llm/vllm-llm",
        "QUEUE_SATURATION",
        "critical",
        "complete",
    )
    assert first.files == ("summary.md", "findings.json")  # the linked report.html is not offered
    assert (second.severity, second.coverage) == ("unreadable", "unknown")


@pytest.mark.integration
def test_hostile_requests_get_404_and_never_the_secret(fake_api: FakeApiServer, receivers: Any, tmp_path: Path) -> None:
    server = receivers(out=planted(tmp_path))
    paths = [
        *HOSTILE_PATHS,
        "/etc/passwd",
        "//etc/passwd",
        "/../secret/summary.md",
        "/%2e%2e/secret/summary.md",
        "/notes.md",
        f"/{RUN}/summary.md",
        "http://127.0.0.1/runs/../secret/summary.md",
    ]

    pages = {path: get(server.url, path) for path in paths}

    assert {path: page.status for path, page in pages.items()} == dict.fromkeys(paths, 404)
    for page in pages.values():
        assert b"planted-secret-value" not in page.body
    good = get(server.url, f"/runs/{RUN}/summary.md")
    assert good.status == 200 and good.headers["Content-Type"] == "text/markdown; charset=utf-8"
    assert good.headers["X-Content-Type-Options"] == "nosniff"


# --------------------------------------------------------------------------------- index and metrics


def metric(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    assert match, f"{name} not in /metrics"
    return float(match.group(1))


@pytest.mark.integration
def test_the_index_links_each_run_to_its_files_and_metrics_count_alerts_and_runs(
    raw_api: FakeApiServer, receivers: Any
) -> None:
    server = receivers()
    post_alerts(
        server.url,
        payload(
            alert({"namespace": "raw", "isvc": "vllm-raw"}),
            alert({"namespace": "raw", "isvc": "gone"}),
            alert({"namespace": "raw", "isvc": "vllm-raw"}, status="resolved"),
        ),
    )
    done, failed = server.wait_for_runs(2, timeout=30)
    assert done.folder is not None and failed.error

    index = get(server.url, "/")
    assert index.status == 200 and index.headers["Content-Type"] == "text/html; charset=utf-8"
    assert "default-src 'none'" in index.headers["Content-Security-Policy"]
    page = index.body.decode()
    assert "raw/vllm-raw" in page and done.root_causes[0] in page and "2026-01-15 12:00:00 UTC" in page
    assert "raw/gone" in page  # the failed run is listed too, without links
    links = re.findall(r'href="([^"]+)"', page)
    assert links == [f"runs/{done.folder.name}/summary.md", f"runs/{done.folder.name}/findings.json"]
    findings = get(server.url, "/" + links[1])
    assert findings.headers["Content-Type"] == "application/json"
    assert json.loads(findings.body)["root_causes"] == list(done.root_causes)

    scraped = get(server.url, "/metrics")
    assert scraped.status == 200 and scraped.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    text = scraped.body.decode()
    assert metric(text, 'kserve_runbook_webhook_alerts_received_total{status="firing"}') == 2
    assert metric(text, 'kserve_runbook_webhook_alerts_received_total{status="resolved"}') == 1
    assert metric(text, "kserve_runbook_webhook_runs_started_total") == 2
    assert metric(text, "kserve_runbook_webhook_runs_failed_total") == 1
    assert metric(text, "kserve_runbook_webhook_run_duration_seconds_count") == 2
    assert metric(text, "kserve_runbook_webhook_queue_length") == 0
    assert get(server.url, "/healthz").status == 200


# ---------------------------------------------------------------------------------------------- pruning


def test_pruning_keeps_the_newest_runs_and_removes_old_ones_but_nothing_else(tmp_path: Path) -> None:
    out = planted(tmp_path)
    for day in range(1, 6):
        (out / f"202601{day:02d}T120000Z-llm-vllm-llm").mkdir()

    removed = webhook_reports.prune(out, NOW, keep=4, keep_days=0)
    assert removed == ["20260102T120000Z-llm-vllm-llm", "20260101T120000Z-llm-vllm-llm"]  # the link is no run
    removed = webhook_reports.prune(out, NOW, keep=0, keep_days=10)
    assert removed == ["20260104T120000Z-llm-vllm-llm", "20260103T120000Z-llm-vllm-llm"]

    assert sorted(path.name for path in out.iterdir()) == [
        "20260105T120000Z-llm-vllm-llm",
        "20260115T110000Z-llm-linked",
        RUN,
        "notes.md",
    ]
    assert (tmp_path / "secret" / "summary.md").exists()  # a linked folder is never followed


def test_pruning_never_follows_a_link_it_removes(tmp_path: Path) -> None:
    out = planted(tmp_path)
    webhook_reports.prune(out, NOW + timedelta(days=100), keep=0, keep_days=1)
    assert (tmp_path / "secret" / "summary.md").read_text() == "planted-secret-value"
    assert not (out / RUN).exists() and (out / "notes.md").exists()


@pytest.mark.integration
def test_the_receiver_prunes_after_each_run(serverless_api: FakeApiServer, receivers: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    for day in (1, 2):
        (out / f"202601{day:02d}T120000Z-llm-old").mkdir(parents=True)
    server = receivers(out=out, keep=2)
    assert len(list(out.iterdir())) == 2  # pruned at start: nothing beyond 2

    post_alerts(server.url, payload(alert({"namespace": "llm", "isvc": "vllm-llm"})))
    server.wait_for_runs(1, timeout=30)

    assert sorted(path.name for path in out.iterdir()) == ["20260102T120000Z-llm-old", RUN]


# ------------------------------------------------------------------------------------------- settings


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ""),
        ("https://runbooks.example.com/", "https://runbooks.example.com"),
        ("http://r.example/hook", "http://r.example/hook"),
    ],
)
def test_a_public_url_is_kept_without_its_trailing_slash(text: str, expected: str) -> None:
    assert parse_public_url(text) == expected


@pytest.mark.parametrize(
    "text", ["runbooks.example.com", "ftp://r.example", "https://r.example/?a=1", "https://user:pw@r.example"]
)
def test_a_bad_public_url_is_refused(text: str) -> None:
    with pytest.raises(RunbookError, match="--public-url"):
        parse_public_url(text)


# ------------------------------------------------------------------------------------------ html reports


@pytest.mark.integration
@pytest.mark.notebook
def test_with_html_reports_the_verdict_comes_first_and_slack_links_the_served_report(
    raw_api: FakeApiServer, receivers: Any
) -> None:
    with SlackReceiver() as slack:
        server = receivers(reports="html", public_url="https://runbooks.example.com", slack_url=slack.url)
        server_url = server.url
        post_alerts(server_url, payload(alert({"namespace": "raw", "isvc": "vllm-raw"})))
        (record,) = server.wait_for_runs(1, timeout=240)
        deadline = time.monotonic() + 10
        while not slack.posts and time.monotonic() < deadline:
            time.sleep(0.05)

    assert record.error == "" and record.report == "html" and record.folder is not None
    files = sorted(path.name for path in record.folder.iterdir())
    assert files == ["evidence.tar.gz", "findings.json", "report.html", "summary.md", "triage.ipynb"]
    ((path, message),) = slack.posts
    link = f"https://runbooks.example.com/runs/{record.folder.name}/report.html"
    assert path == SLACK_PATH and f"Report: {link}" in message["text"]
    report = get(server_url, urlsplit(link).path)
    assert report.status == 200 and report.headers["Content-Type"] == "text/html; charset=utf-8"
    assert report.headers["Content-Security-Policy"].startswith("sandbox")
    assert b"raw/vllm-raw" in report.body or b"vllm-raw" in report.body
    index = get(server_url, "/").body.decode()
    assert f'href="runs/{record.folder.name}/report.html"' in index
    evidence = get(server_url, f"/runs/{record.folder.name}/evidence.tar.gz")
    assert evidence.headers["Content-Type"] == "application/gzip"


def test_a_report_folder_the_receiver_did_not_name_is_not_listed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for name in ("x-llm-a", "20261315T120000Z-llm-a", "20260115T120000Z-", "20260115T120000Z-LLM"):
        (out / name).mkdir(parents=True)
    (out / "20260115T120000Z-llm-file").write_text("")
    assert webhook_reports.run_folders(out) == []
    shutil.rmtree(out)
    assert webhook_reports.run_folders(out) == []  # a missing folder lists nothing


@pytest.mark.parametrize(
    ("changes", "message"),
    [({"reports": "pdf"}, "--reports 'pdf'"), ({"keep": -1}, "--keep -1"), ({"keep_days": -0.5}, "--keep-days -0.5")],
)
def test_bad_report_and_pruning_options_are_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(RunbookError, match=re.escape(message)):
        settings_from_options(TriageParams(), {**OPTIONS, **changes}, {})


def test_the_report_and_pruning_options_reach_the_settings() -> None:
    chosen = settings_from_options(
        TriageParams(),
        {**OPTIONS, "reports": "html", "public_url": "https://r.example/", "keep": 5, "keep_days": 1.5},
        {},
    )
    assert (chosen.reports, chosen.public_url, chosen.keep, chosen.keep_days) == ("html", "https://r.example", 5, 1.5)


def _wait_for(condition: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.integration
@pytest.mark.notebook
def test_the_command_renders_reports_and_its_progress_survives_the_render(
    raw_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    """Rendering points file descriptor 2 at the kernel's log: a line said meanwhile must still reach stderr."""
    out = tmp_path / "out"
    arguments = ["webhook", "--listen", "127.0.0.1:0", "--kubeconfig", str(kubeconfig), "--out", str(out)]
    arguments += ["--reports", "html", "--public-url", "https://runbooks.example.com", "--keep", "5"]
    starts_at = (datetime.now(timezone.utc) - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    with subprocess.Popen(
        [sys.executable, "-m", "nbhelpers", *arguments], stderr=subprocess.PIPE, text=True, cwd=tmp_path
    ) as receiver:
        assert receiver.stderr is not None
        url = receiver.stderr.readline().split()[3]
        post_alerts(url, payload(alert({"namespace": "raw", "isvc": "vllm-raw"}, starts_at=starts_at)))
        _wait_for(lambda: list(out.glob("*/.triage.partial.ipynb")), 60)  # the report notebook is running
        post_alerts(url, payload(alert({"namespace": "raw", "isvc": "other"}, starts_at=starts_at)))
        _wait_for(lambda: list(out.glob("*/report.html")), 120)
        index = get(url, "/").body.decode()
        receiver.send_signal(signal.SIGTERM)
        _, said = receiver.communicate(timeout=60)

    assert receiver.returncode == 0, said
    (folder,) = out.iterdir()
    lines = said.splitlines()
    assert any(line.startswith("webhook: queued raw/other") for line in lines), said  # said during the render
    (done,) = [line for line in lines if line.startswith("webhook: done raw/vllm-raw")]
    assert f"Report: https://runbooks.example.com/runs/{folder.name}/report.html" in done
    assert f'href="runs/{folder.name}/report.html"' in index
    assert "webhook: stopping" in said
