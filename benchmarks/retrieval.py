"""Retrieval benchmark: build time, peak memory, index size and batched query throughput of leaf-nb's
BM25 and dense indexes over synthetic corpora of 10k, 100k and 1M passages.

    nice -n 10 python benchmarks/retrieval.py                       # 10k, 100k, 1M (dense up to 100k)
    python benchmarks/retrieval.py --sizes 10000 --retrievers bm25   # a quick look

Each corpus is generated on the fly and streamed to a JSONL file (never held in memory): 100-200 words
per passage (MedRAG's snippets and chunks run to about 200 words), 40 % of them English function words, the rest
content words from a medical-sounding vocabulary with the term statistics of real text: Zipf-Mandelbrot
frequencies (p(r) ~ 1/(r + 20)^1.07, so the commonest content word is about 0.5 % of all words and occurs in about
half the passages, as "patients" does in PubMed) over a vocabulary that grows with the corpus as Heaps' law says
(40·sqrt(words): 150,000 words for 100k passages, 980,000 for 4M). `zipf_offset=0, vocab_size=50_000` gives the
earlier, harsher corpora, whose commonest word is in every passage. Each build runs `leaf_nb.retrieve.build_index` (the path `leaf-nb index` takes) in its own
subprocess, which reports its wall time and peak RSS; a second subprocess loads the saved index and
answers the queries in one batched `search` (no cache). A query is 6-12 consecutive words of a random passage,
function words included, like a claim or a search an LLM writes; each has a known source passage, so hit@10 is a
sanity check. For dense indexes
throughput is reported with query encoding (what `search` costs) and without (FAISS alone).
The result is a markdown table on stdout (progress on stderr).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

STOPWORDS = ("the of and in to a with is for was by on are as be or that from at an this were which "
             "it not but have has may can these their been also other than more after both into most "
             "such during between each when who all there its no only should").split()
ROOTS = ("cardi hepat nephr neur gastr pulmon derm oste arthr my hemat onc immun endocrin thyr adren "
         "pancreat splen lymph vascul angi bronch pleur periton ur cyst prostat ovar uter cervic mamm "
         "ret ocul ot rhin laryng pharyng esophag col rect an chol lip glyc insul lact ren cortic "
         "thromb embol ischem infarct fibr scler sten necr apopt inflamm infect bacter vir fung parasit "
         "toxic pharmac kinet dynam gen chromos mutat transcript prote enzym recept antibod antigen "
         "cyt leuk erythr plate neutr eosin bas mast macroph dendr fibroblast kerat melan").split()
SUFFIXES = "itis osis oma emia algia ectomy otomy ostomy scopy graphy pathy plasia trophy genesis lysis logy ic al ar ine ase".split()
PREFIXES = ["", "", "", "hyper", "hypo", "peri", "endo", "epi", "intra", "sub", "trans", "poly", "dys", "neo", "micro", "macro"]
WORDS = ("patient patients treatment therapy dose doses clinical trial trials study studies risk factor "
         "factors disease diseases syndrome diagnosis prognosis symptom symptoms acute chronic severe mild "
         "moderate serum plasma level levels increased decreased associated significant outcome outcomes "
         "mortality morbidity incidence prevalence cohort randomized placebo controlled efficacy safety "
         "adverse events infection infections cell cells tissue blood pressure heart failure kidney liver "
         "lung brain bone muscle skin gene protein receptor inhibitor agonist antagonist drug drugs mg kg "
         "daily weekly months years children adults elderly women men pregnancy surgery surgical "
         "imaging biopsy laboratory test tests positive negative sensitivity specificity management "
         "guidelines recommended first line second response remission relapse survival").split()

def vocabulary(size: int, seed: int = 0) -> list[str]:
    "Content words: common clinical words first, then root+suffix terms, then rarer prefixed ones."
    rng = np.random.default_rng(seed)
    words, seen = [], set()
    for w in WORDS + [r + s for r in ROOTS for s in SUFFIXES]:
        if w not in seen: seen.add(w); words.append(w)
    while len(words) < size:
        w = PREFIXES[rng.integers(len(PREFIXES))] + ROOTS[rng.integers(len(ROOTS))] + \
            ROOTS[rng.integers(len(ROOTS))][:rng.integers(2, 6)] + SUFFIXES[rng.integers(len(SUFFIXES))]
        if w not in seen: seen.add(w); words.append(w)
    head, tail = words[:len(WORDS)], words[len(WORDS):size]
    rng.shuffle(tail)
    return head + tail

def zipf_p(n: int, s: float = 1.07, offset: float = 0.0) -> np.ndarray:
    "Zipf-Mandelbrot probabilities p(r) ~ 1/(r + offset)^s, r = 1..n."
    p = 1.0 / (np.arange(1, n + 1) + offset) ** s
    return p / p.sum()

def heaps_vocab(n_passages: int, words_per_passage: float = 150) -> int:
    "Vocabulary size for a corpus of `n_passages` by Heaps' law, V = 40·sqrt(words), at least 5,000."
    return max(5_000, int(40 * (n_passages * words_per_passage) ** 0.5))

QUERY_SHARE = 0.355  # postings share of data/retrieval_queries.jsonl over data/medcorpus.jsonl (bm25_engines.py's reference_share)
SHARE_MODEL_BIAS = 1.28  # measured share / `rarity_for`'s expected share (20k and 100k passages: 0.455 and 0.453 for 0.355): stemming
                         # merges words and titles add some, so the model counts too few postings; the target is divided by it

def keyword_query(rng, words: list[str], p_of: dict, rarity: float, size: tuple[int, int] = (4, 9)) -> str:
    """A search query as an LLM writes one: 4-9 distinct content words of the passage (no function words), rarer ones
    likelier (weight p(word)^-rarity)."""
    types = [w for w in dict.fromkeys(words) if w in p_of]
    weights = np.array([p_of[w] for w in types]) ** -rarity
    k = min(len(types), int(rng.integers(size[0], size[1] + 1)))
    return " ".join(rng.choice(types, size=k, replace=False, p=weights / weights.sum()).tolist())

def rarity_for(share: float, passages: list[list[str]], p_of: dict, words_per_passage: float = 150, content: float = 0.6,
               size: tuple[int, int] = (4, 9)) -> float:
    """The `rarity` at which `keyword_query`'s expected postings share is `share`, on these passages: a word of probability p
    is in 1 - (1 - content·p)^words of the passages, and a query's share is that summed over its words (bisection)."""
    def expected(rarity: float) -> float:
        total = 0.0
        for w in passages:
            types = [x for x in dict.fromkeys(w) if x in p_of]
            p = np.array([p_of[x] for x in types])
            weights = p ** -rarity; weights /= weights.sum()
            df = 1 - (1 - content * p) ** words_per_passage
            total += (size[0] + size[1]) / 2 * float(weights @ df)  # k words, each drawn with these weights (about)
        return total / len(passages)
    lo, hi = 0.0, 3.0
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected(mid) > share else (lo, mid)
    return (lo + hi) / 2

