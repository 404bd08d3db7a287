"""Secret redaction for evidence, bundles and reports (docs/contracts.md#evidence-bundle).

Redaction runs inside ``gather()``, so nothing downstream (checks, findings,
reports, bundles) ever holds a secret. secretKeyRef values are never read in
the first place; what this module removes are secrets written in plain text:
literal env values of secret-looking names, tokens passed as command-line
flags, bearer tokens in annotations, and the same strings wherever else they
appear (vLLM logs its own arguments).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

REDACTED = "<redacted>"
# "token" as in a credential, not vLLM's token counts and tokenizer settings (--max-num-batched-tokens,
# --tokenizer, --return-tokens-as-token-ids): their values are numbers and model names, not secrets.
_TOKEN = r"token(?!s|izer|[-_]ids?)"
_SECRET_NAME = re.compile(rf"({_TOKEN}|secret|passw(or)?d|api[_-]?key|apikey|credential|private[_-]?key|auth)", re.I)
_SECRET_FLAG = re.compile(rf"^--?[\w.-]*({_TOKEN}|secret|passw(or)?d|api[_-]?key|credential|auth)[\w.-]*$", re.I)
_DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)
_TEXT_PATTERNS = (
    # Authorization headers and bearer tokens anywhere.
    re.compile(r"(?i)(authorization\s*[:=]\s*)(\S+(?:\s+\S+)?)"),
    re.compile(r"(?i)(bearer\s+)([A-Za-z0-9._~+/=-]{8,})"),
    # --api-key VALUE / --api-key=VALUE and friends. The name parts are bounded ({0,64}): with `*` a long
    # word (a base64 blob in a log line) costs quadratic time, 35 s for 40 kB.
    re.compile(
        rf"(?i)(--?[\w.-]{{0,64}}(?:{_TOKEN}|secret|passw(?:or)?d|api[_-]?key|credential)[\w.-]{{0,64}}(?:=|\s+))(\S+)"
    ),
    # Python reprs such as api_key='sk-...' or 'api_key': 'sk-...' (vLLM prints its args this way).
    re.compile(
        r"""(?i)(['"]?(?<![\w-])[\w-]{0,64}(?:token|secret|passw(?:or)?d|api[_-]?key)['"]?\s*[:=]\s*['"])([^'"]+)"""
    ),
    # Well-known token shapes.
    re.compile(r"()(sk-[A-Za-z0-9_-]{16,})"),
    re.compile(r"()(hf_[A-Za-z0-9]{20,})"),
    re.compile(r"()(xox[abposr]-[A-Za-z0-9-]{10,})"),
    re.compile(r"()(https://hooks\.slack\.com/services/[A-Za-z0-9/_-]+)"),
)


# Cheap pre-filter: text without any of these words cannot match a pattern below.
_TRIGGER = re.compile(r"(?i)token|secret|passw|api[_-]?key|credential|bearer|authorization|sk-|hf_|xox|hooks\.slack")


def redact_text(text: str, known_secrets: Iterable[str] = ()) -> str:
    """Remove known secret values and anything shaped like a credential from free text."""
    for secret in sorted(set(known_secrets), key=len, reverse=True):
        if len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    if not _TRIGGER.search(text):
        return text
    for pattern in _TEXT_PATTERNS:
        text = pattern.sub(
            lambda match: match.group(1) + REDACTED if match.group(2) != REDACTED else match.group(0), text
        )
    return text


def _redact_args(values: list[Any], found: set[str]) -> list[Any]:
    redacted: list[Any] = []
    hide_next = False
    for value in values:
        text = str(value)
        if hide_next:
            found.add(text)
            redacted.append(REDACTED)
            hide_next = False
            continue
        flag, separator, flag_value = text.partition("=")
        if _SECRET_FLAG.match(flag):
            if separator:
                found.add(flag_value)
                redacted.append(f"{flag}={REDACTED}")
            else:
                redacted.append(text)
                hide_next = True
            continue
        redacted.append(value)
    return redacted


def _collect_and_redact(node: Any, found: set[str], parent_key: str = "") -> Any:
    if isinstance(node, dict):
        result: dict[str, Any] = {}
        is_env_var = "name" in node and ("value" in node or "valueFrom" in node)
        for key, value in node.items():
            if is_env_var and key == "value" and _SECRET_NAME.search(str(node.get("name"))) and value:
                found.add(str(value))
                result[key] = REDACTED
            elif key in ("args", "command") and isinstance(value, list):
                result[key] = _redact_args(value, found)
            elif parent_key in ("annotations", "data", "stringData") and isinstance(value, str):
                if key in _DROPPED_ANNOTATIONS:
                    result[key] = REDACTED
                elif _SECRET_NAME.search(key) and value:
                    found.add(value)
                    result[key] = REDACTED
                else:
                    result[key] = value
            else:
                result[key] = _collect_and_redact(value, found, key)
        return result
    if isinstance(node, list):
        return [_collect_and_redact(item, found, parent_key) for item in node]
    return node


def _scrub_strings(node: Any, secrets: set[str]) -> Any:
    if isinstance(node, dict):
        return {key: _scrub_strings(value, secrets) for key, value in node.items()}
    if isinstance(node, list):
        return [_scrub_strings(item, secrets) for item in node]
    if isinstance(node, str):
        return redact_text(node, secrets)
    return node


def redact_objects(objects: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], set[str]]:
    """Redacted copies of ``objects`` and the set of secret values that were removed."""
    found: set[str] = set()
    first_pass = [_collect_and_redact(obj, found) for obj in objects]
    return [_scrub_strings(obj, found) for obj in first_pass], found
