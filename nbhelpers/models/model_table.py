"""Model architectures for the KV-cache model: a shipped table and a Hugging Face ``config.json`` reader.

Both go through one function, :func:`architecture_from_config`, so a table entry is literally
the subset of the published ``config.json`` that the memory model needs. Each entry cites the
published file (``source``) and the public copy it was checked against.

What the KV cache depends on, per layer and token: K and V (factor 2) for each KV head of
``head_dim`` values. ``head_dim`` is the config's explicit value when present (Gemma-2,
Llama-3.2, Qwen3 set it), else ``hidden_size / num_attention_heads``. Three kinds of models
differ and are handled here:

- MLA (DeepSeek-V2/V3, Kimi-K2: ``kv_lora_rank`` in the config): one compressed latent of
  ``kv_lora_rank + qk_rope_head_dim`` values per layer and token, no separate V, and the same
  latent on every tensor-parallel rank (it is not split by heads).
- Sliding-window layers (Gemma-2 every other layer, Mistral-7B-v0.1, Phi-3-mini): vLLM stores
  them per token like full layers, so the token capacity is the same; only how many blocks a
  long request holds differs. The model reports concurrency as if every layer were full
  (a lower bound) and says so.
- Hybrid attention/state-space or linear-attention models (Jamba, Qwen3-Next, Nemotron-H,
  Falcon-H1 ...): vLLM sizes their cache in mixed pages; the formula does not apply and the
  reader refuses them with a clear message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbhelpers.errors import RunbookError

_HYBRID_MODEL_TYPES = frozenset(
    {
        "jamba",
        "mamba",
        "mamba2",
        "falcon_h1",
        "falcon_mamba",
        "nemotron_h",
        "bamba",
        "zamba",
        "zamba2",
        "granitemoehybrid",
        "qwen3_next",
        "minimax",
        "minimax_text_01",
        "lfm2",
        "plamo2",
        "kimi_linear",
    }
)
_ATTENTION_LAYER_TYPES = frozenset({"full_attention", "sliding_attention", "attention"})
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 2, "float": 2}  # vLLM serves fp32 in 16 bits


class UnsupportedArchitecture(RunbookError):
    """A model whose KV cache the per-token formula cannot describe."""


@dataclass(frozen=True)
class ModelArchitecture:
    """What the memory model needs to know about a model, read from its ``config.json``."""

    name: str
    model_type: str
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    hidden_size: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    torch_dtype: str
    tie_word_embeddings: bool
    num_experts: int = 0  # routed experts; 0 = dense
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    sliding_window: int | None = None
    sliding_window_layers: int = 0  # how many layers use the sliding window
    mla_latent_dim: int = 0  # kv_lora_rank + qk_rope_head_dim for MLA models, else 0
    weight_bits: int = 16  # from quantization_config, 16 when not quantized
    source: str = ""

    @property
    def is_mla(self) -> bool:
        return self.mla_latent_dim > 0

    @property
    def parameter_count(self) -> int:
        """Parameters computed from the shapes (biases and norms included only where they are large).

        Checked against published counts in the tests (Llama-3.1-8B 8.03 B, Qwen2.5-7B 7.62 B,
        Gemma-2-9B 9.24 B, Phi-3-mini 3,821,079,552).
        """
        embedding = self.vocab_size * self.hidden_size
        lm_head = 0 if self.tie_word_embeddings else embedding
        query_width = self.num_attention_heads * self.head_dim
        kv_width = self.num_key_value_heads * self.head_dim
        attention = self.hidden_size * (2 * query_width + 2 * kv_width)
        if self.num_experts:
            mlp = self.num_experts * 3 * self.hidden_size * self.moe_intermediate_size
            mlp += 3 * self.hidden_size * self.shared_expert_intermediate_size + self.hidden_size * self.num_experts
        else:
            mlp = 3 * self.hidden_size * self.intermediate_size
        norms = 2 * self.hidden_size
        return embedding + lm_head + self.num_hidden_layers * (attention + mlp + norms) + self.hidden_size

    @property
    def weight_bytes_per_parameter(self) -> float:
        if self.weight_bits != 16:
            return self.weight_bits / 8
        return float(_DTYPE_BYTES.get(self.torch_dtype, 2))


def _int(config: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = config.get(key, default)
    if value is None:
        raise RunbookError(f"config.json has no {key!r}: cannot size the KV cache")
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise RunbookError(f"config.json {key!r} must be a positive integer, got {value!r}")
    return value


def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """Multimodal configs (Gemma-3, Llava, Qwen-VL ...) keep the language model in ``text_config``."""
    text = config.get("text_config")
    if isinstance(text, Mapping):
        return {**{k: v for k, v in config.items() if k != "text_config"}, **text}
    return config


def _refuse_hybrid(config: Mapping[str, Any], name: str) -> None:
    model_type = str(config.get("model_type", ""))
    layer_types = config.get("layer_types") or config.get("layers_block_type") or []
    other_layers = sorted({str(kind) for kind in layer_types if str(kind) not in _ATTENTION_LAYER_TYPES})
    if model_type in _HYBRID_MODEL_TYPES or other_layers:
        what = f"layer types {', '.join(other_layers)}" if other_layers else f"model_type {model_type}"
        raise UnsupportedArchitecture(
            f"{name} is a hybrid model ({what}): vLLM sizes its cache in mixed pages, so the per-token formula "
            "does not apply; read the engine's own 'GPU KV cache size' log line instead"
        )


def _sliding_layers(config: Mapping[str, Any], layers: int) -> tuple[int | None, int]:
    window = config.get("sliding_window")
    if not isinstance(window, int) or isinstance(window, bool) or window <= 0:
        return None, 0
    if config.get("use_sliding_window") is False:  # Qwen2/Qwen3 ship a window but switch it off
        return None, 0
    layer_types = config.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        return window, sum(1 for kind in layer_types if kind == "sliding_attention")
    pattern = config.get("sliding_window_pattern")
    if isinstance(pattern, int) and pattern > 1:  # Gemma-3: every pattern-th layer is global
        return window, layers - layers // pattern
    if str(config.get("model_type")) == "gemma2":  # Gemma-2 alternates local and global layers
        return window, layers // 2
    return window, layers


def _weight_bits(config: Mapping[str, Any]) -> int:
    quantization = config.get("quantization_config")
    if not isinstance(quantization, Mapping):
        return 16
    bits = quantization.get("bits") or quantization.get("weight_bits")
    if isinstance(bits, int) and bits > 0:
        return bits
    method = str(quantization.get("quant_method", "")).lower()
    if "fp8" in method or quantization.get("load_in_8bit"):
        return 8
    if quantization.get("load_in_4bit") or method in {"mxfp4", "nvfp4", "modelopt_fp4"}:
        return 4
    return 16


def architecture_from_config(config: Mapping[str, Any], name: str, source: str = "") -> ModelArchitecture:
    """Read a Hugging Face ``config.json`` (already parsed) into the fields the memory model needs."""
    config = _text_config(config)
    _refuse_hybrid(config, name)
    layers = _int(config, "num_hidden_layers")
    heads = _int(config, "num_attention_heads")
    hidden = _int(config, "hidden_size")
    explicit_head_dim = config.get("head_dim")
    head_dim = _int(config, "head_dim") if explicit_head_dim is not None else hidden // heads
    window, sliding = _sliding_layers(config, layers)
    experts = config.get("num_local_experts") or config.get("num_experts") or config.get("n_routed_experts") or 0
    mla = 0
    if config.get("kv_lora_rank"):
        mla = _int(config, "kv_lora_rank") + _int(config, "qk_rope_head_dim")
    return ModelArchitecture(
        name=name,
        model_type=str(config.get("model_type", "")),
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=_int(config, "num_key_value_heads", heads),
        head_dim=head_dim,
        hidden_size=hidden,
        intermediate_size=_int(config, "intermediate_size"),
        vocab_size=_int(config, "vocab_size"),
        max_position_embeddings=_int(config, "max_position_embeddings"),
        torch_dtype=str(config.get("torch_dtype") or config.get("dtype") or "bfloat16"),
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        num_experts=int(experts),
        experts_per_token=int(config.get("num_experts_per_tok") or 0),
        moe_intermediate_size=int(config.get("moe_intermediate_size") or config.get("intermediate_size") or 0),
        shared_expert_intermediate_size=int(config.get("shared_expert_intermediate_size") or 0),
        sliding_window=window,
        sliding_window_layers=sliding,
        mla_latent_dim=mla,
        weight_bits=_weight_bits(config),
        source=source,
    )


def read_model_config(path: Path) -> ModelArchitecture:
    """Read a user-supplied ``config.json``."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunbookError(f"--model-config {path} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RunbookError(f"--model-config {path} is not a readable JSON file: {error}") from None
    if not isinstance(config, dict):
        raise RunbookError(f"--model-config {path} is not a JSON object")
    return architecture_from_config(config, name=path.name, source=str(path))