def generate(path: Path, n: int, n_queries: int, vocab_size: int | None = None, seed: int = 0,
             zipf_offset: float = 20.0, query_words: tuple[int, int] = (6, 12), query_style: str = "window",
             query_share: float = QUERY_SHARE) -> list[dict]:
    """Write `n` passages to `path` (streamed in chunks) and return `n_queries` queries, one per different random passage
    (its `relevant` passage): `query_style` "window" is `query_words` consecutive words of it, "keywords" is
    `keyword_query` (distinct content words, rarer ones likelier), its rarity set on the first chunk's passages so
    that a query's expected postings share is `query_share`, whatever the corpus size. `vocab_size` None: `heaps_vocab(n)`."""
    if query_style not in ("window", "keywords"): raise ValueError(f"query_style must be 'window' or 'keywords', got {query_style!r}")
    rng = np.random.default_rng(seed)
    vocab = np.array(vocabulary(vocab_size or heaps_vocab(n), seed))
    stop = np.array(STOPWORDS)
    p_vocab, p_stop = zipf_p(len(vocab), offset=zipf_offset), zipf_p(len(stop), 1.0)
    p_of = dict(zip(vocab.tolist(), p_vocab.tolist())) if query_style == "keywords" else None
    rarity = None
    wanted = set(rng.choice(n, size=min(n_queries, n), replace=False).tolist())
    queries, chunk = [], 10_000
    with open(path, "w") as f:
        for start in range(0, n, chunk):
            m = min(chunk, n - start)
            lengths = rng.integers(100, 201, size=m)
            total = int(lengths.sum())
            content = vocab[rng.choice(len(vocab), size=total, p=p_vocab)]
            function = stop[rng.choice(len(stop), size=total, p=p_stop)]
            words = np.where(rng.random(total) < 0.4, function, content).tolist()
            if p_of is not None and rarity is None:  # calibrated once, on the first chunk (its own generator: the corpus stays the same)
                ends = np.cumsum(lengths)
                rarity = rarity_for(query_share / SHARE_MODEL_BIAS, [words[e - l:e] for e, l in zip(ends[:200], lengths[:200])], p_of,
                                    float(lengths.mean()))
            titles = vocab[rng.choice(len(vocab), size=(m, 3), p=p_vocab)].tolist()
            breaks = rng.integers(12, 25, size=total)
            pos = 0
            lines = []
            for j in range(m):
                w = words[pos:pos + lengths[j]]
                sentences, s = [], 0
                while s < len(w):
                    e = s + int(breaks[pos + s])
                    sent = w[s:e]
                    sentences.append(sent[0].capitalize() + " " + " ".join(sent[1:]) + ".")
                    s = e
                pos += lengths[j]
                doc_id = f"syn{start + j}"
                title = " ".join(titles[j]).capitalize()
                lines.append(json.dumps({"id": doc_id, "title": title, "content": " ".join(sentences)}))
                if start + j in wanted:
                    if p_of is not None: q = keyword_query(rng, w, p_of, rarity)
                    else:
                        size = int(rng.integers(query_words[0], query_words[1] + 1))
                        at = int(rng.integers(0, len(w) - size + 1))
                        q = " ".join(w[at:at + size])
                    queries.append({"query": q, "relevant": doc_id})
            f.write("\n".join(lines) + "\n")
    rng.shuffle(queries)
    return queries

