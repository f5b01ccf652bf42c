"""Kernels per layer in llama.cpp's decode graph, by architecture (DECISIONS, "MoE decode on GPUs").

    python bench/graph_kernels.py

Writes generated models of one and two layers per architecture, decodes one token after four
with the installed llama.cpp, and counts the graph's ops through the scheduler's eval callback
(llama_context_params.cb_eval, asked once per node before it is computed). The difference
between the two models is one layer; views, reshapes and permutes launch nothing and are
counted apart. This is the CPU backend's graph: GPU backends fuse some ops (the MoE router's
softmax and top-k on CUDA, HIP and Vulkan), so it bounds a GPU's kernel count from above.
"""

from __future__ import annotations

import collections
import ctypes
import tempfile
from pathlib import Path

from rooflight.gguf.synthetic import write_model
from rooflight.runtime.ggml_api import ggml_function

NO_KERNEL = {"VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE", "NONE"}
SHAPES = {
    "llama": dict(arch="llama", n_embd=256, n_head=4, n_head_kv=2, n_ff=512),
    "qwen3moe": dict(arch="qwen3moe", n_embd=256, n_head=4, n_head_kv=2, n_ff=256, n_expert=8, n_expert_used=2),
    "gpt-oss": dict(arch="gpt-oss", n_embd=256, n_head=4, n_head_kv=2, n_ff=256, n_expert=8, n_expert_used=2),
}


def decode_ops(path: Path) -> collections.Counter:
    """Ops of the graph that decodes one token after four cached positions."""
    import llama_cpp.llama_cpp as lc

    op_desc = ggml_function("ggml_op_desc", ctypes.c_char_p, [ctypes.c_void_p])
    lc.llama_backend_init()
    model = lc.llama_model_load_from_file(str(path).encode(), lc.llama_model_default_params())
    params = lc.llama_context_default_params()
    params.n_ctx, params.n_batch, params.n_ubatch = 256, 64, 64
    params.n_threads = params.n_threads_batch = 1
    ops: collections.Counter = collections.Counter()
    counting = [False]

    @lc.ggml_backend_sched_eval_callback
    def ask(tensor, asking, _user):
        if asking and counting[0]:
            ops[op_desc(tensor).decode()] += 1
        return False  # observe nothing: the node is computed as usual

    params.cb_eval = ask
    ctx = lc.llama_init_from_model(model, params)
    try:
        for tokens, pos, count in (([5, 6, 7, 8], 0, False), ([9], 4, True)):
            batch = lc.llama_batch_init(len(tokens), 0, 1)
            for i, token in enumerate(tokens):
                batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, pos + i, 1
                batch.seq_id[i][0], batch.logits[i] = 0, i == len(tokens) - 1
            batch.n_tokens = len(tokens)
            counting[0] = count
            status = lc.llama_decode(ctx, batch)
            lc.llama_batch_free(batch)
            if status != 0:
                raise RuntimeError(f"llama_decode returned {status}")
    finally:
        counting[0] = False
        lc.llama_free(ctx)
        lc.llama_model_free(model)
    return ops


def per_layer(shape: dict) -> collections.Counter:
    """One layer's ops: the two-layer model's decode graph less the one-layer model's."""
    with tempfile.TemporaryDirectory(prefix="rooflight-graph-") as tmp:
        one, two = (decode_ops(write_model(Path(tmp) / f"{n}.gguf", n_layer=n, **shape)) for n in (1, 2))
    return two - one


def main() -> None:
    for name, shape in SHAPES.items():
        ops = per_layer(shape)
        kernels = sum(n for op, n in ops.items() if op not in NO_KERNEL)
        detail = ", ".join(f"{op} {n}" for op, n in sorted(ops.items()))
        print(f"{name:9s} {kernels:3d} kernels per layer ({sum(ops.values())} nodes: {detail})")


if __name__ == "__main__":
    main()
