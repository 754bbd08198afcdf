"""What FFRR's `Policy.refresh()` costs with D kept tokenized (`keep_tokens`, the default) against tokenizing D at every
refresh (`keep_tokens=False`, what every refresh did before), measured in one run on the rehearsal's synthetic
LIAR-RAW reports, for the embedded all-MiniLM-L6-v2 and for the rehearsal's stand-in encoder
(`rehearsal_data.build_standin_encoder`, `profiles/rehearsal.yaml`'s `roberta_base`):

    OMP_NUM_THREADS=1 python benchmarks/policy_refresh.py --data /tmp/rehearsal/data

Per encoder, on the same policy and reports: tokenizing alone (`Policy._tokenized_batches`), a refresh that tokenizes,
the first refresh with `keep_tokens` (tokenizes and keeps) and a later one (the encoder only), best of `--repeats`
each. It checks that all three give the same index bit for bit, prints reports per second, the ratio of a later
refresh to a tokenizing one, the bytes the kept tokens take, and what one refresh of LIAR-RAW's whole pool (all
splits, leak-free) takes each way at these rates. Reads the data folder only; the stand-in is built in `--models`
(a temporary folder by default). Time it on an idle machine.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def best_s(fn, repeats: int) -> float:
    "The fastest of `repeats` calls of `fn`, in seconds."
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def measure(pool: list[dict], encoder: str | None, max_length: int, repeats: int) -> dict:
    "Seconds of tokenizing, of a tokenizing refresh and of a refresh from kept tokens over `pool`, on one policy."
    import numpy as np
    from leaf_nb.ffrr import Policy
    p = Policy(pool, encoder, max_length=max_length, progress=False, keep_tokens=False)  # embeds once: the warm-up
    tokenize = best_s(lambda: list(p._tokenized_batches()), repeats)
    tokenizing = best_s(p.refresh, repeats)
    old = p.index.reconstruct_n(0, len(pool))
    p.keep_tokens = True
    t = time.perf_counter()
    p.refresh()  # tokenizes and keeps
    first = time.perf_counter() - t
    kept_bytes = sum(getattr(v, "nbytes", 0) for _, feats in p._batches for v, _ in feats.values())
    kept = best_s(p.refresh, repeats)
    n = len(pool)
    return {"docs": n, "identical": bool(np.array_equal(p.index.reconstruct_n(0, n), old)), "tokenize_s": round(tokenize, 2), "tokenizing_refresh_s": round(tokenizing, 2),
            "first_kept_refresh_s": round(first, 2), "kept_refresh_s": round(kept, 2),
            "tokenize_docs_per_s": round(n / tokenize, 1), "tokenizing_docs_per_s": round(n / tokenizing, 1),
            "kept_docs_per_s": round(n / kept, 1), "speedup": round(tokenizing / kept, 2),
            "kept_bytes_per_doc": round(kept_bytes / n)}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path("/tmp/rehearsal/data"), help="the rehearsal data folder (read only)")
    ap.add_argument("--models", type=Path, default=None, help="where the stand-in is built (default: a temporary folder)")
    ap.add_argument("--minilm-docs", type=int, default=256, help="reports MiniLM embeds per timed refresh")
    ap.add_argument("--standin-docs", type=int, default=3000, help="reports the stand-in embeds per timed refresh")
    ap.add_argument("--max-length", type=int, default=256, help="encoder tokens per report (table2_verification.paper.yaml)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--pool", type=int, default=0, help="reports in the pool the projection is for (0: count LIAR-RAW's, all splits)")
    a = ap.parse_args(argv)
    import torch
    from leaf_nb.data import load_claims
    from leaf_nb.ffrr import leak_free_pool
    from rehearsal_data import build_standin_encoder
    pool, _ = leak_free_pool(load_claims(a.data / "LIAR-RAW", "liar-raw", "test"))
    n = max(a.minilm_docs, a.standin_docs)
    if len(pool) < n: raise SystemExit(f"the test split holds {len(pool):,} leak-free reports, fewer than {n:,}")
    with tempfile.TemporaryDirectory() as tmp:
        standin = build_standin_encoder(a.models or Path(tmp))
        rows = {"all-MiniLM-L6-v2": measure(pool[:a.minilm_docs], None, a.max_length, a.repeats),
                standin.name: measure(pool[:a.standin_docs], str(standin), a.max_length, a.repeats)}
    if not all(r["identical"] for r in rows.values()):
        raise SystemExit("a refresh from kept tokens gave other embeddings than one that tokenizes: " + json.dumps(rows))
    full = a.pool or sum(len(leak_free_pool(load_claims(a.data / "LIAR-RAW", "liar-raw", s))[0])
                         for s in ("train", "val", "test"))
    print(f"FFRR's Policy.refresh() on {torch.get_num_threads()} torch thread(s), {a.max_length} tokens a report; "
          f"projections for LIAR-RAW's whole pool of {full:,} reports:")
    for name, r in rows.items():
        r.update(pool=full, tokenizing_refresh_min=round(full / r["tokenizing_docs_per_s"] / 60, 1),
                 kept_refresh_min=round(full / r["kept_docs_per_s"] / 60, 1),
                 kept_mb=round(full * r["kept_bytes_per_doc"] / 1e6))
        print(f"  {name} ({r['docs']:,} reports): tokenizing alone {r['tokenize_docs_per_s']:,} reports/s; a refresh "
              f"that tokenizes {r['tokenizing_docs_per_s']:,}/s, from kept tokens {r['kept_docs_per_s']:,}/s "
              f"({r['speedup']}x, the same embeddings bit for bit); one refresh of the pool {r['tokenizing_refresh_min']} "
              f"against {r['kept_refresh_min']} min, its tokens kept in {r['kept_mb']:,} MB")
    out = {"torch_threads": torch.get_num_threads(), "max_length": a.max_length, "encoders": rows}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
