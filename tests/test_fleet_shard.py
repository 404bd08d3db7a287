"""``fleet --shard I/N`` and ``fleet merge``: N shards cover the fleet exactly once, and the merged index
says what it could not vouch for (missing folders, absent shards, duplicates) and escapes what it shows.

The sharded runs use the fleet cluster of tests/test_fleet.py (the fixture API server), grown with
copies of its services so that every shard has work.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from builders import comparable
from fakeapi import FakeApiServer
from test_fleet import add_copies, add_llmisvcs, fleet_document, kserve_runbook, request_for

from nbhelpers.cli.fleet import FLEET_SCHEMA_ID, Shard, parse_shard, run_fleet, shard_of
from nbhelpers.cli.fleet_merge import MergeRequest, run_merge
from nbhelpers.errors import RunbookError

SHARDS = 3


def refs(document: dict[str, Any]) -> list[str]:
    return [f"{entry['namespace']}/{entry['isvc']}" for entry in document["services"]]


# ------------------------------------------------------------------------------------------ --shard


@pytest.mark.parametrize(("text", "shard"), [("0/1", Shard(0, 1)), ("3/4", Shard(3, 4)), (" 0/4 ", Shard(0, 4))])
def test_shard_text_is_a_zero_based_index_over_a_count(text: str, shard: Shard) -> None:
    assert parse_shard(text) == shard


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("4/4", "I counts from 0, so it must be below N (0 to 3)"),
        ("1/0", "N must be between 1 and"),
        ("0/20000", "N must be between 1 and"),
        ("-1/4", "takes I/N with 0 <= I < N"),
        ("1", "takes I/N"),
        ("1/2/3", "takes I/N"),
        ("a/b", "takes I/N"),
        ("$(JOB_COMPLETION_INDEX)/4", "takes I/N"),  # a Job that forgot to declare the variable
    ],
)
def test_a_bad_shard_is_one_line_that_says_what_is_expected(text: str, says: str) -> None:
    with pytest.raises(RunbookError) as raised:
        parse_shard(text)
    assert says in str(raised.value) and "\n" not in str(raised.value)


def test_every_service_falls_in_exactly_one_shard() -> None:
    services = [(f"ns-{index % 7}", f"model-{index}") for index in range(300)]
    for count in range(1, 9):
        owners = [[shard for shard in range(count) if Shard(shard, count).owns(*service)] for service in services]
        assert all(len(found) == 1 for found in owners), count
        if count <= 4:  # 300 names spread over every part
            assert {found[0] for found in owners} == set(range(count))


def test_the_partition_is_the_same_in_every_process() -> None:
    """sha256, not Python's hash(): a fresh interpreter with another hash seed cuts the fleet the same way."""
    names = [f"team-{index}/llm-{index * 7}" for index in range(40)]
    script = (
        "import sys; from nbhelpers.cli.fleet import shard_of; "
        "print([shard_of(*name.split('/'), 5) for name in sys.argv[1:]])"
    )
    seen = set()
    for seed in ("1", "2"):
        result = subprocess.run(
            [sys.executable, "-c", script, *names],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONHASHSEED": seed},
            check=True,
        )
        seen.add(result.stdout.strip())
    assert seen == {str([shard_of(*name.split("/"), 5) for name in names])}


