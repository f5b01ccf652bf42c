"""Where a plan puts the model: one enum for the four fit states.

A StrEnum member *is* its string ("full_gpu" == Fit.FULL_GPU, and JSON writes the
string), so CONTRACT.md's `fit` values, the stores and every comparison with the plain
strings stay as they were; code that keys a table by fit state keys it by Fit.
"""

from __future__ import annotations

from enum import StrEnum


class Fit(StrEnum):
    FULL_GPU = "full_gpu"  # every layer, the output layer included, on the GPU(s)
    PARTIAL_GPU = "partial_gpu"  # some layers on the GPU(s), the rest on the CPU
    CPU_ONLY = "cpu_only"  # no layer on a GPU: runs from RAM
    TOO_LARGE = "too_large"  # does not fit in memory at this context

    @property
    def rank(self) -> int:
        """How good a fit: too_large 0, cpu_only 1, partial_gpu 2, full_gpu 3."""
        return _RANK[self]

    @property
    def badge(self) -> str:
        """The short words of a fit badge ("full GPU")."""
        return _BADGE[self]

    @property
    def label(self) -> str:
        """The fit in a few more words ("full GPU offload")."""
        return _LABEL[self]


_RANK = {Fit.TOO_LARGE: 0, Fit.CPU_ONLY: 1, Fit.PARTIAL_GPU: 2, Fit.FULL_GPU: 3}
_BADGE = {Fit.FULL_GPU: "full GPU", Fit.PARTIAL_GPU: "partial GPU", Fit.CPU_ONLY: "CPU only",
          Fit.TOO_LARGE: "too large"}
_LABEL = {Fit.FULL_GPU: "full GPU offload", Fit.PARTIAL_GPU: "partial GPU offload", Fit.CPU_ONLY: "CPU only",
          Fit.TOO_LARGE: "too large for this machine"}
