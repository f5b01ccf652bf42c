"""store/schema.apply_schema: the one way the SQLite stores evolve."""

import sqlite3

from rooflight.store.calibration import CalibrationStore


def test_an_older_calibration_file_gains_the_later_columns_and_keeps_its_rows(tmp_path):
    path = tmp_path / "calibration.sqlite3"
    db = sqlite3.connect(path)  # the table as the first release wrote it
    db.execute("CREATE TABLE measurements (id INTEGER PRIMARY KEY, created_at REAL NOT NULL, machine TEXT NOT NULL,"
               " backend TEXT NOT NULL, model TEXT NOT NULL, quant TEXT NOT NULL, n_ctx INTEGER NOT NULL,"
               " n_gpu_layers INTEGER NOT NULL, prompt_tokens INTEGER NOT NULL, gen_tokens INTEGER NOT NULL,"
               " predicted_decode REAL NOT NULL, measured_decode REAL NOT NULL, predicted_prefill REAL NOT NULL,"
               " measured_prefill REAL NOT NULL)")
    db.execute("INSERT INTO measurements VALUES (1, 0, 'm', 'cpu', 'x', 'Q4_0', 512, 0, 8, 8, 10, 9, 100, 90)")
    db.commit()
    db.close()
    for _ in range(2):  # the second open finds everything in place
        CalibrationStore(path).close()
    db = sqlite3.connect(path)
    columns = {row[1]: row[4] for row in db.execute("PRAGMA table_info(measurements)")}
    assert {"n_threads": "0", "model_bytes": "0", "basis": "'table'", "kernel_shares": "''"}.items() <= columns.items()
    assert db.execute("SELECT model, n_threads, basis FROM measurements").fetchall() == [("x", 0, "table")]
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"measurements", "thread_choices"} <= tables
    db.close()