@dataclass(frozen=True)
class _TableEntry:
    model_id: str
    aliases: tuple[str, ...]
    source: str
    config: Mapping[str, Any]


def _llama(layers: int, heads: int, hidden: int, intermediate: int, tied: bool, **extra: Any) -> dict[str, Any]:
    return {
        "model_type": "llama",
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": 8,
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": tied,
        **extra,
    }


def _qwen2(layers: int, heads: int, kv_heads: int, hidden: int, intermediate: int, context: int) -> dict[str, Any]:
    return {
        "model_type": "qwen2",
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "vocab_size": 152064,
        "max_position_embeddings": context,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
        "sliding_window": 131072,
        "use_sliding_window": False,
    }


def _qwen3(layers: int, heads: int, hidden: int, intermediate: int) -> dict[str, Any]:
    return {
        "model_type": "qwen3",
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "vocab_size": 151936,
        "max_position_embeddings": 40960,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
        "sliding_window": None,
        "use_sliding_window": False,
    }


def _gemma2(layers: int, heads: int, kv_heads: int, head_dim: int, hidden: int, intermediate: int) -> dict[str, Any]:
    return {
        "model_type": "gemma2",
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "vocab_size": 256000,
        "max_position_embeddings": 8192,
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": True,
        "sliding_window": 4096,
    }


