"A cache another process holds locked: opening it waits for the lock, and a lock that stays is named as one."
import sqlite3
import threading
import time

import pytest

from leaf_nb.cache import Cache, CacheError


def hold_exclusive(path, seconds):
    "Another connection (as another process would) holds an exclusive lock on a fresh file for `seconds`."
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("BEGIN EXCLUSIVE")
    held = threading.Event()

    def release():
        held.set(); time.sleep(seconds); conn.execute("COMMIT"); conn.close()
    t = threading.Thread(target=release); t.start(); held.wait()
    return t


def test_opening_waits_for_a_lock_then_works(tmp_path):
    path = tmp_path / "c.sqlite"
    t = hold_exclusive(path, 0.6)
    c = Cache(path, timeout=10)
    c.put_many([("k", 1, None)])  # the first use opens the file, switching it to WAL once the lock is gone
    t.join()
    assert c.get_many(["k"]) == {"k": 1}


def test_a_lock_that_stays_is_called_a_lock_not_a_bad_file(tmp_path):
    path = tmp_path / "c.sqlite"
    t = hold_exclusive(path, 2.0)
    with pytest.raises(CacheError, match="stayed locked by another process"):
        Cache(path, timeout=0.3).get_many(["k"])
    t.join()
    assert Cache(path, timeout=5).get_many(["k"]) == {}  # once released, the same file opens
