"""FFRR training-step cost on the RAWFC fixture: seconds per optimiser step and LLM reward calls per step,
first with an empty cache for each level (every rating reaches the LLM) and then again from the same starting encoder on
the warm cache (the same episodes, so every rating is a cache hit and what is left is the encoder's work).

The LLM is the embedded SmolLM2-135M-Instruct through transformers, the policy the embedded MiniLM; the
intermediate questions are written once, before the timed steps, and their cost is reported apart.

    .venv/bin/python benchmarks/ffrr_step.py [--levels d q d+q] [--steps 2] [--k 3] [--max-picks 0] [--shots 2] [--json out.json]

With the paper's rule (--max-picks 0) an episode samples until the termination test fires, so an episode on the
135M model, whose scores rarely put the gold label on top, may rate all of D'; --max-picks caps each sequence.
"""
import argparse
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

from leaf_nb.cache import Cache
from leaf_nb.data import CLAIM_LABELS, load_claims, report_corpus
from leaf_nb.ffrr import PAPER_FFRR, FFRRTrainer, Policy, Verifier, decompose
from leaf_nb.llm import embedded

ROOT = Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", nargs="+", default=["d", "q", "d+q"], choices=["d", "q", "d+q"])
    ap.add_argument("--objective", default="ffrr", choices=["ffrr", "replug"])
    ap.add_argument("--steps", type=int, default=2, help="optimiser steps per level (batch 4 of the 8 training claims)")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--max-length", type=int, default=64, help="encoder tokens per query or document")
    ap.add_argument("--doc-words", type=int, default=40)
    ap.add_argument("--max-picks", type=int, default=0, help="cap on an episode sequence's picks; 0: none (the paper's rule)")
    ap.add_argument("--shots", type=int, default=2, help="demonstrations per prompt (the paper's 2)")
    ap.add_argument("--json", help="also write the rows here")
    a = ap.parse_args()

    splits = {s: load_claims(ROOT / "data" / "rawfc_sample", "rawfc", s) for s in ("train", "val", "test")}
    train, pool = splits["train"], report_corpus([c for s in splits.values() for c in s])
    cache = Cache(Path(tempfile.mkdtemp()) / "ffrr_step.sqlite")
    lm = embedded(cache=cache, progress=False)
    lm.load()
    t0 = time.perf_counter()
    questions = decompose(train, lm, max_tokens=64, shots=a.shots) if any(l != "d" for l in a.levels) else None
    t_questions = time.perf_counter() - t0
    start = Policy(pool, max_length=a.max_length, progress=False)
    s0 = replace(PAPER_FFRR, objective=a.objective, k=a.k, max_steps=a.steps, max_length=a.max_length, doc_words=a.doc_words,
                 max_picks=a.max_picks or None, shots=a.shots)

    rows = []
    for level in a.levels:
        s = replace(s0, level=level)
        level_lm = lm.derive(cache=Path(tempfile.mkdtemp()) / f"{level}.sqlite")  # an empty cache per level, the same loaded weights
        for phase in ("uncached", "cached"):  # the second run repeats the first one's episodes on the warm cache
            ver = Verifier(level_lm, CLAIM_LABELS["rawfc"], s.doc_words, s.shots)
            log = FFRRTrainer(start.copy(), ver, train, s, questions, progress=False).train()
            rows.append({"objective": a.objective, "level": level, "cache": phase, "steps": len(log),
                         "s/step": round(log.seconds.mean(), 2), "ratings/step": round(log.prompts.mean(), 1),
                         "LLM calls/step": round(log.llm_calls.mean() / len(CLAIM_LABELS["rawfc"]), 1),
                         "label scores/step": round(log.llm_calls.mean(), 1), "docs/step": round(log.docs.mean(), 1)})
    table = pd.DataFrame(rows)
    print(f"RAWFC fixture: {len(train)} training claims, {len(pool)} pooled reports, batch {s0.batch_size}, K={s0.k}, "
          f"|D'|={s0.candidates}, encoder max_length {s0.max_length}; questions for {len(train)} claims written once in "
          f"{t_questions:.1f} s" if questions is not None else "")
    print("ratings = (claim, documents) prompts an episode asked for; LLM calls = those that missed the cache "
          "(one prompt pass each, scoring 3 labels)")
    print(table.to_string(index=False))
    if a.json: Path(a.json).write_text(table.to_json(orient="records", indent=1))


if __name__ == "__main__":
    main()