def disk_size(folder: Path, exclude: str | None = None) -> int:
    "Bytes under `folder` (hard-linked files once), leaving out the subfolders named `exclude`."
    seen, total = set(), 0
    for root, dirs, files in os.walk(folder):
        if exclude is not None: dirs[:] = [d for d in dirs if d != exclude]
        for f in files:
            st = os.stat(os.path.join(root, f))
            if st.st_ino not in seen: seen.add(st.st_ino); total += st.st_size
    return total

def peak_rss_mb() -> float:
    """Peak RSS of this process in MiB: VmHWM belongs to the address space that exec made, whereas
    getrusage's ru_maxrss carries over the parent's size at fork time."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"): return int(line.split()[1]) / 1024
    except OSError: pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 / (1024 if sys.platform == "darwin" else 1)

def child_build(a) -> dict:
    from leaf_nb.retrieve import build_index
    t = time.perf_counter()
    r = build_index(a.corpus, a.retriever, a.out, progress=False, overwrite=True, **json.loads(a.options))
    return {"build_s": time.perf_counter() - t, "peak_rss_mb": peak_rss_mb(), "passages": len(r.corpus)}

def child_search(a) -> dict:
    from leaf_nb.retrieve import hit_rate, load_index
    qs = [json.loads(l) for l in Path(a.queries).read_text().splitlines()]
    queries, relevant = [q["query"] for q in qs], [q["relevant"] for q in qs]
    t = time.perf_counter()
    r = load_index(a.out, progress=False, **json.loads(a.load_options))
    out = {"load_s": time.perf_counter() - t}
    r.search(["warm up the index and the encoder"], k=a.k)
    t = time.perf_counter()
    hits = r.search(queries, k=a.k)
    out["qps"] = len(queries) / (time.perf_counter() - t)
    out["hit_at_k"] = sum(any(h.id == rel for h in hs) for hs, rel in zip(hits, relevant)) / len(qs)
    if r.kind == "dense":
        t = time.perf_counter()
        emb = r.encode_queries(queries)
        enc_s = time.perf_counter() - t
        t = time.perf_counter()
        r.search_vectors(emb, a.k)
        out["qps_no_encoding"] = len(queries) / (time.perf_counter() - t)
        out["encode_qps"] = len(queries) / enc_s
    out["search_peak_rss_mb"] = peak_rss_mb()
    return out

def run_child(args: list[str], timeout: float | None) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])

def log(*a): print(*a, file=sys.stderr, flush=True)

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000], help="corpus sizes (passages)")
    ap.add_argument("--retrievers", nargs="+", default=["bm25", "dense"], choices=["bm25", "dense"])
    ap.add_argument("--dense-max", type=int, default=100_000, help="largest corpus to encode densely (1M takes hours on 2 cores)")
    ap.add_argument("--dense-index", default="flat", choices=["flat", "hnsw", "ivf"])
    ap.add_argument("--dense-max-seq-length", type=int, default=None,
                    help="truncate passages (and queries) to this many tokens: a cheaper build for measuring search "
                         "at sizes whose full encoding takes hours; the table marks such rows")
    ap.add_argument("--bm25-backends", nargs="+", default=["numpy", "numba"], choices=["numpy", "numba"],
                    help="bm25s scorers to search with (numba only where it is importable)")
    ap.add_argument("--queries", type=int, default=1000, help="queries per batched search")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--workdir", type=Path, default=None, help="where corpora and indexes go (default: a temp folder, removed)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--timeout", type=float, default=None, help="seconds allowed per build or search subprocess")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    a = ap.parse_args(argv)
    work = a.workdir or Path(tempfile.mkdtemp(prefix="leaf-nb-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for n in a.sizes:
            corpus, qfile = work / f"corpus_{n}.jsonl", work / f"queries_{n}.jsonl"
            if not (corpus.exists() and qfile.exists()):
                log(f"generating {n:,} passages ...")
                t = time.perf_counter()
                qs = generate(corpus, n, a.queries)
                qfile.write_text("".join(json.dumps(q) + "\n" for q in qs))
                log(f"  {time.perf_counter() - t:.0f} s, {corpus.stat().st_size / 2**20:.0f} MiB")
            for kind in a.retrievers:
                if kind == "dense" and n > a.dense_max: continue
                out = work / f"{kind}_{n}"
                opts = {"index": a.dense_index, "max_seq_length": a.dense_max_seq_length} if kind == "dense" else {}
                opts = json.dumps(opts)
                log(f"{kind} {n:,}: build ...")
                b = run_child(["_build", "--corpus", str(corpus), "--retriever", kind, "--out", str(out), "--options", opts], a.timeout)
                log(f"  {b}")
                backends = [None] if kind != "bm25" else \
                    [x for x in a.bm25_backends if x != "numba" or importlib.util.find_spec("numba") is not None]
                for backend in backends:
                    load = json.dumps({"backend": backend} if backend else {})
                    s = run_child(["_search", "--out", str(out), "--queries", str(qfile), "--k", str(a.k), "--load-options", load], a.timeout)
                    log(f"  {backend or ''} {s}")
                    name = f"bm25 ({backend})" if kind == "bm25" else f"dense ({a.dense_index}" + (
                        f", passages cut to {a.dense_max_seq_length} tokens)" if a.dense_max_seq_length else ")")
                    rows.append({"retriever": name, "passages": n, **b, **s,
                                 "index_mb": disk_size(out, exclude="corpus") / 2**20,
                                 "corpus_mb": disk_size(out / "corpus") / 2**20})
                shutil.rmtree(out, ignore_errors=True)
    finally:
        if not a.keep and a.workdir is None: shutil.rmtree(work, ignore_errors=True)
    print(table(rows, a))
    if a.json: a.json.write_text(json.dumps(rows, indent=1))
    return rows

def table(rows: list[dict], a) -> str:
    lines = [f"| retriever | passages | build (s) | build peak RSS (GB) | index on disk (MB) | corpus on disk (MB) "
             f"| load (s) | q/s, {a.queries} queries batched | q/s without query encoding | hit@{a.k} |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        no_enc = f"{r['qps_no_encoding']:,.0f}" if "qps_no_encoding" in r else "—"
        lines.append(f"| {r['retriever']} | {r['passages']:,} | {r['build_s']:,.1f} | {r['peak_rss_mb'] / 1024:.2f} "
                     f"| {r['index_mb']:,.0f} | {r['corpus_mb']:,.0f} | {r['load_s']:.1f} | {r['qps']:,.0f} | {no_enc} "
                     f"| {r['hit_at_k']:.3f} |")
    return "\n".join(lines)

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("_build", "_search"):
        ap = argparse.ArgumentParser()
        ap.add_argument("cmd"); ap.add_argument("--corpus"); ap.add_argument("--retriever"); ap.add_argument("--out")
        ap.add_argument("--options", default="{}"); ap.add_argument("--load-options", default="{}")
        ap.add_argument("--queries"); ap.add_argument("--k", type=int, default=10)
        a = ap.parse_args()
        print(json.dumps(child_build(a) if a.cmd == "_build" else child_search(a)))
    else:
        main()
