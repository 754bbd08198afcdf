"""Several runs on one cache file (`leaf-nb reproduce --jobs N`): real processes writing to one SQLite cache at once, one
of them holding a long write transaction, lose no write and see no `database is locked`; two paper notebooks run side by
side on a fresh default cache; and the exit status of a `--jobs` run sums up its notebooks."""
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from leaf_nb.cache import Cache
from leaf_nb.runs import prepare_caches

ROOT = Path(__file__).resolve().parents[1]
TABLE1 = ROOT / "nbs" / "papers" / "leaf" / "table1_filtered_accuracy.ipynb"
TABLE7 = ROOT / "nbs" / "papers" / "leaf" / "table7_worked_example.ipynb"
DATASETS = ROOT / "nbs" / "papers" / "ffrr" / "table1_datasets.ipynb"
LEAF_NB = str(Path(sys.executable).with_name("leaf-nb"))

WRITER = """
import sys, time
from leaf_nb.cache import Cache
path, tag, n, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
cache = Cache(path)
while time.time() < start: time.sleep(0.001)
for i in range(n):
    cache.put(f"{tag}-{i}", {"tag": tag, "i": i}, {"op": "test", "tag": tag, "i": i})
    if i % 25 == 0: assert cache.get(f"{tag}-{i}") == {"tag": tag, "i": i}
    if i % 100 == 0: cache.put_many([(f"{tag}-batch-{i}-{j}", j, None) for j in range(20)])
print(tag, "wrote", n)
"""

HOLDER = """
import sys, time
from leaf_nb.cache import Cache
path, start, hold = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
conn = Cache(path)._conn()
while time.time() < start: time.sleep(0.001)
conn.execute("BEGIN IMMEDIATE")  # a long write transaction: every other writer must wait for it, not fail
conn.execute("INSERT INTO entries (key, value, request) VALUES ('held', '1', NULL)")
time.sleep(hold)
conn.execute("COMMIT")
print("held", hold)
"""


def test_writers_at_once_lose_nothing(tmp_path):
    path = tmp_path / "cache.sqlite"
    prepare_caches([(TABLE1, {"cache": str(path)})])  # what `--jobs` does before it starts its processes
    n, start = 1500, time.time() + 4  # every process imports first, then all write from the same instant
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), tag, str(n), str(start)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for tag in ("a", "b")]
    procs.append(subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(start + 0.2), "3"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [o[1][-2000:] for o in outs]
    assert not any("locked" in err for _, err in outs)
    cache = Cache(path)
    batches = 20 * len(range(0, n, 100))
    assert len(cache) == 2 * (n + batches) + 1
    for tag in ("a", "b"):
        got = cache.get_many([f"{tag}-{i}" for i in range(n)])
        assert got == {f"{tag}-{i}": {"tag": tag, "i": i} for i in range(n)}
    assert cache.get("held") == 1


def run(*args, env=None, timeout=900):
    return subprocess.run([LEAF_NB, *map(str, args)], capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


def test_two_notebooks_at_once_on_a_fresh_default_cache(tmp_path):
    cache = tmp_path / "fresh" / "cache.sqlite"  # not there yet: the parent makes it before either process opens it
    out = run("reproduce", TABLE1, TABLE7, "--jobs", "2", "-p", "out_dir", tmp_path / "figures", "--progress-every", "0.5",
              env={"LEAF_NB_CACHE": str(cache)})
    assert out.returncode == 0, out.stderr[-3000:]
    assert "locked" not in out.stderr and "Traceback" not in out.stderr and "without encryption" not in out.stderr
    assert "table1_filtered_accuracy | leaf-nb: [1/1] table1_filtered_accuracy.ipynb (smoke)" in out.stderr
    assert "   table7_worked_example | leaf-nb: [1/1] table7_worked_example.ipynb (smoke)" in out.stderr
    assert "2 notebooks in 2 processes: 2 done" in out.stderr
    # each child's progress lines, marked with its notebook once
    assert re.search(r"^table1_filtered_accuracy \| \S+ min in: ", out.stderr, re.M), out.stderr[-3000:]
    assert "| leaf-nb: table1_filtered_accuracy:" not in out.stderr
    assert out.stdout.count("ran ") == 2
    for nb in (TABLE1, TABLE7):
        assert (tmp_path / "figures" / "smoke" / f"{nb.stem}.provenance.json").exists()
    searches = [json.loads(req)["op"] for (req,) in Cache(cache)._conn().execute("SELECT request FROM entries")]
    assert len(searches) >= 6 and set(searches) == {"search"}  # both notebooks' searches; their model calls came from the records


def test_the_exit_status_sums_up_the_notebooks(tmp_path):
    "One notebook stops at a missing index, the other runs: the run says which, in one line each, and exits 1."
    profile, empty = tmp_path / "lab.yaml", tmp_path / "empty.yaml"
    profile.write_text(f"profile: lab\nindex: {tmp_path / 'no-index'}\n")  # only the LEAF notebook takes `index`
    empty.write_text("")
    out = run("reproduce", DATASETS, TABLE1, "--jobs", "2", "--profile", profile, "-f", empty, "--no-check",
              "-p", "out_dir", tmp_path / "figures", env={"LEAF_NB_CACHE": str(tmp_path / "c.sqlite")})
    assert out.returncode == 1, out.stderr[-3000:]
    assert "2 notebooks in 2 processes: 1 done, 1 stopped at an error (table1_filtered_accuracy.ipynb)" in out.stderr
    said = [l for l in out.stderr.splitlines() if "stopped with" in l]
    assert len(said) == 1 and f"FileNotFoundError: {tmp_path / 'no-index'} holds no index" in said[0] and "Traceback" not in out.stderr
    assert (tmp_path / "figures" / "lab" / "table1_datasets.provenance.json").exists()
