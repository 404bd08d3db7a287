"""Keep third-party imports from doing work this tool never uses.

jsonschema is imported by nbformat (so by papermill and nbconvert) and by altair. When the package
rfc3987-syntax is installed (jupyter-events brings it, with JupyterLab), ``import jsonschema``
builds that package's IRI grammar with lark: about 0.8 s of CPU in every process that imports it,
the CLI and the report's kernel alike, to check the ``iri`` and ``iri-reference`` formats. Neither
nbformat's notebook schema nor altair's Vega-Lite schema uses those formats (and nbformat does not
check formats at all), so the tool tells Python the package is absent before the first import of
jsonschema. Only those two format checks are lost, and only in this tool's processes.
"""

from __future__ import annotations

import sys

_UNUSED_SLOW_IMPORTS = ("rfc3987_syntax",)


def skip_unused_slow_imports() -> None:
    """Make ``import rfc3987_syntax`` fail fast in this process (jsonschema then skips the IRI formats).

    Call before the first import of jsonschema, nbformat, papermill, nbconvert or altair. A module that
    is already imported stays as it is.
    """
    for name in _UNUSED_SLOW_IMPORTS:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]  # None in sys.modules means "not importable"
