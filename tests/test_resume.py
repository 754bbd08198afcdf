"""A run killed with SIGKILL part-way resumes from the cache: nothing lost, nothing finished repeated.

Two backends: the real OpenAI-compatible server, and the embedded model in-process. llama.cpp's server
reuses the KV cache of the previous prompt, so a greedy request sent twice can end differently in its
last tokens; the comparison with an uninterrupted run is therefore made on the local model, whose
outputs (one prompt per forward pass) depend on the request alone."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from leaf_nb.cache import Cache

WORKER = Path(__file__).with_name("resume_worker.py")
TOTAL = 32  # resume_worker.py: 16 greedy + 16 seeded requests


def start_worker(cache_path, spec):
    return subprocess.Popen([sys.executable, str(WORKER), str(cache_path), spec], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish_worker(proc):
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def kill_part_way(cache_path, spec):
    "Start a run, SIGKILL it once a third of its calls are stored; return the stored entries."
    proc = start_worker(cache_path, spec)
    deadline = time.time() + 600
    while time.time() < deadline:
        if cache_path.exists() and len(Cache(cache_path)) >= TOTAL // 3: break
        assert proc.poll() is None, "the worker finished before it could be killed: " + proc.stderr.read()
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    cache = Cache(cache_path)
    return dict(cache._conn().execute("SELECT key, value FROM entries").fetchall())


def check_resume(cache_path, spec):
    stored = kill_part_way(cache_path, spec)
    assert TOTAL // 3 <= len(stored) < TOTAL
    resumed = finish_worker(start_worker(cache_path, spec))
    assert resumed["calls"] == TOTAL - len(stored)  # no finished call repeated
    after = dict(Cache(cache_path)._conn().execute("SELECT key, value FROM entries").fetchall())
    assert len(after) == TOTAL and all(after[k] == v for k, v in stored.items())  # all present, none changed
    again = finish_worker(start_worker(cache_path, spec))
    assert again["calls"] == 0 and again["greedy"] == resumed["greedy"] and again["seeded"] == resumed["seeded"]
    return resumed


def test_sigkill_then_resume_server(server, tmp_path):
    check_resume(tmp_path / "killed.sqlite", f"openai:{server.base_url}#{server.alias}")


@pytest.mark.slow
def test_sigkill_then_resume_matches_uninterrupted_run(tmp_path):
    reference = finish_worker(start_worker(tmp_path / "reference.sqlite", "embedded"))
    assert reference["calls"] == TOTAL
    resumed = check_resume(tmp_path / "killed.sqlite", "embedded")
    assert resumed["greedy"] == reference["greedy"]  # temperature 0: identical outputs
    assert resumed["seeded"] == reference["seeded"]  # seeded samples: identical outputs
