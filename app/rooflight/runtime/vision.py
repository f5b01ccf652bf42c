"""The vision projector loaded beside a model, and prompts with images evaluated through it.

llama-cpp-python 0.3.36's multimodal chat handler (llama_chat_format.MTMDChatHandler)
opens llama.cpp's mtmd context for a projector and the loaded model and turns image
bytes into mtmd bitmaps; its own __call__ renders the model's Jinja template and runs
create_completion, which would bypass the chat session's timing, stop-within-a-token and
context handling. So the session keeps its own rendering and sampling loop and uses the
handler's context for the one thing only mtmd can do: tokenize a prompt whose media
markers stand for images (mtmd_tokenize splits it into text and image chunks) and
evaluate the image chunks (encode with the projector, decode the embeddings) exactly as
the handler's __call__ does (mtmd_helper_eval_chunk_single).

What mtmd allocated is read from its log (installed beside llama.cpp's, llama_log.py):
"model size" and the "compute buffer size" reserved for one image.
"""

from __future__ import annotations

import ctypes
import re
import time
from dataclasses import dataclass
from pathlib import Path

from rooflight.errors import BadInputError, OperationFailedError
from rooflight.runtime.images import ImageData
from rooflight.runtime.llama_log import MIB, capture_llama_log, install_mtmd_log

# "load_hparams: model size:         0.19 MiB"
_MODEL_RE = re.compile(r"load_hparams: model size:\s+([\d.]+) MiB")
# "reserve_compute_meta:        CPU compute buffer size =     0.16 MiB"
_COMPUTE_RE = re.compile(r"reserve_compute_meta:\s+(\S+) compute buffer size =\s+([\d.]+) MiB")
_BACKEND_RE = re.compile(r"clip_ctx: CLIP using (\S+) backend")


@dataclass(frozen=True)
class ProjectorBuffers:
    """What mtmd reported for the projector, in bytes (0.01 MiB resolution)."""

    weights_bytes: int
    compute: dict[str, int]  # buffer name (CPU, CUDA0...) -> bytes
    backend: str

    @property
    def compute_bytes(self) -> int:
        return sum(self.compute.values())


def parse_projector_log(text: str) -> ProjectorBuffers:
    weights = sum(round(float(m) * MIB) for m in _MODEL_RE.findall(text))
    compute: dict[str, int] = {}
    for name, mib in _COMPUTE_RE.findall(text):
        compute[name] = round(float(mib) * MIB)  # a re-reserve repeats it: keep the last
    backend = _BACKEND_RE.search(text)
    return ProjectorBuffers(weights, compute, backend.group(1) if backend else "CPU")


class VisionContext:
    """mtmd's context for one loaded model and its projector (freed with the model)."""

    def __init__(self, llm, projector_path: str | Path, *, use_gpu: bool) -> None:
        import llama_cpp.mtmd_cpp as mtmd
        from llama_cpp.llama_chat_format import MTMDChatHandler

        self._mtmd = mtmd
        self._llm = llm
        self.path = Path(projector_path)
        self.handler = MTMDChatHandler(clip_model_path=str(self.path), verbose=False, use_gpu=use_gpu)
        install_mtmd_log()
        with capture_llama_log() as cap:
            try:
                self.handler._init_mtmd_context(llm)  # the handler's own set-up, freed with llm
            except ValueError as exc:
                detail = _last_error(cap.text) or str(exc)
                raise OperationFailedError(
                    f"llama.cpp could not load the vision projector {self.path.name} ({detail}); "
                    "check that it belongs to this model.") from exc
        self.buffers = parse_projector_log(cap.text)
        self.marker = mtmd.mtmd_default_marker().decode("utf-8")

    @property
    def ctx(self):
        return self.handler.mtmd_ctx

    def tokenize(self, text: str, images: list[ImageData]) -> VisionPrompt:
        """Split a rendered prompt (one marker per image) into mtmd's text and image chunks."""
        mtmd = self._mtmd
        if text.count(self.marker) != len(images):
            raise BadInputError(f"The prompt has {text.count(self.marker)} image places for {len(images)} images.")
        bitmaps = []
        try:
            for img in images:
                try:
                    bitmaps.append(self.handler._create_bitmap_from_bytes(img.data))
                except ValueError:
                    raise BadInputError(
                        f"{img.name or 'The image'} could not be decoded by llama.cpp; "
                        "save it again as PNG or JPEG.") from None
            inp = mtmd.mtmd_input_text()
            raw = text.encode("utf-8")
            inp.text, inp.text_len, inp.add_special, inp.parse_special = raw, len(raw), True, True
            chunks = mtmd.mtmd_input_chunks_init()
            array = (mtmd.mtmd_bitmap_p_ctypes * len(bitmaps))(*bitmaps)
            rc = mtmd.mtmd_tokenize(self.ctx, chunks, ctypes.byref(inp), array, len(bitmaps))
            if rc != 0:
                mtmd.mtmd_input_chunks_free(chunks)
                raise OperationFailedError(f"llama.cpp could not prepare the images for the model (mtmd error {rc}).")
        finally:
            for b in bitmaps:
                mtmd.mtmd_bitmap_free(b)
        return VisionPrompt(self, chunks)


