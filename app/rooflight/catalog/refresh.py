"""Keep the catalog current: `python -m rooflight.catalog.refresh` (a maintainer command).

Online, for every catalog entry and each of its GGUF repositories, it asks the Hub (through
huggingface_hub, so HF_ENDPOINT / HF_TOKEN apply; hub.list_gguf_files) for the files, their
exact sizes and sha256, and reads one header per repository (hub.hub_spec: a few MB of range
requests) to check the hyper-parameters. It then rewrites the entry:

- each listed quant points at the file that publishes it now (renamed files are followed by
  their quant label; split files name their first part), with its exact size and sha256;
- quants the repository added are listed, quants it removed are dropped (a source that
  loses every file is kept unchanged and reported: a failed listing never empties an entry);
- `checked` becomes true and `source` names the listing it was checked against, and when;
  the vision projectors (`mmproj-*.gguf`) the repository publishes become `mmproj`;
- where the header disagrees with the entry's hyper-parameters (layers, width, heads, KV
  heads, vocabulary, training context, experts), the header wins and the change is
  reported; a header that carries output.weight for a model with tied embeddings marks
  the source `untied_output`.

Nothing is written unless every entry parsed back (parse_catalog) and the file is replaced
atomically; `--dry-run` only reports. Exit 1 when some repository could not be read.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from rooflight.atomic import write_text_atomic
from rooflight.catalog import hub
from rooflight.catalog.models import is_quant_label, parse_catalog, quant_order
from rooflight.errors import RooflightError

# header field -> catalog hparams key, for the checks below
_HEADER_FIELDS = {"n_layer": "n_layer", "n_embd": "n_embd", "n_vocab": "n_vocab",
                  "context_length": "context_length", "n_expert": "n_expert", "n_expert_used": "n_expert_used"}


@dataclass
class RefreshReport:
    changed: dict[str, list[str]] = field(default_factory=dict)  # model id -> what changed
    errors: dict[str, str] = field(default_factory=dict)  # repo -> one sentence
    repos: int = 0
    headers: int = 0

    def note(self, model_id: str, what: str) -> None:
        self.changed.setdefault(model_id, []).append(what)

    def to_dict(self) -> dict[str, Any]:
        return {"repos": self.repos, "headers": self.headers, "changed": self.changed, "errors": self.errors}


def _match(quant: str, name: str, by_name: Mapping[str, hub.HubModelFile]) -> hub.HubModelFile | None:
    if name.endswith("/"):  # a folder of split parts
        hit = next((f for n, f in sorted(by_name.items()) if n.startswith(name)), None)
        if hit is not None:
            return hit
    elif name in by_name:
        return by_name[name]
    return next((f for f in by_name.values() if f.quant == quant), None)


def _refresh_source(entry: dict, src: dict, listing: hub.RepoFiles, today: str, report: RefreshReport) -> None:
    mid = entry["id"]
    by_name = {f.filename: f for f in listing.files if f.complete}
    if not by_name:
        report.errors[src["repo"]] = f"{src['repo']} lists no complete GGUF model file; the entry is kept as it was."
        return
    files: dict[str, str] = {}
    sizes: dict[str, int] = {}
    sha: dict[str, list[str]] = {}
    for quant, name in src["files"].items():
        hit = _match(quant, name, by_name)
        if hit is None:
            report.note(mid, f"{src['repo']}: {quant} ({name}) is gone")
            continue
        if hit.filename != name:
            report.note(mid, f"{src['repo']}: {quant} is now {hit.filename} (was {name})")
        files[quant], sizes[quant] = hit.filename, hit.size
        if all(hit.sha256):
            sha[quant] = [h for h in hit.sha256 if h]  # all present: the guard above
    for f in by_name.values():  # quants the repository added
        q = f.quant
        if q and is_quant_label(q) and q not in files:
            files[q], sizes[q] = f.filename, f.size
            if all(f.sha256):
                sha[q] = [h for h in f.sha256 if h]
            report.note(mid, f"{src['repo']}: added {q} ({f.filename})")
    if not files:
        report.errors[src["repo"]] = f"{src['repo']} no longer publishes any of {mid}'s files; the entry is kept."
        return
    old_sizes = src.get("sizes") or {}
    for q, n in sizes.items():
        if old_sizes.get(q) not in (None, n):
            report.note(mid, f"{src['repo']}: {q} is {n} bytes (was {old_sizes[q]})")
    order = sorted(files, key=quant_order)
    src["files"] = {q: files[q] for q in order}
    src["sizes"] = {q: sizes[q] for q in order}
    src["sha256"] = {q: sha[q] for q in order if q in sha}
    projectors = _projectors(src["repo"])
    if projectors is not None and (projectors or src.get("mmproj")):
        if projectors != (src.get("mmproj") or {}):
            report.note(mid, f"{src['repo']}: vision projectors {sorted(projectors.values()) or 'gone'}")
        if projectors:
            src["mmproj"] = projectors
        else:
            src.pop("mmproj", None)
    src["checked"] = True
    src["source"] = (f"{hub.endpoint()}/api/models/{src['repo']} file listing"
                     f"{' at ' + listing.commit if listing.commit else ''} (refreshed {today})")
    if listing.commit:
        src["revision"] = listing.commit


def _projectors(repo: str) -> dict[str, str] | None:
    """precision -> file of the repository's vision projectors (mmproj-*.gguf), from the
    listing list_gguf_files just stored; None when that listing is not at hand."""
    from rooflight.catalog import hub_cache
    from rooflight.catalog.hub_files import parse_quant

    cached = hub_cache.load("files", hub._files_key(repo, None))
    if cached is None or not isinstance(cached.data, dict):
        return None
    out: dict[str, str] = {}
    for f in cached.data.get("files", ()):
        path = f.get("path", "") if isinstance(f, dict) else ""
        if "mmproj" in path.rsplit("/", 1)[-1].lower():
            out.setdefault(parse_quant(path) or path, path)
    return dict(sorted(out.items()))


def _check_header(entry: dict, src: dict, listing: hub.RepoFiles, report: RefreshReport,
                  read: Callable[[hub.HubModelFile], Any]) -> None:
    name = next(iter(src["files"].values()))
    file = next((f for f in listing.files if f.filename == name), None)
    if file is None:
        return
    spec = read(file)
    report.headers += 1
    h = entry["hparams"]
    for attr, key in _HEADER_FIELDS.items():
        got = getattr(spec, attr)
        if got and h.get(key) != got:
            report.note(entry["id"], f"{key} is {got} in {src['repo']}/{name} (was {h.get(key)})")
            h[key] = got
    heads = max(spec.n_head or (0,))
    kv = [k for k in spec.n_head_kv if k]
    for key, got in (("n_head", heads), ("n_head_kv", kv[0] if kv else 0), ("head_dim", spec.head_dim_k)):
        if got and h.get(key) != got:
            report.note(entry["id"], f"{key} is {got} in {src['repo']}/{name} (was {h.get(key)})")
            h[key] = got
    if h.get("tie_embeddings") and not spec.tied_embeddings and not src.get("untied_output"):
        src["untied_output"] = True
        report.note(entry["id"], f"{src['repo']}: its files carry output.weight (untied)")
    note = f"; checked against the GGUF header of {src['repo']}/{name}"
    if note not in entry["hparams_source"]:
        entry["hparams_source"] = entry["hparams_source"].split("; checked against the GGUF header")[0] + note


def refresh_document(doc: Mapping[str, Any], *, only: set[str] | None = None, headers: bool = True,
                     progress: Callable[[str], None] | None = None,
                     read: Callable[[hub.HubModelFile], Any] = hub.hub_spec) -> tuple[dict, RefreshReport]:
    """A refreshed copy of the catalog document and what changed. Asks the Hub afresh
    (max_age 0) once per repository."""
    new = copy.deepcopy(dict(doc))
    report = RefreshReport()
    today = datetime.date.today().isoformat()
    listings: dict[str, hub.RepoFiles | None] = {}
    for entry in new["models"]:
        if only and entry["id"] not in only:
            continue
        for src in entry["gguf"]:
            repo = src["repo"]
            if repo not in listings:
                if progress:
                    progress(repo)
                try:
                    listings[repo] = hub.list_gguf_files(repo, max_age=0)
                    report.repos += 1
                except RooflightError as e:
                    listings[repo] = None
                    report.errors[repo] = str(e)
            listing = listings[repo]
            if listing is None or listing.offline:
                if listing is not None:
                    report.errors[repo] = f"{repo}: the Hub could not be asked (offline); the entry is kept."
                continue
            _refresh_source(entry, src, listing, today, report)
            if headers and repo not in report.errors:
                try:
                    _check_header(entry, src, listing, report, read)
                except RooflightError as e:
                    report.errors[f"{repo} (header)"] = str(e)
    parse_catalog(new)  # never write what the app could not read back
    return new, report


def _packaged_catalog() -> Path:
    return Path(str(resources.files("rooflight.resources") / "catalog.json"))


def _write_atomic(path: Path, doc: Mapping[str, Any]) -> None:
    write_text_atomic(path, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rooflight.catalog.refresh",
                                description="Re-read every catalog entry's GGUF files, sizes, sha256 and "
                                            "headers from the Hub and rewrite the catalog.")
    p.add_argument("--catalog", type=Path, default=None, help="catalog JSON to refresh (default: the packaged one)")
    p.add_argument("--output", type=Path, default=None, help="where to write (default: over --catalog)")
    p.add_argument("--only", help="comma-separated catalog ids")
    p.add_argument("--no-headers", action="store_true", help="file lists only, no header reads")
    p.add_argument("--dry-run", action="store_true", help="report, write nothing")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    args = p.parse_args(argv)
    path = args.catalog or _packaged_catalog()
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        only = {s.strip() for s in args.only.split(",")} if args.only else None
        new, report = refresh_document(doc, only=only, headers=not args.no_headers,
                                       progress=None if args.json else lambda r: print(f"  {r}", file=sys.stderr))
    except (OSError, ValueError) as e:
        print(f"rooflight: cannot read the catalog {path}: {e}", file=sys.stderr)
        return 2
    except RooflightError as e:
        print(f"rooflight: {e}", file=sys.stderr)
        return 1
    if not args.dry_run:
        _write_atomic(args.output or path, new)
    if args.json:
        print(json.dumps(report.to_dict(), indent=1))
    else:
        for mid, what in report.changed.items():
            print(f"{mid}: " + "; ".join(what))
        for repo, why in report.errors.items():
            print(f"error: {repo}: {why}", file=sys.stderr)
        print(f"{report.repos} repositories listed, {report.headers} headers read, "
              f"{len(report.changed)} entries changed{' (dry run: nothing written)' if args.dry_run else ''}.")
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
