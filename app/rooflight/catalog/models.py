"""The curated model catalog (resources/catalog.json): what people run locally, by name.

Each entry carries the published hyper-parameters of the model, so a ModelSpec (and hence
exact file and memory sizes, by llama.cpp's quant recipe) can be built for any quantization
before a GGUF header has been downloaded, and the repositories that publish GGUF files of it.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
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
    "QualityIndex",
    "find_model",
    "load_catalog",
    "parse_catalog",
]


@dataclass(frozen=True)
class GGUFSource:
    """One Hub repository publishing GGUF files of a model: quant type -> file name.

    A file name ending in "/" is a folder of split shards; a name "...-00001-of-0000N.gguf"
    is the first part of a split file. `sizes` are the published sizes (bytes) where the
    file listing or model card gave them; `source` says where the names were checked and
    `checked` whether they were (False: named by the repository's pattern, to be confirmed
    by `python -m rooflight.catalog.refresh`). `untied_output`: the repository's files carry
    an output tensor although the model ties it to the embedding (their converters wrote it).
    `mmproj`: vision projector files, precision -> file name.
    """

    repo: str
    files: Mapping[str, str]
    sizes: Mapping[str, int] = field(default_factory=dict)
    source: str = ""
    checked: bool = True
    untied_output: bool = False
    mmproj: Mapping[str, str] = field(default_factory=dict)

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
    # config.json's layer_types where it lists them ("sliding_attention"/"full_attention"):
    # the interleaving as configured, which wins over swa_pattern
    layer_types: tuple[str, ...] = ()
    # config.json fields kept verbatim (original key names) for architectures the
    # estimator does not model yet (hybrid recurrent/SSM, per-layer embeddings, ...)
    config: Mapping[str, Any] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.n_layer, self.n_embd, self.n_head, self.n_ff, self.n_vocab, self.layer_types))

    def swa_layers(self) -> tuple[bool, ...]:
        """Per layer: True where the layer uses the sliding window."""
        if not self.sliding_window:
            return ()
        if self.layer_types:
            return tuple(t == "sliding_attention" for t in self.layer_types)
        if not self.swa_pattern:
            return ()
        p = self.swa_pattern
        return tuple((il % p) < p - 1 for il in range(self.n_layer))


@dataclass(frozen=True)
class QualityIndex:
    """A model's score on the second index (quality.INDEX_NAME), mapped onto quality.SCALE
    where the model has no figure of its own there."""

    name: str
    score: float
    source: str


@dataclass(frozen=True)
class Quality:
    """A model's figure on the catalog's one quality scale (quality.SCALE), or, with
    score None, the stated prior it ranks by instead (`prior`: "size" or "successor:ID")
    unless it has a score on the second index (`index`), mapped onto the scale."""

    score: float | None
    benchmark: str
    source: str
    prior: str = "size"
    note: str = ""
    index: QualityIndex | None = None


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
    release_source: str = ""  # where the release month comes from, where not the config's source
    native_quant: str | None = None  # the format the model was released in (gpt-oss: MXFP4)
    source_url: str = ""  # the page the entry's facts were checked against

    @property
    def is_moe(self) -> bool:
        return self.hparams.n_expert > 0

    @property
    def quants(self) -> tuple[str, ...]:
        """Quant types some source publishes, from fewest to most bits (quant_order)."""
        have = {q for s in self.gguf for q in s.files}
        return tuple(sorted(have, key=quant_order))

    def published_size(self, quant: str) -> tuple[int, str] | None:
        """(bytes, repo) of this quant's file -- the one file_for names -- where its size
        was published."""
        src = next((s for s in self.gguf if quant in s.files), None)
        if src is not None and src.sizes.get(quant):
            return src.sizes[quant], src.repo
        return None

    def sizable(self, quant: str) -> bool:
        """Whether an estimate can size this quant before its header is read: the size
        recipe knows it, or its published file size is known."""
        return quant in FILE_TYPES or self.published_size(quant) is not None

    def file_for(self, quant: str) -> tuple[str, str]:
        """(repo, file name) of the first source publishing this quant type."""
        quant = quant.upper()
        for s in self.gguf:
            if quant in s.files:
                return s.repo, s.files[quant]
        raise BadInputError(
            f"{self.id} has no {quant} file in the catalog; available: {', '.join(self.quants)}."
        )

    def untied_in(self, quant: str) -> bool:
        """Whether the file this quant is downloaded from carries its own output tensor."""
        src = next((s for s in self.gguf if quant in s.files), None)
        return bool(src and src.untied_output)

    def spec(self, quant: str) -> ModelSpec:
        """The model's tensors and sizes at this quantization, from its hyper-parameters,
        resized to the file's published size where one is known. A quant the size recipe
        does not know (MXFP4, NVFP4, IQ4_XS, Q3_K_M...) is built at the nearest known recipe
        and resized; without a published size it cannot be sized (BadInputError)."""
        quant = quant.upper()
        published = self.published_size(quant)
        if quant not in FILE_TYPES and published is None:
            raise BadInputError(f"Unknown quantization {quant!r} for {self.id}: no published file size "
                                f"and the size recipe knows only {', '.join(FILE_TYPES)}.")
        computed = self._computed(proxy_quant(quant), untied=self.untied_in(quant))
        if published is None:
            return computed
        from rooflight.catalog.hub_specs import resize_spec

        return resize_spec(computed, published[0], quant=quant)

    def _computed(self, quant: str, *, untied: bool = False) -> ModelSpec:
        from rooflight.catalog.arch_support import spec_builder

        builder = spec_builder(self)
        if builder is not None:  # an architecture with its own layers (arch_support.py)
            return builder(self, quant)
        h = self.hparams
        # gpt-oss files keep every expert in MXFP4 whatever their label (its quantizers say so
        # on the model cards): the released recipe, resized to the file's published size
        ftype = "MXFP4_MOE" if self.layout == "gpt-oss" else quant
        return spec_from_hparams(
            name=self.id, arch=self.layout, ftype=ftype, n_layer=h.n_layer, n_embd=h.n_embd,
            n_head=h.n_head, n_head_kv=h.n_head_kv, n_ff=h.n_ff, n_vocab=h.n_vocab,
            context_length=h.context_length, head_dim=h.head_dim, n_expert=h.n_expert,
            n_expert_used=h.n_expert_used, sliding_window=h.sliding_window,
            swa_layers=h.swa_layers(), tie_embeddings=h.tie_embeddings and not untied,
        )


_RESOURCE = "catalog.json"

# Quant labels publishers use, from fewest to most bits (ties: alphabetical). Labels
# outside the size recipe (FILE_TYPES) are sized from their published file size.
_QUANT_ORDER = (
    "IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "Q2_K", "Q2_K_L", "IQ3_XXS", "IQ3_XS",
    "IQ3_S", "IQ3_M", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q3_K_XL", "IQ4_XS", "IQ4_NL", "Q4_0", "MXFP4",
    "NVFP4", "Q4_K_S", "Q4_1", "Q4_K_M", "Q4_K_L", "Q4_K_XL", "Q5_0", "Q5_K_S", "Q5_1", "Q5_K_M",
    "Q5_K_L", "Q5_K_XL", "Q6_K", "Q6_K_L", "Q6_K_XL", "Q8_0", "Q8_K_XL", "BF16", "F16", "F32",
)
_QUANT_LABEL = re.compile(r"^(?:IQ[1-4]_(?:XXS|XS|NL|S|M)|Q[2-8]_K(?:_(?:XL|L|M|S))?|Q[4-8]_[01]|MXFP4|NVFP4|BF16|F16|F32)$")
# the size recipe's nearest known quant for a label it does not know (before resizing)
_PROXY = {"MXFP4": "Q4_K_M", "NVFP4": "Q4_K_M", "IQ4_XS": "Q4_K_S", "IQ4_NL": "Q4_K_S",
          "Q2_K": "Q4_0", "Q2_K_L": "Q4_0", "Q3_K_S": "Q4_0", "Q3_K_M": "Q4_0", "Q3_K_L": "Q4_0",
          "Q3_K_XL": "Q4_0", "Q4_K_L": "Q4_K_M", "Q4_K_XL": "Q4_K_M", "Q5_K_L": "Q5_K_M",
          "Q5_K_XL": "Q5_K_M", "Q6_K_L": "Q6_K", "Q6_K_XL": "Q6_K", "Q8_K_XL": "Q8_0"}


def quant_order(quant: str) -> tuple[int, str]:
    """Sort key: fewest bits first; unknown labels last."""
    q = quant.upper()
    return (_QUANT_ORDER.index(q) if q in _QUANT_ORDER else len(_QUANT_ORDER), q)


def proxy_quant(quant: str) -> str:
    q = quant.upper()
    if q in FILE_TYPES:
        return q
    return _PROXY.get(q, "Q4_0" if q.startswith(("IQ1", "IQ2", "IQ3")) else "Q8_0")


def is_quant_label(quant: str) -> bool:
    return bool(_QUANT_LABEL.match(quant))


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
            layer_types=tuple(h.get("layer_types") or ()),
            config=dict(h.get("config") or {}),
        )
        if hp.layer_types and len(hp.layer_types) != hp.n_layer:
            raise BadInputError(f"Catalog entry {where}: layer_types lists {len(hp.layer_types)} layers, "
                                f"n_layer is {hp.n_layer}.")
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
            score = q.get("score")
            if score is not None and (isinstance(score, bool) or not isinstance(score, num)):
                raise BadInputError(f"Catalog entry {where}: quality score must be a number or null.")
            prior = q.get("prior", "size")
            if not isinstance(prior, str) or not (prior == "size" or prior.startswith("successor:")):
                raise BadInputError(f"Catalog entry {where}: quality prior must be 'size' or 'successor:ID'.")
            quality_index = None
            if q.get("index") is not None:
                ix = q["index"]
                if not isinstance(ix, dict) or isinstance(ix.get("score"), bool) \
                        or not isinstance(ix.get("score"), num):
                    raise BadInputError(f"Catalog entry {where}: quality index must be an object with a number score.")
                quality_index = QualityIndex(_need(ix, "name", str, where), float(ix["score"]),
                                             _need(ix, "source", str, where))
            quality = Quality(None if score is None else float(score), _need(q, "benchmark", str, where),
                              _need(q, "source", str, where), prior, str(q.get("note", "")), quality_index)
        sources = []
        for s in _need(raw, "gguf", list, where):
            if not isinstance(s, dict):
                raise BadInputError(f"Catalog entry {where}: each gguf source must be an object.")
            files = _need(s, "files", dict, where)
            for qt, fn in files.items():
                if not is_quant_label(qt) or not isinstance(fn, str) or not fn:
                    raise BadInputError(f"Catalog entry {where}: bad gguf file entry {qt!r}.")
            sizes = s.get("sizes") or {}
            for qt, n in sizes.items():
                if qt not in files or isinstance(n, bool) or not isinstance(n, int) or n <= 0:
                    raise BadInputError(f"Catalog entry {where}: bad published size for {qt!r}.")
            mmproj = s.get("mmproj") or {}
            if not isinstance(mmproj, dict) or not all(isinstance(v, str) and v for v in mmproj.values()):
                raise BadInputError(f"Catalog entry {where}: mmproj must map a precision to a file name.")
            sources.append(GGUFSource(
                _need(s, "repo", str, where), dict(files), dict(sizes), str(s.get("source", "")),
                bool(s.get("checked", True)), bool(s.get("untied_output", False)), dict(mmproj),
            ))
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
            release_source=str(raw.get("release_source", "")),
            native_quant=raw.get("native_quant") or None,
            source_url=str(raw.get("source_url", "")),
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


@functools.cache
def _packaged_ids() -> frozenset[int]:
    return frozenset(id(m) for m in load_catalog())


def is_packaged(model: CatalogModel) -> bool:
    """Whether this entry is the packaged catalog's own (not a caller's catalog of the
    same ids): what the spec cache keeps on disk (catalog/spec_cache.py)."""
    return id(model) in _packaged_ids()


def find_model(model_id: str) -> CatalogModel | None:
    """The catalog entry with this id (case-insensitive), or None."""
    key = model_id.strip().lower()
    return next((mdl for mdl in load_catalog() if mdl.id == key), None)
