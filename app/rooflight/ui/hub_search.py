"""The Models page's live Hub search: catalog.hub_rank.search_and_rank behind the page's
search-provider hook (pages/models.py: provider(query, hardware, n_ctx), run in a worker).

Results are ranked for the machine in use exactly like catalog entries (one real header
read remotely per repository, the other quants resized from it). When the Hub cannot be
asked (offline mode, no network) the answers come from the on-disk cache of earlier
searches and a banner says so; with nothing cached the search fails with one sentence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rooflight.catalog.rank import RankedModel

SEARCH_LIMIT = 10  # repositories per search: each costs a file listing and a header read


def offline_sentence(query: str) -> str:
    from rooflight.catalog.hub import offline_reason

    why = offline_reason() or "the Hub could not be asked"
    return (f"Offline: the Hub results for {query!r} come from the cache of earlier searches "
            f"({why}), so they may be out of date.")


def skipped_sentence(skipped: Sequence[tuple[str, str]]) -> str:
    why = skipped[0][1]  # each reason names its repository
    if len(skipped) == 1:
        return f"One Hub result is not shown: {why}"
    return f"{len(skipped)} Hub results are not shown, for example: {why}"


def make_search_provider(ctx) -> Callable[[str, object, int], list[RankedModel]]:
    """A provider for ModelsPage.set_search_provider over ctx (its machine and messages)."""

    def search(query: str, hardware, n_ctx: int) -> list[RankedModel]:
        # worker thread: only plain reads of ctx, and signals (queued to the GUI thread)
        from rooflight.catalog.hub_rank import search_and_rank

        machine = ctx.machine
        calibration = machine.calibration if hardware is machine.profile else None
        ranking = search_and_rank(query, hardware, ctx=n_ctx, limit=SEARCH_LIMIT, calibration=calibration)
        if ranking.offline:
            ctx.message.emit("warning", offline_sentence(query))
        if ranking.skipped:
            ctx.message.emit("info", skipped_sentence(ranking.skipped))
        return list(ranking.models)

    return search
