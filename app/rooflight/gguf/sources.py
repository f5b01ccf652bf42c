"""Byte sources: the one thing the header parser reads from.

A source answers `read(offset, n)` with up to `n` bytes (fewer only at the end of the
file) and knows the file's total size once it has been asked for something. The parser
never sees whether the bytes come from a local file or from HTTP range requests, so a
remote header read and a local one run exactly the same, bounded code.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from rooflight.errors import BadInputError, OperationFailedError


class ByteSource(Protocol):
    name: str  # how messages name the file: "model.gguf", "hf:owner/repo/model.gguf"

    @property
    def size(self) -> int | None:
        """Total file size in bytes; None until the first read for remote sources."""

    def read(self, offset: int, n: int) -> bytes:
        """Up to n bytes starting at offset; fewer only at the end of the file."""

    def close(self) -> None: ...


class LocalFileSource:
    """A local file, read with plain seek + read (no memory map: the header is small)."""

    def __init__(self, path: str | os.PathLike[str], name: str | None = None) -> None:
        self.path = Path(path)
        self.name = name or self.path.name
        try:
            self._fh = open(self.path, "rb")  # noqa: SIM115 - closed by close()
        except FileNotFoundError:
            raise BadInputError(f"{self.path} does not exist.") from None
        except IsADirectoryError:
            raise BadInputError(f"{self.path} is a folder, not a GGUF file.") from None
        except PermissionError:
            raise BadInputError(f"{self.path} cannot be read (permission denied).") from None
        except OSError as e:
            raise BadInputError(f"{self.path} cannot be opened: {e.strerror or e}.") from None
        try:
            self._size = os.fstat(self._fh.fileno()).st_size
        except OSError as e:  # pragma: no cover - fstat on an open file practically never fails
            self._fh.close()
            raise BadInputError(f"{self.path} cannot be read: {e.strerror or e}.") from None

    @property
    def size(self) -> int:
        return self._size

    def read(self, offset: int, n: int) -> bytes:
        if n <= 0 or offset >= self._size:
            return b""
        try:
            self._fh.seek(offset)
            return self._fh.read(n)
        except OSError as e:
            raise BadInputError(f"{self.path} cannot be read: {e.strerror or e}.") from None

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> LocalFileSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BytesSource:
    """In-memory bytes (tests, and headers already fetched)."""

    def __init__(self, data: bytes, name: str = "model.gguf") -> None:
        self._data = bytes(data)
        self.name = name

    @property
    def size(self) -> int:
        return len(self._data)

    def read(self, offset: int, n: int) -> bytes:
        if n <= 0:
            return b""
        return self._data[offset : offset + n]

    def close(self) -> None:
        pass


class HttpRangeSource:
    """A remote file read with HTTP Range requests through huggingface_hub's session.

    The session (httpx2 in huggingface_hub 2.x) carries the Hub's proxy, SSL and offline
    settings; `headers` carries the token and user agent from `build_hf_headers`. The
    first answer tells the size (Content-Range). If the Hub redirects to a CDN, later
    ranges go straight to the redirect target (without the token when it is another
    host, as huggingface_hub itself does), which halves the requests.
    """

    def __init__(
        self,
        url: str,
        name: str,
        *,
        headers: dict[str, str],
        timeout: float = 30.0,
        session: object | None = None,
        describe_status: object | None = None,
    ) -> None:
        self.url = url
        self.name = name
        self._headers = dict(headers)
        self._timeout = timeout
        self._session = session
        self._size: int | None = None
        self._describe_status = describe_status  # callable(status, headers) -> RooflightError
        self.bytes_fetched = 0
        self.requests = 0

    @property
    def size(self) -> int | None:
        return self._size

    def _client(self):  # -> httpx2.Client
        if self._session is None:
            from huggingface_hub.utils import get_session

            self._session = get_session()
        return self._session

    def read(self, offset: int, n: int) -> bytes:
        if n <= 0 or (self._size is not None and offset >= self._size):
            return b""
        import httpx2
        from huggingface_hub.errors import OfflineModeIsEnabled

        headers = dict(self._headers)
        headers["Range"] = f"bytes={offset}-{offset + n - 1}"
        headers["Accept-Encoding"] = "identity"  # sizes and ranges must be of the raw bytes
        try:
            with self._client().stream(
                "GET", self.url, headers=headers, timeout=self._timeout, follow_redirects=True
            ) as r:
                self.requests += 1
                return self._take(r, offset, n)
        except OfflineModeIsEnabled:
            raise OperationFailedError(
                f"Cannot read {self.name}: offline mode is on (HF_HUB_OFFLINE is set)."
            ) from None
        except httpx2.TimeoutException:
            raise OperationFailedError(
                f"Reading {self.name} from {_origin(self.url)} timed out after "
                f"{self._timeout:g} s; check the network connection and try again."
            ) from None
        except httpx2.ProxyError as e:
            raise OperationFailedError(
                f"Cannot read {self.name}: the proxy refused the connection ({e})."
            ) from None
        except (httpx2.TransportError, httpx2.StreamError) as e:
            raise OperationFailedError(
                f"Cannot reach {_origin(self.url)} to read {self.name} ({type(e).__name__}: {e}); "
                "check the network connection, HF_ENDPOINT and proxy settings."
            ) from None

    def _take(self, r, offset: int, n: int) -> bytes:  # r: httpx2.Response (streaming)
        status = r.status_code
        if status == 416:
            # Range starts at or past the end: the size is in "bytes */SIZE".
            total = _content_range_total(r.headers.get("Content-Range"))
            if total is not None:
                self._size = total
            return b""
        if status >= 400:
            describe = self._describe_status
            if describe is not None:
                raise describe(status, r.headers)  # type: ignore[operator]
            raise OperationFailedError(f"Reading {self.name} failed: HTTP {status}.")
        if status == 206:
            start, total = _parse_content_range(r.headers.get("Content-Range"))
            if start is None or start != offset:
                raise OperationFailedError(
                    f"Reading {self.name} failed: the server answered the wrong byte range "
                    f"({r.headers.get('Content-Range')!r} for bytes {offset}-{offset + n - 1})."
                )
            if total is not None:
                self._size = total
            skip = 0
        elif status == 200:
            # The server ignored Range and sends the whole file: stream only what we need.
            length = r.headers.get("Content-Length")
            if length is not None and length.isdigit():
                self._size = int(length)
            skip = offset
        else:
            raise OperationFailedError(f"Reading {self.name} failed: unexpected HTTP {status}.")
        self._remember_redirect(r)
        want = skip + n
        buf = bytearray()
        for chunk in r.iter_bytes():
            buf += chunk
            if len(buf) >= want:
                break
        self.bytes_fetched += len(buf)
        return bytes(buf[skip:want])

    def _remember_redirect(self, r) -> None:
        final = str(r.url)
        if final == self.url:
            return
        if _origin(final) != _origin(self.url):
            # A signed CDN URL: never send the Hub token to another host.
            self._headers = {k: v for k, v in self._headers.items() if k.lower() != "authorization"}
        self.url = final

    def close(self) -> None:
        pass  # the shared huggingface_hub session stays open for everyone else


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _parse_content_range(value: str | None) -> tuple[int | None, int | None]:
    """'bytes 0-99/1234' -> (0, 1234); total None when '*'."""
    if not value or not value.startswith("bytes "):
        return None, None
    try:
        span, _, total = value[6:].partition("/")
        start = int(span.split("-", 1)[0])
        return start, (int(total) if total.strip().isdigit() else None)
    except ValueError:
        return None, None


def _content_range_total(value: str | None) -> int | None:
    if not value or "/" not in value:
        return None
    total = value.rsplit("/", 1)[1].strip()
    return int(total) if total.isdigit() else None
