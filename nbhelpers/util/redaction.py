"""Secret redaction: one policy for free text, Kubernetes objects, Prometheus labels and URLs (docs/contracts.md#evidence-bundle).

Redaction runs inside ``gather()``, so nothing downstream (checks, findings, reports, bundles) ever holds
a secret. Secret objects and secretKeyRef values are never read in the first place; this module removes
the secrets that are written in plain text, wherever they are.

What is replaced, and by what. A secret is replaced by the marker ``<redacted>`` (:data:`REDACTED`); what
names it (the variable, the flag, the header, the URL around it) is kept, so a reader still sees that a
credential was there and where it came from.

In any text (log lines, event messages and notes, every string value of an object, label values, error
messages), these forms lose their value:

- URL userinfo, in any scheme: ``https://user:pass@host``, ``postgres://u:p@db``, ``mongodb+srv://…``,
  ``redis://:pw@cache`` become ``scheme://<redacted>@host`` (a user name alone is removed too);
- credential query parameters (``?token=``, ``&access_token=``, ``api_key=``, ``password=``, ``key=``,
  ``sig=``, ``signature=``, ``auth=``, ``code=``, ``jwt=``, ``session=``, ``X-Amz-Signature=``…):
  the value goes, the rest of the URL stays;
- ``name=value``, ``name: value``, ``name => value``, quoted or not, also inside JSON and inside JSON
  escaped into a string (``{\\"password\\": \\"…\\"}``), when the name ends with a credential word:
  token, secret, password/passwd/passphrase, ``_pwd``, api key, access/secret/private/signing/
  subscription key, credential(s), auth, and the connection-string names (``DATABASE_URL``, ``DB_URL``,
  ``REDIS_URL``, ``MONGODB_URI``, ``*_DSN``, ``CONNECTION_STRING``…), whose whole value goes (up to
  whitespace, a quote, ``,`` or ``;``); other unquoted values end at whitespace, a quote or one of
  ``, ; & ( ) [ ] { }``;
- a list value of such a name, as vLLM prints ``'api_key': ['…', '…']`` in its argument line: every
  element goes (``'api_key': [<redacted>]``);
- credential headers: ``Authorization`` and ``Proxy-Authorization`` (the scheme word such as ``Basic``
  or ``Bearer`` is kept), ``Cookie``/``Set-Cookie`` (the rest of the line), and the headers whose name
  ends with a credential word (``X-Api-Key``, ``X-Auth-Token``, ``PRIVATE-TOKEN``…), also as JSON keys;
- ``Bearer <token>`` anywhere, when the token has a digit or 20 characters or more;
- command-line flags naming a credential (``--api-key VALUE``, ``--hf-token=VALUE``);
- well-known token shapes, whole: OpenAI-style ``sk-…``, Hugging Face ``hf_…``, GitHub ``ghp_``/``gho_``/
  ``ghu_``/``ghs_``/``ghr_`` and ``github_pat_…``, GitLab ``glpat-…``, AWS access key ids (``AKIA…``,
  ``ASIA…``), Slack ``xoxb-``/``xoxp-``/``xapp-`` tokens and webhook URLs, Google ``AIza…`` keys,
  Stripe ``sk_live_…``, JSON Web Tokens (``eyJ….….…``), and the body of a ``PRIVATE KEY`` PEM block.

In Kubernetes objects, on top of the text rules applied to every string value (``.status`` condition
messages included): the literal ``value`` of an env entry (or of any ``{name, value}`` pair, such as a
probe's HTTP header) whose name looks secret (token, secret, password, api key, credential, auth, cookie,
connection string…); the argument after a credential flag in ``args``/``command`` (and ``--flag=value``);
annotations and ConfigMap data keys with a secret-looking name; kubectl's last-applied-configuration
annotation (a copy of the whole object). The values removed this way are then removed from every other
text too (logs, messages, labels), wherever they appear, when they are at least six characters long
and not a number or a boolean.

In Prometheus series, a label whose name looks secret loses its value; every other label value goes
through the text rules. :func:`redact_url` cleans a URL before it is shown: userinfo and credential
query or fragment parameters are replaced, scheme, host, port, path and the other parameters kept.

What is deliberately kept. Ordinary words around these names are not secrets: "token budget",
``max_tokens=4096``, ``--max-num-batched-tokens 32768``, ``--tokenizer``, ``tokenizer_mode``,
``return_tokens_as_token_ids``, ``eos_token: </s>`` and other special tokens of a tokenizer, a numeric
``token`` (a token id), ``secretName``/``secretKeyRef`` references, ``auth_enabled: true``, values
``None``/``null``/``true``/``false``, an ``Authorization header is missing`` message, the reason after
containerd's ``failed to fetch anonymous token:`` / ``oauth token:`` (a pull error), the scheme of an
Authorization header, "Bearer authentication", a ``cache key: …`` (a bare "key" is not a credential
name outside a query string), and Kubernetes names (lowercase, so never taken for an ``sk-…`` key).

Cost. Every rule is one regular expression with bounded repetitions (``{0,N}``) and no repeated
group, so no match backtracks more than a fixed number of steps and redaction is linear in the text's
length. A rule runs only when one of its trigger words occurs in the text; the rules on names run only
on the lines where a credential word is followed by a separator. Redacting redacted text changes
nothing: no rule takes the marker for a value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

REDACTED = "<redacted>"
_NOT_REDACTED = f"(?!{re.escape(REDACTED)})"

# "token" as in a credential, not vLLM's token counts and tokenizer settings (--max-num-batched-tokens,
# --tokenizer, --return-tokens-as-token-ids): their values are numbers and model names, not secrets.
_TOKEN = r"token(?!s|izer|[-_]ids?)"
_CONNECTION_STRING = (
    r"(?:(?:database|db|redis|mongo(?:db)?|postgres(?:ql)?|pg|mysql|mariadb|amqp|rabbitmq|broker|sqlalchemy)"
    r"[_.-]?(?:url|uri|dsn)|dsn|connection[_.-]?string|conn[_.-]?str)"
)
# Names of env entries, annotations, ConfigMap keys and Prometheus labels whose whole value is a secret.
_SECRET_NAME = re.compile(
    rf"({_TOKEN}|secret|passw(or)?d|passphrase|api[_-]?key|apikey|credential|private[_-]?key|auth|cookie"
    rf"|(^|[_-])pwd$|^{_CONNECTION_STRING}$|[_-]{_CONNECTION_STRING}$)",
    re.I,
)
_SECRET_FLAG = re.compile(rf"^--?[\w.-]*({_TOKEN}|secret|passw(or)?d|api[_-]?key|credential|auth)[\w.-]*$", re.I)
_DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)
_MIN_KNOWN_SECRET = 4  # shorter known values are not replaced in text: too many innocent matches
_MIN_PROPAGATED = 6  # values found in objects are removed from other texts from this length on
_NOT_SECRET_VALUES = frozenset({"true", "false", "yes", "no", "on", "off", "none", "null", "nil", "undefined"})

# Tokenizer settings that end in "token" and hold a special token, not a credential (eos_token: </s>).
_SPECIAL_TOKEN_PREFIXES = (
    "eos", "bos", "pad", "unk", "sep", "cls", "mask", "stop", "special", "max", "min", "num", "total",
    "prompt", "completion", "output", "input", "image", "audio", "video", "eot", "eom", "start", "end",
    "first", "last", "next", "draft", "prefix", "suffix", "middle", "decoder_start", "default", "tool_call",
)  # fmt: skip
_TOKEN_WORD = "token" + "".join(
    f"(?<!{prefix}{joint}token)" for prefix in _SPECIAL_TOKEN_PREFIXES for joint in ("_", "-", "")
)
# A key=value / key: value name ends with one of these (case-insensitive).
_CREDENTIAL_WORD = (
    rf"(?:{_TOKEN_WORD}|secret|passw(?:or)?d|passphrase|[_.-]pwd|api[ _.-]?key|apikey"
    r"|(?:access|secret|private|signing|subscription|encryption|master|account)[_.-]?key"
    rf"|credentials?|auth|{_CONNECTION_STRING})"
)
_QUERY_NAME = r"(?:x-amz-|x-goog-)?(?:key|sig|signature|auth|code|jwt|session|sessionid)"
# After the name: an optional closing quote (escaped inside JSON strings), then the separator.
_SEPARATOR = r"""\\?["']?[ \t]{0,8}(?>=>|[:=])[ \t]{0,8}"""
# An unquoted value: up to whitespace, a quote, a delimiter of the text around it (JSON, reprs, queries).
_BARE_VALUE = r"""(?!<)[^\s"'\\,;&{}\[\]()]{1,1024}"""
_VALUE_END = r"""(?:[\s"'\\,;&{}\[\]()]|$)"""
_PLACEHOLDER_VALUE = rf"(?:none|null|nil|true|false|undefined|\*{{3,64}}){_VALUE_END}"
_AUTH_SCHEMES = r"(?:basic|bearer|digest|token|negotiate|ntlm|apikey|aws4-hmac-sha256|sso-key|splunk|key)"


def _has_upper_and_digit(match: re.Match[str]) -> bool:
    value = match.group("secret")
    return any(c.isupper() for c in value) and any(c.isdigit() for c in value)


def _not_all_lower(match: re.Match[str]) -> bool:
    value = match.group("secret")
    return any(c.isupper() or c.isdigit() for c in value[3:])


def _not_a_token_id(match: re.Match[str]) -> bool:
    """A bare number after a ``token`` name is a token id (logprobs, tokenizer output), not a credential."""
    return not (match.group("secret").isdigit() and match.group("word").lower().endswith("token"))


# containerd's registry client wraps the error of its token request as "failed to fetch anonymous token: <why>"
# or "failed to fetch oauth token: <why>" (the why: 'unexpected status from GET request to https://auth.docker.io/
# token?...: 401 Unauthorized', 'Get "https://...": dial tcp ...: i/o timeout'), and kubelet puts that text in an
# ErrImagePull event and the container's waiting message (ciiiii/cloudflare-docker-proxy#62, moby/buildkit#4456,
# docker-library/tomcat#321). What follows "token:" there is the reason the pull failed, never a credential.
_TOKEN_FETCH_ERROR = re.compile(r"(?i)\bfetch(?:ing)?[ \t]{1,8}(?:an[ \t]{1,8})?(?:anonymous|oauth)[ \t]{1,8}$")


def _not_a_fetch_error(match: re.Match[str]) -> bool:
    """Not the reason of a failed token request ("failed to fetch anonymous token: unexpected status ...")."""
    if match.group("word").lower() != "token" or "=" in match.string[match.end("word") : match.start("secret")]:
        return True  # the error is written "token: why"; "token=value" stays a credential
    before = match.string[max(0, match.start("word") - 40) : match.start("word")]
    return not _TOKEN_FETCH_ERROR.search(before)


def _a_credential(match: re.Match[str]) -> bool:
    """The value after a credential name is one: neither a token id nor a token request's error."""
    return _not_a_token_id(match) and _not_a_fetch_error(match)


@dataclass(frozen=True)
class _Rule:
    """One form of secret: ``keep`` stays, ``secret`` becomes the marker."""

    name: str
    pattern: re.Pattern[str]
    triggers: tuple[str, ...]  # lower-case: the rule runs only when the lowered text contains one of them
    applies: Callable[[re.Match[str]], bool] | None = None  # False: this match is not a secret after all


@dataclass(frozen=True)
class _LineRules:
    """Rules whose matches never span a line, run only on the lines where ``candidates`` finds something.

    The credential-name rules try a long alternation of names at every position; most lines of a log
    have none of them before a separator, and this keeps the cost of a 4 MB log low.
    """

    candidates: re.Pattern[str]
    rules: tuple[_Rule, ...]


def _rule(
    name: str, regex: str, triggers: Iterable[str] = (), applies: Callable[[re.Match[str]], bool] | None = None
) -> _Rule:
    return _Rule(name, re.compile(regex), tuple(triggers), applies)


def _shape(
    name: str, regex: str, triggers: Iterable[str], applies: Callable[[re.Match[str]], bool] | None = None
) -> _Rule:
    """A token recognised by its shape alone: the whole match is the secret."""
    return _rule(name, rf"(?P<keep>)(?<![A-Za-z0-9_-])(?P<secret>{regex})(?![A-Za-z0-9])", triggers, applies)


_AWS_PREFIXES = ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AIPA", "ANPA", "ANVA", "AROA", "APKA", "ASCA")
# Order matters only for readability of the result: value shapes first, then names around values.
_RULES: tuple[_Rule | _LineRules, ...] = (
    _rule(
        "private key block",
        r"(?P<keep>-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----)(?P<secret>[A-Za-z0-9+/=\s\\]{1,16384})",
        ["private key-----"],
    ),
    _rule(
        "URL userinfo",
        rf"""(?i)(?P<keep>(?<![a-z0-9+.-])[a-z][a-z0-9+.-]{{0,30}}://){_NOT_REDACTED}(?P<secret>[^\s/?#"'\\]{{1,1024}})(?=@)""",
        ["://"],
    ),
    _shape("Slack webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{1,256}", ["hooks.slack.com"]),
    _shape("OpenAI-style key", r"sk-[A-Za-z0-9_-]{16,512}", ["sk-"], _has_upper_and_digit),
    _shape("Stripe key", r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,255}", ["k_live_", "k_test_"]),
    _shape("Hugging Face token", r"hf_[A-Za-z0-9]{20,512}", ["hf_"], _not_all_lower),
    _shape("GitHub token", r"gh[pousr]_[A-Za-z0-9]{30,255}", ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]),
    _shape("GitHub fine-grained token", r"github_pat_[A-Za-z0-9_]{20,255}", ["github_pat_"]),
    _shape("GitLab token", r"glpat-[A-Za-z0-9_-]{20,255}", ["glpat-"]),
    _shape("AWS access key id", rf"(?:{'|'.join(_AWS_PREFIXES)})[A-Z0-9]{{16}}", [p.lower() for p in _AWS_PREFIXES]),
    _shape("Slack token", r"(?:xox[abposr]-[A-Za-z0-9-]{10,255}|xapp-[0-9]-[A-Za-z0-9-]{10,255})", ["xox", "xapp-"]),
    _shape("Google API key", r"AIza[0-9A-Za-z_-]{35}", ["aiza"]),
    _shape("JSON Web Token", r"eyJ[A-Za-z0-9_-]{8,4096}\.[A-Za-z0-9_-]{8,4096}\.[A-Za-z0-9_-]{0,4096}", ["eyj"]),
    _rule(
        "credential query parameter",
        rf"(?i)(?P<keep>[?&;#]{_QUERY_NAME}=){_NOT_REDACTED}(?P<secret>[^&#\s\"'\\<>]{{1,4096}})",
        ["key=", "sig=", "signature=", "auth=", "code=", "jwt=", "session=", "sessionid="],
    ),
    _rule(
        "Authorization header",
        rf"(?i)(?P<keep>authorization{_SEPARATOR}\[?[ \t]{{0,8}}\\?[\"']?(?:{_AUTH_SCHEMES}[ \t]{{1,8}})?+)"
        rf"{_NOT_REDACTED}(?P<secret>[^\s\"'\\,\[\]]{{1,4096}})",
        ["authorization"],
    ),
    _rule(
        "Cookie header",
        rf"(?i)(?P<keep>cookie{_SEPARATOR}\\?[\"']?){_NOT_REDACTED}(?P<secret>[^\s\"'\\][^\r\n\"'\\]{{0,4095}})",
        ["cookie"],
    ),
    _rule(
        "bearer token",
        rf"(?i)(?P<keep>(?<![\w-])bearer[ \t]{{1,8}}){_NOT_REDACTED}"
        r"(?P<secret>(?=[A-Za-z._~+/=-]{0,4096}[0-9])[A-Za-z0-9._~+/=-]{8,4096}|[A-Za-z._~+/=-]{20,4096})",
        ["bearer"],
    ),
    _LineRules(
        re.compile(
            rf"(?i)(?:token|secret|password|passwd|passphrase|pwd|key|credentials?|auth|url|uri|dsn|str|string){_SEPARATOR}"
        ),
        (
            _rule(
                "credential list",
                rf"(?i)(?P<keep>(?P<word>{_CREDENTIAL_WORD}){_SEPARATOR}\[)(?!{re.escape(REDACTED)}\])"
                r"(?P<secret>[^\]\r\n]{1,4096})(?=\])",
            ),
            _rule(
                "credential value in double quotes",
                rf'(?i)(?P<keep>(?P<word>{_CREDENTIAL_WORD}){_SEPARATOR}\\?"){_NOT_REDACTED}(?P<secret>[^"\\\r\n]{{1,1024}})',
                applies=_a_credential,
            ),
            _rule(
                "credential value in single quotes",
                rf"(?i)(?P<keep>(?P<word>{_CREDENTIAL_WORD}){_SEPARATOR}\\?'){_NOT_REDACTED}(?P<secret>[^'\\\r\n]{{1,1024}})",
                applies=_a_credential,
            ),
            _rule(
                "connection string",  # the whole value, a Go DSN's tcp(host:port) included
                rf"(?i)(?P<keep>{_CONNECTION_STRING}{_SEPARATOR})(?!<)(?P<secret>[^\s\"'\\,;{{}}\[\]]{{1,1024}})",
            ),
            _rule(
                "credential value",
                rf"(?i)(?P<keep>(?P<word>{_CREDENTIAL_WORD}){_SEPARATOR})(?!{_PLACEHOLDER_VALUE})(?P<secret>{_BARE_VALUE})",
                applies=_a_credential,
            ),
        ),
    ),
    # --api-key VALUE / --api-key=VALUE and friends. The name parts are bounded ({0,64}): with `*` a long
    # word (a base64 blob in a log line) costs quadratic time, 35 s for 40 kB.
    _rule(
        "credential flag",
        rf"""(?i)(?P<keep>(?<![\w.-])--?[\w.-]{{0,64}}(?:{_TOKEN}|secret|passw(?:or)?d|api[_-]?key|credential)"""
        rf"""[\w.-]{{0,64}}(?:=|[ \t]{{1,8}})){_NOT_REDACTED}(?!-)"""
        r"""(?P<secret>'[^'\r\n]{0,1024}'|"[^"\r\n]{0,1024}"|[^\s'"]{1,1024})""",
        ["token", "secret", "passw", "key", "credential"],
    ),
)


