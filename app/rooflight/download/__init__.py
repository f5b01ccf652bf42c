"""Resumable, verified downloads into the Hugging Face cache (issue 4).

    download_model(repo, file)        one download, synchronous (CLI, worker threads)
    DownloadQueue(on_event)           several, N at a time, pause/resume/cancel/retry (GUI)
    rooflight.store.installed         what is installed, and removing it

Modules: hubfile (what to fetch, Hub errors as sentences), diskspace, transfer (the
resumable GET), verify (sha256), cache (huggingface_hub's cache layout), job, queue,
progress, control.
"""

from .control import DownloadControl, DownloadStopped
from .job import DownloadResult, discard_partial, download_model
from .progress import Progress
from .queue import DownloadEvent, DownloadJob, DownloadQueue, JobState
from .transfer import RetryPolicy

__all__ = [
    "DownloadControl",
    "DownloadEvent",
    "DownloadJob",
    "DownloadQueue",
    "DownloadResult",
    "DownloadStopped",
    "JobState",
    "Progress",
    "RetryPolicy",
    "discard_partial",
    "download_model",
]
