"""The project explains itself: comments cite docs/ in the repository, and every cited anchor exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]
CITED = re.compile(r"(?<![\w/.-])docs/([\w.-]+\.md)(?:#([\w-]+))?")  # not upstream paths like .../docs/x.md
FOUNDING_BRIEF = "DESIGN " + "§"  # spelled apart so this file does not cite it


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces to dashes."""
    headings = re.findall(r"^#+ (.+)$", markdown, re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading).strip().lower().replace(" ", "-") for heading in headings}


def _sources() -> list[Path]:
    folders = ("nbhelpers", "tests", "benchmarks", "runbooks", "deploy")
    return [
        path
        for folder in folders
        for path in (ROOT / folder).rglob("*")
        if path.suffix in (".py", ".ipynb", ".yaml", ".json", ".md") and "golden" not in path.parts
    ]


def test_no_comment_cites_a_document_outside_the_repository() -> None:
    outside = [str(path) for path in _sources() if FOUNDING_BRIEF in path.read_text(errors="replace")]
    assert outside == []


def test_every_cited_doc_and_anchor_exists() -> None:
    missing = []
    for path in [*_sources(), ROOT / "README.md"]:
        for name, anchor in CITED.findall(path.read_text(errors="replace")):
            doc = ROOT / "docs" / name
            if not doc.is_file() or (anchor and anchor not in _anchors(doc.read_text())):
                missing.append(f"{path.relative_to(ROOT)}: docs/{name}#{anchor}")
    assert missing == []
