"""Rooflight: which local LLM will really run on this machine, and how fast."""

__version__ = "0.1.0"
