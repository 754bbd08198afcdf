"""Where the time of scoring answers with a local reward model goes (`RewardModelScorer._local`), measured in one run.

Table 4's full-size rehearsal (2026-12-06, idle machine) spent about 56 of its 106 minutes scoring the 38,315 sampled
answers with `profiles/rehearsal.yaml`'s stand-in for ArmoRM: the embedded MiniLM under a seeded head, on the CPU.
This script scores a seeded sample of those same (question, answer) pairs, read from that rehearsal's cache (or
spread synthetic pairs without one), with the same scorer code, in a fresh process for each torch thread count. It
splits each run's time into the lengths pass (every pair tokenised once, to sort by length), the forward passes, and
the rest (encoding and padding each batch, reading its scores), and counts the model's arithmetic from its shapes
and each batch's padded length, so the rate can be set against what a core does. The seconds hold only on an idle
machine (`other_busy_cpus` is sampled before each process).

    OMP_NUM_THREADS=1 python benchmarks/reward_scoring_speed.py --cache /tmp/reh/t4/cache/table4_ranking_delta.sqlite \
        --model /tmp/reh/data/models/minilm-rm-head-seed0 --pairs 1500 --threads 1 2
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results_csv import append_rows, other_busy_cpus  # noqa: E402  benchmarks/results_csv.py
from reward_scoring_memory import TABLE4_SAMPLES, spread_pairs  # noqa: E402

COLUMNS = ["date", "source", "pairs", "threads", "batch_size", "mean_tokens", "share_at_limit", "padded_share",
           "lengths_s", "forward_s", "other_s", "total_s", "pairs_per_s", "tokens_per_s", "gflop_per_s",
           "projected_table4_min", "other_busy_cpus", "command", "note"]


def cached_pairs(cache: Path) -> list[tuple[str, str]]:
    "Every (prompt, answer) a local reward model scored in this cache (requests `op: reward`, kind `seqcls`)."
    con = sqlite3.connect(f"file:{cache}?mode=ro", uri=True)
    out = []
    # canonical JSON sorts keys, so a reward request starts with its "answer"
    for (req,) in con.execute("SELECT request FROM entries WHERE request LIKE '{\"answer\"%'"):
        r = json.loads(req)
        if r.get("op") == "reward" and r.get("kind") == "seqcls": out.append((r["prompt"], r["answer"]))
    con.close()
    if not out: sys.exit(f"{cache} holds no local reward-model request")
    return out


def flops(cfg, seq: int, batch: int) -> float:
    "Multiply-adds x 2 of one BERT forward pass over `batch` sequences of `seq` tokens (projections, MLP, attention)."
    h, i, n = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    per_layer = 4 * seq * h * h + 2 * seq * h * i + 2 * seq * seq * h
    return 2.0 * batch * n * per_layer


def child(pairs_file: Path, model: str, threads: int, batch_size: int) -> int:
    "Score the pairs in `pairs_file` in this (fresh) process on `threads` threads; print the split as JSON."
    import torch
    torch.set_num_threads(threads)
    from leaf_nb.selftrain import RewardModelScorer
    pairs = [tuple(p) for p in json.loads(pairs_file.read_text())]
    with tempfile.TemporaryDirectory() as tmp:
        if model == "test":
            from leaf_nb.selftrain import build_test_reward_model
            model = build_test_reward_model(Path(tmp))
        rm = RewardModelScorer(model, cache=None, progress=False, batch_size=batch_size)
        net, tok = rm.load()
        limit = min(rm.max_length, tok.model_max_length)
        t = time.perf_counter()
        lengths = [len(rm._encode(tok, p, a)["input_ids"]) for p, a in pairs]  # what `_local` does first
        lengths_s = time.perf_counter() - t
        fwd = {"s": 0.0, "flop": 0.0, "real": 0, "padded": 0}

        def before(mod, args, kwargs):
            ids = kwargs["input_ids"]
            fwd["t"] = time.perf_counter()
            fwd["flop"] += flops(mod.config, ids.shape[1], ids.shape[0])
            fwd["padded"] += ids.numel()
            fwd["real"] += int(kwargs["attention_mask"].sum())

        def after(mod, args, kwargs, out): fwd["s"] += time.perf_counter() - fwd["t"]
        net.register_forward_pre_hook(before, with_kwargs=True)
        net.register_forward_hook(after, with_kwargs=True)
        t = time.perf_counter()
        n = sum(1 for _ in rm._local(pairs))  # the scorer as Table 4 runs it (its own lengths pass included)
        total = time.perf_counter() - t
    print(json.dumps({"pairs": n, "threads": torch.get_num_threads(), "mean_tokens": sum(lengths) / len(lengths),
                      "share_at_limit": sum(x >= limit for x in lengths) / len(lengths),
                      "padded_share": 1 - fwd["real"] / fwd["padded"], "lengths_s": lengths_s, "forward_s": fwd["s"],
                      "other_s": total - lengths_s - fwd["s"], "total_s": total, "flop": fwd["flop"], "tokens": fwd["real"]}))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", type=Path, help="a Table 4 rehearsal's cache: its scored pairs are sampled (default: spread synthetic pairs)")
    ap.add_argument("--model", default="test", help='the reward-model folder ("test": build the test reward model)')
    ap.add_argument("--pairs", type=int, default=1500, help="pairs to score in each process")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="torch thread counts, one fresh process each")
    ap.add_argument("--batch-size", type=int, default=8, help="pairs per forward pass (RewardModelScorer's default, which Table 4 uses)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--csv", type=Path, help="append the rows here, e.g. benchmarks/results/reward_scoring_speed.csv")
    ap.add_argument("--note", default="")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child: return child(a.child, a.model, a.threads[0], a.batch_size)
    if a.cache:
        every = cached_pairs(a.cache)
        pairs, source = random.Random(a.seed).sample(every, min(a.pairs, len(every))), f"cache ({len(every):,} pairs)"
    else:
        pairs, source = spread_pairs(a.pairs, a.seed), "synthetic"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        pf = Path(tmp) / "pairs.json"
        pf.write_text(json.dumps(pairs))
        for t in a.threads:
            busy = other_busy_cpus()
            env = {**os.environ, "OMP_NUM_THREADS": str(t), "TQDM_DISABLE": "1"}
            r = subprocess.run([sys.executable, __file__, "--child", str(pf), "--model", a.model, "--threads", str(t),
                                "--batch-size", str(a.batch_size)], capture_output=True, text=True, env=env)
            if r.returncode: sys.exit(f"the {t}-thread process failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
            m = json.loads(r.stdout.strip().splitlines()[-1])
            rows.append({"source": source, "pairs": m["pairs"], "threads": m["threads"], "batch_size": a.batch_size,
                         "mean_tokens": round(m["mean_tokens"], 1), "share_at_limit": round(m["share_at_limit"], 3),
                         "padded_share": round(m["padded_share"], 3),
                         **{k: round(m[k], 2) for k in ("lengths_s", "forward_s", "other_s", "total_s")},
                         "pairs_per_s": round(m["pairs"] / m["total_s"], 2), "tokens_per_s": round(m["tokens"] / m["total_s"]),
                         "gflop_per_s": round(m["flop"] / m["forward_s"] / 1e9, 1),
                         "projected_table4_min": round(TABLE4_SAMPLES * m["total_s"] / m["pairs"] / 60, 1),
                         "other_busy_cpus": busy, "note": a.note})
    for r in rows:
        print(f"{r['threads']} thread(s): {r['pairs']:,} pairs ({source}), {r['mean_tokens']:.0f} tokens a pair, "
              f"{r['share_at_limit']:.0%} cut at the model's limit, {r['padded_share']:.1%} padding; "
              f"{r['total_s']:.1f} s = lengths pass {r['lengths_s']:.1f} + forward {r['forward_s']:.1f} + other {r['other_s']:.1f}; "
              f"{r['pairs_per_s']:.1f} pairs/s, {r['tokens_per_s']:,} tokens/s, forward at {r['gflop_per_s']:.0f} GFLOP/s; "
              f"Table 4's {TABLE4_SAMPLES:,} pairs would take {r['projected_table4_min']:.0f} min "
              f"(other busy CPUs before: {r['other_busy_cpus']})")
    if len(rows) > 1:
        base = rows[0]
        for r in rows[1:]:
            print(f"{r['threads']} threads against {base['threads']}: {base['total_s'] / r['total_s']:.2f}x the pairs/s")
    if a.csv: append_rows(a.csv, COLUMNS, rows, "benchmarks/reward_scoring_speed.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
