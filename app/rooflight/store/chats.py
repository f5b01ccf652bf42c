"""Chat history: SQLite in the user data dir, written as tokens arrive.

A reply is streamed into its row with append_to_message(), one committed transaction per
call, so a crash (or SIGKILL) loses nothing already shown: finished messages stay intact
and the reply in progress is kept with complete = False. WAL mode makes those small
commits cheap (synchronous=NORMAL: a commit is durable against a process crash; only an
OS crash or power cut can lose the last few, and never corrupts the file).

One connection guarded by a lock, so the GUI can write from a worker thread and read
from the GUI thread; other processes (the CLI chat beside the app) get their own
connection and SQLite's busy timeout serialises writers.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rooflight.errors import BadInputError, OperationFailedError
from rooflight.store.paths import data_dir
from rooflight.store.schema import apply_schema

SCHEMA_VERSION = 1
ROLES = ("system", "user", "assistant")
EXPORT_FORMAT = "rooflight-chat"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS chats (
    id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    model TEXT NOT NULL,
    system_prompt TEXT NOT NULL DEFAULT '',
    settings TEXT NOT NULL DEFAULT '{}',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    chat_id INTEGER NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
    content TEXT NOT NULL,
    stats TEXT,
    complete INTEGER NOT NULL DEFAULT 1,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_chat ON messages (chat_id, id);
CREATE TABLE IF NOT EXISTS message_images (
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    format TEXT NOT NULL,
    width INTEGER NOT NULL,
    height INTEGER NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (message_id, position)
);
CREATE INDEX IF NOT EXISTS message_images_by_hash ON message_images (sha256);
"""


class ChatStoreCorruptError(OperationFailedError):
    """The history file could not be read; it was moved aside (moved_to), not deleted.

    Opening the store again starts a new, empty history.
    """

    def __init__(self, message: str, moved_to: Path) -> None:
        super().__init__(message)
        self.moved_to = moved_to


@dataclass(frozen=True)
class ChatSummary:
    id: int
    title: str
    model: str
    created_at: float  # Unix time
    updated_at: float
    n_messages: int
    system_prompt: str = ""
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StoredImage:
    """An image attached to a message; its bytes live once, by hash, in the images folder."""

    sha256: str
    format: str  # png | jpeg | gif | bmp
    width: int
    height: int
    name: str
    path: Path


@dataclass(frozen=True)
class Message:
    id: int
    role: str
    content: str
    stats: dict[str, Any] | None
    complete: bool
    created_at: float
    images: tuple[StoredImage, ...] = ()


def default_path() -> Path:
    return data_dir() / "chats.sqlite3"


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _from_iso(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _dumps(value: dict | None) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True)


