"""A local stand-in for the Hugging Face Hub, for tests: real HTTP on 127.0.0.1.

It serves a folder laid out as ROOT/OWNER/REPO/FILES and speaks the part of the Hub
protocol that huggingface_hub 2.x uses to read and download files:

- GET /api/models/{repo}[/revision/{rev}]       model_info (siblings; sizes + LFS with blobs=1)
- GET /api/models?search=&filter=&author=&sort=&limit=&full=   list_models (Link rel="next")
- GET /api/models/{repo}/tree/{rev}[/{path}]    list_repo_tree (recursive=1 supported)
- HEAD/GET /{repo}/resolve/{rev}/{path}         with X-Repo-Commit, ETag, X-Linked-Etag and
  X-Linked-Size (sha256 / size; *.gguf and files over 10 MB are treated as LFS),
  Content-Length, Accept-Ranges and Range (206 + Content-Range, 416 when unsatisfiable).

Errors carry the Hub's X-Error-Code header (RepoNotFound, RevisionNotFound, EntryNotFound,
GatedRepo) so huggingface_hub raises its usual exceptions. Failure injection for download
tests: `require_token(repo)` (401 without an Authorization header), `drop_after(path, n)`
(close the connection after n body bytes), `corrupt(path)` (serve wrong bytes under the
right checksum headers), `fail_next(path, status)` (answer e.g. 503), `throttle(path, bps)`
(slow the body down), and per-file byte counters plus a request log.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

LFS_SUFFIXES = (".gguf", ".safetensors", ".bin")
LFS_MIN_SIZE = 10 * 1024 * 1024
CHUNK = 64 * 1024


@dataclass
class LoggedRequest:
    method: str
    path: str  # URL path, unquoted, without the query
    range: str | None
    authorization: bool
    status: int = 0
    body_bytes: int = 0


class HubServer:
    """Owns the HTTP server thread, the repo folder and the failure-injection knobs."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.requests: list[LoggedRequest] = []
        self.bytes_served: dict[str, int] = {}  # "owner/repo/path" -> body bytes sent
        self._tokens: dict[str, str | None] = {}  # repo -> required token (None: any)
        self._private: set[str] = set()  # repos that look absent without a token
        self._drops: dict[str, list[int]] = {}  # "owner/repo/path" -> [after_bytes, times]
        self._corrupt: dict[str, int] = {}  # "owner/repo/path" -> bodies left to corrupt
        self._fails: dict[str, list[int]] = {}  # "owner/repo/path" -> [status, times]
        self._throttle: dict[str, float] = {}  # "owner/repo/path" -> body bytes per second
        self._hashes: dict[tuple[str, int, int], tuple[str, str]] = {}
        self._lock = threading.Lock()
        self.redirect_lfs = False  # answer LFS resolves with a 302 to /_cdn/... like the Hub
        # per repo: fields the search answers with (downloads, likes, tags, lastModified...)
        self.repo_meta: dict[str, dict] = {}
        handler = type("Handler", (_Handler,), {"hub": self})
        self.errors: list[BaseException] = []  # handler crashes (not client disconnects)
        self.httpd = _QuietServer(("127.0.0.1", 0), handler)
        self.httpd.hub = self
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    # -- life cycle --------------------------------------------------------------------

    def start(self) -> HubServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- content -----------------------------------------------------------------------

    def add_file(self, repo: str, path: str, content: bytes | str | os.PathLike[str]) -> Path:
        """Put a file into OWNER/REPO at path; content is bytes or a local file to link."""
        dest = self.root / repo / path
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.exists() or dest.is_symlink():
            dest.unlink()
        if isinstance(content, bytes | bytearray):
            dest.write_bytes(bytes(content))
        else:
            src = Path(content).resolve()
            try:
                os.link(src, dest)  # big model files: no copy
            except OSError:
                try:
                    dest.symlink_to(src)
                except OSError:
                    shutil.copyfile(src, dest)
        return dest

    def require_token(self, repo: str, token: str | None = None, *, private: bool = False) -> None:
        """Need Authorization (equal to "Bearer token" when token is given) for a repo.

        Gated (default): as on the Hub, model info and tree stay public, file downloads
        answer 401 GatedRepo. Private: every endpoint answers 401 RepoNotFound.
        """
        self._tokens[repo] = token
        if private:
            self._private.add(repo)

    def drop_after(self, file: str, n_bytes: int, times: int = 1) -> None:
        """Close the connection after n_bytes of the body of "owner/repo/path", `times` times."""
        self._drops[file] = [n_bytes, times]

    def corrupt(self, file: str, times: int = 1) -> None:
        """Invert every body byte of "owner/repo/path" (headers unchanged) for `times` GETs."""
        self._corrupt[file] = times

    def fail_next(self, file: str, status: int = 503, times: int = 1) -> None:
        """Answer the next `times` downloads of "owner/repo/path" with HTTP `status`."""
        self._fails[file] = [status, times]

    def throttle(self, file: str, bytes_per_second: float | None) -> None:
        """Send the body of "owner/repo/path" at about this rate (None: full speed)."""
        if bytes_per_second:
            self._throttle[file] = float(bytes_per_second)
        else:
            self._throttle.pop(file, None)

    def reset_counters(self) -> None:
        with self._lock:
            self.requests.clear()
            self.bytes_served.clear()

    def served(self, file: str) -> int:
        return self.bytes_served.get(file, 0)

    # -- repo model --------------------------------------------------------------------

    def repo_dir(self, repo: str) -> Path | None:
        d = self.root / repo
        return d if repo.count("/") == 1 and d.is_dir() else None

    def files(self, repo: str) -> list[str]:
        d = self.root / repo
        return sorted(
            p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file() or p.is_symlink()
        )

    def commit(self, repo: str) -> str:
        """A stable 40-hex commit id for the repo's current content listing."""
        h = hashlib.sha1(repo.encode())
        for f in self.files(repo):
            st = (self.root / repo / f).stat()
            h.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        return h.hexdigest()

    def is_lfs(self, path: str, size: int) -> bool:
        return path.endswith(LFS_SUFFIXES) or size >= LFS_MIN_SIZE

    def hashes(self, file: Path) -> tuple[str, str]:
        """(git blob sha1, sha256) of a file, cached by path, size and mtime."""
        st = file.stat()
        key = (str(file), st.st_size, st.st_mtime_ns)
        with self._lock:
            if key in self._hashes:
                return self._hashes[key]
        sha1 = hashlib.sha1(f"blob {st.st_size}\0".encode())
        sha256 = hashlib.sha256()
        with open(file, "rb") as fh:
            while chunk := fh.read(1 << 20):
                sha1.update(chunk)
                sha256.update(chunk)
        out = (sha1.hexdigest(), sha256.hexdigest())
        with self._lock:
            self._hashes[key] = out
        return out

    def file_entry(self, repo: str, path: str) -> dict:
        f = self.root / repo / path
        size = f.stat().st_size
        blob, sha256 = self.hashes(f)
        entry: dict = {"type": "file", "oid": blob, "size": size, "path": path}
        if self.is_lfs(path, size):
            entry["lfs"] = {"oid": sha256, "size": size, "pointerSize": 134}
        return entry


