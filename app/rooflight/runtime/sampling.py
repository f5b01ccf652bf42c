"""Sampling settings, their per-model defaults, and llama.cpp's sampler chain for them.

Defaults, later ones winning: llama.cpp's own (temperature 0.8, top-k 40, top-p 0.95,
min-p 0.05); the model family's published recommendation; for a base model driven as a
transcript, a lower temperature and a repeat penalty (small base models loop otherwise);
and the `general.sampling.*` keys a GGUF may carry (convert_hf_to_gguf copies them from
the model's generation_config.json).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from rooflight.errors import BadInputError

# Published recommendations (model cards / generation_config.json of the instruct models).
_FAMILY = {
    "gemma": dict(temperature=1.0, top_k=64, top_p=0.95, min_p=0.0),  # Gemma 3 model card
    "qwen": dict(temperature=0.7, top_k=20, top_p=0.8, min_p=0.0),  # Qwen2.5/3 non-thinking
    "llama": dict(temperature=0.6, top_k=40, top_p=0.9, min_p=0.05),  # Llama 3 generation_config
    "phi": dict(temperature=0.7, top_k=40, top_p=0.95, min_p=0.05),
}
_GGUF_KEYS = {
    "general.sampling.temp": "temperature",
    "general.sampling.top_k": "top_k",
    "general.sampling.top_p": "top_p",
    "general.sampling.min_p": "min_p",
    "general.sampling.penalty_repeat": "repeat_penalty",
}
PENALTY_LAST_N = 64  # tokens the repeat penalty looks back over (llama.cpp's default)


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.8  # 0: greedy (always the most likely token)
    top_p: float = 0.95
    top_k: int = 40  # 0: off
    min_p: float = 0.05
    repeat_penalty: float = 1.0  # 1: off
    max_tokens: int = 512  # most tokens one reply may have
    seed: int | None = None  # None: a new random seed per reply

    def __post_init__(self) -> None:
        checks = [
            (self.temperature >= 0, "temperature must be 0 or more"),
            (0 < self.top_p <= 1, "top-p must be above 0 and at most 1"),
            (self.top_k >= 0, "top-k must be 0 (off) or more"),
            (0 <= self.min_p < 1, "min-p must be from 0 up to (not including) 1"),
            (self.repeat_penalty > 0, "the repeat penalty must be above 0 (1 is off)"),
            (self.max_tokens >= 1, "max tokens must be at least 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise BadInputError(f"Bad sampling setting: {message}.")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any], base: Sampling | None = None) -> Sampling:
        known = {f.name for f in fields(cls)}
        return replace(base or cls(), **{k: v for k, v in d.items() if k in known})


def _family(architecture: str) -> str | None:
    arch = architecture.lower()
    for family in ("gemma", "qwen", "llama", "phi"):
        if arch.startswith(family):
            return family
    return None


def default_sampling(architecture: str, metadata: dict[str, str], *, completion: bool = False) -> Sampling:
    """Sensible settings for this model (see the module docstring for the order)."""
    values: dict[str, Any] = dict(_FAMILY.get(_family(architecture) or "", {}))
    if completion:
        values.update(temperature=min(values.get("temperature", 0.8), 0.7), repeat_penalty=1.1)
    for key, name in _GGUF_KEYS.items():
        if key in metadata:
            try:
                raw = float(metadata[key])
            except (TypeError, ValueError):
                continue
            values[name] = int(raw) if name == "top_k" else raw
    try:
        return Sampling(**values)
    except BadInputError:  # a GGUF with nonsense sampling keys: ignore them
        return Sampling(**{k: v for k, v in _FAMILY.get(_family(architecture) or "", {}).items()})  # type: ignore[arg-type]


class SamplerChain:
    """llama.cpp's sampler chain for one reply (public C API); sample() also accepts the token."""

    def __init__(self, s: Sampling, n_vocab: int, seed: int | None = None) -> None:
        import llama_cpp as lc

        self._lc = lc
        self.seed = seed if seed is not None else (s.seed if s.seed is not None else random.getrandbits(32))
        self._chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
        add = lambda smpl: lc.llama_sampler_chain_add(self._chain, smpl)  # noqa: E731
        if s.repeat_penalty != 1.0:
            add(lc.llama_sampler_init_penalties(n_vocab, PENALTY_LAST_N, s.repeat_penalty, 0.0, 0.0))
        if s.temperature <= 0:
            add(lc.llama_sampler_init_greedy())
        else:
            if s.top_k > 0:
                add(lc.llama_sampler_init_top_k(s.top_k))
            if s.top_p < 1.0:
                add(lc.llama_sampler_init_top_p(s.top_p, 1))
            if s.min_p > 0:
                add(lc.llama_sampler_init_min_p(s.min_p, 1))
            add(lc.llama_sampler_init_temp(s.temperature))
            add(lc.llama_sampler_init_dist(self.seed & 0xFFFFFFFF))

    def sample(self, ctx) -> int:
        return int(self._lc.llama_sampler_sample(self._chain, ctx, -1))

    def close(self) -> None:
        if self._chain is not None:
            self._lc.llama_sampler_free(self._chain)
            self._chain = None

    def __enter__(self) -> SamplerChain:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
