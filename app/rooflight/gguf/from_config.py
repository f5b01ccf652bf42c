"""A ModelSpec from a model's config.json (HF key names), the way its GGUF would read.

The catalog keeps each model's config.json fields verbatim (`hparams.config`) and the
llama.cpp architecture name; this module turns them into the header llama.cpp's converter
(convert_hf_to_gguf.py, `conversion/*.py` of the llama.cpp vendored by llama-cpp-python
0.3.36) would write -- the same metadata keys, per-layer arrays and tensor list -- and
reads that header with gguf/build.py like a real file. So the recurrent layout
(gguf/recurrent.py), the sliding-window layout (gguf/swa.py) and the shared KV cache come
out exactly as they would from the published GGUF, through one code path:

- LFM2 and LFM2-MoE: `layer_types` ("conv" / "full_attention", older files
  `full_attn_idxs`), `conv_L_cache`, the feed-forward width after
  `block_auto_adjust_ff_dim`; experts after `num_dense_layers` (lfm2.py);
- Granite 4 H (granitehybrid): `layer_types` ("mamba" / "attention") or
  `attn_layer_indices`; `mamba_d_conv`, `mamba_d_state`, `mamba_n_groups`, `mamba_n_heads`,
  d_inner = `mamba_expand` x `hidden_size`; experts with a shared one (granite.py);
- Nemotron-H (nemotron_h): `hybrid_override_pattern` (M Mamba-2, * attention, - MLP),
  d_inner = `mamba_num_heads` x `mamba_head_dim`, `n_groups` / `mamba_num_groups`,
  `ssm_state_size`, `conv_kernel`; Nemotron-H MoE (nemotron_h_moe, Nemotron 3 Nano): E for
  layers of `n_routed_experts` of `moe_intermediate_size` and a shared expert of
  `moe_shared_expert_intermediate_size` (nemotron.py; latent experts are refused);
- Jamba: attention every `attn_layer_period` from `attn_layer_offset`, experts every
  `expert_layer_period` from `expert_layer_offset`, `mamba_*` sizes (jamba.py);
- Qwen3-Next / Qwen3.5 / Qwen3.5-MoE: `linear_*` delta-net sizes, `layer_types` or
  `full_attention_interval` (qwen.py; the MTP block the converter may append is left out:
  llama.cpp's main context gives it no cache);
- Gemma 3n: `layer_types` written as the per-layer sliding-window pattern, the first 20
  layers keeping the KV cache (gemma.py, src/models/gemma3n.cpp);
- other transformers: the llama-style tensor list, and a sliding window only where the
  converter writes one for that architecture (gemma2, gemma3, cohere2, olmo2, exaone4):
  Ministral's and Qwen's `sliding_window` fields are dropped by their converters, so
  llama.cpp runs those models with full attention, and so does the plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rooflight.errors import BadInputError

from .arch_recipe import (
    HYBRID_ARCHITECTURES,
    KV_FROM_START,
    HybridShape,
    gemma3n_metadata,
    hybrid_metadata,
    plan_gemma3n_tensors,
    plan_hybrid_tensors,
)
from .arrays import ArrayInfo
from .build import build_model_spec
from .gemma4_layout import Gemma4Shape, gemma4_metadata, plan_gemma4_tensors
from .quant_recipe import _ALL_FILE_TYPES, TensorPlan, normalize_ftype, plan_tensors
from .spec import ModelSpec

# transformer architectures whose converter writes the config's sliding window, and how
# it writes the per-layer pattern ("layer_types" array, or none: llama.cpp's fixed one)
_SWA_FROM_CONFIG = {"gemma2": None, "gemma3": None, "cohere2": None, "olmo2": "layer_types",
                    "exaone4": "layer_types"}
# plain transformers the llama-style tensor list describes (dense or routed experts without a
# shared one); any other architecture gets a sentence rather than a layout it does not have
_TRANSFORMERS = frozenset({"llama", "mistral3", "qwen2", "qwen3", "qwen3moe", "gemma2", "gemma3",
                           "cohere2", "olmo2", "exaone4", "phi3", "granite", "smollm3", "mixtral", "llama4"})


def _text(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """Multimodal checkpoints keep the decoder's fields under text_config."""
    inner = config.get("text_config")
    return {**config, **inner} if isinstance(inner, Mapping) else config


