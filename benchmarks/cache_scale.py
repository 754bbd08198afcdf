"""Does the cache stay fast as it fills? `leaf_nb.cache.Cache` filled to a million entries, with `get_many` and `put_many`
timed at each size on the way (10k, 100k, 1M by default): a paper run of Table 1 writes about half a million entries,
so a lookup that slowed with the table's size would slow the whole run as it went.

    nice -n 10 python benchmarks/cache_scale.py --db /tmp/rehearsal/cache_scale.sqlite --csv benchmarks/results/cache_scale.csv

Entries look like a paper run's: the key is `request_key` of a request shaped like a rater call (`--request-chars`
of prompt, 2,000 by default), the value a reply of `--value-chars` (600). At each size the benchmark times, in batches
as the pipeline makes them (`--batch`, 1,000 keys): `get_many` of keys that are present (random, all over the table),
`get_many` of keys that are absent (what every new call asks first), and `put_many` of new entries; each `--repeats`
times, the median kept. It reports microseconds per key and the file's size. The claim is constant time: the lookup
per key at 1M within a small factor of the one at 10k (SQLite's B-tree adds a level now and then, so a factor up to ~2
is expected; `--max-ratio`, 3 by default, makes the run fail above it). Figures from a busy machine are marked so.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from results_csv import append_rows, other_busy_cpus  # noqa: E402

COLUMNS = ["date", "entries", "batch", "get_present_us_per_key", "get_absent_us_per_key", "put_us_per_key", "db_mb",
           "fill_s", "request_chars", "value_chars", "other_busy_cpus", "command", "note"]


def request(i: int, chars: int) -> dict:
    "A request shaped like a LEAF rater call (op, model, prompt, params), unique by `i`."
    body = (f"KNOWLEDGE: passage {i} " + "lorem ipsum dolor sit amet " * (chars // 27 + 1))[:chars]
    return {"op": "generate", "kind": "openai", "model": "qwen2-72b@sha256:0123456789abcdef",
            "prompt": [{"role": "user", "content": body}],
            "params": {"temperature": 0.0, "max_tokens": 1024, "stop": None, "seed": None}, "sample": 0}


def fill(cache, start: int, stop: int, a) -> None:
    "Entries `start`..`stop`-1, in transactions of 5,000 (as a pipeline stage stores them)."
    from leaf_nb.cache import request_key
    value = "The STATEMENT is supported by the KNOWLEDGE. " * (a.value_chars // 46 + 1)
    for s in range(start, stop, 5000):
        items = []
        for i in range(s, min(stop, s + 5000)):
            r = request(i, a.request_chars)
            items.append((request_key(r), value[:a.value_chars] + str(i), r))
        cache.put_many(items)


def measure(cache, n: int, a, rng: random.Random) -> dict:
    from leaf_nb.cache import request_key
    present = lambda: [request_key(request(rng.randrange(n), a.request_chars)) for _ in range(a.batch)]
    absent = lambda: [request_key(request(10 ** 9 + rng.randrange(10 ** 9), a.request_chars)) for _ in range(a.batch)]
    def timed(fn, keys) -> float:
        t = time.perf_counter(); fn(keys); return (time.perf_counter() - t) / len(keys) * 1e6
    out = {"get_present_us_per_key": [], "get_absent_us_per_key": [], "put_us_per_key": []}
    for r in range(a.repeats):
        keys = present()
        got = cache.get_many(keys)
        assert len(got) == len(set(keys)), f"{len(set(keys)) - len(got)} present keys were not found"
        out["get_present_us_per_key"].append(timed(cache.get_many, present()))
        out["get_absent_us_per_key"].append(timed(lambda k: cache.get_many(k), absent()))
        base = 2 * 10 ** 9 + (n + r) * a.batch
        value = "x" * a.value_chars
        items = [(request_key(q), value, q) for q in (request(base + i, a.request_chars) for i in range(a.batch))]
        t = time.perf_counter(); cache.put_many(items); out["put_us_per_key"].append((time.perf_counter() - t) / a.batch * 1e6)
    return {k: round(statistics.median(v), 2) for k, v in out.items()}


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, required=True, help="the cache file to fill (removed first; GBs at 1M entries)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--batch", type=int, default=1000, help="keys per get_many / put_many")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--request-chars", type=int, default=2000)
    ap.add_argument("--value-chars", type=int, default=600)
    ap.add_argument("--max-ratio", type=float, default=3.0, help="fail if a per-key time at the largest size exceeds this x the smallest's")
    ap.add_argument("--csv", type=Path, default=None)
    ap.add_argument("--note", default="", help="e.g. 'busy machine'")
    ap.add_argument("--busy-sample-s", type=float, default=3.0)
    ap.add_argument("--keep", action="store_true", help="keep the filled database")
    a = ap.parse_args(argv)
    from leaf_nb.cache import Cache
    for suffix in ("", "-wal", "-shm"): Path(str(a.db) + suffix).unlink(missing_ok=True)
    cache, rng, rows, filled = Cache(a.db), random.Random(0), [], 0
    for n in sorted(a.sizes):
        t = time.perf_counter()
        fill(cache, filled, n, a)
        fill_s = time.perf_counter() - t
        filled = n
        busy = other_busy_cpus(a.busy_sample_s)
        row = {"entries": n, "batch": a.batch, **measure(cache, n, a, rng), "fill_s": round(fill_s, 1),
               "db_mb": round(sum(os.path.getsize(p) for p in (str(a.db), str(a.db) + "-wal") if os.path.exists(p)) / 2**20, 1),
               "request_chars": a.request_chars, "value_chars": a.value_chars, "other_busy_cpus": busy, "note": a.note}
        print(json.dumps(row), flush=True)
        rows.append(row)
    cache.close()
    if a.csv: append_rows(a.csv, COLUMNS, rows, "benchmarks/cache_scale.py")
    if not a.keep:
        for suffix in ("", "-wal", "-shm"): Path(str(a.db) + suffix).unlink(missing_ok=True)
    first, last = rows[0], rows[-1]
    bad = [c for c in ("get_present_us_per_key", "get_absent_us_per_key", "put_us_per_key")
           if last[c] > a.max_ratio * max(first[c], 1.0)]
    for c in ("get_present_us_per_key", "get_absent_us_per_key", "put_us_per_key"):
        print(f"{c}: {first[c]} us at {first['entries']:,} entries, {last[c]} us at {last['entries']:,} ({last[c] / max(first[c], 1e-9):.2f}x)")
    if bad: raise SystemExit(f"cache lookups are not constant-time: {bad} grew more than {a.max_ratio}x from {first['entries']:,} to {last['entries']:,} entries")
    return rows


if __name__ == "__main__":
    main()
