"A run killed with SIGKILL part-way resumes from the cache: nothing lost, nothing finished repeated."
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from leaf_nb.cache import Cache

WORKER = Path(__file__).with_name("resume_worker.py")
TOTAL = 48  # resume_worker.py: 24 greedy + 24 seeded requests


def run_worker(server, cache_path):
    out = subprocess.run([sys.executable, str(WORKER), server.base_url, server.alias, str(cache_path)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_sigkill_then_resume(server, tmp_path):
    reference = run_worker(server, tmp_path / "reference.sqlite")  # one uninterrupted run
    assert reference["calls"] == TOTAL

    cache_path = tmp_path / "killed.sqlite"
    proc = subprocess.Popen([sys.executable, str(WORKER), server.base_url, server.alias, str(cache_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while time.time() < deadline:  # kill once a third of the calls are stored
        if cache_path.exists() and len(Cache(cache_path)) >= TOTAL // 3: break
        assert proc.poll() is None, "the worker finished before it could be killed"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    finished = len(Cache(cache_path))
    assert TOTAL // 3 <= finished < TOTAL

    resumed = run_worker(server, cache_path)
    assert resumed["calls"] == TOTAL - finished  # no finished call repeated
    assert len(Cache(cache_path)) == TOTAL  # every result present
    assert resumed["greedy"] == reference["greedy"]  # temperature 0: identical outputs
    assert resumed["seeded"] == reference["seeded"]  # seeded samples: identical outputs
    assert run_worker(server, cache_path)["calls"] == 0  # a third run is served by the cache alone