class ChatStore:
    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        # attached images, one file per content hash, shared by every message that has it
        self.images_dir = self.path.parent / "images"
        self._lock = threading.RLock()
        self._db = self._open()

    # ---- opening ---------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(self.path, timeout=10.0, check_same_thread=False)
        except sqlite3.Error as exc:
            raise OperationFailedError(
                f"Could not open the chat history at {self.path} ({exc}); check that the folder is writable."
            ) from exc
        try:
            db.execute("PRAGMA foreign_keys = ON")
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            # a damaged page is otherwise only noticed when a query reaches it, mid-chat
            if db.execute("PRAGMA quick_check(1)").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("integrity check failed")
            self._migrate(db)
        except _NewerSchema as exc:
            db.close()
            raise OperationFailedError(
                f"The chat history at {self.path} was {exc}; update Rooflight to open it."
            ) from exc
        except sqlite3.OperationalError as exc:
            db.close()
            if "locked" in str(exc) or "busy" in str(exc):
                raise OperationFailedError(
                    f"The chat history at {self.path} is locked by another program; close it and try again."
                ) from exc
            raise self._move_aside(exc) from exc
        except sqlite3.DatabaseError as exc:
            db.close()
            raise self._move_aside(exc) from exc
        return db

    def _migrate(self, db: sqlite3.Connection) -> None:
        with db:
            apply_schema(db, _SCHEMA)
            row = db.execute("SELECT max(version) FROM schema_version").fetchone()
            version = row[0]
            if version is None:
                db.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
            elif version > SCHEMA_VERSION:
                raise _NewerSchema(version)

    def _move_aside(self, exc: Exception) -> ChatStoreCorruptError:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        aside = self.path.with_name(f"{self.path.name}.damaged-{stamp}")
        n = 1
        while aside.exists():
            aside = self.path.with_name(f"{self.path.name}.damaged-{stamp}-{n}")
            n += 1
        # the WAL belongs to the damaged file: replaying it onto a new one would be wrong
        for suffix in ("", "-wal", "-shm"):
            src = Path(str(self.path) + suffix)
            if src.exists():
                src.replace(Path(str(aside) + suffix))
        return ChatStoreCorruptError(
            f"The chat history {self.path.name} is damaged ({exc}); it was kept as {aside.name} "
            "and a new, empty history starts next time.",
            aside,
        )

    # ---- lifetime --------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> ChatStore:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # ---- helpers ---------------------------------------------------------------------

    def _write(self, sql: str, params: tuple = ()) -> sqlite3.Cursor:
        with self._lock:
            try:
                with self._db:  # one committed transaction per write
                    return self._db.execute(sql, params)
            except sqlite3.DatabaseError as exc:
                raise OperationFailedError(f"Could not write the chat history at {self.path}: {exc}.") from exc

    def _read(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.DatabaseError as exc:
                raise OperationFailedError(f"Could not read the chat history at {self.path}: {exc}.") from exc

    def _check_chat(self, chat_id: int) -> None:
        if not self._read("SELECT 1 FROM chats WHERE id = ?", (chat_id,)):
            raise BadInputError(f"There is no chat with id {chat_id}.")

    def _message_chat(self, message_id: int) -> int:
        rows = self._read("SELECT chat_id FROM messages WHERE id = ?", (message_id,))
        if not rows:
            raise BadInputError(f"There is no message with id {message_id}.")
        return rows[0][0]

    def _touch(self, chat_id: int) -> None:
        self._write("UPDATE chats SET updated_at = ? WHERE id = ?", (time.time(), chat_id))

    # ---- chats -----------------------------------------------------------------------

    def create_chat(self, title: str, model: str, system_prompt: str = "",
                    settings: dict | None = None) -> int:
        now = time.time()
        cur = self._write(
            "INSERT INTO chats (title, model, system_prompt, settings, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (title, model, system_prompt, _dumps(settings or {}), now, now),
        )
        return int(cur.lastrowid or 0)  # an INSERT always sets it

    _SUMMARY = (
        "SELECT c.id, c.title, c.model, c.created_at, c.updated_at,"
        " (SELECT count(*) FROM messages m WHERE m.chat_id = c.id), c.system_prompt, c.settings"
        " FROM chats c"
    )

    @staticmethod
    def _summary(row: tuple) -> ChatSummary:
        return ChatSummary(id=row[0], title=row[1], model=row[2], created_at=row[3], updated_at=row[4],
                           n_messages=row[5], system_prompt=row[6], settings=json.loads(row[7] or "{}"))

    def list_chats(self) -> list[ChatSummary]:
        """All chats, most recently active first."""
        rows = self._read(self._SUMMARY + " ORDER BY c.updated_at DESC, c.id DESC")
        return [self._summary(r) for r in rows]

    def get_chat(self, chat_id: int) -> ChatSummary:
        rows = self._read(self._SUMMARY + " WHERE c.id = ?", (chat_id,))
        if not rows:
            raise BadInputError(f"There is no chat with id {chat_id}.")
        return self._summary(rows[0])

    def rename_chat(self, chat_id: int, title: str) -> None:
        self._check_chat(chat_id)
        self._write("UPDATE chats SET title = ?, updated_at = ? WHERE id = ?", (title, time.time(), chat_id))

    def delete_chat(self, chat_id: int) -> None:
        self._check_chat(chat_id)
        self._write("DELETE FROM chats WHERE id = ?", (chat_id,))  # messages cascade
        self._drop_unused_images()

    def set_system_prompt(self, chat_id: int, text: str) -> None:
        self._check_chat(chat_id)
        self._write("UPDATE chats SET system_prompt = ?, updated_at = ? WHERE id = ?",
                    (text, time.time(), chat_id))

    def set_settings(self, chat_id: int, settings: dict) -> None:
        """Replace the chat's sampling settings (temperature, top-p, ... as the caller names them)."""
        self._check_chat(chat_id)
        self._write("UPDATE chats SET settings = ?, updated_at = ? WHERE id = ?",
                    (_dumps(settings), time.time(), chat_id))

    # ---- messages --------------------------------------------------------------------

    def add_message(self, chat_id: int, role: str, content: str, stats: dict | None = None,
                    *, complete: bool | None = None) -> int:
        """Add a message; returns its id.

        complete defaults to True, except for an empty assistant message: that is the
        placeholder a streamed reply is appended to, finished by finish_message().
        """
        if role not in ROLES:
            raise BadInputError(f"Unknown message role {role!r}; use one of {', '.join(ROLES)}.")
        self._check_chat(chat_id)
        if complete is None:
            complete = not (role == "assistant" and content == "" and stats is None)
        now = time.time()
        with self._lock:
            try:
                with self._db:
                    cur = self._db.execute(
                        "INSERT INTO messages (chat_id, role, content, stats, complete, created_at)"
                        " VALUES (?, ?, ?, ?, ?, ?)",
                        (chat_id, role, content, _dumps(stats), int(complete), now),
                    )
                    self._db.execute("UPDATE chats SET updated_at = ? WHERE id = ?", (now, chat_id))
            except sqlite3.DatabaseError as exc:
                raise OperationFailedError(f"Could not write the chat history at {self.path}: {exc}.") from exc
        return int(cur.lastrowid or 0)  # an INSERT always sets it

    def append_to_message(self, message_id: int, text: str) -> None:
        """Append streamed text; committed at once. The message counts as in progress."""
        cur = self._write("UPDATE messages SET content = content || ?, complete = 0 WHERE id = ?",
                          (text, message_id))
        if cur.rowcount == 0:
            raise BadInputError(f"There is no message with id {message_id}.")

    def finish_message(self, message_id: int, stats: dict | None = None) -> None:
        """Mark a streamed message complete, with its measurements (TTFT, tok/s, predictions)."""
        chat_id = self._message_chat(message_id)
        if stats is None:
            self._write("UPDATE messages SET complete = 1 WHERE id = ?", (message_id,))
        else:
            self._write("UPDATE messages SET complete = 1, stats = ? WHERE id = ?", (_dumps(stats), message_id))
        self._touch(chat_id)

    def update_message(self, message_id: int, content: str) -> None:
        chat_id = self._message_chat(message_id)
        self._write("UPDATE messages SET content = ? WHERE id = ?", (content, message_id))
        self._touch(chat_id)

    def delete_messages_after(self, chat_id: int, message_id: int) -> int:
        """Delete the chat's messages after message_id (kept); returns how many went.

        Regenerate deletes after the user's message; edit-and-resend updates it first.
        """
        if self._message_chat(message_id) != chat_id:
            raise BadInputError(f"Message {message_id} is not part of chat {chat_id}.")
        cur = self._write("DELETE FROM messages WHERE chat_id = ? AND id > ?", (chat_id, message_id))
        self._touch(chat_id)
        self._drop_unused_images()
        return cur.rowcount

    def messages(self, chat_id: int) -> list[Message]:
        self._check_chat(chat_id)
        rows = self._read(
            "SELECT id, role, content, stats, complete, created_at FROM messages"
            " WHERE chat_id = ? ORDER BY id", (chat_id,))
        images = self._images_of_chat(chat_id)
        return [Message(id=r[0], role=r[1], content=r[2], stats=json.loads(r[3]) if r[3] else None,
                        complete=bool(r[4]), created_at=r[5], images=images.get(r[0], ()))
                for r in rows]

    # ---- images ----------------------------------------------------------------------

    def _image_path(self, sha256: str, fmt: str) -> Path:
        return self.images_dir / f"{sha256}.{'jpg' if fmt == 'jpeg' else fmt}"

    def _write_image_file(self, sha256: str, fmt: str, data: bytes) -> Path:
        """Write the image once (temp name, fsync, rename); an existing copy is kept."""
        target = self._image_path(sha256, fmt)
        if target.is_file() and target.stat().st_size == len(data):
            return target
        try:
            self.images_dir.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + f".{threading.get_ident()}.tmp")
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except OSError as exc:
            raise OperationFailedError(
                f"Could not store the image in {self.images_dir} ({exc.strerror or exc}); "
                "check that the folder is writable and has free space.") from exc
        return target

    def attach_image(self, message_id: int, data: bytes, fmt: str, width: int, height: int,
                     name: str = "") -> StoredImage:
        """Attach an image (already checked: runtime/images.check_image) to a message."""
        import hashlib

        self._message_chat(message_id)
        sha = hashlib.sha256(data).hexdigest()
        path = self._write_image_file(sha, fmt, data)
        rows = self._read("SELECT coalesce(max(position) + 1, 0) FROM message_images WHERE message_id = ?",
                          (message_id,))
        self._write("INSERT INTO message_images (message_id, position, sha256, format, width, height, name)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)", (message_id, rows[0][0], sha, fmt, width, height, name))
        return StoredImage(sha, fmt, width, height, name, path)

    def _images_of_chat(self, chat_id: int) -> dict[int, tuple[StoredImage, ...]]:
        rows = self._read(
            "SELECT i.message_id, i.sha256, i.format, i.width, i.height, i.name FROM message_images i"
            " JOIN messages m ON m.id = i.message_id WHERE m.chat_id = ? ORDER BY i.message_id, i.position",
            (chat_id,))
        out: dict[int, list[StoredImage]] = {}
        for mid, sha, fmt, w, h, name in rows:
            out.setdefault(mid, []).append(StoredImage(sha, fmt, w, h, name, self._image_path(sha, fmt)))
        return {k: tuple(v) for k, v in out.items()}

    def image_bytes(self, image: StoredImage) -> bytes:
        try:
            return image.path.read_bytes()
        except OSError as exc:
            raise OperationFailedError(f"The stored image {image.path.name} cannot be read "
                                       f"({exc.strerror or exc}); it was removed from {self.images_dir}.") from exc

    def _drop_unused_images(self) -> None:
        """Delete image files no message refers to any more (after a chat or messages went)."""
        if not self.images_dir.is_dir():
            return
        used = {r[0] for r in self._read("SELECT DISTINCT sha256 FROM message_images")}
        for f in self.images_dir.iterdir():
            if f.suffix != ".tmp" and f.stem not in used:
                f.unlink(missing_ok=True)

    # ---- export / import -------------------------------------------------------------

    def export_markdown(self, chat_id: int) -> str:
        """The chat as Markdown; message text goes in verbatim, so code blocks stay code blocks."""
        chat = self.get_chat(chat_id)
        lines = [f"# {chat.title}", "", f"Model: `{chat.model}` · started {_iso(chat.created_at)}", ""]
        if chat.system_prompt:
            lines += ["## System", "", chat.system_prompt, ""]
        for m in self.messages(chat_id):
            lines += [f"## {m.role.capitalize()}", "", m.content]
            lines += [f"\n![{im.name or 'image'}]({im.path.as_uri()})" for im in m.images]
            if not m.complete:
                lines += ["", "*(reply interrupted)*"]
            lines.append("")
        return "\n".join(lines).rstrip("\n") + "\n"

    def export_json(self, chat_id: int) -> dict:
        chat = self.get_chat(chat_id)
        return {
            "format": EXPORT_FORMAT,
            "version": SCHEMA_VERSION,
            "title": chat.title,
            "model": chat.model,
            "system_prompt": chat.system_prompt,
            "settings": chat.settings,
            "created_at": _iso(chat.created_at),
            "updated_at": _iso(chat.updated_at),
            "messages": [
                {"role": m.role, "content": m.content, "stats": m.stats, "complete": m.complete,
                 "created_at": _iso(m.created_at),
                 **({"images": [self._export_image(im) for im in m.images]} if m.images else {})}
                for m in self.messages(chat_id)
            ],
        }

    def _export_image(self, im: StoredImage) -> dict:
        import base64

        return {"sha256": im.sha256, "format": im.format, "width": im.width, "height": im.height,
                "name": im.name, "data_base64": base64.b64encode(self.image_bytes(im)).decode("ascii")}

    def import_json(self, doc: dict) -> int:
        """Add a chat exported by export_json(); returns its new id."""
        if not isinstance(doc, dict) or doc.get("format") != EXPORT_FORMAT:
            raise BadInputError("This is not a Rooflight chat export (its 'format' is not rooflight-chat).")
        try:
            created, updated = _from_iso(doc["created_at"]), _from_iso(doc["updated_at"])
            rows = [(m["role"], m["content"], _dumps(m.get("stats")), int(bool(m.get("complete", True))),
                     _from_iso(m["created_at"])) for m in doc["messages"]]
            images = [_import_images(m.get("images") or []) for m in doc["messages"]]
            chat_row = (doc["title"], doc["model"], doc.get("system_prompt", ""),
                        _dumps(doc.get("settings") or {}), created, updated)
        except (KeyError, TypeError, ValueError) as exc:
            raise BadInputError(f"The chat export is missing or has a malformed field ({exc}).") from exc
        if any(r[0] not in ROLES for r in rows):
            raise BadInputError(f"The chat export has a message role other than {', '.join(ROLES)}.")
        with self._lock:
            try:
                with self._db:
                    cur = self._db.execute(
                        "INSERT INTO chats (title, model, system_prompt, settings, created_at, updated_at)"
                        " VALUES (?, ?, ?, ?, ?, ?)", chat_row)
                    chat_id = int(cur.lastrowid or 0)  # an INSERT always sets it
                    ids = []
                    for r in rows:
                        ids.append(self._db.execute(
                            "INSERT INTO messages (chat_id, role, content, stats, complete, created_at)"
                            " VALUES (?, ?, ?, ?, ?, ?)", (chat_id, *r)).lastrowid)
                    for mid, imgs in zip(ids, images, strict=True):
                        for pos, (sha, fmt, w, h, name, data) in enumerate(imgs):
                            self._write_image_file(sha, fmt, data)
                            self._db.execute(
                                "INSERT INTO message_images (message_id, position, sha256, format, width,"
                                " height, name) VALUES (?, ?, ?, ?, ?, ?, ?)", (mid, pos, sha, fmt, w, h, name))
            except sqlite3.DatabaseError as exc:
                raise OperationFailedError(f"Could not write the chat history at {self.path}: {exc}.") from exc
        return chat_id


def _import_images(items: list) -> list[tuple[str, str, int, int, str, bytes]]:
    """An export's images, decoded and checked like an attached file."""
    import base64
    import binascii

    from rooflight.runtime.images import check_image

    out = []
    for item in items:
        try:
            data = base64.b64decode(item["data_base64"], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise BadInputError(f"The chat export has an image that is not valid base64 ({exc}).") from exc
        img = check_image(data, item.get("name") or "an image in the chat export")
        out.append((img.sha256, img.format, img.width, img.height, str(item.get("name") or ""), data))
    return out


class _NewerSchema(sqlite3.OperationalError):
    def __init__(self, version: int) -> None:
        super().__init__(f"written by a newer Rooflight (schema {version})")
