"""The curated model catalog (resources/catalog.json): what people run locally, by name.

Each entry carries the published hyper-parameters of the model, so a ModelSpec (and hence
exact file and memory sizes, by llama.cpp's quant recipe) can be built for any quantization
before a GGUF header has been downloaded, and the repositories that publish GGUF files of it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from rooflight.errors import BadInputError
from rooflight.gguf.from_hparams import spec_from_hparams
from rooflight.gguf.quant_recipe import ARCHITECTURES, FILE_TYPES
from rooflight.gguf.spec import ModelSpec

__all__ = [
    "CatalogModel",
    "GGUFSource",
    "HParams",
    "Quality",
    "find_model",
    "load_catalog",
    "parse_catalog",
]


@dataclass(frozen=True)
class GGUFSource:
    """One Hub repository publishing GGUF files of a model: quant type -> file name.

    A file name ending in "/" is a folder of split shards.
    """

    repo: str
    files: Mapping[str, str]

    def __hash__(self) -> int:
        return hash((self.repo, tuple(sorted(self.files.items()))))


@dataclass(frozen=True)
class HParams:
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int  # per expert for MoE models
    n_vocab: int
    context_length: int
    sliding_window: int = 0
    swa_pattern: int | None = None  # every Nth layer is global (llama.cpp's n_swa_pattern)
    n_expert: int = 0
    n_expert_used: int = 0
    tie_embeddings: bool = False

    def swa_layers(self) -> tuple[bool, ...]:
        """Per layer: True where the layer uses the sliding window."""
        if not self.sliding_window or not self.swa_pattern:
            return ()
        p = self.swa_pattern
        return tuple((il % p) < p - 1 for il in range(self.n_layer))


@dataclass(frozen=True)
class Quality:
    score: float
    benchmark: str
    source: str


@dataclass(frozen=True)
class CatalogModel:
    id: str
    name: str
    family: str
    architecture: str  # the real architecture (qwen2, phi3, gpt-oss, ...)
    layout: str  # the tensor layout used to compute sizes: one of quant_recipe.ARCHITECTURES
    params_total: float  # billions
    params_active: float  # billions (== params_total for dense models)
    license: str
    tags: tuple[str, ...]
    release: str  # YYYY-MM
    hparams: HParams
    hparams_source: str
    quality: Quality | None
    gguf: tuple[GGUFSource, ...]

    @property
    def is_moe(self) -> bool:
        return self.hparams.n_expert > 0

    @property
    def quants(self) -> tuple[str, ...]:
        """Quant types some source publishes, from fewest to most bits (FILE_TYPES order)."""
        have = {q for s in self.gguf for q in s.files}
        order = list(FILE_TYPES)
        return tuple(sorted(have, key=lambda q: (order.index(q) if q in order else len(order), q)))

    def file_for(self, quant: str) -> tuple[str, str]:
        """(repo, file name) of the first source publishing this quant type."""
        quant = quant.upper()
        for s in self.gguf:
            if quant in s.files:
                return s.repo, s.files[quant]
        raise BadInputError(
            f"{self.id} has no {quant} file in the catalog; available: {', '.join(self.quants)}."
        )

    def spec(self, quant: str) -> ModelSpec:
        """The model's tensors and sizes at this quantization, from its hyper-parameters."""
        quant = quant.upper()
        if quant not in FILE_TYPES:
            raise BadInputError(f"Unknown quantization {quant!r}; known: {', '.join(FILE_TYPES)}.")
        h = self.hparams
        return spec_from_hparams(
            name=self.id, arch=self.layout, ftype=quant, n_layer=h.n_layer, n_embd=h.n_embd,
            n_head=h.n_head, n_head_kv=h.n_head_kv, n_ff=h.n_ff, n_vocab=h.n_vocab,
            context_length=h.context_length, head_dim=h.head_dim, n_expert=h.n_expert,
            n_expert_used=h.n_expert_used, sliding_window=h.sliding_window,
            swa_layers=h.swa_layers(), tie_embeddings=h.tie_embeddings,
        )


_RESOURCE = "catalog.json"