@pytest.mark.integration
def test_n_shards_cover_the_fleet_exactly_once_and_merge_into_the_unsharded_index(
    fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    add_copies(fleet_api, "team-b", "summarize", 4)
    add_copies(fleet_api, "team-b", "chat", 2)
    whole = run_fleet(request_for(kubeconfig, tmp_path / "whole"))
    whole_index = fleet_document(tmp_path / "whole")
    assert len(whole.entries) == 10

    shard_refs = []
    for index in range(SHARDS):
        request = request_for(kubeconfig, tmp_path / "run" / f"shard-{index}")
        result = run_fleet(replace(request, shard=Shard(index, SHARDS)))
        document = fleet_document(result.out_dir)
        assert document["shard"] == {"index": index, "count": SHARDS, "listed": 10}
        assert document["scope"] == {"all_namespaces": True, "namespace": None}
        assert all(Shard(index, SHARDS).owns(entry["namespace"], entry["isvc"]) for entry in document["services"])
        for entry in document["services"]:  # the same triage as in the whole run
            alone = json.loads((result.out_dir / entry["path"] / "findings.json").read_text())
            together = json.loads((tmp_path / "whole" / entry["path"] / "findings.json").read_text())
            assert comparable(alone) == comparable(together), entry["isvc"]
        shard_refs.append(refs(document))

    found = [ref for part in shard_refs for ref in part]
    assert len(found) == len(set(found))  # no service in two shards
    assert sorted(found) == sorted(refs(whole_index))  # and none left out
    assert sum(1 for part in shard_refs if part) >= 2  # the cut spreads the work

    merged = run_merge(
        MergeRequest(tuple(str(tmp_path / "run" / f"shard-{index}") for index in range(SHARDS)), str(tmp_path / "run"))
    )
    merged_index = fleet_document(tmp_path / "run")
    assert refs(merged_index) == refs(whole_index)  # same services, same worst-first order
    assert merged_index["totals"] == whole_index["totals"]
    assert merged.exit_code == whole.exit_code == 1
    for mine, theirs in zip(merged_index["services"], whole_index["services"], strict=True):
        assert mine["path"].endswith(theirs["path"]) and mine["path"].startswith("shard-")
        assert (tmp_path / "run" / mine["path"] / "summary.md").is_file()
        assert {key: value for key, value in mine.items() if key != "path"} == {
            key: value for key, value in theirs.items() if key != "path"
        }
    assert merged_index["missing"] == [] and merged_index["duplicates"] == []
    assert [item["shard"] for item in merged_index["merged_from"]] == [f"{index}/{SHARDS}" for index in range(SHARDS)]
    whole_caveat = (tmp_path / "whole" / "fleet.md").read_text().splitlines()[2]
    assert (tmp_path / "run" / "fleet.md").read_text().splitlines()[2] == whole_caveat  # nothing more to say


def kinded(document: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(namespace, name, kind) of each service: one of each kind may share a name."""
    return [
        (entry["namespace"], entry["isvc"], entry.get("kind", "InferenceService")) for entry in document["services"]
    ]


@pytest.mark.integration
def test_shards_cover_both_kinds_exactly_once_and_merge_without_duplicates(
    fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    """With LLMInferenceServices listed too, the cut still depends on namespace/name only: a service of each
    kind with the same name falls in the same shard, and the merge keeps both."""
    add_llmisvcs(fleet_api)
    add_copies(fleet_api, "team-b", "summarize", 3)
    whole = fleet_document(run_fleet(request_for(kubeconfig, tmp_path / "whole")).out_dir)
    assert len(whole["services"]) == 9 and whole["totals"]["services"] == 9

    parts = []
    for index in range(SHARDS):
        request = request_for(kubeconfig, tmp_path / "run" / f"shard-{index}")
        document = fleet_document(run_fleet(replace(request, shard=Shard(index, SHARDS))).out_dir)
        assert document["shard"] == {"index": index, "count": SHARDS, "listed": 9}
        assert [item["status"] for item in document["listing"]] == ["ok", "ok"]
        parts.append(kinded(document))
    found = [service for part in parts for service in part]
    assert sorted(found) == sorted(kinded(whole)) and len(set(found)) == len(found)
    (namesakes,) = [part for part in parts if ("llm", "qwen-chat", "InferenceService") in part]
    assert ("llm", "qwen-chat", "LLMInferenceService") in namesakes

    run_merge(
        MergeRequest(tuple(str(tmp_path / "run" / f"shard-{index}") for index in range(SHARDS)), str(tmp_path / "run"))
    )
    merged = fleet_document(tmp_path / "run")
    assert kinded(merged) == kinded(whole) and merged["duplicates"] == []
    assert merged["listing"] == whole["listing"]
    whole_caveat = (tmp_path / "whole" / "fleet.md").read_text().splitlines()[2]
    assert (tmp_path / "run" / "fleet.md").read_text().splitlines()[2] == whole_caveat


@pytest.mark.integration
def test_the_cli_shards_and_merges(fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path) -> None:
    for index in range(2):
        result = kserve_runbook(
            "fleet", "--kubeconfig", str(kubeconfig), "-A", "--start", "2026-01-15T10:00:00Z",
            "--end", "2026-01-15T12:00:00Z", "--shard", f"{index}/2", "--out", f"shard-{index}", cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode in (0, 1), result.stderr
    merged = kserve_runbook("fleet", "merge", "shard-0", "shard-1", "--out", ".", cwd=tmp_path)
    assert merged.returncode == 1, merged.stderr  # the fleet holds critical findings
    assert merged.stdout.splitlines()[0] == "fleet: fleet.md"
    assert sorted(refs(fleet_document(tmp_path))) == [
        "llm/qwen-chat",
        "llm/vllm-llm",
        "team-b/chat",
        "team-b/summarize",
    ]
    assert (tmp_path / "fleet.html").is_file()

    arguments = ("fleet", "merge", "shard-0", "shard-1", "shard-9", "--out", "m", "--fail-on-partial")
    strict = kserve_runbook(*arguments, cwd=tmp_path)  # shard-9 does not exist
    assert strict.returncode == 1
    assert strict.stderr.strip() == (
        "kserve-runbook: partial result (--fail-on-partial): 1 service(s) not fully seen and 1 gap(s) in the listing or the merge; "
        f"see {Path('m') / 'fleet.md'}"
    )


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        (("fleet", "-A", "--shard", "2/2"), "--shard 2/2: I counts from 0"),
        (("fleet", "-A", "--shard", "one/two"), "--shard takes I/N"),
        (("fleet", "merge", "--out", "merged"), "Missing argument"),
        (("fleet", "merge", "somewhere"), "Missing option '--out'"),
        (("fleet", "-A", "merge", "a", "--out", "b"), "fleet merge takes its own options: drop --all-namespaces"),
        (
            ("fleet", "merge", "nothing-here", "--out", "merged"),
            "no folder could be read (nothing-here: no such folder)",
        ),
    ],
)
def test_the_cli_refuses_bad_shard_and_merge_input_with_one_line_and_exit_2(
    arguments: tuple[str, ...], says: str, tmp_path: Path
) -> None:
    result = kserve_runbook(*arguments, cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kserve-runbook: error: ") and says in lines[0], result.stderr


# ------------------------------------------------------------------------------------------- merge


def write_shard(
    folder: Path,
    services: list[Any],
    shard: tuple[int, int] | None = None,
    listed: int | None = None,
    generated_at: str = "2026-01-15T12:00:05Z",
) -> Path:
    """A shard's folder as fleet writes it: fleet.json, and each service's folder with its files."""
    folder.mkdir(parents=True)
    entries = []
    for service in services:
        if not isinstance(service, dict):  # a malformed entry, written as it is
            entries.append(service)
            continue
        entry = {
            "status": "complete",
            "partial": False,
            "reason": "",
            "counts": {"critical": 0, "warning": 0, "info": 0},
            "top_root_cause": None,
            "root_causes": [],
            "deployment_mode": "Serverless",
            "path": f"{service['namespace']}/{service['isvc']}",
            **service,
        }
        if isinstance(entry["path"], str) and re.fullmatch(r"[a-z0-9-]+/[a-z0-9-]+", entry["path"]):
            (folder / entry["path"]).mkdir(parents=True)
            (folder / entry["path"] / "summary.md").write_text("# summary\n")
        entries.append(entry)
    document = {
        "schema": FLEET_SCHEMA_ID,
        "generated_at": generated_at,
        "scope": {"all_namespaces": True, "namespace": None},
        "window": {"start": "2026-01-15T10:00:00Z", "end": "2026-01-15T12:00:00Z"},
        "sources": {"cluster": "live", "prometheus": "live"},
        "shard": None if shard is None else {"index": shard[0], "count": shard[1], "listed": listed},
        "services": entries,
    }
    (folder / "fleet.json").write_text(json.dumps(document))
    return folder


def merge(tmp_path: Path, *folders: Path | str) -> tuple[Any, dict[str, Any], str, str]:
    out = tmp_path / "merged"
    result = run_merge(MergeRequest(tuple(str(folder) for folder in folders), str(out)))
    return result, fleet_document(out), (out / "fleet.md").read_text(), (out / "fleet.html").read_text()


def test_a_service_in_two_folders_is_listed_once_from_the_newest_run(tmp_path: Path) -> None:
    older = write_shard(tmp_path / "old", [{"namespace": "llm", "isvc": "chat", "status": "partial"}], (0, 1), 1)
    newer = write_shard(
        tmp_path / "new",
        [{"namespace": "llm", "isvc": "chat", "counts": {"critical": 1, "warning": 0, "info": 0}}],
        (0, 1),
        1,
        generated_at="2026-01-15T13:00:00Z",
    )
    result, index, markdown, _ = merge(tmp_path, older, newer)
    assert refs(index) == ["llm/chat"]
    assert index["services"][0]["counts"]["critical"] == 1 and index["services"][0]["path"] == "../new/llm/chat"
    assert index["duplicates"] == [
        {
            "namespace": "llm",
            "isvc": "chat",
            "kind": "InferenceService",
            "kept": "../new",
            "folders": ["../old", "../new"],
        }
    ]
    assert "1 service(s) found in more than one folder; the newest run of each is kept" in markdown
    assert result.exit_code == 1


def test_the_same_folder_named_twice_is_read_once(tmp_path: Path) -> None:
    shard = write_shard(tmp_path / "s0", [{"namespace": "llm", "isvc": "chat"}], (0, 1), 1)
    _, index, markdown, _ = merge(tmp_path, shard, shard, str(shard) + "/")
    assert refs(index) == ["llm/chat"] and index["duplicates"] == [] and len(index["merged_from"]) == 1
    assert "Coverage: every service was triaged and every read succeeded." in markdown


def test_missing_folders_and_absent_shards_are_named_and_the_rest_is_merged(tmp_path: Path) -> None:
    first = write_shard(tmp_path / "s0", [{"namespace": "llm", "isvc": "chat"}], (0, 4), 5)
    third = write_shard(tmp_path / "s2", [{"namespace": "team-b", "isvc": "sum"}], (2, 4), 5)
    unfinished = tmp_path / "s1"
    unfinished.mkdir()
    not_a_fleet = tmp_path / "other"
    not_a_fleet.mkdir()
    (not_a_fleet / "fleet.json").write_text('{"schema": "something/else", "services": []}')
    result, index, markdown, _ = merge(tmp_path, first, unfinished, third, tmp_path / "gone", not_a_fleet)

    assert sorted(refs(index)) == ["llm/chat", "team-b/sum"]
    assert index["missing"] == [
        {"folder": "../s1", "reason": "no fleet.json (did that shard finish?)"},
        {"folder": "../gone", "reason": "no such folder"},
        {"folder": "../other", "reason": f"fleet.json is not a {FLEET_SCHEMA_ID} index"},
    ]
    caveat = markdown.splitlines()[2]
    assert caveat.startswith("_Coverage: could not see everything: ")
    assert "../s1 not merged (no fleet.json (did that shard finish?))" in caveat
    assert "shard(s) 1/4, 3/4 missing: their services are not in this index" in caveat
    assert result.exit_code == 0 and result.caveats


def test_many_absent_shards_are_counted_not_all_named(tmp_path: Path) -> None:
    _, _, markdown, _ = merge(tmp_path, write_shard(tmp_path / "s5", [], (5, 1000), 0))
    assert "shard(s) 0/1000, 1/1000, 2/1000, 3/1000, 4/1000, 6/1000, 7/1000, 8/1000 and 991 more missing" in markdown


def test_a_complete_set_of_shards_that_lost_a_service_says_so(tmp_path: Path) -> None:
    first = write_shard(tmp_path / "s0", [{"namespace": "llm", "isvc": "chat"}], (0, 2), 3)
    second = write_shard(tmp_path / "s1", [{"namespace": "llm", "isvc": "code"}], (1, 2), 3)
    _, _, markdown, _ = merge(tmp_path, first, second)
    assert "the shards listed 3 service(s) but 2 are in this index" in markdown


def test_nothing_readable_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(RunbookError, match=r"no folder could be read \(.*/nowhere: no such folder\)"):
        merge(tmp_path, tmp_path / "nowhere")
    shard = write_shard(tmp_path / "s0", [], (0, 1), 0)
    with pytest.raises(RunbookError, match="is one of the shard folders"):
        run_merge(MergeRequest((str(shard),), str(shard)))


HOSTILE = "<script>alert(1)</script>"


def test_hostile_content_is_escaped_and_never_linked(tmp_path: Path) -> None:
    shard = write_shard(
        tmp_path / "s0",
        [
            {"namespace": "llm", "isvc": HOSTILE, "path": "../../../etc"},
            {
                "namespace": "llm",
                "isvc": "chat",
                "status": "error",
                "reason": '<img src=x onerror="alert(2)"> | broken',
                "path": None,
            },
            {
                "namespace": "team-b",
                "isvc": "sum",
                "deployment_mode": '"><iframe src="https://example.invalid/">',
                "root_causes": ["</code><script>alert(3)</script>"],
                "counts": {"critical": 1, "warning": 0, "info": 0},
            },
            {"namespace": "team-b", "isvc": "js", "path": "javascript:alert(4)"},
            {"namespace": "team-b", "isvc": "bad-counts", "counts": {"critical": "1"}},
            {"namespace": "team-b", "isvc": "bad-status", "status": "<b>"},
            "not an object",
        ],
        (0, 1),
        7,
    )
    _, index, markdown, page = merge(tmp_path, shard)

    assert sorted(refs(index)) == ["llm/<script>alert(1)</script>", "llm/chat", "team-b/js", "team-b/sum"]
    by_name = {entry["isvc"]: entry for entry in index["services"]}
    assert by_name[HOSTILE]["path"] is None and by_name["js"]["path"] is None  # outside, or not a folder
    assert by_name["sum"]["path"] == "../s0/team-b/sum"
    assert "3 malformed service entries left out" in markdown

    assert page.count("<script>") == 1  # the page's own sorting script, nothing from the data
    for raw in ("<img", "<iframe", "<script>alert", "javascript:", 'src="https', "<b>"):
        assert raw not in page, raw
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=&quot;alert(2)&quot;&gt; | broken" in page
    assert '<a href="../s0/team-b/sum/summary.md">summary</a>' in page
    assert re.findall(r'href="([^"]*)"', page) == ["../s0/team-b/sum/summary.md", "../s0/team-b/sum/findings.json"]
    assert '| **error**: &lt;img src=x onerror="alert(2)"&gt; \\| broken |' in markdown  # one cell, no raw HTML
    assert "<script>" not in markdown and "<img" not in markdown


def test_the_page_opens_offline_and_sorts_by_any_column(tmp_path: Path) -> None:
    services = [
        {"namespace": "llm", "isvc": "a", "counts": {"critical": 2, "warning": 0, "info": 1}},
        {"namespace": "llm", "isvc": "b", "counts": {"critical": 0, "warning": 10, "info": 0}},
    ]
    _, _, _, page = merge(tmp_path, write_shard(tmp_path / "s0", services, (0, 1), 2))
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert not re.search(r"(src|href)=\"(https?:)?//", page)  # nothing fetched from anywhere
    assert page.count("<th ") == 10 and 'addEventListener("click"' in page
    assert '<td data-sort="10">10</td>' in page  # numbers sort as numbers
    rows = re.findall(r'<tr class="(\w+)">.*?<td>(llm/\w)</td>', page)
    assert rows == [("critical", "llm/a"), ("warning", "llm/b")]  # worst first until a header is clicked


@pytest.mark.integration
def test_a_shard_with_no_service_writes_an_empty_index_and_exits_0(
    fleet_api: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    fleet = [("llm", "vllm-llm"), ("llm", "qwen-chat"), ("team-b", "summarize"), ("team-b", "chat")]
    empty = next(index for index in range(50) if not any(Shard(index, 50).owns(*service) for service in fleet))
    result = kserve_runbook(
        "fleet", "--kubeconfig", str(kubeconfig), "-A", "--shard", f"{empty}/50", "--out", "empty", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    index = fleet_document(tmp_path / "empty")
    assert index["services"] == [] and index["shard"] == {"index": empty, "count": 50, "listed": 4}
    assert sorted(path.name for path in (tmp_path / "empty").iterdir()) == ["fleet.html", "fleet.json", "fleet.md"]


CHROMIUM = Path("/usr/bin/chromium")


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Chromium not installed (Debian package chromium)")
def test_the_page_sorts_in_a_real_browser_with_the_network_cut(tmp_path: Path) -> None:
    """Chromium opens fleet.html from disk; every request other than the file itself is refused and
    recorded; clicking a header sorts the rows, clicking again reverses them."""
    from playwright.sync_api import Route, sync_playwright

    services = [
        {"namespace": "llm", "isvc": "a", "counts": {"critical": 2, "warning": 0, "info": 1}},
        {"namespace": "llm", "isvc": "b", "counts": {"critical": 0, "warning": 10, "info": 0}},
        {"namespace": "llm", "isvc": "c", "counts": {"critical": 0, "warning": 9, "info": 0}},
    ]
    merge(tmp_path, write_shard(tmp_path / "s0", services, (0, 1), 3))
    page_url = (tmp_path / "merged" / "fleet.html").as_uri()
    refused: list[str] = []

    def only_the_page(route: Route) -> None:
        if route.request.url == page_url:
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"], headless=True)
        try:
            page = browser.new_page()
            page.route("**/*", only_the_page)
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(page_url)
            names = page.locator("tbody tr td:nth-child(2)")
            assert names.all_inner_texts() == ["llm/a", "llm/b", "llm/c"]
            page.locator("th", has_text="warning").click()
            assert names.all_inner_texts() == ["llm/a", "llm/c", "llm/b"]  # 0, 9, 10: numbers, not text
            page.locator("th", has_text="warning").click()
            assert names.all_inner_texts() == ["llm/b", "llm/c", "llm/a"]
            page.locator("th", has_text="service").click()
            assert names.all_inner_texts() == ["llm/a", "llm/b", "llm/c"]
        finally:
            browser.close()
    assert errors == [] and refused == []


def test_services_of_two_kinds_with_one_name_are_two_services_and_an_entry_without_kind_is_an_isvc(
    tmp_path: Path,
) -> None:
    isvc = {"namespace": "llm", "isvc": "chat"}  # written before fleet listed LLMInferenceServices: no kind
    llmisvc = {"namespace": "llm", "isvc": "chat", "kind": "LLMInferenceService", "path": "llm/_llmisvc/chat"}
    folder = write_shard(tmp_path / "s0", [isvc, llmisvc], (0, 1), 2)
    (folder / "llm" / "_llmisvc" / "chat").mkdir(parents=True)  # write_shard makes plain <namespace>/<name> only
    _, index, markdown, _ = merge(tmp_path, folder)
    assert kinded(index) == [("llm", "chat", "InferenceService"), ("llm", "chat", "LLMInferenceService")]
    assert index["duplicates"] == [] and index["listing"] == []
    assert [entry["path"] for entry in index["services"]] == ["../s0/llm/chat", "../s0/llm/_llmisvc/chat"]
    assert "| llm/chat | LLMInferenceService |" in markdown


def test_a_kind_the_merge_does_not_know_is_left_out(tmp_path: Path) -> None:
    service = {"namespace": "llm", "isvc": "chat", "kind": "Deployment"}
    _, index, markdown, _ = merge(tmp_path, write_shard(tmp_path / "s0", [service], (0, 1), 1))
    assert index["services"] == [] and "1 malformed service entry left out" in markdown


def test_the_shards_listings_merge_to_the_worst_answer_per_kind(tmp_path: Path) -> None:
    listing = [
        {"kind": "InferenceService", "status": "ok", "services": 2, "reason": ""},
        {"kind": "LLMInferenceService", "status": "not_installed", "services": 0, "reason": "no CRD"},
    ]
    forbidden = [listing[0], {**listing[1], "status": "forbidden", "reason": "403"}]
    folders = []
    for index, shard_listing in enumerate((listing, forbidden)):
        folder = write_shard(tmp_path / f"s{index}", [{"namespace": "llm", "isvc": f"m{index}"}], (index, 2), 2)
        document = json.loads((folder / "fleet.json").read_text())
        (folder / "fleet.json").write_text(json.dumps({**document, "listing": shard_listing}))
        folders.append(folder)
    result, index, markdown, _ = merge(tmp_path, *folders)
    assert [item["status"] for item in index["listing"]] == ["ok", "forbidden"]
    assert result.gaps == ("LLMInferenceServices could not be listed (forbidden: 403)",)
    assert "LLMInferenceServices could not be listed (forbidden: 403)" in markdown.splitlines()[2]
