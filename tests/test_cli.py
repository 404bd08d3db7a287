"""The CLI as a user meets it: exit codes and one-line errors (docs/contracts.md#cli)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from builders import bundle_files

from nbhelpers.sources.bundle import write_bundle_files

ISVC = {
    "apiVersion": "serving.kserve.io/v1beta1",
    "kind": "InferenceService",
    "metadata": {"name": "x", "namespace": "llm"},
}


def kserve_runbook(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nbhelpers", *arguments], capture_output=True, text=True, timeout=120, cwd=cwd
    )


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return write_bundle_files(bundle_files([ISVC], "llm", "x"), tmp_path / "bundle")


def assert_one_line_error(result: subprocess.CompletedProcess[str], expected: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert expected in lines[0]


def test_unknown_isvc_lists_the_existing_ones(bundle: Path, tmp_path: Path) -> None:
    result = kserve_runbook("triage", "--bundle", str(bundle), "--isvc", "nope", cwd=tmp_path)
    assert_one_line_error(result, "InferenceService 'nope' not found in namespace 'llm' (existing: x)")


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["--since", "5 minutes"], "bad duration '5 minutes'"),
        (["--start", "2026-01-15T11:00:00Z", "--end", "2026-01-15T10:00:00Z"], "reversed window"),
        (["--start", "2026-01-15T11:00:00", "--end", "2026-01-15T11:30:00Z"], "has no UTC offset"),
        (["--incident-start", "2026-01-15T11:00:00Z"], "--incident-start and --incident-end go together"),
    ],
)
def test_bad_windows_exit_2(bundle: Path, arguments: list[str], expected: str, tmp_path: Path) -> None:
    assert_one_line_error(kserve_runbook("triage", "--bundle", str(bundle), *arguments, cwd=tmp_path), expected)


def test_missing_bundle_and_missing_target(tmp_path: Path) -> None:
    assert_one_line_error(kserve_runbook("triage", "--bundle", str(tmp_path / "nope"), cwd=tmp_path), "does not exist")
    assert_one_line_error(kserve_runbook("triage", cwd=tmp_path), "--namespace and --isvc are required")


def test_non_empty_out_is_refused(bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("x")
    assert_one_line_error(
        kserve_runbook("triage", "--bundle", str(bundle), "--out", str(out), cwd=tmp_path), "is not empty"
    )


def test_unreachable_api_server_exits_2(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\n"
    )
    result = kserve_runbook(
        "triage", "--kubeconfig", str(kubeconfig), "-n", "llm", "--isvc", "x", "--request-timeout", "3s", cwd=tmp_path
    )
    assert_one_line_error(result, "127.0.0.1:9")


def test_unknown_code_and_usage_errors_exit_2(tmp_path: Path) -> None:
    assert_one_line_error(kserve_runbook("codes", "NOPE", cwd=tmp_path), "unknown code 'NOPE'")
    assert_one_line_error(kserve_runbook("triage", "--no-such-flag", cwd=tmp_path), "No such option")


def test_codes_prints_the_catalog_with_edges(tmp_path: Path) -> None:
    listing = kserve_runbook("codes", cwd=tmp_path)
    assert listing.returncode == 0
    assert "PORT_MISMATCH  [critical, step ports]" in listing.stdout
    one = kserve_runbook("codes", "PORT_MISMATCH", cwd=tmp_path)
    assert "explains: " in one.stdout and "ENDPOINTS_NONE_READY" in one.stdout


@pytest.mark.notebook
def test_symptom_orders_the_reading_in_the_report(bundle: Path, tmp_path: Path) -> None:
    result = kserve_runbook("triage", "--bundle", str(bundle), "--symptom", "504", "--out", "out", cwd=tmp_path)
    assert result.returncode in (0, 1), result.stderr
    page = (tmp_path / "out" / "report.html").read_text()
    assert "For HTTP 504 (gateway timeout), hanging requests, read these steps first" in page
    assert_one_line_error(
        kserve_runbook("triage", "--bundle", str(bundle), "--symptom", "slow", cwd=tmp_path), "Invalid value"
    )


def test_an_unexpected_error_is_one_line_exit_2_with_the_trace_in_a_log(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from nbhelpers.cli import main as cli_main

    def broken(*_args: object, **_kwargs: object) -> None:
        raise ZeroDivisionError("bug \x1b[31mred\x1b[0m\nsecond line")

    monkeypatch.setattr(cli_main.cli, "main", broken)
    with pytest.raises(SystemExit) as exited:
        cli_main.main()
    assert exited.value.code == 2  # 1 means "ran and found something critical"
    stderr = capsys.readouterr().err
    assert stderr.count("\n") == 1 and "\x1b" not in stderr and "Traceback" not in stderr
    assert "unexpected ZeroDivisionError" in stderr
    log = Path(stderr.split("trace in ")[1].split(";")[0])
    assert "Traceback" in log.read_text() and "ZeroDivisionError" in log.read_text()
    log.unlink()


def test_terminal_output_drops_control_characters() -> None:
    from nbhelpers.cli.main import terminal_safe

    assert terminal_safe("ns/\x1b]0;pwned\x07isvc\r\nnext") == "ns/?]0;pwned?isvc; next"
