"""Requests/s for N independent LM requests: one at a time vs the backend's batching/concurrency.

Measured in one run on the embedded SmolLM2-135M-Instruct:
  - through a real OpenAI-compatible server (llama-cpp-python on loopback): sequential calls vs
    `max_concurrency` requests in flight;
  - in-process through transformers: batch_size=1 vs one batched call;
  - the same requests again through a warm cache.
No cache is used for the timed backend runs, so every request is really served.

    .venv/bin/python benchmarks/lm_throughput.py [-n 16] [--max-tokens 32] [--concurrency 8]
"""
import argparse
import tempfile
import time
from pathlib import Path

from leaf_nb.cache import Cache
from leaf_nb.llm import LlamaCppServer, embedded, user

TOPICS = ["metformin", "warfarin", "asthma", "sepsis", "anemia", "gout", "migraine", "hypothyroidism",
          "pneumonia", "psoriasis", "glaucoma", "lupus", "angina", "cirrhosis", "epilepsy", "malaria"]


def prompts(n):
    return [user(f"In one sentence, what is the first-line treatment of {TOPICS[i % len(TOPICS)]} (case {i})?") for i in range(n)]


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=16, help="independent requests")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=16)
    args = ap.parse_args()
    ps, kw = prompts(args.n), dict(max_tokens=args.max_tokens)
    rows = []

    with LlamaCppServer() as server:
        seq_lm = server.lm(max_concurrency=1, progress=False)
        server.lm(progress=False).generate(ps[:1], **kw)  # warm-up
        t_seq, _ = timed(lambda: [seq_lm.generate([p], **kw) for p in ps])
        t_con, _ = timed(lambda: server.lm(max_concurrency=args.concurrency, progress=False).generate(ps, **kw))
        rows.append(("llama.cpp server (OpenAI API)", f"sequential, 1 in flight", t_seq, f"{args.concurrency} in flight", t_con))

    local = embedded(batch_size=1, progress=False)
    local.generate(ps[:1], **kw)  # loads the weights
    t_one, _ = timed(lambda: [local.generate([p], **kw) for p in ps])
    batched = local.derive(batch_size=args.batch_size)
    t_bat, _ = timed(lambda: batched.generate(ps, **kw))
    rows.append(("transformers, in-process", "batch_size=1", t_one, f"batch_size={args.batch_size}", t_bat))

    cached = local.derive(batch_size=args.batch_size, cache=Cache(Path(tempfile.mkdtemp()) / "c.sqlite"))
    t_fill, _ = timed(lambda: cached.generate(ps, **kw))
    t_hit, _ = timed(lambda: cached.generate(ps, **kw))
    rows.append(("transformers + cache", "cold cache", t_fill, "warm cache", t_hit))

    print(f"\n{args.n} requests, max_tokens={args.max_tokens}, greedy, embedded SmolLM2-135M-Instruct\n")
    print("| backend | baseline | req/s | faster mode | req/s | ratio |")
    print("|---|---|---|---|---|---|")
    for name, a, ta, b, tb in rows:
        print(f"| {name} | {a} | {args.n / ta:.2f} | {b} | {args.n / tb:.2f} | {ta / tb:.1f}x |")


if __name__ == "__main__":
    main()
