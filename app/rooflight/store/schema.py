"""The one way Rooflight's SQLite stores evolve: the tables are created if missing, and a
column added by a later version is added to an older file where it is missing, with its
default. Nothing is ever dropped or rewritten, so an older Rooflight can still read the
tables it knows, and two stores can share one file (calibration and machine probes do).

    apply_schema(db, SCHEMA, added={"measurements": [("basis", "TEXT NOT NULL DEFAULT 'table'")]})

A store whose older versions must refuse a newer file says so itself (chats.py keeps a
schema version for that).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence


def apply_schema(db: sqlite3.Connection, script: str,
                 added: Mapping[str, Sequence[tuple[str, str]]] | None = None) -> None:
    """Run `script` (CREATE ... IF NOT EXISTS statements), then add each (column, SQL type
    and default) of `added` to its table where the file lacks it."""
    db.executescript(script)
    for table, columns in (added or {}).items():
        have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        for name, decl in columns:
            if name not in have:
                db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")