_HF = "https://huggingface.co/{}/blob/main/config.json"
_LLM_PROF = "checked against citsjtu2020/LLM-Prof sglang/Model_Config.md (copies of the published config.json files)"
_MAXTEXT = "checked against AI-Hypercomputer/maxtext MaxText/utils/ckpt_conversion/utils/hf_model_configs.py"

_TABLE: tuple[_TableEntry, ...] = (
    _TableEntry(
        "meta-llama/Llama-3.1-8B-Instruct",
        ("meta-llama/Llama-3.1-8B", "meta-llama/Meta-Llama-3.1-8B-Instruct"),
        f"{_HF.format('meta-llama/Llama-3.1-8B-Instruct')}; {_LLM_PROF}",
        _llama(32, 32, 4096, 14336, tied=False),
    ),
    _TableEntry(
        "meta-llama/Llama-3.1-70B-Instruct",
        ("meta-llama/Llama-3.1-70B", "meta-llama/Meta-Llama-3.1-70B-Instruct", "meta-llama/Llama-3.3-70B-Instruct"),
        f"{_HF.format('meta-llama/Llama-3.1-70B-Instruct')}; checked against vulkomilev/oumi "
        "configs/recipes/llama3_1/README.md (80 layers, 64 heads, 8 KV heads, hidden 8192, MLP 28672)",
        _llama(80, 64, 8192, 28672, tied=False),
    ),
    _TableEntry(
        "meta-llama/Llama-3.2-1B-Instruct",
        ("meta-llama/Llama-3.2-1B",),
        f"{_HF.format('meta-llama/Llama-3.2-1B-Instruct')}; checked against kevinstephano/thunder_model_blocks "
        "hf_llama/llama_config.py (a copy of the config.json at commit 4e20de36)",
        _llama(16, 32, 2048, 8192, tied=True, head_dim=64),
    ),
    _TableEntry(
        "meta-llama/Llama-3.2-3B-Instruct",
        ("meta-llama/Llama-3.2-3B",),
        f"{_HF.format('meta-llama/Llama-3.2-3B-Instruct')}; {_LLM_PROF}",
        _llama(28, 24, 3072, 8192, tied=True, head_dim=128),
    ),
    _TableEntry(
        "mistralai/Mistral-7B-Instruct-v0.3",
        ("mistralai/Mistral-7B-v0.3",),
        f"{_HF.format('mistralai/Mistral-7B-Instruct-v0.3')}; the model card (mirrored in public repos) gives the "
        "32768-token vocabulary of v0.3; v0.2+ dropped the sliding window (Azure/azureml-assets Mistral-7B-Instruct-v0-2)",
        {
            "model_type": "mistral",
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "vocab_size": 32768,
            "max_position_embeddings": 32768,
            "torch_dtype": "bfloat16",
            "tie_word_embeddings": False,
            "sliding_window": None,
        },
    ),
    _TableEntry(
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        ("mistralai/Mixtral-8x7B-v0.1",),
        f"{_HF.format('mistralai/Mixtral-8x7B-Instruct-v0.1')}; checked against huggingface/candle "
        "candle-transformers/src/models/mixtral.rs (which still carries the sliding_window 4096 of an early "
        "revision; the current config.json has none)",
        {
            "model_type": "mixtral",
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "vocab_size": 32000,
            "max_position_embeddings": 32768,
            "torch_dtype": "bfloat16",
            "tie_word_embeddings": False,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
            "sliding_window": None,
        },
    ),
    _TableEntry(
        "Qwen/Qwen2.5-7B-Instruct",
        (),
        f"{_HF.format('Qwen/Qwen2.5-7B-Instruct')}; shapes {_LLM_PROF} (base model); the Instruct config "
        "sets max_position_embeddings 32768",
        _qwen2(28, 28, 4, 3584, 18944, 32768),
    ),
    _TableEntry(
        "Qwen/Qwen2.5-7B", (), f"{_HF.format('Qwen/Qwen2.5-7B')}; {_LLM_PROF}", _qwen2(28, 28, 4, 3584, 18944, 131072)
    ),
    _TableEntry(
        "Qwen/Qwen2.5-14B-Instruct",
        (),
        f"{_HF.format('Qwen/Qwen2.5-14B-Instruct')}; shapes {_LLM_PROF} (base model)",
        _qwen2(48, 40, 8, 5120, 13824, 32768),
    ),
    _TableEntry(
        "Qwen/Qwen2.5-14B", (), f"{_HF.format('Qwen/Qwen2.5-14B')}; {_LLM_PROF}", _qwen2(48, 40, 8, 5120, 13824, 131072)
    ),
    _TableEntry(
        "Qwen/Qwen2.5-32B-Instruct",
        (),
        f"{_HF.format('Qwen/Qwen2.5-32B-Instruct')}; shapes {_LLM_PROF} (base model)",
        _qwen2(64, 40, 8, 5120, 27648, 32768),
    ),
    _TableEntry(
        "Qwen/Qwen2.5-32B", (), f"{_HF.format('Qwen/Qwen2.5-32B')}; {_LLM_PROF}", _qwen2(64, 40, 8, 5120, 27648, 131072)
    ),
    _TableEntry(
        "Qwen/Qwen2.5-72B-Instruct",
        (),
        f"{_HF.format('Qwen/Qwen2.5-72B-Instruct')} (hidden 8192, MLP 29568, 80 layers, 64 heads, 8 KV heads)",
        _qwen2(80, 64, 8, 8192, 29568, 32768),
    ),
    _TableEntry("Qwen/Qwen3-8B", (), f"{_HF.format('Qwen/Qwen3-8B')}; {_LLM_PROF}", _qwen3(36, 32, 4096, 12288)),
    _TableEntry("Qwen/Qwen3-14B", (), f"{_HF.format('Qwen/Qwen3-14B')}; {_LLM_PROF}", _qwen3(40, 40, 5120, 17408)),
    _TableEntry(
        "google/gemma-2-9b-it",
        ("google/gemma-2-9b",),
        f"{_HF.format('google/gemma-2-9b-it')}; {_MAXTEXT}",
        _gemma2(42, 16, 8, 256, 3584, 14336),
    ),
    _TableEntry(
        "google/gemma-2-27b-it",
        ("google/gemma-2-27b",),
        f"{_HF.format('google/gemma-2-27b-it')}; {_MAXTEXT}",
        _gemma2(46, 32, 16, 128, 4608, 36864),
    ),
    _TableEntry(
        "microsoft/Phi-3-mini-4k-instruct",
        (),
        f"{_HF.format('microsoft/Phi-3-mini-4k-instruct')}; parameter count checked against keras-team/keras-hub "
        "keras_hub/src/models/phi3/phi3_presets.py (3,821,079,552)",
        {
            "model_type": "phi3",
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 32,
            "hidden_size": 3072,
            "intermediate_size": 8192,
            "vocab_size": 32064,
            "max_position_embeddings": 4096,
            "torch_dtype": "bfloat16",
            "tie_word_embeddings": False,
            "sliding_window": 2047,
        },
    ),
    _TableEntry(
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
        (),
        f"{_HF.format('deepseek-ai/DeepSeek-R1-Distill-Qwen-7B')} (Qwen2.5-Math-7B shapes, 131072 context)",
        {**_qwen2(28, 28, 4, 3584, 18944, 131072), "sliding_window": 4096},
    ),
)


def known_models() -> list[str]:
    return [entry.model_id for entry in _TABLE]


def lookup_model(model_id: str) -> ModelArchitecture:
    """The table's architecture for a Hugging Face id (case-insensitive; the part after '/' is enough)."""
    wanted = model_id.strip().lower()
    for entry in _TABLE:
        names = (entry.model_id, *entry.aliases)
        if any(wanted in (name.lower(), name.lower().split("/", 1)[-1]) for name in names):
            return architecture_from_config(entry.config, name=entry.model_id, source=entry.source)
    raise RunbookError(
        f"model {model_id!r} is not in the shipped table (known: {', '.join(known_models())}); "
        "pass its config.json with --model-config"
    )
