"""gguf/quant_recipe.py: its ggml type ids, block sizes and file types are ggml's (as the
gguf package carries them), and it stays free of numpy and the gguf package, so that
`rooflight rank` does not import them."""

import subprocess
import sys

import gguf

from rooflight.gguf.quant_recipe import (
    FILE_TYPES,
    GGML_BLOCK_SIZES,
    FileType,
    GGMLType,
    plan_tensors,
)


def test_type_ids_and_block_sizes_are_ggmls():
    for t in GGMLType:
        theirs = gguf.GGMLQuantizationType[t.name]
        assert t.value == theirs.value and GGML_BLOCK_SIZES[t] == gguf.GGML_QUANT_SIZES[theirs]
    for f in FileType:
        assert f.value == gguf.LlamaFileType[f.name].value
    assert set(GGML_BLOCK_SIZES) == set(GGMLType)


def test_the_recipes_types_compare_equal_to_the_gguf_packages():
    # the writer and the tests hand these to the gguf package: same ids, same names
    plans = plan_tensors(arch="llama", ftype="Q4_K_M", n_layer=2, n_embd=256, n_head=4, n_head_kv=2,
                         head_dim=64, n_ff=512, n_vocab=512)
    for p in plans:
        assert p.qtype == gguf.GGMLQuantizationType[p.qtype.name]
    assert {ft for ft, _ in FILE_TYPES.values()} <= set(FileType)


def test_ranking_the_catalog_imports_neither_numpy_nor_the_gguf_package():
    code = ("import sys\n"
            "from rooflight.catalog.rank import rank_models\n"
            "from rooflight.hardware import profile_from_dict\n"
            "hw = profile_from_dict({'cpu': {'cores': 4, 'ram_total_bytes': 16 << 30,"
            " 'ram_bandwidth_gbs': 20.0}}, measure_bandwidth=False)\n"
            "assert rank_models(hw)\n"
            "print(sorted(m for m in ('numpy', 'gguf', 'llama_cpp') if m in sys.modules))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_fallback_types_follow_llama_quants_table():
    """tensor_type_fallback() in llama-quant.cpp (llama-cpp-python 0.3.36): 256-block types
    whose rows a block does not divide fall back to a 32-block type, a 32-block type keeps
    itself, and F16 is left where neither fits; one table serves the recipe and the Hub's
    resized files (catalog/hub_specs.py)."""
    from rooflight.gguf.quant_recipe import fallback_type

    assert [fallback_type(t, 2880) for t in ("Q4_K", "Q5_K", "Q6_K", "Q3_K", "IQ2_XS", "IQ4_XS", "MXFP4", "Q8_0")] \
        == ["Q5_0", "Q5_1", "Q8_0", "Q4_0", "IQ4_NL", "IQ4_NL", "MXFP4", "Q8_0"]
    assert fallback_type("Q4_K", 4096) == "Q4_K"
    assert fallback_type("Q4_K", 100) == fallback_type("MXFP4", 100) == "F16"
