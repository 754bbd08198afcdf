"""Generated tokens/s of `LlamaCppServer` (llama.cpp's OpenAI-compatible server on the embedded SmolLM2) by its thread
count, on an idle machine and with other processes keeping some CPUs busy, as a notebook kernel that retrieves or
trains beside the server it calls does.

llama.cpp's CPU threads meet at a barrier after every operation of every token and spin while they wait, so a thread
that the OS takes off its core holds up all the others. The benchmark shows what that costs: per thread count and
per number of busy CPUs (each a process spinning in Python, started here), the same greedy requests, their tokens/s
and the ratio against one thread under the same load. It also checks that every thread count writes the same text.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/llama_threads.py [--requests 6] [--max-tokens 48] [--busy 0 1]
        [--csv benchmarks/results/llama_threads.csv]

Run it on an idle machine: the first thing it does is measure the CPUs that other processes keep busy.
"""
import argparse
import multiprocessing
import os
import sys
import time
from pathlib import Path

from leaf_nb.llm import LlamaCppServer, usable_cpus, user

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from results_csv import append_rows, other_busy_cpus  # noqa: E402

COLUMNS = ["date", "cpus", "other_busy_cpus", "busy", "n_threads", "requests", "tokens", "seconds", "tokens_per_s",
           "vs_one_thread", "same_text", "command", "note"]
TOPICS = ["metformin", "warfarin", "asthma", "sepsis", "anemia", "gout", "migraine", "lupus"]


def spin(stop):
    "Keep one CPU busy until `stop` is set (a process, so it holds a core of its own, not the GIL)."
    x = 0
    while not stop.is_set():
        for _ in range(100_000): x += 1


def measure(n_threads: int, prompts: list, max_tokens: int) -> tuple[float, int, list[str]]:
    "Seconds and completion tokens for `prompts` one at a time (the server runs one at a time anyway), after a warm-up."
    with LlamaCppServer(n_threads=n_threads) as server:
        lm = server.lm(cache=None, max_concurrency=1, progress=False)
        lm.generate([user("Say hello.")], max_tokens=4)  # weights paged in, first-request costs paid
        client, t0 = lm.client, time.perf_counter()
        texts, tokens = [], 0
        for p in prompts:
            out = client.chat.completions.create(model=lm.model_id, messages=p, max_tokens=max_tokens, temperature=0)
            texts.append(out.choices[0].message.content)
            tokens += out.usage.completion_tokens
        return time.perf_counter() - t0, tokens, texts


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, nargs="+", default=None, help="thread counts (default: 1 and every CPU)")
    ap.add_argument("--busy", type=int, nargs="+", default=[0, 1], help="CPUs kept busy by spinning processes, per condition")
    ap.add_argument("--csv", type=Path, default=None)
    ap.add_argument("--note", default="")
    a = ap.parse_args(argv)
    cpus = usable_cpus()
    threads = a.threads or sorted({1, cpus})
    prompts = [user(f"Write a short paragraph about {TOPICS[i % len(TOPICS)]} (note {i}).") for i in range(a.requests)]
    others = other_busy_cpus()
    print(f"{cpus} CPUs; other processes kept {others:.2f} of them busy before the run")
    rows, reference = [], None
    for busy in a.busy:
        stop = multiprocessing.Event()
        spinners = [multiprocessing.Process(target=spin, args=(stop,), daemon=True) for _ in range(busy)]
        for p in spinners: p.start()
        try:
            base = None
            for n in threads:
                seconds, tokens, texts = measure(n, prompts, a.max_tokens)
                reference = reference or texts
                base = base or (seconds / tokens)
                rows.append({"cpus": cpus, "other_busy_cpus": others, "busy": busy, "n_threads": n, "requests": len(prompts),
                             "tokens": tokens, "seconds": round(seconds, 2), "tokens_per_s": round(tokens / seconds, 1),
                             "vs_one_thread": round(base / (seconds / tokens), 2), "same_text": texts == reference,
                             "note": a.note})
                r = rows[-1]
                print(f"busy CPUs {busy}  n_threads {n}: {tokens} tokens in {seconds:6.1f} s = {r['tokens_per_s']:6.1f} tok/s"
                      f"  ({r['vs_one_thread']:.2f}x one thread)  same text as the first run: {r['same_text']}", flush=True)
        finally:
            stop.set()
            for p in spinners: p.join()
    if a.csv: append_rows(a.csv, COLUMNS, rows, "benchmarks/llama_threads.py")
    return rows


if __name__ == "__main__":
    main()