def _need(d: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in d:
        raise BadInputError(f"Catalog entry {where} lacks {key!r}.")
    value = d[key]
    if isinstance(value, bool) and kind is not bool and (kind is int or (isinstance(kind, tuple) and bool not in kind)):
        raise BadInputError(f"Catalog entry {where}: {key!r} must not be a boolean.")
    if not isinstance(value, kind):
        raise BadInputError(f"Catalog entry {where}: {key!r} has the wrong type ({type(value).__name__}).")
    return value


def _parse_entry(raw: Any, index: int) -> CatalogModel:
    where = f"#{index}"
    if not isinstance(raw, dict):
        raise BadInputError(f"Catalog entry {where} is not an object.")
    mid = _need(raw, "id", str, where)
    where = f"{mid!r}"
    h = _need(raw, "hparams", dict, where)
    num = (int, float)
    try:
        hp = HParams(
            n_layer=_need(h, "n_layer", int, where),
            n_embd=_need(h, "n_embd", int, where),
            n_head=_need(h, "n_head", int, where),
            n_head_kv=_need(h, "n_head_kv", int, where),
            head_dim=_need(h, "head_dim", int, where),
            n_ff=_need(h, "n_ff", int, where),
            n_vocab=_need(h, "n_vocab", int, where),
            context_length=_need(h, "context_length", int, where),
            sliding_window=h.get("sliding_window") or 0,
            swa_pattern=h.get("swa_pattern"),
            n_expert=h.get("n_expert") or 0,
            n_expert_used=h.get("n_expert_used") or 0,
            tie_embeddings=bool(h.get("tie_embeddings", False)),
        )
        for field in ("n_layer", "n_embd", "n_head", "n_head_kv", "head_dim", "n_ff", "n_vocab",
                      "context_length"):
            if getattr(hp, field) <= 0:
                raise BadInputError(f"Catalog entry {where}: {field} must be positive.")
        if hp.n_head % hp.n_head_kv:
            raise BadInputError(f"Catalog entry {where}: n_head is not a multiple of n_head_kv.")
        if hp.n_expert and not 0 < hp.n_expert_used < hp.n_expert:
            raise BadInputError(f"Catalog entry {where}: n_expert_used must be in 1..n_expert-1.")
        if hp.swa_pattern is not None and (not isinstance(hp.swa_pattern, int) or hp.swa_pattern < 1):
            raise BadInputError(f"Catalog entry {where}: swa_pattern must be a positive integer or null.")
        layout = _need(raw, "layout", str, where)
        if layout not in ARCHITECTURES:
            raise BadInputError(f"Catalog entry {where}: layout {layout!r} is not one of {ARCHITECTURES}.")
        total = float(_need(raw, "params_total", num, where))
        active = float(_need(raw, "params_active", num, where))
        if not total >= active > 0:
            raise BadInputError(f"Catalog entry {where}: need params_total >= params_active > 0.")
        q = raw.get("quality")
        quality = None
        if q is not None:
            if not isinstance(q, dict):
                raise BadInputError(f"Catalog entry {where}: quality must be an object or null.")
            quality = Quality(float(_need(q, "score", num, where)), _need(q, "benchmark", str, where),
                              _need(q, "source", str, where))
        sources = []
        for s in _need(raw, "gguf", list, where):
            if not isinstance(s, dict):
                raise BadInputError(f"Catalog entry {where}: each gguf source must be an object.")
            files = _need(s, "files", dict, where)
            for qt, fn in files.items():
                if qt not in FILE_TYPES or not isinstance(fn, str) or not fn:
                    raise BadInputError(f"Catalog entry {where}: bad gguf file entry {qt!r}.")
            sources.append(GGUFSource(_need(s, "repo", str, where), dict(files)))
        if not sources:
            raise BadInputError(f"Catalog entry {where} lists no GGUF source.")
        return CatalogModel(
            id=mid,
            name=_need(raw, "name", str, where),
            family=_need(raw, "family", str, where),
            architecture=_need(raw, "architecture", str, where),
            layout=layout,
            params_total=total,
            params_active=active,
            license=_need(raw, "license", str, where),
            tags=tuple(_need(raw, "tags", list, where)),
            release=_need(raw, "release", str, where),
            hparams=hp,
            hparams_source=_need(raw, "hparams_source", str, where),
            quality=quality,
            gguf=tuple(sources),
        )
    except (TypeError, ValueError) as e:
        raise BadInputError(f"Catalog entry {where} is malformed: {e}.") from e


def parse_catalog(doc: Any) -> tuple[CatalogModel, ...]:
    """Validate a parsed catalog document; BadInputError names the first bad entry."""
    if not isinstance(doc, dict) or not isinstance(doc.get("models"), list):
        raise BadInputError("The model catalog has no 'models' list.")
    models = tuple(_parse_entry(raw, i) for i, raw in enumerate(doc["models"]))
    seen: set[str] = set()
    for mdl in models:
        if mdl.id in seen:
            raise BadInputError(f"Catalog entry {mdl.id!r} appears twice.")
        seen.add(mdl.id)
    return models


@functools.cache
def load_catalog() -> tuple[CatalogModel, ...]:
    """Every model in the packaged catalog (read once)."""
    path = resources.files("rooflight.resources") / _RESOURCE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise BadInputError(f"The model catalog {_RESOURCE} cannot be read: {e}.") from e
    return parse_catalog(doc)


def find_model(model_id: str) -> CatalogModel | None:
    """The catalog entry with this id (case-insensitive), or None."""
    key = model_id.strip().lower()
    return next((mdl for mdl in load_catalog() if mdl.id == key), None)
