"""Host memory of scoring answers with a local reward model (`RewardModelScorer._local`), measured in one run.

Table 4's rehearsal at full size scores 38,315 sampled answers. `_local` used to encode every (question, answer)
pair up front and hold the token lists while it scored; it now keeps one length per pair and encodes each batch
when it is scored. This script measures both on the same pairs: the memory that holding every encoding takes
(what the old code held) against the lengths alone (what the new code holds), then scores a few batches to show
the scorer's own peak. Pairs are seeded synthetic text; the model is the test reward model (the embedded MiniLM
under a seeded head), on the CPU.

It then measures the order of the batches. Table 4's rehearsal grew from 5.2 to 9.9 GB while it scored, when `_local`
ran its batches shortest first: each batch a little longer than the one before needs a block that the blocks freed
before it cannot hold, so the heap grows. `_local` now runs the same batches longest first. Two fresh processes score
the same pairs (their lengths spread evenly up to the model's 512 tokens, as sampled answers are) on two threads,
one in each order; each reports its peak RSS over the loaded model and its scoring time, and the scores are compared.
The bytes hold on a busy machine; the seconds only on an idle one.

    OMP_NUM_THREADS=1 python benchmarks/reward_scoring_memory.py --pairs 3000 --order-pairs 3000
"""
from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import subprocess
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


def spread_pairs(n: int, seed: int) -> list[tuple[str, str]]:
    "Short questions and answers of 10-480 words: pair lengths spread up to MiniLM's 512 tokens."
    rng = random.Random(seed)
    return [(" ".join(rng.choices(WORDS, k=rng.randint(15, 40))), " ".join(rng.choices(WORDS, k=rng.randint(10, 480))))
            for _ in range(n)]


def shortest_first(rm, pairs):
    "`_local` as it was: the same batches, shortest first."
    import torch
    model, tok = rm.load()
    lengths = [len(rm._encode(tok, p, a)["input_ids"]) for p, a in pairs]
    order = sorted(range(len(pairs)), key=lengths.__getitem__)
    tok.padding_side = "right"
    for s in range(0, len(order), rm.batch_size):
        b = order[s:s + rm.batch_size]
        batch = tok.pad([rm._encode(tok, *pairs[i]) for i in b], return_tensors="pt").to(model.device)
        with torch.inference_mode(): out = model(**batch)
        yield from zip(b, out.logits[:, rm.label].float().cpu().tolist())


def child(order: str, n: int, seed: int, threads: int) -> int:
    "Score `n` spread pairs in one order in this (fresh) process; print its growth and the scores as JSON."
    import torch
    torch.set_num_threads(threads)
    from leaf_nb.selftrain import RewardModelScorer, build_test_reward_model
    pairs = spread_pairs(n, seed)
    with tempfile.TemporaryDirectory() as tmp:
        rm = RewardModelScorer(build_test_reward_model(Path(tmp)), cache=None, progress=False)
        rm.load()
        base = rss()
        t0 = time.perf_counter()
        scores = dict(rm._local(pairs) if order == "longest" else shortest_first(rm, pairs))
        seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kB
    print(json.dumps({"grew": peak - base, "seconds": seconds, "scores": [scores[i] for i in range(n)]}))
    return 0


def by_order(n: int, seed: int, threads: int) -> dict:
    out = {}
    for order in ("shortest", "longest"):
        r = subprocess.run([sys.executable, __file__, "--child", order, "--order-pairs", str(n), "--seed", str(seed),
                            "--threads", str(threads)], capture_output=True, text=True)
        if r.returncode: sys.exit(f"the {order}-first process failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
        out[order] = json.loads(r.stdout.strip().splitlines()[-1])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=3000, help="pairs to encode")
    ap.add_argument("--score", type=int, default=64, help="pairs to score (the scorer's peak)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--order-pairs", type=int, default=3000, help="pairs each order scores (0: skip that part)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads of the two scoring processes")
    ap.add_argument("--child", choices=("shortest", "longest"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child: return child(a.child, a.order_pairs, a.seed, a.threads)
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
    if a.order_pairs:
        r = by_order(a.order_pairs, a.seed, a.threads)
        short, long_ = r["shortest"]["grew"], r["longest"]["grew"]
        print(f"batch order, {a.order_pairs:,} pairs of 10-512 tokens on {a.threads} threads, each order in a fresh process: "
              f"peak RSS over the loaded model {short / 1e9:.2f} GB shortest first (the old _local), "
              f"{long_ / 1e9:.2f} GB longest first (the new), {short / max(long_, 1):.1f}x; "
              f"scores identical: {r['shortest']['scores'] == r['longest']['scores']}; scoring took "
              f"{r['shortest']['seconds']:.0f} s shortest first, {r['longest']['seconds']:.0f} s longest first "
              f"({r['longest']['seconds'] / r['shortest']['seconds']:.2f}x; time only on an idle machine)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
