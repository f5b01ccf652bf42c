"""What llama.cpp computes for the output rows only while it processes a prompt.

Most model graphs select the rows whose logits are wanted (`inp_out_ids`: the prompt's last
token) in the last block, after its attention and before its FFN: `if (il == n_layer - 1 &&
inp_out_ids) { cur = ggml_get_rows(ctx0, cur, inp_out_ids); ... }` (src/models/*.cpp,
llama-cpp-python 0.3.36). So the last block's FFN multiplies one token, in the prompt's
last micro-batch, not every token; the output layer likewise. A 3-layer model skips a
third of its FFN work that way: pricing every block for every token made a probe's prompt
figures, measured on 3-layer models, about a fifth too fast for real models of 16-80 blocks.
"""

from __future__ import annotations

from rooflight.estimate.layers import layer_table
from rooflight.estimate.placement import CPU
from rooflight.gguf.spec import ModelSpec

# Architectures whose graph crops before the last FFN with llama.cpp's default context
# parameters (the line above, unconditional or with `!cparams.embeddings_nextn`, in their
# src/models file). Not: gemma3n, lfm2moe (crop after the last block), and gemma4, gpt-oss,
# nemotron_h and nemotron_h_moe (one graph), qwen35, qwen35moe, qwen3next (crop there only
# when embeddings_nextn_masked, false by default).
CROPS_LAST_FFN = frozenset({
    "llama", "llama4", "mistral3", "qwen2", "qwen3", "qwen3moe", "gemma3", "granite", "granitehybrid",
    "lfm2", "olmo2", "phi3", "seed_oss", "smollm3", "glm4moe",
})

OUTPUT_ROWS = 1  # a prompt's logits: the last token's (llama-cpp-python without logits_all)


def is_last_ffn(spec: ModelSpec, name: str, layer: int | None) -> bool:
    """Whether a tensor is one of the last block's FFN tensors (norms, gate, up, down,
    router, shared and routed experts), the work cropped to the output rows."""
    return layer == spec.n_layer - 1 and ".ffn_" in name


def multiplies_every_prompt_token(spec: ModelSpec, name: str, layer: int | None) -> bool:
    """Whether a block tensor multiplies every token of a prompt (not only its output rows)."""
    return not (spec.architecture in CROPS_LAST_FFN and is_last_ffn(spec, name, layer))


def crop_last_ffn(per_dev: dict, spec: ModelSpec, devices, n_cpu_moe: int) -> None:
    """Move the last block's FFN work out of per_dev's per-token work (perf._PrefillWork:
    params, params_by_type) into its output-row work (out_params, out_by_type), on the
    device that multiplies it: the block's, or the CPU for experts --n-cpu-moe keeps there."""
    if spec.architecture not in CROPS_LAST_FFN or not spec.n_layer:
        return
    last = spec.n_layer - 1
    parts = [(devices[last], layer_table(spec).last_ffn_by_type or {})]
    if spec.n_expert:
        from rooflight.estimate.experts import expert_table

        table = expert_table(spec)
        on = CPU if n_cpu_moe > last else devices[last]  # --n-cpu-moe keeps blocks < N's experts there
        parts.append((on, table.by_type[last] if table.by_type else {}))
        if on in per_dev:  # the last block's routed experts multiply the output rows only
            for kind, n in (table.by_type[last] if table.by_type else {}).items():
                per_dev[on].routed_by_type[kind] = per_dev[on].routed_by_type.get(kind, 0.0) - n
    for dev, by_type in parts:
        w = per_dev.get(dev)
        if w is None:
            continue
        for kind, n in by_type.items():
            w.params -= n
            w.out_params += n
            if w.params_by_type is not None:
                w.params_by_type[kind] = w.params_by_type.get(kind, 0.0) - n
            w.out_by_type[kind] = w.out_by_type.get(kind, 0.0) + n
