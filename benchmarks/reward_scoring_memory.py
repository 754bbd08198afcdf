"""Host memory of scoring answers with a local reward model (`RewardModelScorer._local`), measured in one run.

Table 4's rehearsal at full size scores 38,315 sampled answers. `_local` used to encode every (question, answer)
pair up front and hold the token lists while it scored; it now keeps one length per pair and encodes each batch
when it is scored. This script measures both on the same pairs: the memory that holding every encoding takes
(what the old code held) against the lengths alone (what the new code holds), then scores a few batches to show
the scorer's own peak. Pairs are seeded synthetic text; the model is the test reward model (the embedded MiniLM
under a seeded head), on the CPU.

    OMP_NUM_THREADS=1 python benchmarks/reward_scoring_memory.py --pairs 3000
"""
from __future__ import annotations

import argparse
import gc
import random
import sys
import tempfile
import time
from pathlib import Path

import psutil

TABLE4_SAMPLES = 38_315  # 7,663 MIRAGE questions x 5 samples (LEAF paper: "Five responses were generated")
WORDS = ("the patient has a fever and metformin lowers glucose in the liver while insulin acts on skeletal muscle "
         "after a meal so the dose is reduced when kidney function falls").split()


def rss() -> int:
    gc.collect()
    return psutil.Process().memory_info().rss


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=3000, help="pairs to encode")
    ap.add_argument("--score", type=int, default=64, help="pairs to score (the scorer's peak)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    from leaf_nb.selftrain import RewardModelScorer, build_test_reward_model
    rng = random.Random(a.seed)
    pairs = [(" ".join(rng.choices(WORDS, k=60)), " ".join(rng.choices(WORDS, k=rng.randint(50, 600)))) for _ in range(a.pairs)]
    with tempfile.TemporaryDirectory() as tmp:
        rm = RewardModelScorer(build_test_reward_model(Path(tmp)), cache=None, progress=False)
        _, tok = rm.load()
        base = rss()
        t = time.perf_counter()
        held = [rm._encode(tok, p, q) for p, q in pairs]
        held_bytes, enc_s = rss() - base, time.perf_counter() - t
        tokens = sum(len(e["input_ids"]) for e in held)
        del held
        base = rss()
        lengths = [len(rm._encode(tok, p, q)["input_ids"]) for p, q in pairs]
        length_bytes = rss() - base
        del lengths
        base, peak = rss(), 0
        t = time.perf_counter()
        for _ in rm._local(pairs[:a.score]): peak = max(peak, psutil.Process().memory_info().rss)
        score_s = time.perf_counter() - t
    per_pair = held_bytes / a.pairs
    print(f"{a.pairs:,} pairs, {tokens / a.pairs:.0f} tokens a pair after truncation at {min(rm.max_length, tok.model_max_length)}; "
          f"encoding them took {enc_s:.1f} s")
    print(f"every encoding held (the old _local): {held_bytes / 1e6:,.0f} MB, {per_pair / 1e3:.1f} kB a pair; "
          f"at Table 4's {TABLE4_SAMPLES:,} samples {per_pair * TABLE4_SAMPLES / 1e9:.1f} GB")
    print(f"lengths only (the new _local): {max(length_bytes, 0) / 1e6:.1f} MB measured for these pairs (one int a pair: "
          f"{TABLE4_SAMPLES * 36 / 1e6:.1f} MB at Table 4's count)")
    print(f"scoring {a.score} pairs: {score_s:.1f} s, RSS {(peak - base) / 1e6:+.0f} MB over the loaded model")
    return 0


if __name__ == "__main__":
    sys.exit(main())