def _find(c: Mapping[str, Any], keys: Sequence[str], default: Any = None, *, prefix: str = "") -> Any:
    """The first key present, then the same keys with the converter's hparam prefix
    (ModelBase.find_hparam / GraniteHybridModel.find_hparam)."""
    for k in list(keys) + [f"{prefix}_{k}" for k in keys if prefix]:
        if c.get(k) is not None:
            return c[k]
    if default is None:
        raise BadInputError(f"config.json lacks {keys[0]!r}, which llama.cpp's converter needs.")
    return default


def _common(c: Mapping[str, Any]) -> dict[str, Any]:
    n_embd = int(c["hidden_size"])
    n_head = int(c["num_attention_heads"])
    return dict(n_embd=n_embd, n_head=n_head, head_dim=int(c.get("head_dim") or n_embd // n_head),
                n_vocab=int(c["vocab_size"]), context_length=int(c.get("max_position_embeddings") or 4096),
                tie_embeddings=bool(c.get("tie_word_embeddings", c.get("tie_embedding", False))))


def _lfm2(c: Mapping[str, Any], arch: str) -> HybridShape:
    n = int(c["num_hidden_layers"])
    types = c.get("layer_types")
    if isinstance(types, list) and len(types) == n:
        attn = [t != "conv" for t in types]
    else:
        idx = set(_find(c, ["full_attn_idxs"]))
        attn = [il in idx for il in range(n)]
    ff = int(_find(c, ["block_ff_dim", "intermediate_size"]))
    if c.get("block_auto_adjust_ff_dim"):
        ff = int(2 * ff / 3)
        if c.get("block_ffn_dim_multiplier") is not None:
            ff = int(c["block_ffn_dim_multiplier"] * ff)
        multiple = int(c.get("block_multiple_of", 1))
        ff = multiple * ((ff + multiple - 1) // multiple)
    kv = int(c["num_key_value_heads"])
    common = _common(c)
    common["tie_embeddings"] = bool(c.get("tie_embedding", c.get("tie_word_embeddings", True)))
    moe: dict[str, Any] = {}
    if arch == "lfm2moe":  # experts after num_dense_layers dense ones (lfm2.py LFM2MoeModel)
        ff = int(c["intermediate_size"])
        dense = int(c.get("num_dense_layers", 0))
        moe = dict(n_expert=int(c["num_experts"]), n_expert_used=int(c["num_experts_per_tok"]),
                   n_ff_exp=int(c["moe_intermediate_size"]), moe_layers=tuple(il >= dense for il in range(n)))
    return HybridShape(arch, **common, n_head_kv=tuple(kv if a else 0 for a in attn), n_ff=(ff,) * n,
                       l_cache=int(c.get("conv_L_cache", 3)), **moe)


def _granite(c: Mapping[str, Any], arch: str) -> HybridShape:
    n = int(c["num_hidden_layers"])
    if types := c.get("layer_types"):
        attn = {i for i, t in enumerate(types) if t == "attention"}
    elif c.get("attn_layer_indices"):
        attn = set(c["attn_layer_indices"])
    else:
        period, offset = int(c["attn_layer_period"]), int(c["attn_layer_offset"])
        attn = {i for i in range(n) if i % period == offset}
    kv = int(_find(c, ["num_key_value_heads", "n_head_kv"]))
    n_expert = int(c.get("num_local_experts") or 0)
    d_model = int(_find(c, ["mamba_head_dim", "hidden_size", "d_model"], prefix="mamba"))
    return HybridShape(
        arch, **_common(c), n_head_kv=tuple(kv if i in attn else 0 for i in range(n)),
        n_ff=(int(c["intermediate_size"]),) * n,
        ssm_d_conv=int(_find(c, ["conv_kernel", "d_conv"], prefix="mamba")),
        ssm_d_inner=int(_find(c, ["expand", "num_heads"], prefix="mamba")) * d_model,
        ssm_d_state=int(_find(c, ["state_size", "d_state", "state_dim", "ssm_state_size"], prefix="mamba")),
        ssm_dt_rank=int(_find(c, ["n_heads", "num_heads"], prefix="mamba")),
        ssm_n_group=int(_find(c, ["n_groups", "num_groups"], prefix="mamba")),
        n_expert=n_expert, n_expert_used=int(c.get("num_experts_per_tok") or 0) if n_expert else 0,
        n_ff_shexp=int(c.get("shared_intermediate_size") or 0) if n_expert else 0,
    )


def _nemotron(c: Mapping[str, Any], arch: str) -> HybridShape:
    pattern = _find(c, ["hybrid_override_pattern"])
    n = len(pattern)
    kv = int(c["num_key_value_heads"])
    heads = int(_find(c, ["num_heads"], prefix="mamba"))
    d_model = int(_find(c, ["mamba_head_dim", "hidden_size", "d_model"], prefix="mamba"))
    if arch == "nemotron_h_moe":  # "E" layers: routed and shared experts (conversion/nemotron.py)
        n_ff, ffn_layer = int(c["moe_intermediate_size"]), "E"
        moe: dict[str, Any] = dict(
            n_expert=int(c["n_routed_experts"]), n_expert_used=int(c["num_experts_per_tok"]), n_ff_exp=n_ff,
            n_ff_shexp=int(c["moe_shared_expert_intermediate_size"]), n_expert_shared=int(c["n_shared_experts"]),
            expert_weights_norm=bool(c["norm_topk_prob"]), expert_weights_scale=float(c["routed_scaling_factor"]),
            n_expert_group=int(c["n_group"]))
        if c.get("moe_latent_size"):
            raise ValueError("latent expert projections (moe_latent_size) are not modelled")
    else:
        n_ff, ffn_layer = int(_find(c, ["intermediate_size", "n_inner", "hidden_dim"])), "-"
        moe = {}
    return HybridShape(
        arch, **_common(c), n_head_kv=tuple(kv if p == "*" else 0 for p in pattern),
        n_ff=tuple(n_ff if p == ffn_layer else 0 for p in pattern[:n]), **moe,
        ssm_d_conv=int(_find(c, ["conv_kernel", "d_conv"], prefix="mamba")), ssm_d_inner=heads * d_model,
        ssm_d_state=int(_find(c, ["state_size", "d_state", "state_dim", "ssm_state_size"], prefix="mamba")),
        ssm_dt_rank=int(_find(c, ["n_heads", "num_heads"], prefix="mamba")),
        ssm_n_group=int(_find(c, ["n_groups", "num_groups"], prefix="mamba")),
    )


def _jamba(c: Mapping[str, Any], arch: str) -> HybridShape:
    n = int(c["num_hidden_layers"])
    d_model = int(_find(c, ["hidden_size", "mamba_d_model"]))
    a_off, a_per = int(c["attn_layer_offset"]), int(c["attn_layer_period"])
    e_off, e_per = int(c.get("expert_layer_offset", 0)), int(c.get("expert_layer_period", 1))
    kv = int(c["num_key_value_heads"])
    n_expert = int(_find(c, ["num_local_experts", "num_experts"], 0))
    return HybridShape(
        arch, **_common(c),
        n_head_kv=tuple(kv if i >= a_off and (i - a_off) % a_per == 0 else 0 for i in range(n)),
        n_ff=(int(c["intermediate_size"]),) * n, ssm_d_conv=int(c.get("mamba_d_conv") or 4),
        ssm_d_inner=int(c["mamba_expand"]) * d_model, ssm_d_state=int(c.get("mamba_d_state") or 16),
        ssm_dt_rank=int(c.get("mamba_dt_rank") or -(d_model // -16)),
        n_expert=n_expert, n_expert_used=int(_find(c, ["num_experts_per_tok", "num_experts_per_token"], 0)),
        moe_layers=tuple(n_expert > 0 and (i - e_off) % e_per == 0 and i >= e_off for i in range(n)),
    )


def _delta_net(c: Mapping[str, Any], arch: str) -> tuple[HybridShape, list[bool] | None]:
    n = int(c["num_hidden_layers"])
    n_expert = int(c.get("num_experts") or 0) if arch != "qwen35" else 0
    kv = int(c["num_key_value_heads"])
    types = c.get("layer_types")
    recurrent = [t == "linear_attention" for t in types] if isinstance(types, list) and len(types) == n else None
    shape = HybridShape(
        arch, **_common(c), n_head_kv=(kv,) * n,
        n_ff=(int(c.get("intermediate_size") or c.get("moe_intermediate_size") or 0),) * n,
        ssm_d_conv=int(c["linear_conv_kernel_dim"]), ssm_d_state=int(c["linear_key_head_dim"]),
        ssm_n_group=int(c["linear_num_key_heads"]), ssm_dt_rank=int(c["linear_num_value_heads"]),
        ssm_d_inner=int(c["linear_value_head_dim"]) * int(c["linear_num_value_heads"]),
        n_expert=n_expert, n_expert_used=int(c.get("num_experts_per_tok") or 0) if n_expert else 0,
        n_ff_exp=int(c.get("moe_intermediate_size") or 0) if n_expert else 0,
        n_ff_shexp=int(c.get("shared_expert_intermediate_size") or 0) if n_expert else 0,
        full_attention_interval=int(c.get("full_attention_interval") or 4),
    )
    return shape, recurrent


_HYBRID = {"lfm2": _lfm2, "lfm2moe": _lfm2, "granitehybrid": _granite, "nemotron_h": _nemotron,
           "nemotron_h_moe": _nemotron, "jamba": _jamba}


_BOOL, _INT32 = 7, 5  # gguf.GGUFValueType.BOOL / INT32


def _metadata(arch: str, keys: dict[str, Any], ftype: str) -> dict[str, Any]:
    """Recipe keys as the header parser returns them: lists become ArrayInfo."""
    out: dict[str, Any] = {"general.architecture": arch,
                           "general.file_type": int(_ALL_FILE_TYPES[normalize_ftype(ftype)][0])}
    for key, value in keys.items():
        if isinstance(value, list | tuple):
            values = tuple(value)
            item = _BOOL if values and type(values[0]) is bool else _INT32
            out[key] = ArrayInfo(item, len(values), values)
        else:
            out[key] = value
    return out


@dataclass(frozen=True)
class _Tensor:  # what build_model_spec reads of a header's tensor
    name: str
    type_name: str
    shape: tuple[int, ...]
    n_bytes: int


@dataclass(frozen=True)
class _Header:  # what build_model_spec reads of a GGUFHeader
    source: str
    metadata: dict[str, Any]
    tensors: tuple[_Tensor, ...]
    file_size: int
    bytes_read: int = 0


def _gemma4(c: Mapping[str, Any]) -> Gemma4Shape:
    """Gemma 4's dense layout (gemma4_layout.py), as conversion/gemma.py Gemma4Model writes
    it: `layer_types`, `head_dim` / `global_head_dim`, `num_key_value_heads` /
    `num_global_key_value_heads`, `attention_k_eq_v`."""
    moe: dict[str, Any] = {}
    if c.get("enable_moe_block"):
        moe = dict(n_expert=int(_find(c, ["num_experts"])), n_expert_used=int(_find(c, ["top_k_experts"])),
                   n_ff_exp=int(_find(c, ["moe_intermediate_size", "expert_intermediate_size"])))
    common = _common(c)
    types = _find(c, ["layer_types"])
    n_kv = int(c["num_key_value_heads"])
    return Gemma4Shape(
        n_embd=common["n_embd"], n_head=common["n_head"], n_ff=int(c["intermediate_size"]),
        n_vocab=common["n_vocab"], swa_layers=tuple(t == "sliding_attention" for t in types),
        head_dim_swa=common["head_dim"], head_dim_full=int(c["global_head_dim"]), n_head_kv_swa=n_kv,
        n_head_kv_full=int(c.get("num_global_key_value_heads") or n_kv), sliding_window=int(c["sliding_window"]),
        k_eq_v=bool(c.get("attention_k_eq_v")), context_length=common["context_length"],
        tie_embeddings=common["tie_embeddings"], n_embd_per_layer=int(c.get("hidden_size_per_layer_input") or 0),
        n_kv_shared=int(c.get("num_kv_shared_layers") or 0), double_wide_mlp=bool(c.get("use_double_wide_mlp")),
        **moe)


def _header(name: str, metadata: dict[str, Any], plans: Sequence[TensorPlan]) -> _Header:
    tensors = tuple(_Tensor(p.name, p.qtype.name, p.ne, p.n_bytes) for p in plans)
    size = sum(t.n_bytes + (-t.n_bytes % 32) for t in tensors)  # 32-byte aligned, as written
    return _Header(name, metadata, tensors, size)


def _transformer(c: Mapping[str, Any], arch: str, ftype: str) -> tuple[dict[str, Any], list[TensorPlan]]:
    n = int(c["num_hidden_layers"])
    common = _common(c)
    n_expert = int(_find(c, ["num_experts", "num_local_experts", "n_routed_experts"], 0))
    n_ff = int(c.get("moe_intermediate_size") or c["intermediate_size"]) if n_expert else int(c["intermediate_size"])
    n_kv = int(c.get("num_key_value_heads") or common["n_head"])
    layout = "gemma3" if arch in ("gemma3", "gemma2") else "qwen3moe" if n_expert else "llama"
    llama4: dict[str, Any] = {}
    if arch == "llama4":
        # conversion/llama.py Llama4Model: config.json's intermediate_size is the experts' (and
        # the shared expert's) width, intermediate_size_mlp the dense blocks'
        layout, n_ff = "llama4", int(c["intermediate_size_mlp"])
        llama4 = dict(n_ff_exp=int(c["intermediate_size"]), moe_layer_step=int(c["interleave_moe_layer_step"]))
    plans = plan_tensors(arch=layout, ftype=ftype, n_layer=n, n_embd=common["n_embd"], n_head=common["n_head"],
                         n_head_kv=n_kv, head_dim=common["head_dim"], n_ff=n_ff, n_vocab=common["n_vocab"],
                         n_expert=n_expert, tie_embeddings=common["tie_embeddings"], **llama4)

    a = arch
    keys: dict[str, Any] = {
        f"{a}.block_count": n, f"{a}.context_length": common["context_length"],
        f"{a}.embedding_length": common["n_embd"], f"{a}.feed_forward_length": n_ff,
        f"{a}.attention.head_count": common["n_head"], f"{a}.attention.head_count_kv": n_kv,
        f"{a}.attention.key_length": common["head_dim"], f"{a}.attention.value_length": common["head_dim"],
    }
    if n_expert:
        keys[f"{a}.expert_count"] = n_expert
        keys[f"{a}.expert_used_count"] = int(_find(c, ["num_experts_per_tok", "num_experts_per_token"]))
        keys[f"{a}.expert_feed_forward_length"] = llama4.get("n_ff_exp", n_ff)
    if llama4:
        keys[f"{a}.interleave_moe_layer_step"] = llama4["moe_layer_step"]
        types = c.get("layer_types")
        if isinstance(types, list) and all(t == "full_attention" for t in types):
            keys[f"{a}.attention.sliding_window"] = 0  # no chunked attention (MobileLLM)
    if arch in _SWA_FROM_CONFIG and c.get("sliding_window"):
        keys[f"{a}.attention.sliding_window"] = int(c["sliding_window"])
        types = c.get("layer_types")
        if _SWA_FROM_CONFIG[arch] == "layer_types" and isinstance(types, list) and len(types) == n:
            keys[f"{a}.attention.sliding_window_pattern"] = [t == "sliding_attention" for t in types]

    return _metadata(arch, keys, ftype), plans


def spec_from_config(config: Mapping[str, Any], *, arch: str, ftype: str, name: str) -> ModelSpec:
    """The ModelSpec of `arch` (llama.cpp's name) at file type `ftype`, from config.json.

    BadInputError (one sentence) when the config lacks a field the converter needs.
    """
    c = _text(config)
    try:
        if arch in HYBRID_ARCHITECTURES:
            if arch in _HYBRID:
                shape, recurrent = _HYBRID[arch](c, arch), None
            else:
                shape, recurrent = _delta_net(c, arch)
            plans = plan_hybrid_tensors(shape, ftype)

            keys = hybrid_metadata(shape)
            if recurrent is not None:
                keys[f"{arch}.attention.recurrent_layers"] = recurrent
            metadata = _metadata(arch, keys, ftype)
        elif arch == "gemma3n":
            common = _common(c)
            n = int(c["num_hidden_layers"])
            n_ff = c["intermediate_size"]
            n_ff = max(n_ff) if isinstance(n_ff, list) else int(n_ff)
            kw = dict(n_layer=n, n_embd=common["n_embd"], n_head=common["n_head"],
                      n_head_kv=int(c["num_key_value_heads"]), head_dim=common["head_dim"], n_ff=n_ff)
            plans = plan_gemma3n_tensors(ftype=ftype, n_vocab=common["n_vocab"], **kw)
            types = c.get("layer_types")
            pattern = [t == "sliding_attention" for t in types] if isinstance(types, list) and len(types) == n else None
            metadata = _metadata(arch, gemma3n_metadata(
                **kw, context_length=common["context_length"], sliding_window=int(c["sliding_window"]),
                swa_pattern=pattern), ftype)
            shared = c.get("num_kv_shared_layers")
            if isinstance(shared, int) and n - shared != KV_FROM_START:
                raise BadInputError(f"{name}: llama.cpp keeps the KV cache of exactly {KV_FROM_START} gemma3n "
                                    f"layers, but this config shares all but {n - shared}.")
        elif arch == "gemma4":
            shape4 = _gemma4(c)
            plans = plan_gemma4_tensors(shape4, ftype)
            metadata = _metadata(arch, gemma4_metadata(shape4), ftype)
        elif arch in _TRANSFORMERS:
            metadata, plans = _transformer(c, arch, ftype)
        else:
            raise BadInputError(f"{name}: Rooflight has no config.json mapping for {arch} layers "
                                "(a GGUF header of the file is needed).")
    except (KeyError, TypeError, ValueError) as e:
        raise BadInputError(f"{name}: config.json cannot describe a {arch} model ({e}).") from e
    return build_model_spec([_header(name, metadata, plans)], default_name=name)
