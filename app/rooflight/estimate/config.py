"""RunConfig: exactly the knobs the runtime passes to llama-cpp-python's Llama(...).

What the estimator plans is what the runtime loads (DESIGN.md): keep every field here
mapped one to one onto a Llama() argument (see runtime_kwargs()), except n_cpu_moe, which
the runtime applies as llama.cpp's tensor overrides (runtime/tensor_overrides.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from rooflight.errors import BadInputError
from rooflight.gguf.quant_recipe import GGML_BLOCK_SIZES, GGMLType

# KV cache element types llama.cpp accepts for --cache-type-k/v that Rooflight offers.
KV_TYPES = ("f16", "q8_0", "q4_0")


def kv_bytes_per_element(kv_type: str) -> float:
    """Bytes per cached element: f16 2, q8_0 34/32, q4_0 18/32 (GGML block sizes)."""
    if kv_type not in KV_TYPES:
        raise BadInputError(f"Unknown KV cache type {kv_type!r}; use one of {', '.join(KV_TYPES)}.")
    block, size = GGML_BLOCK_SIZES[GGMLType[kv_type.upper()]]
    return size / block


@dataclass(frozen=True)
class RunConfig:
    n_ctx: int
    n_gpu_layers: int  # llama.cpp semantics: the last n blocks, counting the output layer as one
    n_threads: int
    kv_type: str = "f16"
    flash_attn: bool = False
    swa_full: bool = False  # llama.cpp defaults to a full-size SWA cache; we plan the small one
    n_batch: int = 512
    n_ubatch: int = 512
    offload_kqv: bool = True
    tensor_split: tuple[float, ...] | None = None  # None: split by free memory, as llama.cpp does
    # MoE: routed-expert tensors of blocks 0..n_cpu_moe-1 stay in RAM (llama.cpp's --n-cpu-moe;
    # not a Llama() argument: runtime/tensor_overrides.py sets it on the model parameters)
    n_cpu_moe: int = 0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["tensor_split"] = list(self.tensor_split) if self.tensor_split else None
        return d

    def runtime_kwargs(self) -> dict:
        """Keyword arguments for llama_cpp.Llama that reproduce this plan."""
        import llama_cpp  # lazy: the estimator itself never needs llama.cpp

        ggml_type = {
            "f16": llama_cpp.GGML_TYPE_F16,
            "q8_0": llama_cpp.GGML_TYPE_Q8_0,
            "q4_0": llama_cpp.GGML_TYPE_Q4_0,
        }[self.kv_type]
        kwargs: dict[str, Any] = dict(
            n_ctx=self.n_ctx,
            n_gpu_layers=self.n_gpu_layers,
            n_threads=self.n_threads,
            n_threads_batch=self.n_threads,
            n_batch=self.n_batch,
            n_ubatch=self.n_ubatch,
            flash_attn=self.flash_attn,
            swa_full=self.swa_full,
            offload_kqv=self.offload_kqv,
            type_k=ggml_type,
            type_v=ggml_type,
        )
        if self.tensor_split:
            kwargs["tensor_split"] = list(self.tensor_split)
        return kwargs


def padded_ctx(n_ctx: int) -> int:
    """llama.cpp rounds the context up to a multiple of 256 (llama-context.cpp, GGML_PAD)."""
    return -(-n_ctx // 256) * 256
