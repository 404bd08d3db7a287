"""Transitional: catalog.yaml holds exactly the Python catalog, guides and cause graph it replaces.

Removed with the Python copies in the next commit.
"""

from __future__ import annotations

from nbhelpers.findings import catalog, model
from nbhelpers.render import code_reference


def test_the_data_file_matches_the_python_catalog_field_by_field() -> None:
    assert list(catalog.CATALOG) == list(model.CATALOG)
    for code, old in model.CATALOG.items():
        new = catalog.CATALOG[code]
        guide = code_reference.GUIDES[code]
        assert (new.code, new.step, new.severity.value, new.title, new.why, new.fix, new.evidence) == (
            old.code,
            old.step,
            old.severity.value,
            old.meaning,
            old.reference,
            guide.fix,
            guide.evidence,
        ), code
    assert catalog.CAUSE_EDGES == model.CAUSE_EDGES
    assert all(catalog.reachable(code) == model.reachable(code) for code in model.CATALOG)
