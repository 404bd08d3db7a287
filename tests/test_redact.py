"""Secrets are removed from objects and logs before anything is written (docs/contracts.md#evidence-bundle)."""

from __future__ import annotations

from nbhelpers.util.redaction import REDACTED, redact_objects, redact_text

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
