"""How fast FFRR's policy embeds its report pool with the embedded all-MiniLM-L6-v2 and with the rehearsal's stand-in
encoder (`rehearsal_data.build_standin_encoder`, `profiles/rehearsal.yaml`'s `roberta_base`), on the rehearsal's synthetic
LIAR-RAW reports, in one run:

    OMP_NUM_THREADS=1 python benchmarks/standin_encoder.py --data /tmp/rehearsal/data

Both are timed on FFRR's own path: a `leaf_nb.ffrr.Policy` over leak-free reports of the test split (`leak_free_pool`)
at the paper profile's `max_length` (256 tokens), then `Policy.refresh()` (what every trained method runs after each
epoch: re-embed D in batches of 64 and rebuild the FAISS index) timed on its own, after the first embedding that the
constructor does. It prints documents per second for each, their ratio, and the time one refresh of a pool of
`--pool` reports takes at each rate (default: LIAR-RAW's whole pool, all splits, measured by `--count-pool`). Reads the
data folder only; the stand-in is built in `--models` (a temporary folder by default).
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


def docs_per_s(pool: list[dict], encoder: str | None, max_length: int, repeats: int) -> tuple[float, float]:
    "Documents embedded per second by `Policy.refresh()` over `pool` (best of `repeats`), and the seconds of one."
    from leaf_nb.ffrr import Policy
    policy = Policy(pool, encoder, max_length=max_length, progress=False)  # embeds once (warm-up: threads, allocator)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        policy.refresh()
        best = min(best, time.perf_counter() - t)
    return len(pool) / best, best


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path("/tmp/rehearsal/data"), help="the rehearsal data folder (read only)")
    ap.add_argument("--models", type=Path, default=None, help="where the stand-in is built (default: a temporary folder)")
    ap.add_argument("--minilm-docs", type=int, default=96, help="reports MiniLM embeds per timed refresh")
    ap.add_argument("--standin-docs", type=int, default=3000, help="reports the stand-in embeds per timed refresh")
    ap.add_argument("--max-length", type=int, default=256, help="encoder tokens per report (table2_verification.paper.yaml)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--pool", type=int, default=0, help="reports in the pool the projection is for (0: count LIAR-RAW's, all splits)")
    a = ap.parse_args(argv)
    import torch
    from leaf_nb.data import load_claims
    from leaf_nb.ffrr import leak_free_pool
    from rehearsal_data import build_standin_encoder
    n = max(a.minilm_docs, a.standin_docs)
    pool, _ = leak_free_pool(load_claims(a.data / "LIAR-RAW", "liar-raw", "test"))
    if len(pool) < n: raise SystemExit(f"the test split holds {len(pool):,} leak-free reports, fewer than {n:,}")
    with tempfile.TemporaryDirectory() as tmp:
        standin = build_standin_encoder(a.models or Path(tmp))
        mini_rate, mini_s = docs_per_s(pool[:a.minilm_docs], None, a.max_length, a.repeats)
        stand_rate, stand_s = docs_per_s(pool[:a.standin_docs], str(standin), a.max_length, a.repeats)
    full = a.pool
    if not full:  # every split's leak-free reports: the pool each trained method re-embeds
        full = sum(len(leak_free_pool(load_claims(a.data / "LIAR-RAW", "liar-raw", s))[0]) for s in ("train", "val", "test"))
    words = sum(len(d["content"].split()) for d in pool[:n]) / n
    out = {"torch_threads": torch.get_num_threads(), "max_length": a.max_length, "words_per_report": round(words, 1),
           "minilm_docs": a.minilm_docs, "minilm_s": round(mini_s, 2), "minilm_docs_per_s": round(mini_rate, 2),
           "standin": standin.name, "standin_docs": a.standin_docs, "standin_s": round(stand_s, 2),
           "standin_docs_per_s": round(stand_rate, 1), "ratio": round(stand_rate / mini_rate, 1), "pool": full,
           "refresh_minilm_h": round(full / mini_rate / 3600, 2), "refresh_standin_min": round(full / stand_rate / 60, 1)}
    print(f"FFRR's Policy.refresh() on {torch.get_num_threads()} thread(s), {a.max_length} tokens a report "
          f"({words:.0f} words on average): all-MiniLM-L6-v2 {mini_rate:.2f} reports/s ({a.minilm_docs} in {mini_s:.1f} s), "
          f"stand-in {standin.name} {stand_rate:.1f} reports/s ({a.standin_docs} in {stand_s:.1f} s): {stand_rate / mini_rate:.0f}x. "
          f"One refresh of LIAR-RAW's {full:,} reports: {full / mini_rate / 3600:.1f} h with MiniLM, "
          f"{full / stand_rate / 60:.1f} min with the stand-in.")
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