class VisionPrompt:
    """Tokenized text and image chunks, evaluated into the model's KV cache from position 0."""

    def __init__(self, vision: VisionContext, chunks) -> None:
        mtmd = vision._mtmd
        self._vision, self._chunks = vision, chunks
        self.parts: list[tuple[str, object, int]] = []  # (kind, chunk, n_tokens)
        for i in range(mtmd.mtmd_input_chunks_size(chunks)):
            chunk = mtmd.mtmd_input_chunks_get(chunks, i)
            if mtmd.mtmd_input_chunk_get_type(chunk) == mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
                n = ctypes.c_size_t()
                ptr = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
                self.parts.append(("text", [ptr[j] for j in range(n.value)], n.value))
            else:
                self.parts.append(("image", chunk, int(mtmd.mtmd_input_chunk_get_n_tokens(chunk))))

    @property
    def n_tokens(self) -> int:
        return sum(p[2] for p in self.parts)

    @property
    def image_tokens(self) -> int:
        return sum(p[2] for p in self.parts if p[0] == "image")

    @property
    def n_images(self) -> int:
        return sum(1 for p in self.parts if p[0] == "image")

    def evaluate(self) -> float:
        """Clear the cache and evaluate every chunk; returns the seconds spent on images."""
        import llama_cpp as lc

        mtmd, llm = self._vision._mtmd, self._vision._llm
        llm.reset()
        lc.llama_memory_clear(lc.llama_get_memory(llm.ctx), True)
        t_images = 0.0
        for kind, payload, _n in self.parts:
            if kind == "text":
                if payload:
                    llm.eval(payload)
                continue
            start = llm.n_tokens
            new_n_past = lc.llama_pos(0)
            t0 = time.perf_counter()
            rc = mtmd.mtmd_helper_eval_chunk_single(
                self._vision.ctx, llm._ctx.ctx, payload, lc.llama_pos(start), lc.llama_seq_id(0),
                llm.n_batch, False, ctypes.byref(new_n_past))
            t_images += time.perf_counter() - t0
            if rc != 0:
                raise OperationFailedError(f"llama.cpp could not encode the image (mtmd error {rc}).")
            llm.n_tokens = new_n_past.value
            # these positions hold image embeddings, not tokens: no later prompt may match them
            llm.input_ids[start:llm.n_tokens] = -1
        return t_images

    def close(self) -> None:
        if self._chunks is not None:
            self._vision._mtmd.mtmd_input_chunks_free(self._chunks)
            self._chunks = None

    def __enter__(self) -> VisionPrompt:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _last_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if "error" in ln.lower() or "mismatch" in ln.lower()]
    return lines[-1] if lines else ""
