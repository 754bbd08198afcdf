"""Sentences checked per second: a sequential per-sentence loop (SAFE-style) vs LEAF's batched pipeline.

The same answers are checked both ways on the same backend, without a cache, with the embedded
SmolLM2-135M-Instruct writing queries and rating, and BM25 over the shipped corpus:
  (a) sequential: for each sentence, SAFE's loop of single calls: up to `--searches` rounds of one query
      call (shown the documents found so far) and one search, then one rating call;
  (b) batched: `fact_check` on all answers at once (one call per search round and one for the verdicts;
      requests in flight together for a server, batched forward passes for the local model).
Both stop a sentence's searches early the same way (a search that adds no new document, or a later reply
without a query). Verdict agreement between (a) and (b) is printed too. With `--csv` the rows are also appended
to a CSV, with the command and the date: `benchmarks/results/factcheck_throughput.csv` is the file
`nbs/api/06_factcheck.ipynb` shows.

    .venv/bin/python benchmarks/factcheck_throughput.py [--backend server|local|both] [-n 8] [--searches 1] \
        [--csv benchmarks/results/factcheck_throughput.csv]
"""
import argparse
import sys
import time
from pathlib import Path

from results_csv import append_rows  # benchmarks/results_csv.py (scripts run from the repository root)

from leaf_nb.factcheck import FactCheckSettings, _knowledge, fact_check, question_context
from leaf_nb.llm import LlamaCppServer, embedded, user
from leaf_nb.prompts import UNPARSED, fact_check_prompt, parse_query, parse_verdict, query_prompt
from leaf_nb.retrieve import BM25
from leaf_nb.text import split_sentences

ROOT = Path(__file__).resolve().parents[1]
QUESTION = question_context("A patient is brought in with pinpoint pupils and slow breathing after a heroin overdose. Which drug is given?",
                            {"A": "Naloxone", "B": "Flumazenil", "C": "Atropine", "D": "Protamine"})
ANSWERS = [
    "Naloxone is the antidote for opioid overdose. It is a competitive opioid receptor antagonist. Flumazenil reverses benzodiazepines instead.",
    "The answer is A. Naloxone reverses respiratory depression within minutes. Its effect may wear off before long-acting opioids are cleared.",
    "Atropine treats organophosphate poisoning. Protamine reverses heparin. Naloxone is therefore the right choice here.",
    "Opioid overdose causes miosis and hypoventilation. Naloxone can be given intravenously or intranasally.",
]


def sequential(lm, bm25, answers, s):
    verdicts = []
    for a in answers:
        for sent in split_sentences(a):
            hits = []
            for r in range(s.n_searches):
                q = parse_query(lm.generate([user(query_prompt(sent, QUESTION, _knowledge(hits)))], max_tokens=s.query_max_tokens)[0][0])
                if q == UNPARSED and r: break
                seen = {h.id for h in hits}
                new = [h for h in bm25.search([sent if q == UNPARSED else q], k=s.k)[0] if h.id not in seen]
                hits += new
                if not new: break
            reply = lm.generate([user(fact_check_prompt(sent, _knowledge(hits), QUESTION))], max_tokens=s.rater_max_tokens)[0][0]
            verdicts.append(parse_verdict(reply))
    return verdicts


def run(name, make_lm, answers, s, bm25) -> dict:
    "One backend's row: sentences/s of the sequential loop and of `fact_check`, and how many verdicts they share."
    t0 = time.perf_counter()
    seq = sequential(make_lm(sequential=True), bm25, answers, s)
    t_seq = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = fact_check(answers, [QUESTION] * len(answers), llm=make_lm(sequential=False), retriever=bm25, settings=s)
    t_bat = time.perf_counter() - t0
    n = len(seq)
    return {"backend": name, "answers": len(answers), "sentences": n, "distinct_sentences": len(set(res.sentences.text)),
            "searches": s.n_searches, "rater_max_tokens": s.rater_max_tokens, "sequential_sent_per_s": round(n / t_seq, 2),
            "batched_sent_per_s": round(n / t_bat, 2), "ratio": round(t_seq / t_bat, 1),
            "same_verdicts": sum(a == b for a, b in zip(seq, res.sentences.verdict))}


COLUMNS = ["date", "command", "backend", "answers", "sentences", "distinct_sentences", "searches", "rater_max_tokens",
           "sequential_sent_per_s", "batched_sent_per_s", "ratio", "same_verdicts", "note"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["server", "local", "both"], default="both")
    ap.add_argument("-n", type=int, default=8, help="answers (the 4 written here, repeated with a variant suffix)")
    ap.add_argument("--rater-max-tokens", type=int, default=48)
    ap.add_argument("--searches", type=int, default=1, help="searches per sentence (the paper profile uses 5)")
    ap.add_argument("--csv", type=Path, default=None, help="append the rows to this CSV")
    args = ap.parse_args()
    answers = [ANSWERS[i % len(ANSWERS)] + ("" if i < len(ANSWERS) else f" (Variant {i}.)") for i in range(args.n)]
    s = FactCheckSettings(n_searches=args.searches, query_max_tokens=24, rater_max_tokens=args.rater_max_tokens)
    bm25 = BM25(ROOT / "data" / "medcorpus.jsonl", progress=False)
    lines = []
    if args.backend in ("server", "both"):
        # llama-cpp-python's server answers one request at a time: the other 7 in flight wait in its queue,
        # and that wait counts against the client's timeout (120 s by default), hence the long one
        with LlamaCppServer() as server:
            lines.append(run("llama.cpp server, 1 vs 8 requests in flight", lambda sequential: server.lm(max_concurrency=1 if sequential else 8, timeout=900, progress=False), answers, s, bm25))
    if args.backend in ("local", "both"):
        local = embedded(progress=False)
        local.load()
        lines.append(run("transformers, batch 1 vs 16", lambda sequential: local.derive(batch_size=1 if sequential else 16, cache=None), answers, s, bm25))
    print(f"\n{args.n} answers, {args.searches} search(es) per sentence, query 24 tokens, rater {args.rater_max_tokens} tokens (cot), k=3, no cache\n")
    print("| backend | sentences | sequential sent/s | batched sent/s | ratio | same verdicts |")
    print("|---|---|---|---|---|---|")
    for r in lines:
        print(f"| {r['backend']} | {r['sentences']} | {r['sequential_sent_per_s']:.2f} | {r['batched_sent_per_s']:.2f} "
              f"| {r['ratio']:.1f}x | {r['same_verdicts']}/{r['sentences']} |")
    if args.csv: append_rows(args.csv, COLUMNS, lines, "benchmarks/factcheck_throughput.py")


if __name__ == "__main__":
    main()
