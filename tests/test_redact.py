"""Secrets are removed from objects and logs before anything is written (docs/contracts.md#evidence-bundle)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbhelpers.util.redaction import REDACTED, redact_labels, redact_objects, redact_text, redact_url

API_KEY = "sk-live-0123456789abcdefghij"
HF_TOKEN = "hf_ABCDEFGHIJKLMNOPQRSTUVWXYZ"
BEARER = "eyJhbGciOiJSUzI1NiJ9.payload.signature"


def _pod() -> dict[str, object]:
    return {
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "annotations": {
                "example.com/auth-token": BEARER,
                "kubectl.kubernetes.io/last-applied-configuration": '{"spec": "' + API_KEY + '"}',
                "harmless": "yes",
            },
        },
        "spec": {
            "containers": [
                {
                    "name": "kserve-container",
                    "args": ["--model", "/mnt/models", "--api-key", API_KEY, f"--hf-token={HF_TOKEN}"],
                    "env": [
                        {"name": "HF_TOKEN", "value": HF_TOKEN},
                        {"name": "OPENAI_API_KEY", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                        {"name": "DB_PASSWORD", "value": "hunter2hunter2"},
                        {"name": "PORT", "value": "8080"},
                    ],
                }
            ]
        },
    }


def test_objects_lose_secret_values_and_keep_the_rest() -> None:
    [pod], found = redact_objects([_pod()])
    container = pod["spec"]["containers"][0]
    assert container["args"] == ["--model", "/mnt/models", "--api-key", REDACTED, f"--hf-token={REDACTED}"]
    env = {entry["name"]: entry for entry in container["env"]}
    assert env["HF_TOKEN"]["value"] == REDACTED
    assert env["DB_PASSWORD"]["value"] == REDACTED
    assert env["PORT"]["value"] == "8080"
    assert env["OPENAI_API_KEY"]["valueFrom"] == {"secretKeyRef": {"name": "s", "key": "k"}}
    annotations = pod["metadata"]["annotations"]
    assert annotations["example.com/auth-token"] == REDACTED
    assert annotations["harmless"] == "yes"
    assert API_KEY not in repr(pod) and HF_TOKEN not in repr(pod) and BEARER not in repr(pod)
    assert {API_KEY, HF_TOKEN, BEARER} <= found


def test_logs_lose_known_secrets_and_credential_shapes() -> None:
    log = (
        f"INFO 01-15 11:00:00 [api_server.py:1] args: Namespace(api_key='{API_KEY}', port=8000)\n"
        f"INFO non-default args: {{'api_key': '{API_KEY}'}}\n"
        f"DEBUG request headers Authorization: Bearer {BEARER}\n"
        "DEBUG slack https://hooks.slack.com/services/T000/B000/XXXXXXXX\n"
        "INFO plain line with port 8000\n"
    )
    cleaned = redact_text(log, {API_KEY})
    for secret in (API_KEY, BEARER, "hooks.slack.com/services/T000"):
        assert secret not in cleaned
    assert "plain line with port 8000" in cleaned
    assert cleaned.count(REDACTED) >= 4


def test_vllm_token_counts_and_tokenizer_flags_are_not_secrets() -> None:
    container = {
        "name": "kserve-container",
        "args": [
            "--max-num-batched-tokens",
            "32768",
            "--tokenizer",
            "meta-llama/Llama-3.1-8B-Instruct",
            "--return-tokens-as-token-ids",
            "--hf-token",
            "hf-secret-value-123",
        ],
        "env": [{"name": "MAX_TOKENS", "value": "4096"}, {"name": "HF_TOKEN", "value": "another-secret-1"}],
    }
    (cleaned,), secrets = redact_objects([{"kind": "Pod", "spec": {"containers": [container]}}])
    args = cleaned["spec"]["containers"][0]["args"]
    assert args[:5] == container["args"][:5]
    assert args[5:] == ["--hf-token", REDACTED]
    assert cleaned["spec"]["containers"][0]["env"][0]["value"] == "4096"
    assert "32768" not in secrets and "hf-secret-value-123" in secrets
    assert redact_text("--max-num-batched-tokens 32768 --hf-token abcdefgh123", secrets) == (
        f"--max-num-batched-tokens 32768 --hf-token {REDACTED}"
    )


# --- The policy, form by form (issue #19) -------------------------------------------------------------

# (text, the secret in it, what must stay readable around it)
FORMS = [
    ("GET https://svc:Pw0rd-userinfo-1@models.example.com/v1", "Pw0rd-userinfo-1", "@models.example.com/v1"),
    ("postgres://app:Pg-s3cret-value@db:5432/app", "Pg-s3cret-value", "postgres://"),
    ("mysql://root:My-s3cret-value@mysql:3306/x", "My-s3cret-value", "@mysql:3306/x"),
    ("mongodb+srv://admin:Mg-s3cret-value@c0.example.net/db", "Mg-s3cret-value", "mongodb+srv://"),
    ("redis://:Rd-s3cret-value@cache:6379/0", "Rd-s3cret-value", "@cache:6379/0"),
    ("postgres://u:p@ss-with-at@db/app", "p@ss-with-at", "@db/app"),
    ("DATABASE_URL=app:Db-s3cret-value@tcp(db:3306)/app next", "tcp(db:3306)", "DATABASE_URL="),
    ("CONNECTION_STRING=Server=db;Password=Cs-s3cret-value;", "Cs-s3cret-value", "CONNECTION_STRING="),
    ("REDIS_URL: redis://default:Rd-s3cret-2@cache", "Rd-s3cret-2", "REDIS_URL"),
    ("GET /cb?token=Tk-s3cret-query&attempt=2", "Tk-s3cret-query", "&attempt=2"),
    ("GET /me?access_token=At-s3cret-query", "At-s3cret-query", "access_token="),
    ("GET /models?api_key=Ak-s3cret-query&limit=5", "Ak-s3cret-query", "&limit=5"),
    ("GET /geo?q=x&key=AIzaLikeButNotQuite123", "AIzaLikeButNotQuite123", "?q=x&key="),
    ("GET /blob?sv=2021&sig=Sg-s3cret%2Bsig&se=2026", "Sg-s3cret%2Bsig", "&se=2026"),
    ("connecting with password=Pw-kv-s3cret user=app", "Pw-kv-s3cret", "user=app"),
    ("DB_PASSWORD=Pw-env-dump-1", "Pw-env-dump-1", "DB_PASSWORD="),
    ("token: Tk-colon-s3cret", "Tk-colon-s3cret", "token: "),
    ('oauth client_secret="Cs-quoted-s3cret" scope=read', "Cs-quoted-s3cret", "scope=read"),
    ("{'password': 'Pw-repr-s3cret', 'user': 'app'}", "Pw-repr-s3cret", "'user': 'app'"),
    ('{"api_key": "Ak-json-s3cret", "port": 8080}', "Ak-json-s3cret", '"port": 8080'),
    ('log: {\\"password\\": \\"Pw-escaped-json\\"}', "Pw-escaped-json", '\\"password\\"'),
    ("'password' => 'Pw-arrow-s3cret'", "Pw-arrow-s3cret", "'password' =>"),
    ("X-Api-Key: Xk-header-s3cret", "Xk-header-s3cret", "X-Api-Key: "),
    ("X-Auth-Token: Xt-header-s3cret", "Xt-header-s3cret", "X-Auth-Token: "),
    ("PRIVATE-TOKEN: Gl-header-s3cret", "Gl-header-s3cret", "PRIVATE-TOKEN: "),
    ("Authorization: Basic dXNlcjpQdy1iYXNpYy1zM2NyZXQ=", "dXNlcjpQdy1iYXNpYy1zM2NyZXQ=", "Authorization: Basic "),
    ("Authorization: Bearer Br-header-s3cret", "Br-header-s3cret", "Authorization: Bearer "),
    ("Authorization: Br-noscheme-s3cret", "Br-noscheme-s3cret", "Authorization: "),
    ("Proxy-Authorization: Basic UHgtczNjcmV0LXZhbHVl", "UHgtczNjcmV0LXZhbHVl", "Proxy-Authorization: Basic "),
    (
        '{"headers": {"Authorization": "Basic QmFzaWMtaW4tanNvbg=="}}',
        "QmFzaWMtaW4tanNvbg==",
        '"Authorization": "Basic ',
    ),
    ('{"Authorization": ["Bearer Br-in-a-list-1"]}', "Br-in-a-list-1", '"Authorization"'),
    ("Cookie: theme=dark; session=Ck-s3cret-value", "Ck-s3cret-value", "Cookie: "),
    ("Set-Cookie: sid=Sc-s3cret-value; Path=/; HttpOnly", "Sc-s3cret-value", "Set-Cookie: "),
    ("upstream said bearer Br-anywhere-123", "Br-anywhere-123", "upstream said bearer "),
    ("git push with ghp_0123456789abcdefghijABCDEFGHIJ012345", "ghp_0123456789abcdefghijABCDEFGHIJ012345", "git push"),
    (
        "using github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
        "using",
    ),
    ("glpat-AbCdEf0123456789xyzw in ci", "glpat-AbCdEf0123456789xyzw", "in ci"),
    ("s3 client with AKIAIOSFODNN7EXAMPLE in us-east-1", "AKIAIOSFODNN7EXAMPLE", "in us-east-1"),
    ("alert via xoxb-123456789012-AbCdEfGhIjKl", "xoxb-123456789012-AbCdEfGhIjKl", "alert via"),
    ("alert via xoxp-123456789012-AbCdEfGhIjKl", "xoxp-123456789012-AbCdEfGhIjKl", "alert via"),
    ("key sk-proj-AbCdEf0123456789XyZ rejected", "sk-proj-AbCdEf0123456789XyZ", "rejected"),
    ("with hf_AbCdEfGhIjKlMnOpQrStUvWx", "hf_AbCdEfGhIjKlMnOpQrStUvWx", "with"),
    ("maps AIzaSyA-0123456789abcdefghijklmnopqrstu", "AIzaSyA-0123456789abcdefghijklmnopqrstu", "maps"),
    ("session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJl0123", "eyJzdWIiOiIxMjM0NSJ9", "session"),
    (
        "non-default args: {'model_tag': '/mnt/models', 'api_key': ['Vk-list-s3cret', 'Vk-second'], 'port': 8080}",
        "Vk-list-s3cret",
        "'port': 8080",
    ),
    ("args: Namespace(model='/m', api_key='Vk-ns-s3cret', port=8080)", "Vk-ns-s3cret", "port=8080"),
    ("started with --api-key Fl-s3cret-value --port 8080", "Fl-s3cret-value", "--port 8080"),
    ("started with --hf-token=Fl-eq-s3cret --port 8080", "Fl-eq-s3cret", "--port 8080"),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpKeyBody0123\n-----END RSA PRIVATE KEY-----",
        "MIIEpKeyBody0123",
        "-----END",
    ),
    ("AccountName=x;AccountKey=Az-s3cret==;EndpointSuffix=core", "Az-s3cret==", "EndpointSuffix=core"),
    # Near containerd's token-request error, a credential written as one is still one.
    ("anonymous token: Tk-anon-s3cret", "Tk-anon-s3cret", "anonymous token: "),
    ("failed to fetch anonymous token=Tk-eq-s3cret now", "Tk-eq-s3cret", " now"),
    ("pull with --token Tk-flag-s3cret after fetch oauth token", "Tk-flag-s3cret", "fetch oauth token"),
    (
        "failed to fetch oauth token: Authorization: Bearer Br-s3cret-0123456789 rejected",
        "Br-s3cret-0123456789",
        "failed to fetch oauth token: ",
    ),
]


@pytest.mark.parametrize(("text", "secret", "kept"), FORMS, ids=[text[:40] for text, _, _ in FORMS])
def test_each_form_loses_its_secret_and_keeps_its_context(text: str, secret: str, kept: str) -> None:
    cleaned = redact_text(text)
    assert secret not in cleaned and REDACTED in cleaned
    assert kept in cleaned
    assert redact_text(cleaned) == cleaned


# Ordinary text that names tokens, keys and secrets without holding one.
ORDINARY = [
    "token budget exhausted for this request",
    "max_tokens=4096 temperature=0.7",
    "--max-num-batched-tokens 32768 --tokenizer meta-llama/Llama-3.1-8B-Instruct --tokenizer-mode auto",
    "--return-tokens-as-token-ids --enable-prompt-tokens-details",
    "non-default args: {'model': 'Qwen/Qwen2.5-7B-Instruct', 'max_num_batched_tokens': 8192, 'api_key': None}",
    "Namespace(model='/mnt/models', api_key=None, hf_token=None, ssl_keyfile=None, port=8080)",
    'eos_token: </s> pad_token=\'<pad>\' "bos_token": "<|begin_of_text|>"',
    '{"token": 15339, "logprob": -0.02, "bytes": [72]}',
    "inter-token latency 12 ms; per-token cost; tokens: 512",
    "Maximum concurrency for 8192 tokens per request: 12.5x",
    "Authorization header is missing",
    "Bearer tokens are issued by the gateway; it uses Bearer authentication",
    "secretName: vllm-secrets, secretKeyRef: {name: hf, key: token}",
    "auth_enabled: true, auth: false, password: ********, hf_token: null",
    "automountServiceAccountToken: false",
    "risk-assessment-predictor-00001-deployment-7d9c5f6b8d-4xk2p",
    "sk-learn-iris-predictor-00001-deployment-abcdef0123456789",
    "hf_transfer enabled; hf_hub_download retried",
    "http://prometheus.monitoring:9090/api/v1/query_range?query=up&start=1&step=15",
    "contact admin@example.com about http://grafana:3000/d/abc?orgId=1",
    "image docker.io/vllm/vllm-openai@sha256:0123456789abcdef",
    "the cache key: prefix-abc was evicted",
    "Successfully assigned llm/chat to gpu-a100-node-1",
    'Readiness probe failed: Get "http://10.0.0.12:8080/health": dial tcp: connection refused',
    # containerd's token-request errors, as kubelet reports a failed pull: the reason after "token:" is kept
    # (ciiiii/cloudflare-docker-proxy#62, moby/buildkit#4456, docker-library/tomcat#321).
    'Failed to pull image "docker.io/library/foo:latest": failed to pull and unpack image '
    '"docker.io/library/foo:latest": failed to resolve reference "docker.io/library/foo:latest": failed to '
    "authorize: failed to fetch anonymous token: unexpected status from GET request to "
    "https://auth.docker.io/token?scope=repository%3Alibrary%2Ffoo%3Apull&service=registry.docker.io: 401 Unauthorized",
    "failed to authorize: failed to fetch oauth token: unexpected status: 401 Unauthorized",
    'failed to authorize: failed to fetch anonymous token: Get "https://auth.docker.io/token?scope=repository%3A'
    'library%2Fredis%3Apull&service=registry.docker.io": dial tcp 199.96.62.75:443: i/o timeout',
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_unchanged(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://prometheus.monitoring:9090", "http://prometheus.monitoring:9090"),
        (
            "https://user:Pw-url-s3cret@thanos.example.com/tenant/?token=Tk-url-s3cret&dedup=true",
            f"https://{REDACTED}@thanos.example.com/tenant/?token={REDACTED}&dedup=true",
        ),
        (
            "https://Tk-only-user@host/x?api_key=1&key=2&tokens=5",
            f"https://{REDACTED}@host/x?api_key={REDACTED}&key={REDACTED}&tokens=5",
        ),
        ("https://host/cb#access_token=Tk-frag&state=1", f"https://host/cb#access_token={REDACTED}&state=1"),
        (
            "https://host/x?X-Amz-Signature=abc&X-Amz-Credential=AK%2F1&x=1",
            f"https://host/x?X-Amz-Signature={REDACTED}&X-Amz-Credential={REDACTED}&x=1",
        ),
        ("http://[::1", "http://[::1"),
    ],
)
def test_redact_url_removes_userinfo_and_credential_parameters(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert redact_url(shown) == shown


def test_prometheus_labels_lose_secret_values() -> None:
    labels = {
        "pod": "vllm-llm-predictor-00001-deployment-7d9c5f6b8d-4xk2p",
        "le": "0.5",
        "api_key": "Ak-label-s3cret",
        "url": "https://u:Pw-label-s3cret@upstream/v1",
        "detail": "called with Authorization: Bearer Br-label-s3cret",
        "note": "shared-label-s3cret",
    }
    cleaned = redact_labels(labels, {"shared-label-s3cret"})
    assert cleaned["pod"] == labels["pod"] and cleaned["le"] == "0.5"
    assert cleaned["api_key"] == REDACTED
    assert cleaned["url"] == f"https://{REDACTED}@upstream/v1"
    assert cleaned["detail"] == f"called with Authorization: Bearer {REDACTED}"
    assert cleaned["note"] == REDACTED


def test_objects_lose_secrets_in_every_string() -> None:
    isvc = {
        "kind": "InferenceService",
        "metadata": {
            "name": "llm",
            "annotations": {"example.com/notes": "pull with ghp_0123456789abcdefghijABCDEFGHIJ012345"},
        },
        "status": {
            "conditions": [
                {"type": "Ready", "status": "False", "message": "fetch https://u:Pw-cond-s3cret@storage/model failed"}
            ]
        },
    }
    pod = {
        "kind": "Pod",
        "spec": {
            "containers": [
                {
                    "name": "kserve-container",
                    "env": [
                        {"name": "DATABASE_URL", "value": "postgres://app:Pw-dsn-s3cret@db/app"},
                        {"name": "SESSION_COOKIE", "value": "sid=Ck-env-s3cret"},
                        {"name": "AUTH_ENABLED", "value": "true"},
                        {"name": "EXTRA", "value": "password=Pw-extra-s3cret"},
                    ],
                    "readinessProbe": {
                        "httpGet": {"httpHeaders": [{"name": "Authorization", "value": "Bearer Br-probe-s3cret"}]}
                    },
                }
            ]
        },
        "status": {"message": "AUTH_ENABLED is true"},
    }
    (clean_isvc, clean_pod), found = redact_objects([isvc, pod])
    text = repr([clean_isvc, clean_pod])
    for secret in ("ghp_0123456789", "Pw-cond-s3cret", "Pw-dsn-s3cret", "Ck-env-s3cret", "Pw-extra-s3cret", "Br-probe"):
        assert secret not in text
    assert "fetch https://<redacted>@storage/model failed" in text
    env = {entry["name"]: entry["value"] for entry in clean_pod["spec"]["containers"][0]["env"]}
    assert env["DATABASE_URL"] == env["SESSION_COOKIE"] == env["AUTH_ENABLED"] == REDACTED
    assert env["EXTRA"] == f"password={REDACTED}"
    # A value too common to be a secret is not chased through other texts: "true" stays true elsewhere.
    assert clean_pod["status"]["message"] == "AUTH_ENABLED is true" and "true" not in found
    assert "postgres://app:Pw-dsn-s3cret@db/app" in found


# --- Fuzz: any text, 100 kB of the characters the rules look for, is redacted in bounded time, once -------

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PIECES = (
    "=", ":", "/", "@", "a", "Z", "0", " ", "\n", "'", '"', "\\", "[", "]", "?", "&", "#", "-", "_", "<", ">",
    "token", "token=", "password: '", "api_key: [", "Authorization: Basic ", "Bearer ", "Cookie: ", "https://",
    "x://a:b@", "--api-key ", "-----BEGIN PRIVATE KEY-----", "sk-", "hf_", "ghp_", "AKIA", "xoxb-", "eyJ", ".",
    "DATABASE_URL=", "?key=", "=>", REDACTED, "eos_token", "None", '"Authorization": ["Bearer ', "{", "}", "(", ")",
    "\t", ";", ",", "*", "X-Api-Key", "secret", "AIza", "github_pat_",
)  # fmt: skip
SHORT_TEXT = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=6)), max_size=40).map("".join)
# Long runs of one piece (up to 100 kB in all): where a backtracking pattern would take quadratic time.
LONG_TEXT = st.lists(
    st.tuples(st.one_of(st.sampled_from(PIECES), st.text(min_size=1, max_size=6)), st.integers(1, 25_000)),
    min_size=1,
    max_size=6,
).map(lambda runs: "".join(piece * count for piece, count in runs)[:100_000])


@FUZZ
@given(SHORT_TEXT)
def test_redaction_is_idempotent(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


@FEW
@given(LONG_TEXT)
def test_redaction_of_100_kb_finishes_and_is_idempotent(text: str) -> None:
    """No time is measured: the input is bounded, and the pytest timeout catches a pattern gone quadratic."""
    once = redact_text(text)
    assert redact_text(once) == once
