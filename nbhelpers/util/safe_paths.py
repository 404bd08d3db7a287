"""The one guard between names from outside and the file system (issue #19).

Namespaces, pod and container names, InferenceService names come from bundles, API servers and
webhook payloads: any of them may hold ``/``, ``..``, NUL or a terminal escape. Before such a name
becomes part of a path it goes through :func:`safe_component`, and every path written is checked
with :func:`inside` to stay inside its folder after resolution.

- :func:`safe_component`: a name as one path component. Kubernetes names (``[a-z0-9.-]``) are kept
  as they are; anything else has each run of other characters replaced by ``_`` and a short hash
  of the original appended, so two different names never share a file and the result reads like
  the name.
- :func:`safe_relative`: ``a/b/c`` made only of such components (what a bundle writer may write),
  else ``UnsafePath``.
- :func:`inside`: ``root / relative``, refused unless it resolves inside ``root``.
- :func:`child_path`: ``root`` joined with names from outside, each made a safe component.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from nbhelpers.errors import RunbookError

MAX_COMPONENT_CHARS = 200  # Kubernetes names up to 200 characters are kept; with a suffix still under 255 bytes
_KEPT = re.compile(r"[A-Za-z0-9._-]+")
_REPLACED = re.compile(r"[^A-Za-z0-9._-]+")
_HASH_CHARS = 10


class UnsafePath(RunbookError):
    """A path that would leave its folder, or a name that is not a single safe component."""


def is_safe_component(name: str) -> bool:
    return bool(_KEPT.fullmatch(name)) and name not in (".", "..") and len(name) <= MAX_COMPONENT_CHARS


def safe_component(name: object) -> str:
    """``name`` as a single, readable file name component: no separator, no ``..``, no control
    character, not empty, at most :data:`MAX_COMPONENT_CHARS` characters. Deterministic, and
    different names give different components."""
    text = name if isinstance(name, str) else str(name)
    if is_safe_component(text):
        return text
    digest = hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()[:_HASH_CHARS]
    readable = _REPLACED.sub("_", text).strip(".")[: MAX_COMPONENT_CHARS - _HASH_CHARS - 1]
    return f"{readable}_{digest}" if readable else f"_{digest}"


def safe_relative(name: str) -> str:
    """``name`` when it is a relative POSIX path of safe components only; else ``UnsafePath``."""
    parts = name.split("/")
    if not name or not all(is_safe_component(part) for part in parts):
        raise UnsafePath(
            f"refusing the path {_shown(name)}: each part must be a plain name (no '..', control characters)"
        )
    return name


def inside(root: Path, relative: str) -> Path:
    """``root / relative`` after checking that it is made of safe components and resolves inside ``root``."""
    base = root.resolve()
    path = (base / safe_relative(relative)).resolve()
    if path == base or not path.is_relative_to(base):
        raise UnsafePath(f"refusing the path {_shown(relative)}: it resolves outside {root}")
    return path


def child_path(root: Path, *names: object) -> Path:
    """``root`` joined with ``names`` from outside (each made one :func:`safe_component`), checked to stay inside.

    ``child_path(Path("outputs"), "x/../../etc")`` is ``outputs/x_.._.._etc_<hash>``.
    """
    relative = "/".join(safe_component(name) for name in names)
    inside(root, relative)
    return root / relative


def _shown(name: str) -> str:
    return repr(name if len(name) <= 80 else name[:80] + "...")
