"""The machine probe's image part: how fast this CPU encodes an image through a projector.

A vision model's first token waits for its image to be encoded (mtmd's ViT graph, then the
projection). estimate/vision.py counts that encoder's FLOPs; here we time the real graph
once per machine: a generated Gemma 3 style projector (gguf/synthetic_mmproj.py) beside a
tiny generated language model (mtmd needs one to load against), loaded as the chat loads
a projector (runtime/vision.py VisionContext, CPU), one generated image tokenized once and
encoded a few times with mtmd_encode_chunk — the encode alone, without decoding the
embeddings into the model (the plan prices those image tokens at the prefill rate).

The projector is CLIP-B-like in its matrix sizes (512 wide, 2048 feed-forward, 256
patches) so its GEMMs run at the speed real towers see, and small enough that one encode
takes tens of milliseconds here; its rate (FLOPs by estimate/vision.encode_flops over the
measured time) then prices any projector of the same weight type on this CPU.
"""

from __future__ import annotations

import ctypes
import math
import time
from pathlib import Path
from typing import Any

from rooflight.errors import OperationFailedError

# the probe projector (write_projector arguments) and its language model
PROJECTOR_SHAPE: dict[str, Any] = dict(n_embd=512, n_ff=2048, n_layer=2, n_head=8, image_size=256, patch_size=16, n_merge=2)
PROJECTOR_TYPE = "F16"  # the variant vision repositories publish first (mmproj-...-f16.gguf)
_LM_SHAPE: dict[str, Any] = dict(arch="gemma3", n_layer=1, n_embd=64, n_head=4, n_head_kv=2, n_ff=128, n_vocab=800,
                 context_length=512)
MAX_ENCODES_PER_RUN = 64


def write_probe_pair(folder: Path) -> tuple[Path, Path]:
    """(language model, projector) written into folder with the project's writers."""
    from rooflight.gguf.synthetic import write_model
    from rooflight.gguf.synthetic_mmproj import write_projector

    lm = write_model(folder / "vision-lm.gguf", **_LM_SHAPE)
    proj = write_projector(folder / "mmproj-vision-lm-f16.gguf", projection_dim=_LM_SHAPE["n_embd"],
                           ftype=PROJECTOR_TYPE, **PROJECTOR_SHAPE)
    return lm, proj


class EncodeBench:
    """A loaded projector and one image, tokenized once, ready to encode again and again."""

    def __init__(self, llm, projector_path: Path) -> None:
        import llama_cpp.mtmd_cpp as mtmd
        import numpy as np

        from rooflight.gguf.projector import load_projector_spec
        from rooflight.runtime.vision import VisionContext

        self._mtmd = mtmd
        self.spec = load_projector_spec(projector_path)
        self.vision = VisionContext(llm, projector_path, use_gpu=False)  # the CPU's figure
        side = self.spec.image_size  # already the projector's size: preprocessing is trivial
        pixels = np.random.default_rng(0).integers(0, 256, side * side * 3, dtype=np.uint8)
        data = (ctypes.c_uint8 * pixels.size).from_buffer_copy(pixels.tobytes())
        bitmap = mtmd.mtmd_bitmap_init(side, side, data)
        if not bitmap:
            raise OperationFailedError("llama.cpp could not make the probe's test image.")
        self._chunks = mtmd.mtmd_input_chunks_init()
        try:
            raw = self.vision.marker.encode("utf-8")
            inp = mtmd.mtmd_input_text()
            inp.text, inp.text_len, inp.add_special, inp.parse_special = raw, len(raw), False, True
            array = (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap)
            rc = mtmd.mtmd_tokenize(self.vision.ctx, self._chunks, ctypes.byref(inp), array, 1)
        finally:
            mtmd.mtmd_bitmap_free(bitmap)
        self._chunk = None
        for i in range(mtmd.mtmd_input_chunks_size(self._chunks) if rc == 0 else 0):
            chunk = mtmd.mtmd_input_chunks_get(self._chunks, i)
            if mtmd.mtmd_input_chunk_get_type(chunk) != mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
                self._chunk = chunk
        if self._chunk is None:
            self.close()
            raise OperationFailedError(f"llama.cpp could not prepare the probe's test image (mtmd error {rc}).")

    def encode_s(self) -> float:
        """Seconds of one encode of the image."""
        t0 = time.perf_counter()
        rc = self._mtmd.mtmd_encode_chunk(self.vision.ctx, self._chunk)
        dt = time.perf_counter() - t0
        if rc != 0:
            raise OperationFailedError(f"llama.cpp could not encode the probe's test image (mtmd error {rc}).")
        return dt

    def encodes_for(self, target_s: float) -> int:
        """Encodes per run so a run lasts about target_s (after one warm-up encode, which
        also pays mtmd's first-use allocations)."""
        self.encode_s()
        per = self.encode_s()
        return max(1, min(MAX_ENCODES_PER_RUN, math.ceil(target_s / max(per, 1e-6))))

    def run(self, n: int):
        """A probe run: mean seconds per encode over n encodes."""
        def one() -> float:
            return sum(self.encode_s() for _ in range(n)) / n
        return one

    def close(self) -> None:
        if self._chunks is not None:
            self._mtmd.mtmd_input_chunks_free(self._chunks)
            self._chunks = None