def _apply(rule: _Rule, text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        if match.group("secret") == REDACTED or (rule.applies is not None and not rule.applies(match)):
            return match.group(0)
        return match.group("keep") + REDACTED

    return rule.pattern.sub(replace, text)


def _replace_known(text: str, secrets: Iterable[str]) -> str:
    """``text`` without the known secret values, leaving existing markers whole."""
    wanted = sorted(
        {s for s in secrets if len(s) >= _MIN_KNOWN_SECRET and s not in REDACTED and REDACTED not in s},
        key=len,
        reverse=True,
    )
    if not wanted or not text:
        return text
    parts = text.split(REDACTED)
    for secret in wanted:
        parts = [part.replace(secret, REDACTED) for part in parts]
    return REDACTED.join(parts)


def _apply_on_lines(stage: _LineRules, text: str) -> str:
    pieces: list[str] = []
    done = 0  # text[:done] is in pieces
    for candidate in stage.candidates.finditer(text):
        if candidate.start() < done:
            continue  # on a line already redacted
        start = text.rfind("\n", 0, candidate.start()) + 1
        end = text.find("\n", candidate.end())
        end = len(text) if end == -1 else end
        line = text[start:end]
        for rule in stage.rules:
            line = _apply(rule, line)
        pieces += [text[done:start], line]
        done = end
    return "".join(pieces) + text[done:] if pieces else text


def redact_text(text: str, known_secrets: Iterable[str] = ()) -> str:
    """``text`` without the known secret values and without anything shaped like a credential."""
    text = _replace_known(text, known_secrets)
    lowered = text.lower()
    for stage in _RULES:
        if isinstance(stage, _LineRules):
            text = _apply_on_lines(stage, text)
        elif any(trigger in lowered for trigger in stage.triggers):
            text = _apply(stage, text)
    return text


def redact_labels(labels: Mapping[str, str], known_secrets: Iterable[str] = ()) -> dict[str, str]:
    """Prometheus series labels: a secret-looking label name loses its value, other values are redacted."""
    known = tuple(known_secrets)
    return {
        name: REDACTED if value and _SECRET_NAME.search(name) else redact_text(str(value), known)
        for name, value in labels.items()
    }


def _redact_parameters(query: str) -> str:
    """A query string (or fragment) with the values of credential parameters replaced."""
    if "=" not in query:
        return query
    kept = []
    for parameter in query.split("&"):
        name, separator, value = parameter.partition("=")
        plain = unquote(name).strip()
        if separator and value and (_QUERY_NAME_RE.fullmatch(plain) or _CREDENTIAL_NAME_RE.search(plain)):
            parameter = f"{name}={REDACTED}"
        kept.append(parameter)
    return "&".join(kept)


_QUERY_NAME_RE = re.compile(_QUERY_NAME, re.I)
_CREDENTIAL_NAME_RE = re.compile(rf"{_CREDENTIAL_WORD}$", re.I)


def redact_url(url: str) -> str:
    """``url`` fit to show: userinfo and credential query/fragment parameters replaced by the marker.

    Scheme, host, port, path and the other parameters stay as they were. Text that is not a URL is
    redacted as text.
    """
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unbalanced IPv6 bracket
        return redact_text(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    cleaned = urlunsplit(
        (parts.scheme, netloc, parts.path, _redact_parameters(parts.query), _redact_parameters(parts.fragment))
    )
    return redact_text(cleaned)


def _worth_propagating(value: str) -> bool:
    """A value removed from an object is also removed from other texts, unless it is too common to mean it."""
    plain = value.strip()
    if len(plain) < _MIN_PROPAGATED or plain.lower() in _NOT_SECRET_VALUES or REDACTED in plain:
        return False
    try:
        float(plain)
    except ValueError:
        return True
    return False


def _remember(found: set[str], value: str) -> None:
    if _worth_propagating(value):
        found.add(value)


def _redact_args(values: list[Any], found: set[str]) -> list[Any]:
    redacted: list[Any] = []
    hide_next = False
    for value in values:
        text = str(value)
        if hide_next:
            _remember(found, text)
            redacted.append(REDACTED)
            hide_next = False
            continue
        flag, separator, flag_value = text.partition("=")
        if _SECRET_FLAG.match(flag):
            if separator:
                _remember(found, flag_value)
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
                _remember(found, str(value))
                result[key] = REDACTED
            elif key in ("args", "command") and isinstance(value, list):
                result[key] = _redact_args(value, found)
            elif parent_key in ("annotations", "data", "stringData") and isinstance(value, str):
                if key in _DROPPED_ANNOTATIONS:
                    result[key] = REDACTED
                elif _SECRET_NAME.search(key) and value:
                    _remember(found, value)
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
