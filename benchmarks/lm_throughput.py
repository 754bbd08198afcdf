"""Requests/s for N independent LM requests: one at a time vs the backend's batching/concurrency.

Measured in one run on the embedded SmolLM2-135M-Instruct:
  - through a real OpenAI-compatible server (llama-cpp-python on loopback): sequential calls vs
    `max_concurrency` requests in flight;
  - in-process through transformers: batch_size=1 vs one batched call;
  - the same requests again through a warm cache;
  - label scoring (`label_logprobs`, the fast verdict) on fact-check prompts with three passages of
    KNOWLEDGE: one full forward per (prompt, label) pair with logits at every position (the
    definition, and what leaf-nb did before) vs one shared prompt pass per prompt, batched.
No cache is used for the timed backend runs, so every request is really served.

With `--standin` it measures only the stand-in server (`leaf_nb.standin`, instant replies): requests/s over raw
keep-alive HTTP/1.1 connections from threads (what the server itself sustains, the client costing little), and
through `OpenAICompatible` (what the pipeline's client gets from it).

    .venv/bin/python benchmarks/lm_throughput.py [-n 16] [--max-tokens 32] [--concurrency 8]
    .venv/bin/python benchmarks/lm_throughput.py --standin [-n 4000] [--concurrency 8]
"""
import argparse
import http.client
import json
import tempfile
import threading
import time
from pathlib import Path

from leaf_nb.cache import Cache
from leaf_nb.llm import LlamaCppServer, embedded, user
from leaf_nb.prompts import fact_check_prompt

ROOT = Path(__file__).resolve().parents[1]

TOPICS = ["metformin", "warfarin", "asthma", "sepsis", "anemia", "gout", "migraine", "hypothyroidism",
          "pneumonia", "psoriasis", "glaucoma", "lupus", "angina", "cirrhosis", "epilepsy", "malaria"]


def prompts(n):
    return [user(f"In one sentence, what is the first-line treatment of {TOPICS[i % len(TOPICS)]} (case {i})?") for i in range(n)]


def rating_prompts(n):
    "Label-only fact-check prompts: a statement, the question as CONTEXT, three passages of the shipped corpus."
    docs = [json.loads(line) for line in (ROOT / "data" / "medcorpus.jsonl").read_text().splitlines()]
    return [user(fact_check_prompt(f"{TOPICS[i % len(TOPICS)].capitalize()} is treated first with a low dose.",
                                   [d["content"] for d in docs[3 * i:3 * i + 3]],
                                   f"What is the first-line treatment of {TOPICS[i % len(TOPICS)]}?", reasoning=False))
            for i in range(n)]


def per_pair_forward(lm, prompts, labels):
    "Baseline: log P(label | prompt) from one forward pass over prompt + label for every pair."
    import torch
    model, tok = lm.load()
    out = []
    for p in prompts:
        for label in labels:
            a, b = (tok(t, add_special_tokens=False)["input_ids"] for t in (lm.render(p), label))
            with torch.inference_mode():
                logp = torch.log_softmax(model(input_ids=torch.tensor([a + b])).logits[0].float(), -1)
            out.append(sum(float(logp[len(a) - 1 + j, t]) for j, t in enumerate(b)))
    return out


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def standin_rows(n, max_tokens, concurrency):
    "Requests/s of the stand-in server: raw keep-alive HTTP from `concurrency` threads, and through OpenAICompatible."
    from leaf_nb.standin import StandinServer
    bodies = [json.dumps({"model": "standin", "prompt": f"In one sentence, what treats {TOPICS[i % len(TOPICS)]} (case {i})?",
                          "max_tokens": max_tokens, "temperature": 0}).encode() for i in range(n)]
    with StandinServer() as server:
        def worker(part):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            for b in part:
                conn.request("POST", "/v1/completions", b, {"Content-Type": "application/json"})
                r = conn.getresponse(); r.read()
                assert r.status == 200, r.status
            conn.close()
        def raw():
            threads = [threading.Thread(target=worker, args=(bodies[k::concurrency],)) for k in range(concurrency)]
            for t in threads: t.start()
            for t in threads: t.join()
        worker(bodies[:50])  # warm-up
        t_raw, _ = timed(raw)
        lm = server.lm(max_concurrency=concurrency, progress=False)
        lm.generate(prompts(20), max_tokens=max_tokens)  # warm-up: the client, the connection pool
        t_client, _ = timed(lambda: lm.generate(prompts(n), max_tokens=max_tokens))
    return [(f"stand-in server, raw HTTP/1.1 keep-alive, {concurrency} connections", n / t_raw),
            (f"stand-in server through OpenAICompatible (openai client), {concurrency} in flight", n / t_client)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=16, help="independent requests")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--standin", action="store_true", help="measure only the stand-in server (instant replies)")
    args = ap.parse_args()
    if args.standin:
        rows = standin_rows(args.n, args.max_tokens, args.concurrency)
        print(f"\n{args.n} requests, max_tokens={args.max_tokens}, greedy, stand-in server on loopback (instant)\n")
        print("| path | req/s |\n|---|---|")
        for name, rate in rows: print(f"| {name} | {rate:.0f} |")
        return
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

    labels = ["[Supported]", "[Not Supported]"]
    rps = rating_prompts(args.n)
    t_pair, ref = timed(lambda: per_pair_forward(local, rps, labels))
    t_shared, got = timed(lambda: batched.label_logprobs(rps, labels))
    assert max(abs(x - y) for x, y in zip(ref, got.ravel())) < 1e-2, "shared-prompt scores differ from the definition"
    n_tok = sum(len(local.tokenizer(local.render(p))["input_ids"]) for p in rps) / len(rps)
    rows.append((f"transformers label scoring ({n_tok:.0f}-token prompts, 2 labels)", "forward per (prompt, label)",
                 t_pair, f"shared prompt pass, batch_size={args.batch_size}", t_shared))

    print(f"\n{args.n} requests, max_tokens={args.max_tokens}, greedy, embedded SmolLM2-135M-Instruct\n")
    print("| backend | baseline | req/s | faster mode | req/s | ratio |")
    print("|---|---|---|---|---|---|")
    for name, a, ta, b, tb in rows:
        print(f"| {name} | {a} | {args.n / ta:.2f} | {b} | {args.n / tb:.2f} | {ta / tb:.1f}x |")


if __name__ == "__main__":
    main()