class _QuietServer(ThreadingHTTPServer):
    """Clients hanging up (dropped connections are a feature here) are not errors."""

    hub: HubServer

    def handle_error(self, request: object, client_address: object) -> None:
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError) or exc is None:
            return
        self.hub.errors.append(exc)


class _Handler(BaseHTTPRequestHandler):
    hub: HubServer
    protocol_version = "HTTP/1.1"  # keep-alive, like the Hub; every answer has a length

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
        pass  # the request log below is what tests read

    # -- plumbing ----------------------------------------------------------------------

    def _begin(self) -> tuple[str, dict[str, list[str]]]:
        parts = urlsplit(self.path)
        self._log = LoggedRequest(
            self.command,
            unquote(parts.path),
            self.headers.get("Range"),
            self.headers.get("Authorization") is not None,
        )
        with self.hub._lock:
            self.hub.requests.append(self._log)
        return parts.path, parse_qs(parts.query)

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self._log.status = status
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body:
            self._log.body_bytes = len(body)  # before writing: the client may look at once
            self.wfile.write(body)

    def _json(self, obj: object, headers: dict[str, str] | None = None) -> None:
        self._send(
            200, json.dumps(obj).encode(), {"Content-Type": "application/json", **(headers or {})}
        )

    def _error(
        self, status: int, code: str, message: str, extra: dict[str, str] | None = None
    ) -> None:
        body = json.dumps({"error": message}).encode()
        headers = {
            "Content-Type": "application/json",
            "X-Error-Code": code,
            "X-Error-Message": message,
        }
        self._send(status, body, {**headers, **(extra or {})})

    def _gate(self, repo: str, download: bool) -> bool:
        """True if the request may proceed; otherwise answer 401 as the Hub does."""
        if repo not in self.hub._tokens:
            return True
        private = repo in self.hub._private
        if not download and not private:
            return True  # a gated repo's info and file list are public
        token = self.hub._tokens[repo]
        auth = self.headers.get("Authorization")
        if auth is not None and (token is None or auth == f"Bearer {token}"):
            return True
        if private:
            self._error(401, "RepoNotFound", "Repository not found")
        else:
            self._error(
                401,
                "GatedRepo",
                f"Access to model {repo} is restricted. You must have access to it and be "
                "authenticated to access it. Please log in.",
            )
        return False

    def _repo(self, segments: list[str]) -> str | None:
        """owner/repo from the first two segments, answering 404 if it does not exist."""
        if len(segments) < 2:
            self._error(404, "RepoNotFound", "Repository not found")
            return None
        repo = "/".join(segments[:2])
        if self.hub.repo_dir(repo) is None:
            self._error(404, "RepoNotFound", "Repository not found")
            return None
        return repo

    def _revision_ok(self, repo: str, rev: str) -> bool:
        if rev in ("main", self.hub.commit(repo)):
            return True
        self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        return False

    # -- routes ------------------------------------------------------------------------

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802
        path, query = self._begin()
        try:
            if path.startswith("/api/models/"):
                self._api(path[len("/api/models/") :], query)
            elif path in ("/api/models", "/api/models/"):
                self._search(query)
            elif path.startswith("/_cdn/"):
                segments = [unquote(s) for s in path[len("/_cdn/") :].split("/")]
                self._resolve(segments, via_cdn=True)
            else:
                segments = [unquote(s) for s in path.lstrip("/").split("/")]
                if len(segments) >= 5 and segments[2] == "resolve":
                    self._resolve(segments[:2] + segments[3:])
                else:
                    self._error(404, "EntryNotFound", "Not found")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _api(self, rest: str, query: dict[str, list[str]]) -> None:
        segments = [unquote(s) for s in rest.split("/") if s]
        repo = self._repo(segments)
        if repo is None or not self._gate(repo, download=False):
            return
        tail = segments[2:]
        commit = self.hub.commit(repo)
        if not tail or (len(tail) == 2 and tail[0] == "revision"):
            if tail and not self._revision_ok(repo, tail[1]):
                return
            blobs = query.get("blobs", ["false"])[0].lower() in ("1", "true")
            siblings = []
            for f in self.hub.files(repo):
                if blobs:
                    e = self.hub.file_entry(repo, f)
                    sib = {"rfilename": f, "size": e["size"], "blobId": e["oid"]}
                    if "lfs" in e:
                        sib["lfs"] = {
                            "sha256": e["lfs"]["oid"],
                            "size": e["size"],
                            "pointerSize": 134,
                        }
                    siblings.append(sib)
                else:
                    siblings.append({"rfilename": f})
            self._json(
                {
                    "_id": commit[:24],
                    "id": repo,
                    "modelId": repo,
                    "author": repo.split("/")[0],
                    "sha": commit,
                    "private": repo in self.hub._private,
                    "gated": "auto"
                    if repo in self.hub._tokens and repo not in self.hub._private
                    else False,
                    "disabled": False,
                    "downloads": 0,
                    "likes": 0,
                    "tags": ["gguf"],
                    "library_name": "gguf",
                    "siblings": siblings,
                    "lastModified": "2025-01-01T00:00:00.000Z",
                    "createdAt": "2025-01-01T00:00:00.000Z",
                }
            )
        elif tail[0] == "tree" and len(tail) >= 2:
            if not self._revision_ok(repo, tail[1]):
                return
            prefix = "/".join(tail[2:])
            recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
            self._tree(repo, prefix, recursive)
        else:
            self._error(404, "EntryNotFound", "Not found")

    def _search(self, query: dict[str, list[str]]) -> None:
        """GET /api/models (HfApi.list_models): search, filter (tags, all must match),
        author, sort (descending), limit (the page size) with a Link rel="next" cursor,
        full (adds siblings, sha, gated...) and expand (only the listed fields)."""
        hub = self.hub
        search = query.get("search", [""])[0].lower()
        tags_wanted = set(query.get("filter", []))
        author = query.get("author", [None])[0]
        auth = self.headers.get("Authorization")
        items = []
        for owner in sorted(p for p in hub.root.iterdir() if p.is_dir()):
            for repo_dir in sorted(p for p in owner.iterdir() if p.is_dir()):
                repo = f"{owner.name}/{repo_dir.name}"
                meta = hub.repo_meta.get(repo, {})
                files = hub.files(repo)
                tags = meta.get("tags") or (["gguf"] if any(f.endswith(".gguf") for f in files) else [])
                if search and search not in repo.lower():
                    continue
                if not tags_wanted <= set(tags) or (author and owner.name != author):
                    continue
                if repo in hub._private and (auth is None or (
                        hub._tokens[repo] is not None and auth != f"Bearer {hub._tokens[repo]}")):
                    continue  # private repos are visible to their owner only
                commit = hub.commit(repo)
                item = {
                    "_id": commit[:24], "id": repo, "modelId": repo, "author": owner.name,
                    "likes": meta.get("likes", 0), "downloads": meta.get("downloads", 0),
                    "trendingScore": meta.get("trendingScore", 0), "tags": tags,
                    "private": repo in hub._private, "library_name": "gguf" if "gguf" in tags else None,
                    "createdAt": meta.get("createdAt", "2025-01-01T00:00:00.000Z"),
                    "lastModified": meta.get("lastModified", "2025-01-01T00:00:00.000Z"),
                    "sha": commit, "disabled": False,
                    "gated": "auto" if repo in hub._tokens and repo not in hub._private else False,
                    "siblings": [{"rfilename": f} for f in files],
                }
                items.append(item)
        sort = query.get("sort", [None])[0]
        if sort:
            items.sort(key=lambda it: (it.get(sort) or 0, it["id"]), reverse=True)
        full = query.get("full", ["false"])[0].lower() in ("1", "true")
        expand = query.get("expand", [])
        brief = ("_id", "id", "modelId", "likes", "downloads", "trendingScore", "tags", "private",
                 "library_name", "createdAt")
        keep = (["_id", "id", *expand]) if expand else (list(items[0]) if full and items else brief)
        items = [{k: it[k] for k in keep if k in it} for it in items]
        start = int(query.get("cursor", ["0"])[0])
        limit = int(query.get("limit", ["1000"])[0])
        page = items[start : start + limit]
        headers = {}
        if start + limit < len(items):
            rest = [(k, v) for k, vs in query.items() if k != "cursor" for v in vs]
            rest.append(("cursor", str(start + limit)))
            from urllib.parse import urlencode

            headers["Link"] = f'<{hub.url}/api/models?{urlencode(rest)}>; rel="next"'
        self._json(page, headers)

    def _tree(self, repo: str, prefix: str, recursive: bool) -> None:
        base = self.hub.root / repo / prefix
        if prefix and not base.is_dir():
            self._error(404, "EntryNotFound", f"{prefix} does not exist on main")
            return
        entries = []
        items = sorted(base.rglob("*") if recursive else base.iterdir())
        for p in items:
            rel = p.relative_to(self.hub.root / repo).as_posix()
            if p.is_dir():
                oid = hashlib.sha1(rel.encode()).hexdigest()
                entries.append({"type": "directory", "oid": oid, "size": 0, "path": rel})
            else:
                entries.append(self.hub.file_entry(repo, rel))
        self._json(entries)

    def _resolve(self, segments: list[str], via_cdn: bool = False) -> None:
        # segments: owner, repo, revision, *path
        repo = self._repo(segments)
        if repo is None or (not via_cdn and not self._gate(repo, download=True)):
            return
        if len(segments) < 4:
            self._error(404, "EntryNotFound", "Entry not found")
            return
        rev, rel = segments[2], "/".join(segments[3:])
        if not self._revision_ok(repo, rev):
            return
        commit = self.hub.commit(repo)
        f = self.hub.root / repo / rel
        if not f.is_file():
            self._error(404, "EntryNotFound", "Entry not found", {"X-Repo-Commit": commit})
            return
        size = f.stat().st_size
        blob, sha256 = self.hub.hashes(f)
        lfs = self.hub.is_lfs(rel, size)
        headers = {
            "X-Repo-Commit": commit,
            "ETag": f'"{sha256 if lfs else blob}"',
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        if lfs:
            headers["X-Linked-Etag"] = f'"{sha256}"'
            headers["X-Linked-Size"] = str(size)
            if self.hub.redirect_lfs and not via_cdn:
                location = f"/_cdn/{repo}/{quote(rev, safe='')}/{quote(rel)}"
                self._send(302, b"", {**headers, "Location": location})
                return
        self._body(f"{repo}/{rel}", f, size, headers)

    def _body(self, key: str, f: Path, size: int, headers: dict[str, str]) -> None:
        with self.hub._lock:
            fail = self.hub._fails.get(key)
            status_now = None
            if fail and fail[1] > 0:
                fail[1] -= 1
                status_now = fail[0]
            corrupt = self.hub._corrupt.get(key, 0) > 0 and self.command == "GET"
            if corrupt:
                self.hub._corrupt[key] -= 1
            rate = self.hub._throttle.get(key)
        if status_now is not None:
            self._send(status_now, b"injected failure", {"Content-Type": "text/plain"})
            return
        start, end = 0, size - 1
        status = 200
        rng = self.headers.get("Range")
        if rng:
            parsed = _parse_range(rng, size)
            if parsed is None:
                self._send(416, b"", {**headers, "Content-Range": f"bytes */{size}"})
                return
            start, end = parsed
            status = 206
            headers = {**headers, "Content-Range": f"bytes {start}-{end}/{size}"}
        length = end - start + 1 if size else 0
        self._log.status = status
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        if self.command == "HEAD":
            return
        limit = length
        with self.hub._lock:
            drop = self.hub._drops.get(key)
            if drop and drop[1] > 0:
                drop[1] -= 1
                limit = min(length, drop[0])
            else:
                drop = None
        sent = 0
        with open(f, "rb") as fh:
            fh.seek(start)
            while sent < limit:
                chunk = fh.read(min(CHUNK, limit - sent))
                if not chunk:
                    break
                if corrupt:
                    chunk = bytes(b ^ 0xFF for b in chunk)
                if rate:
                    time.sleep(len(chunk) / rate)
                # count before writing: a test may read the counters as soon as it has the bytes
                self._count(key, len(chunk))
                sent += len(chunk)
                try:
                    self.wfile.write(chunk)
                except OSError:
                    self._count(key, -len(chunk))
                    sent -= len(chunk)
                    raise
        self.wfile.flush()
        if drop is not None and sent < length:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _count(self, key: str, n: int) -> None:
        with self.hub._lock:
            self.hub.bytes_served[key] = self.hub.bytes_served.get(key, 0) + n
            self._log.body_bytes += n


def _parse_range(value: str, size: int) -> tuple[int, int] | None:
    """One 'bytes=a-b' / 'bytes=a-' / 'bytes=-n' range -> inclusive (start, end), None if unsatisfiable."""
    if not value.startswith("bytes=") or "," in value:
        return None
    first, _, last = value[6:].strip().partition("-")
    try:
        if first == "":
            n = int(last)
            if n <= 0:
                return None
            return max(0, size - n), size - 1
        start = int(first)
        end = int(last) if last else size - 1
    except ValueError:
        return None
    if start >= size or end < start:
        return None
    return start, min(end, size - 1)
