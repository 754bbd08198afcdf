"""What BM25's explicit tie rule costs, and how often it decides anything.

    OMP_NUM_THREADS=1 python benchmarks/bm25_ties.py                    # data/medcorpus.jsonl, then 100k synthetic passages
    python benchmarks/bm25_ties.py --passages 1000000 --queries 5000

leaf-nb's `BM25._search` ranks equal scores by corpus position (the passage earlier in the corpus first): bm25s leaves
them to `np.argpartition`, whose choice among ties changed with the numpy version and the CPU, so a recorded smoke run
stopped replaying on a fresh install. To do that it asks bm25s for k + 1 passages, sorts each row by (score, position),
and where the k-th and (k+1)-th scores are equal ranks the query again from its full score vector.

For each corpus this prints, over one set of queries: how many queries hold a tie in their top k, how many a tie across
the cut at k (those take the full-vector path), how many come out in another order than bm25s's own (and how many with other passages: a tie across the cut), and the search
rate of the old path (bm25s's `retrieve` at k, zero scores dropped: a copy of `_search` before the rule, kept here as
the baseline) against the new `_search`, timed alternately in one process on the same loaded index, best of
`--repeats` (a corpus with few queries repeats them to at least 5,000 a batch). Corpora: `data/medcorpus.jsonl` with `data/retrieval_queries.jsonl` and the queries the smoke records
hold (the LLM's own search queries, where the ties that broke replay came from), and a synthetic corpus from
`benchmarks/retrieval.py`'s generator with its LLM-style keyword queries. Time it on an idle machine.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from results_csv import append_rows, other_busy_cpus  # noqa: E402  benchmarks/results_csv.py


def old_search(r, queries: list[str], k: int) -> list[list[tuple[int, float]]]:
    "`BM25._search` before the tie rule: bm25s's own top k, zero scores dropped (the baseline, deliberately a copy)."
    q = r.tokenizer.tokenize(list(queries), update_vocab=False, return_as="ids", show_progress=False)
    docs, scores = r.model.retrieve(q, k=k, n_threads=r.n_threads, show_progress=False)
    return [[(int(d), float(s)) for d, s in zip(dr, sr) if s > 0] for dr, sr in zip(docs, scores)]


def tie_counts(r, queries: list[str], k: int) -> dict:
    "Queries with equal scores inside their top k, and across the cut at k (score k equal to score k + 1, above 0)."
    q = r.tokenizer.tokenize(list(queries), update_vocab=False, return_as="ids", show_progress=False)
    inside = across = 0
    for ids in q:
        s = np.sort(r.model.get_scores_from_ids(ids))[::-1][:k + 1]
        top = s[:k][s[:k] > 0]
        inside += len(np.unique(top)) < len(top)
        across += len(s) > k and s[k - 1] > 0 and s[k] == s[k - 1]
    return {"ties_in_top_k": int(inside), "ties_across_cut": int(across)}


def rate(fn, queries: list[str]) -> float:
    t = time.perf_counter(); fn(queries)
    return len(queries) / (time.perf_counter() - t)


def measure(name: str, r, queries: list[str], k: int, repeats: int, a_min_timed: int = 5000) -> dict:
    old, new = old_search(r, queries, k), r._search(queries, k)
    row = {"corpus": name, "passages": len(r.corpus), "queries": len(queries), "k": k, **tie_counts(r, queries, k),
           "order_differs": sum(a != b for a, b in zip(old, new)),
           "passage_set_differs": sum({d for d, _ in a} != {d for d, _ in b} for a, b in zip(old, new))}
    timed = queries * -(-a_min_timed // len(queries))  # a few queries repeated: enough of them to time
    r._search(queries[:50], k); old_search(r, queries[:50], k)  # warm up: numba's compile, the page cache
    old_qps = new_qps = 0.0
    for _ in range(repeats):  # alternately, so that drift in the machine's speed falls on both
        old_qps = max(old_qps, rate(lambda qs: old_search(r, qs, k), timed))
        new_qps = max(new_qps, rate(lambda qs: r._search(qs, k), timed))
    return {**row, "old_qps": round(old_qps), "new_qps": round(new_qps), "new_over_old": round(new_qps / old_qps, 3)}


def recorded_queries() -> list[str]:
    "The search queries the committed smoke records hold: each query-writing reply, parsed as the fact-checker parses it."
    from leaf_nb.prompts import UNPARSED, parse_query
    out = []
    for rec in sorted(ROOT.glob("nbs/**/records/*.jsonl")):
        for line in rec.read_text(encoding="utf-8").splitlines():
            x = json.loads(line)
            prompt = x["request"].get("prompt")
            text = prompt if isinstance(prompt, str) else " ".join(m.get("content") or "" for m in prompt or [])
            if x["request"].get("op") == "generate" and "search query" in text and isinstance(x["value"], str):
                q = parse_query(x["value"])
                if q != UNPARSED: out.append(q)
    return sorted(set(out))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--passages", type=int, default=100_000, help="synthetic corpus size (0: skip it)")
    ap.add_argument("--queries", type=int, default=5000, help="synthetic queries")
    ap.add_argument("--k", type=int, nargs="+", default=[1, 10], help="passages per query")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=-1, help="bm25s threads (-1: all cores)")
    ap.add_argument("--csv", type=Path, help="append the rows here, e.g. benchmarks/results/bm25_ties.csv")
    ap.add_argument("--note", default="")
    a = ap.parse_args(argv)
    from leaf_nb.retrieve import BM25
    busy = other_busy_cpus()
    print(f"other busy CPUs before: {busy:.2f} (timings are valid near 0)", file=sys.stderr)
    rows = []
    small = BM25(str(ROOT / "data" / "medcorpus.jsonl"), progress=False, n_threads=a.threads)
    fixture = [json.loads(l)["query"] for l in (ROOT / "data" / "retrieval_queries.jsonl").read_text().splitlines() if l.strip()]
    llm_queries = recorded_queries()
    for k in a.k:
        rows.append(measure("medcorpus, retrieval_queries", small, fixture, k, a.repeats))
        rows.append(measure("medcorpus, the records' LLM queries", small, llm_queries, k, a.repeats))
    if a.passages:
        from retrieval import generate
        with tempfile.TemporaryDirectory(prefix="bm25-ties-") as tmp:
            path = Path(tmp) / "corpus.jsonl"
            print(f"generating {a.passages:,} passages ...", file=sys.stderr)
            qs = [q["query"] for q in generate(path, a.passages, a.queries, query_style="keywords")]
            big = BM25(str(path), progress=False, n_threads=a.threads, backend="numba")
            for k in a.k: rows.append(measure("synthetic, keyword queries", big, qs, k, a.repeats))
    import pandas as pd
    df = pd.DataFrame(rows).assign(threads=a.threads, other_busy_cpus=round(busy, 2))
    print(df.to_string(index=False))
    if a.csv: append_rows(a.csv, ["date", *df.columns, "command", "note"], [{**r, "note": a.note} for r in df.to_dict("records")],
                          "benchmarks/bm25_ties.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
