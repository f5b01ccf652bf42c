"""What a weight quantization costs in quality: the published table, in one place.

llama.cpp tools/perplexity README, Llama-3-8B on wikitext-2 (REFERENCE.md §2): increase
in perplexity and mean KL divergence against F16. The advisor quotes only these rows;
the catalog's ranking (catalog/quality.py) adds its own figures for the labels the README
has no row for, since a ranking needs one for every file it lists, but those are not
measurements and are never quoted as such.
"""

from __future__ import annotations

QUANT_SOURCE = "llama.cpp tools/perplexity README (Llama-3-8B, wikitext-2; larger models lose less)"
QUANT_DPPL = {
    "F32": 0.0, "F16": 0.0, "BF16": 0.0,
    "Q8_0": 0.0027, "Q6_K": 0.022, "Q5_K_M": 0.057, "Q5_K_S": 0.105, "Q4_K_M": 0.175,
    "Q4_K_S": 0.269, "IQ4_XS": 0.228, "Q4_0": 0.469, "Q3_K_L": 0.556, "Q3_K_M": 0.657,
    "IQ3_M": 0.667, "IQ3_XXS": 1.23, "Q3_K_S": 1.63, "IQ2_M": 2.37, "Q2_K": 3.52,
    "IQ2_XXS": 7.86, "IQ1_M": 19.3, "IQ1_S": 52.0,
}
QUANT_KLD_PUBLISHED = {
    "F32": 0.0, "F16": 0.0, "BF16": 0.0,
    "Q8_0": 0.0014, "Q6_K": 0.0055, "Q5_K_M": 0.011, "Q5_K_S": 0.017, "Q4_K_M": 0.031,
    "Q4_K_S": 0.043, "IQ4_XS": 0.036, "Q4_0": 0.072, "Q3_K_L": 0.087, "Q3_K_M": 0.102,
    "IQ3_M": 0.103, "IQ3_XXS": 0.184, "Q3_K_S": 0.228, "IQ2_M": 0.326, "Q2_K": 0.445,
    "IQ2_XXS": 0.812, "IQ1_M": 1.39, "IQ1_S": 2.21,
}
