"""FAISS index choices for MedRAG-sized corpora: flat, HNSW and IVF-PQ over synthetic vectors, with the settings
leaf-nb's `Dense` uses (built by `leaf_nb.retrieve.make_faiss_index`): memory, build time, queries per second and
recall@10 against the exact (flat) answer.

    python benchmarks/dense_indexes.py --n 1000000 --workdir /tmp/dense-bench --csv benchmarks/results/dense_indexes.csv

The vectors are synthetic, not embeddings of text: encoding a million passages with MiniLM takes about ten hours on
two cores, and an index's speed and memory depend only on the vectors' number and dimension. Recall does depend on
how the vectors are spread, so they are drawn to look like sentence embeddings rather than uniform noise: 2,000
Gaussian clusters in a 48-dimensional subspace, spread within each cluster, embedded in `--dim` dimensions by a
random orthonormal map, plus a little isotropic noise, then normalised (cosine = inner product, as in `Dense`).
Queries are 1,000 fresh draws from the same mixture; an IVF index is also searched with each `--nprobe`.
Each index is built and searched in its own process, which
reports its wall times and peak RSS (VmHWM; it includes the memory-mapped input vectors, n x dim x 4 bytes, that
every build reads); "index (MB)" is the index file `Dense` would save. FAISS runs on `--threads` threads.
"""
from __future__ import annotations

import argparse
import csv
import inspect
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from results_csv import other_busy_cpus  # benchmarks/results_csv.py (scripts run from the repository root)

LATENT, CLUSTERS = 48, 2000


