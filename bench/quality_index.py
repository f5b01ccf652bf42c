"""The second quality index (LMArena text score) mapped onto the Open LLM Leaderboard v2 scale.

    .venv/bin/python bench/quality_index.py                  # the fit and its held-out error
    .venv/bin/python bench/quality_index.py --build ARENA_JSON OLLB_HTML   # rebuild the overlap

The overlap (bench/data/quality_index_overlap.json) is every model with both figures: its
LMArena text score (lmarena/arena-catalog data/leaderboard-text.json, category "full") and
its Open LLM Leaderboard v2 average with the parameter count the leaderboard lists (the
chenjy16/modelrank_ai docs/index.html export the catalog's figures come from). Models are
matched by hand, one arena name to one Hub repo, only where both name the same release and
variant (instruct/chat, same size); a repo the export lists twice is averaged. --build needs
the two files from mirrors of those repositories; without it the stored overlap is refitted
with quality.index_fit, the fit tests/test_catalog_quality.py checks quality.INDEX_* against.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from rooflight.catalog import quality as q

DATA = Path(__file__).resolve().parent / "data" / "quality_index_overlap.json"
ARENA_COMMIT = "c9558b60647217fafa878cb7ee14f8f43c355594"
OLLB_COMMIT = "2c9830dc3f370334eba9a1b48e7d02b918102811"

# arena name -> Hub repo of the same release and variant on the leaderboard export
MATCH = {
    "llama-3.2-1b-instruct": "meta-llama/Llama-3.2-1B-Instruct",
    "llama-3.2-3b-instruct": "meta-llama/Llama-3.2-3B-Instruct",
    "llama-3.1-8b-instruct": "meta-llama/Llama-3.1-8B-Instruct",
    "llama-3.3-70b-instruct": "meta-llama/Llama-3.3-70B-Instruct",
    "llama-3.1-70b-instruct": "meta-llama/Llama-3.1-70B-Instruct",
    "llama-3-70b-instruct": "meta-llama/Meta-Llama-3-70B-Instruct",
    "llama-3-8b-instruct": "meta-llama/Meta-Llama-3-8B-Instruct",
    "llama-2-70b-chat": "meta-llama/Llama-2-70b-chat-hf",
    "llama-2-13b-chat": "meta-llama/Llama-2-13b-chat-hf",
    "llama-2-7b-chat": "meta-llama/Llama-2-7b-chat-hf",
    "qwen2.5-72b-instruct": "Qwen/Qwen2.5-72B-Instruct",
    "qwen2.5-coder-32b-instruct": "Qwen/Qwen2.5-Coder-32B-Instruct",
    "qwen2-72b-instruct": "Qwen/Qwen2-72B-Instruct",
    "qwen1.5-110b-chat": "Qwen/Qwen1.5-110B-Chat",
    "qwen1.5-32b-chat": "Qwen/Qwen1.5-32B-Chat",
    "qwen1.5-14b-chat": "Qwen/Qwen1.5-14B-Chat",
    "qwen1.5-7b-chat": "Qwen/Qwen1.5-7B-Chat",
    "qwen1.5-4b-chat": "Qwen/Qwen1.5-4B-Chat",
    "qwq-32b-preview": "Qwen/QwQ-32B-Preview",
    "qwq-32b": "Qwen/QwQ-32B",
    "gemma-2-27b-it": "google/gemma-2-27b-it",
    "gemma-2-9b-it": "google/gemma-2-9b-it",
    "gemma-2-2b-it": "google/gemma-2-2b-it",
    "gemma-1.1-7b-it": "google/gemma-1.1-7b-it",
    "gemma-1.1-2b-it": "google/gemma-1.1-2b-it",
    "gemma-7b-it": "google/gemma-7b-it",
    "gemma-2b-it": "google/gemma-2b-it",
    "gemma-2-9b-it-simpo": "princeton-nlp/gemma-2-9b-it-SimPO",
    "mistral-large-2411": "mistralai/Mistral-Large-Instruct-2411",
    "mistral-7b-instruct-v0.2": "mistralai/Mistral-7B-Instruct-v0.2",
    "mistral-7b-instruct": "mistralai/Mistral-7B-Instruct-v0.1",
    "mixtral-8x7b-instruct-v0.1": "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "mixtral-8x22b-instruct-v0.1": "mistralai/Mixtral-8x22B-Instruct-v0.1",
    "ministral-8b-2410": "mistralai/Ministral-8B-Instruct-2410",
    "phi-4": "microsoft/phi-4",
    "phi-3-medium-4k-instruct": "microsoft/Phi-3-medium-4k-instruct",
    "phi-3-small-8k-instruct": "microsoft/Phi-3-small-8k-instruct",
    "phi-3-mini-4k-instruct": "microsoft/Phi-3-mini-4k-instruct",
    "phi-3-mini-128k-instruct": "microsoft/Phi-3-mini-128k-instruct",
    "granite-3.1-8b-instruct": "ibm-granite/granite-3.1-8b-instruct",
    "granite-3.1-2b-instruct": "ibm-granite/granite-3.1-2b-instruct",
    "granite-3.0-8b-instruct": "ibm-granite/granite-3.0-8b-instruct",
    "granite-3.0-2b-instruct": "ibm-granite/granite-3.0-2b-instruct",
    "smollm2-1.7b-instruct": "HuggingFaceTB/SmolLM2-1.7B-Instruct",
    "olmo-7b-instruct": "allenai/OLMo-7B-Instruct-hf",
    "llama-3.1-nemotron-70b-instruct": "nvidia/Llama-3.1-Nemotron-70B-Instruct-HF",
    "llama-3.1-tulu-3-8b": "allenai/Llama-3.1-Tulu-3-8B",
    "llama-3.1-tulu-3-70b": "allenai/Llama-3.1-Tulu-3-70B",
    "c4ai-aya-expanse-8b": "CohereForAI/aya-expanse-8b",
    "c4ai-aya-expanse-32b": "CohereForAI/aya-expanse-32b",
    "command-r-plus": "CohereForAI/c4ai-command-r-plus",
    "command-r": "CohereForAI/c4ai-command-r-v01",
    "command-r-plus-08-2024": "CohereForAI/c4ai-command-r-plus-08-2024",
    "yi-34b-chat": "01-ai/Yi-34B-Chat",
    "yi-1.5-34b-chat": "01-ai/Yi-1.5-34B-Chat",
    "solar-10.7b-instruct-v1.0": "upstage/SOLAR-10.7B-Instruct-v1.0",
    "zephyr-7b-beta": "HuggingFaceH4/zephyr-7b-beta",
    "zephyr-7b-alpha": "HuggingFaceH4/zephyr-7b-alpha",
    "starling-lm-7b-alpha": "berkeley-nest/Starling-LM-7B-alpha",
    "openchat-3.5-0106": "openchat/openchat-3.5-0106",
    "openchat-3.5": "openchat/openchat_3.5",
    "openhermes-2.5-mistral-7b": "teknium/OpenHermes-2.5-Mistral-7B",
    "nous-hermes-2-mixtral-8x7b-dpo": "NousResearch/Nous-Hermes-2-Mixtral-8x7B-DPO",
    "internlm2_5-20b-chat": "internlm/internlm2_5-20b-chat",
    "vicuna-7b": "lmsys/vicuna-7b-v1.5",
}


def _leaderboard_rows(html: str) -> dict[str, list[tuple[float, float]]]:
    """repo -> [(average, parameters B)] from the export's table (Rank, Model, Average, Params, ...)."""
    out: dict[str, list[tuple[float, float]]] = {}
    for row in re.findall(r"<tr>(.*?)</tr>", html, re.S):
        cells = re.findall(r"<td>(.*?)</td>", row, re.S)
        repo = re.search(r'huggingface\.co/([^"]+)"', cells[1]) if len(cells) > 3 else None
        if repo is None:
            continue
        text = [re.sub(r"<.*?>", "", c).strip() for c in cells]
        try:
            out.setdefault(repo.group(1), []).append((float(text[2]), float(text[3])))
        except ValueError:
            continue
    return out


