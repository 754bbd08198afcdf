"""The pipeline's own ceiling: sentence checks per second of `fact_check` when the model answers instantly.

The scenario of issue 21: 300 answers (about 1,800 sentences of medical prose, drawn seeded from the passages of
data/medcorpus.jsonl, answering the 40 questions of data/mirage_sample.json), one search per sentence, k=3, `cot`
verdicts, BM25 over data/medcorpus.jsonl, a fresh cache file per row. Rows (--rows):
  in-process    an LM whose `_generate` returns the stand-in's reply at once (`leaf_nb.standin.reply`)
  http          `OpenAICompatible` against the stand-in server process on loopback, one prompt per request (chat)
  http-batched  the same with the tokenizer known: chat prompts rendered with its template and sent as lists to
                /v1/completions, `batch_size` a request (skipped where the leaf_nb measured has no such option)
The two HTTP rows render chat prompts with the embedded model's chat template (the server's tokenizer, and in the batched
row the client's too), so they get the same replies: the script checks that their verdicts and queries are identical.
The in-process backend renders chat as the stand-in does without a tokenizer (a template costs more than the reply).
Memoised functions (sentence splits, the fence) are cleared before every run, so no run reads another's.

Each row is run twice: timed (no profiler), then profiled (a fresh cache; cProfile with per-thread CPU time in every
thread), the profile summarised by stage (fence, sentence split, prompt building, cache, HTTP client, retrieval, ...)
with the top functions by own and by cumulative time. Checks/s come from the timed run only.

It imports only names every checkout has had (fact_check, FactCheckSettings, LM, OpenAICompatible, BM25, Cache), so it
measures any checkout's library: put that checkout first on PYTHONPATH. The stand-in is taken from that library when it
has one, else from the `leaf_nb/standin.py` beside this script (--standin FILE to choose). Before and after, on an idle
machine, from this checkout:

    .venv/bin/python benchmarks/pipeline_ceiling.py --csv benchmarks/results/pipeline_ceiling.csv --note "after"
    git worktree add /tmp/leaf-base 0888053
    PYTHONPATH=/tmp/leaf-base .venv/bin/python benchmarks/pipeline_ceiling.py --csv benchmarks/results/pipeline_ceiling.csv --note "before"

(the CSV row records the commit of the library it measured). `--answers 20 --rows in-process` is a quick smoke run.
"""
import argparse
import cProfile
import importlib.util
import inspect
import json
import os
import pstats
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

from results_csv import append_rows, code_version, other_busy_cpus  # benchmarks/results_csv.py (this script's folder)

import leaf_nb
from leaf_nb.cache import Cache
from leaf_nb.factcheck import FactCheckSettings, fact_check, question_context
from leaf_nb.llm import LM, OpenAICompatible, embedded_dir
from leaf_nb.retrieve import BM25
from leaf_nb.text import split_sentences

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "data"