def vectors(n: int, dim: int, seed: int, chunk: int = 100_000):
    "Chunks of `n` unit vectors from the clustered low-rank mixture (the same mixture for every seed)."
    g = np.random.default_rng(0)
    centres = g.normal(size=(CLUSTERS, LATENT)).astype(np.float32)
    spread = g.uniform(0.3, 0.8, size=CLUSTERS).astype(np.float32)
    basis = np.linalg.qr(g.normal(size=(dim, LATENT)))[0].T.astype(np.float32)  # LATENT x dim, orthonormal rows
    rng = np.random.default_rng(seed)
    for s in range(0, n, chunk):
        m = min(chunk, n - s)
        c = rng.integers(CLUSTERS, size=m)
        z = centres[c] + spread[c, None] * rng.normal(size=(m, LATENT)).astype(np.float32)
        x = z @ basis + 0.05 * rng.normal(size=(m, dim)).astype(np.float32)
        yield (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def peak_rss_gb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"): return int(line.split()[1]) / 2**20
    return float("nan")


def child(a) -> dict:
    import faiss
    from leaf_nb.retrieve import Dense, ivf_settings, make_faiss_index
    faiss.omp_set_num_threads(a.threads)
    defaults = {k: p.default for k, p in inspect.signature(Dense.__init__).parameters.items()}
    base = np.load(a.work / "base.npy", mmap_mode="r")
    queries = np.load(a.work / "queries.npy")
    n, dim = base.shape
    out = {"index": a.index, "passages": n, "dim": dim, "threads": a.threads}
    t = time.perf_counter()
    train, nlist = None, 1
    if a.index in ("ivf", "ivfpq"):
        nlist, size = ivf_settings(a.index, n)
        pick = np.sort(np.random.default_rng(0).choice(n, size, replace=False))
        train = np.ascontiguousarray(base[pick])
        out["nlist"], out["train_size"] = nlist, size
    index = make_faiss_index(a.index, dim, train, hnsw_m=defaults["hnsw_m"], nlist=nlist, pq_nbits=defaults["pq_nbits"])
    out["train_s"] = time.perf_counter() - t
    del train
    for s in range(0, n, 100_000): index.add(np.ascontiguousarray(base[s:s + 100_000]))
    out["build_s"] = time.perf_counter() - t
    if a.index == "hnsw": index.hnsw.efSearch = defaults["ef_search"]; out["ef_search"] = defaults["ef_search"]
    if a.index in ("ivf", "ivfpq"): index.nprobe = defaults["nprobe"]; out["nprobe"] = defaults["nprobe"]
    if a.index == "ivfpq": out["pq_m"] = index.pq.M
    truth, results = a.work / "truth.npy", []
    probes = [out["nprobe"]] + [x for x in a.nprobe if x != out["nprobe"]] if "nprobe" in out else [None]
    for nprobe in probes:
        if nprobe is not None: index.nprobe = nprobe
        index.search(queries[:50], 10)  # warm up
        t = time.perf_counter()
        _, rows = index.search(queries, 10)
        qps = len(queries) / (time.perf_counter() - t)
        if a.index == "flat": np.save(truth, rows)
        recall = float(np.mean([len(set(r) & set(e)) / 10 for r, e in zip(rows, np.load(truth))]))
        results.append({**out, **({"nprobe": nprobe} if nprobe is not None else {}), "qps": qps, "recall_at_10": recall})
    peak = peak_rss_gb()
    saved = a.work / f"{a.index}.faiss"  # the index as `Dense` saves it (written after the peak is read)
    faiss.write_index(index, str(saved))
    size = saved.stat().st_size / 2**20
    saved.unlink()
    return [{**r, "peak_gb": peak, "index_mb": size} for r in results]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000, help="vectors (passages)")
    ap.add_argument("--dim", type=int, default=384, help="dimension (all-MiniLM-L6-v2: 384; MedCPT: 768)")
    ap.add_argument("--indexes", nargs="+", default=["flat", "hnsw", "ivfpq"], choices=["flat", "hnsw", "ivf", "ivfpq"])
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--nprobe", type=int, nargs="+", default=[64], help="IVF: clusters visited per query, measured besides Dense's default")
    ap.add_argument("--workdir", type=Path, required=True, help="the vectors go here (n x dim x 4 bytes)")
    ap.add_argument("--timeout", type=float, default=None)
    ap.add_argument("--csv", type=Path, default=None, help="append the rows to this CSV")
    ap.add_argument("--busy-sample-s", type=float, default=3.0, help="seconds spent measuring other load before each index")
    a = ap.parse_args(argv)
    a.workdir.mkdir(parents=True, exist_ok=True)
    meta = a.workdir / "vectors.json"
    if not meta.exists() or json.loads(meta.read_text()) != {"n": a.n, "dim": a.dim}:
        print(f"drawing {a.n:,} vectors of {a.dim} dimensions ...", file=sys.stderr)
        base = np.lib.format.open_memmap(a.workdir / "base.npy", mode="w+", dtype=np.float32, shape=(a.n, a.dim))
        s = 0
        for x in vectors(a.n, a.dim, seed=1): base[s:s + len(x)] = x; s += len(x)
        base.flush(); del base
        np.save(a.workdir / "queries.npy", np.concatenate(list(vectors(a.queries, a.dim, seed=2))))
        meta.write_text(json.dumps({"n": a.n, "dim": a.dim}))
    rows = []
    for kind in ["flat"] + [k for k in a.indexes if k != "flat"]:  # flat first: it writes the exact answers
        cmd = [sys.executable, str(Path(__file__).resolve()), "_child", "--index", kind, "--work", str(a.workdir), "--threads", str(a.threads),
               "--nprobe", *map(str, a.nprobe)]
        load, busy = os.getloadavg()[0], other_busy_cpus(a.busy_sample_s)  # busy: sampled while no child runs (timings valid near 0)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
        if p.returncode != 0: raise RuntimeError(f"{kind} failed:\n{p.stderr[-3000:]}")
        for r in json.loads(p.stdout.strip().splitlines()[-1]):
            rows.append({**r, "load_avg_1min": load, "other_busy_cpus": busy})
            print(f"  {rows[-1]}", file=sys.stderr, flush=True)
    print("| index | vectors | build (s) | peak RSS (GB) | index (MB) | q/s | recall@10 vs flat | settings |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        settings = ", ".join(f"{k}={r[k]}" for k in ("ef_search", "nlist", "nprobe", "pq_m", "train_size") if k in r)
        print(f"| {r['index']} | {r['passages']:,} x {r['dim']} | {r['build_s']:,.1f} | {r['peak_gb']:.2f} | {r['index_mb']:,.0f} "
              f"| {r['qps']:,.0f} | {r['recall_at_10']:.3f} | {settings} |")
    if a.csv:
        cols = ["index", "passages", "dim", "threads", "build_s", "train_s", "peak_gb", "index_mb", "qps", "recall_at_10",
                "ef_search", "nlist", "nprobe", "pq_m", "train_size", "load_avg_1min", "other_busy_cpus"]
        new = not a.csv.exists()
        a.csv.parent.mkdir(parents=True, exist_ok=True)
        with open(a.csv, "a", newline="") as f:
            w = csv.DictWriter(f, cols, extrasaction="ignore")
            if new: w.writeheader()
            for r in rows: w.writerow({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()})
    return rows


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        ap = argparse.ArgumentParser()
        ap.add_argument("_child"); ap.add_argument("--index"); ap.add_argument("--work", type=Path); ap.add_argument("--threads", type=int)
        ap.add_argument("--nprobe", type=int, nargs="+", default=[])
        print(json.dumps(child(ap.parse_args())))
    else:
        main()