def build(arena_path: str, ollb_path: str) -> dict:
    arena = json.loads(Path(arena_path).read_text())["full"]
    board = _leaderboard_rows(Path(ollb_path).read_text())
    rows = []
    for name, repo in MATCH.items():
        if name not in arena or repo not in board:
            raise SystemExit(f"{name} / {repo}: missing from the sources")
        figs = board[repo]
        rows.append({"arena": name, "arena_score": round(arena[name]["rating"], 1), "repo": repo,
                     "leaderboard": round(sum(a for a, _ in figs) / len(figs), 2),
                     "params_b": figs[0][1], "leaderboard_rows": len(figs)})
    return {"index": q.INDEX_NAME,
            "index_source": f"lmarena/arena-catalog data/leaderboard-text.json (commit {ARENA_COMMIT[:7]}), "
                            "category full, field rating",
            "leaderboard_source": f"Open LLM Leaderboard v2 average and Parameters(B) as exported in "
                                  f"chenjy16/modelrank_ai docs/index.html (commit {OLLB_COMMIT[:7]}); a repo "
                                  "listed twice is averaged",
            "models": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", nargs=2, metavar=("ARENA_JSON", "OLLB_HTML"))
    args = ap.parse_args(argv)
    if args.build:
        doc = build(*args.build)
        DATA.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {DATA} ({len(doc['models'])} models)")
    doc = json.loads(DATA.read_text())
    fit = q.index_fit(doc["models"])
    print(f"overlap: {fit['n']} models with both figures ({q.INDEX_NAME}; {q.SCALE})")
    print(f"mapping: {fit['a']:.3f} + {fit['b']:.5f} x score + {fit['c']:.3f} x log2(params B)")
    print(f"held-out (leave-one-out) RMSE: mapping {fit['loo_rmse']:.2f}; index alone "
          f"{fit['loo_rmse_index_only']:.2f}; size alone {fit['loo_rmse_size_only']:.2f} points")
    print(f"index range of the overlap: {fit['x_min']:.0f}..{fit['x_max']:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