def load_standin(path: Path | None):
    "The measured library's stand-in, else the one in `path` (this checkout's by default), loaded by file."
    if path is None:
        try:
            import leaf_nb.standin as s
            return s
        except ImportError:
            path = HERE.parent / "leaf_nb" / "standin.py"
    spec = importlib.util.spec_from_file_location("standin_from_file", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses and patch look modules up by name
    spec.loader.exec_module(mod)
    return mod


def scenario(n_answers: int, seed: int = 0):
    "Answers of one answer line and five corpus sentences, each answering one of the MIRAGE sample's questions."
    rng = random.Random(seed)
    docs = [json.loads(l) for l in (DATA / "medcorpus.jsonl").read_text().splitlines()]
    pool = [s for d in docs for s in split_sentences(d["content"])]
    qs = [q for ds in json.loads((DATA / "mirage_sample.json").read_text()).values() for q in ds.values()]
    answers, contexts = [], []
    for i in range(n_answers):
        q = qs[i % len(qs)]
        letter = rng.choice(sorted(q["options"]))
        answers.append(f"**Answer**: ({letter}) {q['options'][letter]}\n\n**Reasoning:** " + " ".join(rng.sample(pool, 5)))
        contexts.append(question_context(q["question"], q["options"]))
    return answers, contexts


class Instant(LM):
    "Answers at once with the stand-in's reply (chat rendered as `<|role|>` lines: a chat template would cost more than the reply)."
    kind = "instant"

    def __init__(self, standin, **kw):
        super().__init__("instant", **kw)
        self.standin = standin

    def _generate(self, reqs):
        for i, r in enumerate(reqs):
            text = r.prompt if isinstance(r.prompt, str) else self.standin.render_chat(r.prompt)
            seed, index = (0, 0) if r.temperature == 0 else (r.seed or 0, 1)
            yield i, self.standin.reply(text, r.max_tokens, seed, index)


def batched_option():
    "The OpenAICompatible argument that sends chat prompts as lists to /v1/completions, if the library has one."
    params = inspect.signature(OpenAICompatible.__init__).parameters
    return "batch_size" if "batch_size" in params else None


# what each stage is: the functions whose cumulative time it is (file suffix, function), less the stages nested inside
STAGES = [
    ("sentence split", [("leaf_nb/text.py", "split_sentences")], []),
    ("fence (format_knowledge)", [("leaf_nb/prompts.py", "format_knowledge")], []),
    ("prompt building", [("leaf_nb/prompts.py", "query_prompt"), ("leaf_nb/prompts.py", "fact_check_prompt"),
                         ("leaf_nb/factcheck.py", "_knowledge"), ("leaf_nb/llm.py", "user")], ["fence (format_knowledge)"]),
    ("parsing", [("leaf_nb/prompts.py", "parse_query"), ("leaf_nb/prompts.py", "parse_verdict")], []),
    ("retrieval (BM25, its cache)", [("leaf_nb/retrieve.py", "search")], []),
    ("rows (pandas)", [("leaf_nb/factcheck.py", "_sentence_rows"), ("leaf_nb/factcheck.py", "_answer_rows")], []),
    ("backend: stand-in replies", [("pipeline_ceiling.py", "_generate")], []),
    # OpenAICompatible's requests, made in its worker threads (the openai client, httpx, rendering chat for lists)
    ("HTTP client (worker threads)", [("leaf_nb/llm.py", "_complete"), ("leaf_nb/llm.py", "_complete_batch")], []),
    # OpenAICompatible._generate in the calling thread: planning the requests, the pool, waiting (no CPU while it waits)
    ("HTTP pool (calling thread)", [("leaf_nb/llm.py", "_generate")], []),
    ("LM layer: requests, keys, cache", [("leaf_nb/llm.py", "generate")],
     ["backend: stand-in replies", "HTTP pool (calling thread)"]),
]


def stage_summary(stats: pstats.Stats) -> tuple[list[dict], float]:
    "CPU seconds and share per stage, from cumulative times of the stage's functions (outermost call each)."
    total = sum(v[2] for v in stats.stats.values())  # own time over every function = all CPU profiled
    cum = {}
    for (file, _, func), v in stats.stats.items():
        for name, entries, _ in STAGES:
            if any(file.endswith(f) and func == fn for f, fn in entries): cum[name] = cum.get(name, 0.0) + v[3]
    rows, got = [], {}
    for name, _, minus in STAGES:
        got[name] = max(0.0, cum.get(name, 0.0) - sum(got.get(m, 0.0) for m in minus))
    # llm.py's _generate is OpenAICompatible's, this file's is Instant's: a row has one or the other
    for name, _, _ in STAGES:
        rows.append({"stage": name, "cpu_s": round(got[name], 3), "share": round(got[name] / total, 3) if total else 0.0})
    rest = total - sum(got.values())
    rows.append({"stage": "other", "cpu_s": round(rest, 3), "share": round(rest / total, 3) if total else 0.0})
    return rows, total


def top(stats: pstats.Stats, key: int, n: int) -> list[tuple]:
    "The n functions with the most own (key 2) or cumulative (key 3) time: (seconds, calls, where)."
    items = sorted(stats.stats.items(), key=lambda kv: -kv[1][key])[:n]
    return [(round(v[key], 3), v[1], f"{Path(f).name}:{l}({fn})") for (f, l, fn), v in items]


class ThreadProfiles:
    "cProfile with per-thread CPU time in the calling thread and in every thread started while it is on; merged at the end."
    def __init__(self):
        self.profiles, self._run = [], threading.Thread.run

    def __enter__(self):
        owner = self
        def run(thread):
            p = cProfile.Profile(time.thread_time)
            owner.profiles.append(p)
            p.enable()
            try: owner._run(thread)
            finally: p.disable()
        threading.Thread.run = run
        self.main = cProfile.Profile(time.thread_time)
        self.main.enable()
        return self

    def __exit__(self, *exc):
        self.main.disable()
        threading.Thread.run = self._run

    def stats(self) -> pstats.Stats:
        s = pstats.Stats(self.main)
        for p in self.profiles:
            try: s.add(p)
            except TypeError: pass  # a thread that never ran profiled code
        return s


def proc_cpu(pid: int) -> float:
    "User + system CPU seconds of a process so far (Linux /proc)."
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def make_row(name, standin, tok_dir, args):
    "(lm factory, server or None) for a row; the factory takes a cache."
    if name == "in-process":
        return (lambda cache: Instant(standin, cache=cache, progress=False)), None
    server = standin.StandinServer(tokenizer=tok_dir).start()
    kw = dict(max_concurrency=args.concurrency, progress=False)
    if name == "http-batched":
        kw.update({batched_option(): args.batch_size, "tokenizer": tok_dir})
    return (lambda cache: OpenAICompatible(server.base_url, server.model, cache=cache, **kw)), server


def clear_memos():
    "Empty every functools cache of the library (and of the stand-in): each run starts as a new process would."
    import leaf_nb
    for mod in [m for name, m in list(sys.modules.items()) if name.startswith(("leaf_nb", "standin_from_file")) and m]:
        for obj in list(vars(mod).values()):
            if callable(getattr(obj, "cache_clear", None)) and getattr(obj, "__module__", "") == mod.__name__: obj.cache_clear()


def run_row(name, standin, tok_dir, bm25_path, answers, contexts, settings, args, workdir):
    factory, server = make_row(name, standin, tok_dir, args)
    try:
        busy = other_busy_cpus(args.busy_sample_s)
        def once(tag, profile=False, n=None):
            cache = Cache(workdir / f"{name}-{tag}.sqlite")
            bm25 = BM25.load(bm25_path, cache=cache, progress=False)
            lm = factory(cache)
            if server is not None: lm.identity  # GET /v1/models before the clock starts
            clear_memos()
            cpu0 = proc_cpu(server.proc.pid) if server is not None else 0.0
            prof = ThreadProfiles() if profile else None
            t0 = time.perf_counter()
            if prof: prof.__enter__()
            try: res = fact_check(answers[:n], contexts[:n], llm=lm, retriever=bm25, settings=settings)
            finally:
                if prof: prof.__exit__()
            wall = time.perf_counter() - t0
            server_cpu = proc_cpu(server.proc.pid) - cpu0 if server is not None else 0.0
            cache.close()
            return res, wall, server_cpu, prof
        once("warm", n=20)  # imports, numba, the client's connection pool: not what a long run pays per check
        res, wall, server_cpu, _ = once("timed")
        prof = once("profiled", profile=True)[3] if args.profile else None
    finally:
        if server is not None: server.stop()
    n = len(res.sentences)
    row = {"row": name, "answers": len(answers), "sentences": n, "searches": settings.n_searches, "k": settings.k,
           "verdict": settings.verdict, "concurrency": args.concurrency if server else "",
           "batch_size": args.batch_size if name == "http-batched" else "", "seconds": round(wall, 3),
           "checks_per_s": round(n / wall, 1), "server_cpu_s": round(server_cpu, 2) if server else "",
           "other_busy_cpus": busy}
    stages, profile_lines = [], []
    if prof is not None:
        stats = prof.stats()
        stages, total = stage_summary(stats)
        row["profiled_cpu_s"] = round(total, 2)
        row["profile"] = "; ".join(f"{s['stage']} {100 * s['share']:.0f}%" for s in stages if s["share"] >= 0.005)
        profile_lines = [f"\n### {name}: {n} sentences, profiled CPU {total:.2f} s (all threads)\n",
                         "| stage | CPU s | share |", "|---|---|---|"]
        profile_lines += [f"| {s['stage']} | {s['cpu_s']:.2f} | {100 * s['share']:.1f}% |" for s in stages]
        for label, key in (("own", 2), ("cumulative", 3)):
            profile_lines += [f"\ntop {args.top} by {label} time:"] + [f"  {t:8.3f} s {c:9d} calls  {w}" for t, c, w in top(stats, key, args.top)]
    return row, stages, res, profile_lines


def commit_of(path: Path) -> str: return code_version(path) or "unknown"


COLUMNS = ["date", "command", "leaf_nb_commit", "row", "answers", "sentences", "searches", "k", "verdict", "concurrency",
           "batch_size", "seconds", "checks_per_s", "server_cpu_s", "profiled_cpu_s", "other_busy_cpus", "profile", "note"]
STAGE_COLUMNS = ["date", "command", "leaf_nb_commit", "row", "stage", "cpu_s", "share", "note"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--answers", type=int, default=300)
    ap.add_argument("--rows", nargs="+", default=["in-process", "http", "http-batched"], choices=["in-process", "http", "http-batched"])
    ap.add_argument("--concurrency", type=int, default=16, help="requests in flight (OpenAICompatible's max_concurrency)")
    ap.add_argument("--batch-size", type=int, default=32, help="prompts per request in the http-batched row")
    ap.add_argument("--no-profile", dest="profile", action="store_false")
    ap.add_argument("--top", type=int, default=15, help="functions listed per profile")
    ap.add_argument("--standin", type=Path, default=None, help="a standin.py to use (default: the measured library's, else this checkout's)")
    ap.add_argument("--busy-sample-s", type=float, default=3.0, help="seconds of /proc/stat sampled before each row")
    ap.add_argument("--csv", type=Path, default=None, help="append the rows here, and the stages to <name>_profile.csv beside it")
    ap.add_argument("--note", default="")
    ap.add_argument("--commit", default=None, help="the commit of the library measured, where it is not a git checkout (an archive)")
    args = ap.parse_args()
    standin = load_standin(args.standin)
    lib = Path(leaf_nb.__file__).resolve().parent
    commit = args.commit or commit_of(lib)
    tok_dir = embedded_dir()
    answers, contexts = scenario(args.answers)
    settings = FactCheckSettings(n_searches=1, k=3, verdict="cot")
    rows = [r for r in args.rows if r != "http-batched" or batched_option()]
    skipped = sorted(set(args.rows) - set(rows))
    with tempfile.TemporaryDirectory(prefix="pipeline-ceiling-") as tmp:
        workdir = Path(tmp)
        bm25 = BM25(DATA / "medcorpus.jsonl", progress=False)
        bm25._search([f"warm up query {i} aspirin heparin insulin" for i in range(2000)], 3)  # numba compiles once per process
        bm25_path = bm25.save(workdir / "bm25")
        bm25 = BM25.load(bm25_path, progress=False)
        bm25._search([f"warm up query {i} aspirin heparin insulin" for i in range(2000)], 3)
        out, stage_rows, results, report = [], [], {}, []
        for name in rows:
            row, stages, res, lines = run_row(name, standin, tok_dir, bm25_path, answers, contexts, settings, args, workdir)
            row.update({"leaf_nb_commit": commit, "note": args.note})
            out.append(row); results[name] = res; report += lines
            stage_rows += [{"leaf_nb_commit": commit, "row": name, "note": args.note, **s} for s in stages]
            print(f"{name}: {row['sentences']} sentences in {row['seconds']:.2f} s = {row['checks_per_s']:.0f} checks/s", flush=True)
    names = list(results)
    ref = "http" if "http" in results else names[0]  # the HTTP rows render alike; the in-process one is its own reference
    comparable = [n for n in names if n == ref or n.startswith("http") == ref.startswith("http")]
    same = {n: int(sum(a == b for a, b in zip(results[ref].sentences.verdict, results[n].sentences.verdict))) for n in comparable}
    same_q = {n: bool((results[ref].sentences["query"] == results[n].sentences["query"]).all()) for n in comparable}
    print(f"\nleaf_nb {commit} ({lib.parent.name}), stand-in from {Path(standin.__file__).parent.parent.name}, "
          f"{args.answers} answers, 1 search, k=3, cot, BM25 over data/medcorpus.jsonl, fresh cache per row\n")
    print(f"| row | sentences | seconds | checks/s | server CPU s | other busy CPUs | same verdicts as {ref} | same queries |")
    print("|---|---|---|---|---|---|---|---|")
    for r in out:
        print(f"| {r['row']} | {r['sentences']} | {r['seconds']:.2f} | {r['checks_per_s']:.0f} | {r['server_cpu_s']} "
              f"| {r['other_busy_cpus']} | {same.get(r['row'], '-')}/{r['sentences']} | {same_q.get(r['row'], '-')} |")
    if skipped: print(f"\nskipped (the library measured has no such option): {', '.join(skipped)}")
    print("\n".join(report))
    if args.csv:
        append_rows(args.csv, COLUMNS, out, "benchmarks/pipeline_ceiling.py")
        append_rows(args.csv.with_name(args.csv.stem + "_profile.csv"), STAGE_COLUMNS, stage_rows, "benchmarks/pipeline_ceiling.py")
    bad = [n for n in comparable if same[n] != len(results[n].sentences) or not same_q[n]]
    if bad: sys.exit(f"rows {bad} do not give the first row's verdicts and queries")


if __name__ == "__main__":
    main()
