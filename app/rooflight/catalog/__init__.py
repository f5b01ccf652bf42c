"""Curated catalog of local LLMs: hyper-parameters, GGUF sources and a quality figure."""

from rooflight.catalog.models import (
    CatalogModel,
    GGUFSource,
    HParams,
    Quality,
    find_model,
    load_catalog,
    parse_catalog,
)

__all__ = [
    "CatalogModel",
    "GGUFSource",
    "HParams",
    "Quality",
    "find_model",
    "load_catalog",
    "parse_catalog",
]
