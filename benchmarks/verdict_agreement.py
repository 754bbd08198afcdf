"""Chain-of-thought verdicts (the paper's) vs one-forward-pass label probabilities: agreement and speed.

Checks the statements of `data/verdict_claims.jsonl` (written by us, half supported by the shipped corpus,
half contradicted by it) with `fact_check(verdict="cot")` and `fact_check(verdict="logprob")`, the same
query writer (the rater, as in SAFE and LEAF, unless `--writer` names another) and BM25 over
`data/medcorpus.jsonl`, `--searches` searches per statement (default 1), no cache. Prints how often the two verdicts agree,
how often each matches our labels, how many chain-of-thought replies ended without a label, and the
sentences/s of each mode. With `--csv` the rows are also appended to a CSV, with the command and the date:
`benchmarks/results/verdict_agreement.csv` is the file `nbs/api/06_factcheck.ipynb` shows.

    .venv/bin/python benchmarks/verdict_agreement.py                                  # embedded SmolLM2 rates
    .venv/bin/python benchmarks/verdict_agreement.py --rater "openai:http://127.0.0.1:8001/v1#Qwen/Qwen2-72B-Instruct" \\
        --rater-tokenizer /models/Qwen2-72B-Instruct --rater-max-tokens 512
    .venv/bin/python benchmarks/verdict_agreement.py --csv benchmarks/results/verdict_agreement.csv
"""
import argparse
import json
import sys
import time
from pathlib import Path

from results_csv import append_rows  # benchmarks/results_csv.py (scripts run from the repository root)

from leaf_nb.factcheck import FactCheckSettings, fact_check
from leaf_nb.llm import embedded, load_llm
from leaf_nb.prompts import NOT_SUPPORTED, SUPPORTED, UNPARSED
from leaf_nb.retrieve import BM25

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ["date", "command", "rater", "writer", "statements", "searches", "rater_max_tokens", "verdict", "seconds", "right",
           "unparsed", "agreement", "note"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rater", default="embedded", help="LLM spec of the rater (see load_llm)")
    ap.add_argument("--rater-tokenizer", default=None, help="tokenizer folder of a served rater (needed for logprob)")
    ap.add_argument("--rater-max-tokens", type=int, default=96)
    ap.add_argument("--writer", default=None, help="LLM spec of the query writer; default: the rater (SAFE's one model)")
    ap.add_argument("--searches", type=int, default=1, help="searches per statement (the paper profile uses 5)")
    ap.add_argument("--csv", type=Path, default=None, help="append the two rows (cot, logprob) to this CSV")
    args = ap.parse_args()
    claims = [json.loads(line) for line in (ROOT / "data" / "verdict_claims.jsonl").read_text().splitlines()]
    bm25 = BM25(ROOT / "data" / "medcorpus.jsonl", progress=False)
    served = {"tokenizer": args.rater_tokenizer} if args.rater_tokenizer else {}
    rater = embedded(cache=None, progress=False) if args.rater == "embedded" else load_llm(args.rater, cache=None, progress=False, **served)
    writer = rater if args.writer is None else embedded(cache=None, progress=False) if args.writer == "embedded" \
        else load_llm(args.writer, cache=None, progress=False)
    for lm in {id(rater): rater, id(writer): writer}.values():
        lm.generate(["warm-up"], max_tokens=1)  # load the weights outside the timings
    rows = {}
    for mode in ("cot", "logprob"):
        s = FactCheckSettings(verdict=mode, n_searches=args.searches, query_max_tokens=24, rater_max_tokens=args.rater_max_tokens)
        t0 = time.perf_counter()
        res = fact_check([c["statement"] for c in claims], [c["question"] for c in claims], llm=writer, rater=rater,
                         retriever=bm25, settings=s)
        rows[mode] = (time.perf_counter() - t0, res.sentences.verdict.tolist())
    gold = [SUPPORTED if c["supported"] else NOT_SUPPORTED for c in claims]
    n = len(claims)
    print(f"\n{n} statements, rater {args.rater}, writer {args.writer or 'the rater'}, {args.searches} search(es), "
          f"cot max_tokens={args.rater_max_tokens}, k=3, BM25, no cache\n")
    print("| verdict | seconds | sentences/s | right vs our labels | unparsed |")
    print("|---|---:|---:|---:|---:|")
    agree = sum(a == b for a, b in zip(rows["cot"][1], rows["logprob"][1]))
    out = []
    for mode, (t, v) in rows.items():
        right = sum(a == b for a, b in zip(v, gold))
        print(f"| {mode} | {t:.1f} | {n / t:.2f} | {right}/{n} | {v.count(UNPARSED)} |")
        out.append({"rater": args.rater, "writer": args.writer or "the rater", "statements": n, "searches": args.searches,
                    "rater_max_tokens": args.rater_max_tokens, "verdict": mode, "seconds": round(t, 1), "right": right,
                    "unparsed": v.count(UNPARSED), "agreement": agree})
    print(f"\nagreement cot vs logprob: {agree}/{n}; logprob is {rows['cot'][0] / rows['logprob'][0]:.1f}x faster")
    if args.csv: append_rows(args.csv, COLUMNS, out, "benchmarks/verdict_agreement.py")


if __name__ == "__main__":
    main()
