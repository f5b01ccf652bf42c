"""The project's own errors: each carries one sentence a user can act on.

The CLI maps them to exit codes (CONTRACT.md): BadInput -> 2, OperationFailed -> 1.
"""


class RooflightError(Exception):
    """Base class; str(error) is the one-sentence message shown to the user."""

    exit_code = 1


class BadInputError(RooflightError):
    """An unreadable file, a malformed profile or GGUF header, a bad option value."""

    exit_code = 2


class OperationFailedError(RooflightError):
    """Something that should have worked did not (network, disk, llama.cpp)."""

    exit_code = 1


class EstimateUnavailableError(BadInputError):
    """A model whose architecture Rooflight cannot size (estimate/support.py)."""

    def __init__(self, message: str, architecture: str) -> None:
        super().__init__(message)
        self.architecture = architecture
