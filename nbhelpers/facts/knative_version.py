"""The Knative Serving release the cluster runs, as far as the evidence shows it.

Knative's release manifests label every object they install with the release: ``app.kubernetes.io/version``
(``"1.15.2"``, the tag without its ``v``) and, in releases before about 1.9, also
``serving.knative.dev/release`` (``"v1.0.0"``); a build from source keeps the placeholder ``devel``
(knative/serving ``hack/generate-yamls.sh``). The ConfigMaps of the ``knative-serving`` namespace that the
evidence already holds (config-deployment, config-autoscaler, config-defaults) carry those labels, so no
extra read is needed. An operator or a vendor build may label them otherwise: then the version is unknown,
and a consumer says so instead of guessing.

Feature gates that depend on the release:

- ``startupProbe``: Knative's webhook rejected it ("must not set the field(s): ...startupProbe",
  knative/serving#10037) until PR #15309, first released in knative-v1.15.0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nbhelpers.evidence.model import Evidence
from nbhelpers.sources import kube

_CONFIG_MAPS = ("config-deployment", "config-autoscaler", "config-defaults")
_LABELS = ("app.kubernetes.io/version", "serving.knative.dev/release")
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")
STARTUP_PROBE_SINCE = (1, 15)


@dataclass(frozen=True)
class KnativeVersion:
    """The release (major, minor, patch) and where it was read, or None with why not."""

    release: tuple[int, int, int] | None
    source: str

    @property
    def text(self) -> str:
        return ".".join(str(part) for part in self.release) if self.release else "unknown"

    def at_least(self, major: int, minor: int) -> bool | None:
        """Whether the release is at least ``major.minor``; None when it is unknown."""
        return None if self.release is None else self.release[:2] >= (major, minor)

    @property
    def allows_startup_probe(self) -> bool | None:
        return self.at_least(*STARTUP_PROBE_SINCE)

    def describe(self) -> str:
        if self.release is None:
            return f"Knative Serving version unknown ({self.source})"
        return f"Knative Serving {self.text} ({self.source})"


def serving_version(evidence: Evidence) -> KnativeVersion:
    namespace = evidence.site.knative_namespace
    seen = []
    for name in _CONFIG_MAPS:
        config = evidence.config_map(namespace, name)
        if config is None:
            continue
        seen.append(name)
        labels = kube.labels(config)
        for label in _LABELS:
            match = _VERSION.match(labels.get(label, "").strip())
            if match:
                major, minor, patch = (int(part or 0) for part in match.groups())
                return KnativeVersion((major, minor, patch), f"label {label} of ConfigMap {namespace}/{name}")
    if not seen:
        return KnativeVersion(None, f"no ConfigMap of {namespace} was read")
    return KnativeVersion(None, f"no release label on {', '.join(f'{namespace}/{name}' for name in seen)}")
