"""One prepared command for a lent GPU (one H200, 15 minutes of device time in all): leaf-nb's fact-check
throughput, a SimPO step and an FFRR step at the papers' model sizes, timed, written to one JSON.

Nothing here has touched a GPU before. Models are built from published configs with random weights (speed and
memory depend on the shape, not the values), tokenized by a BPE tokenizer trained at start on the shipped corpus
(the embedded SmolLM2 and MiniLM are PyPI packages, not on that machine). Sections:
  factcheck  Llama-3-8B shape, bf16, leaf_nb's `Transformers` backend: a SAFE-style loop (one query call and one
             rating call per sentence) vs `fact_check` batched, chain-of-thought vs log-probability verdicts, in
             checks/s, against the 70 checks/s roofline of 704-token checks (2 x 8.03e9 x 704 FLOP at 790 TFLOP/s).
  simpo      `benchmarks/simpo_step.py` at Llama-3-8B with gradient checkpointing: peak memory, s/step.
  ffrr       `benchmarks/ffrr_step.py` with a RoBERTa-base policy encoder and the Llama-3-8B-shaped verifier; first,
             `benchmarks/policy_refresh.py`'s measure of `Policy.refresh()` over 4,096 documents of about 256 tokens
             with that encoder: tokenizing at every refresh against from kept tokens (`keep_tokens`), docs/s each.
Each section runs in its own process under a time limit; the script watches `--budget-s` (default 420) and
records a section it has no time for as skipped; the JSON is rewritten after every section, so a run cut short
keeps what it measured. A section whose packages are missing is skipped and says which ("missing: trl").

What that machine has (the device notes' package list): torch, transformers, tokenizers, accelerate, numpy,
pandas, tqdm, jinja2, pyarrow, xxhash, sentence-transformers; not pysbd, bm25s, trl, datasets, dill,
multiprocess, faiss, fastcore. Without wheels every section is skipped: factcheck needs pysbd (bm25s is optional:
fixed passages replace BM25 hits), simpo needs trl, datasets, dill and multiprocess, ffrr needs faiss (and
fastcore while leaf_nb/ffrr.py imports it). All are pure Python but faiss-cpu, whose wheel is 18.8 MB.

BEFORE the call, on the development machine, in the repository root (no device time; about 21 MB, not committed):

    echo /.whl/ >> .git/info/exclude
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \\
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \\
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \\
      pysbd==0.3.4 bm25s==0.3.16 trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 faiss-cpu==1.15.0 \\
      fastcore==1.14.5

THE CALL (check `status` first: can_start_another must be true): the device tool's `run` with
carry [".whl"], timeout_s 480, and command

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site; set -o pipefail; PYTHONUNBUFFERED=1 python3 benchmarks/gpu_check.py --out $OUT/gpu_check.json 2>&1 | tee $OUT/gpu_check.log

The script ends by itself in about 7 minutes at most (--budget-s 420); the 60 s beyond are for the wheels'
install and the JSON. Then give the machine back (`give_back`) unless a rerun follows at once: the machine stays
warm only 30 s, and a section that failed for a reason fixed here can run alone, e.g. with the same command ending
in `--sections simpo --budget-s 200 --out $OUT/gpu_check_simpo.json`. Without wheels (pip fails) the script still
runs and records what it skipped.

AFTER: the JSON comes back as gpu_check.json (the log beside it). Put its figures in the speed sections of
  nbs/api/06_factcheck.ipynb   (the sequential vs batched table: a row for the 8B model on the H200, CoT and
                                logprob, checks/s and the ratio to the 70 checks/s roofline),
  nbs/api/11_selftrain.ipynb   (where it says simpo_step.py "has not been run here": peak GiB and s/step at 8B),
  nbs/api/12_ffrr.ipynb        (the FFRR step cost: s/step and ratings/step per level at GPU scale; and in the retrieval
                                policy's section, a refresh's docs/s tokenizing against from kept tokens),
naming the GPU, torch version and date from the JSON's `environment`, and that weights were random.

On a CPU, `--tiny` runs the same sections on tiny shapes in well under a minute (tests/test_gpu_check.py runs it):

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/gpu_check.py --tiny --out /tmp/gpu-tiny.json
"""
from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if importlib.util.find_spec("leaf_nb") is None: sys.path.insert(0, str(ROOT))  # leaf_nb travels with the working tree

ROOFLINE_CHECKS_PER_S = 70.0  # 704-token checks of an 8B model: 2 x 8.03e9 x 704 FLOP each at 790 TFLOP/s
H200_BF16_FLOPS = 790e12  # bf16 matrix products measured on this workplace's H200 (device notes: 769-798 TFLOP/s)

# import name -> distribution name (for versions and for the wheel to carry)
DIST = {"faiss": "faiss-cpu", "sentence_transformers": "sentence-transformers", "yaml": "pyyaml"}
WHEELS = {"fastcore": "fastcore==1.14.5", "pysbd": "pysbd==0.3.4", "bm25s": "bm25s==0.3.16", "trl": "trl==1.16.0", "datasets": "datasets==5.2.0",
          "dill": "dill==0.4.1", "multiprocess": "multiprocess==0.70.19", "faiss": "faiss-cpu==1.15.0"}
BASE = ["torch", "transformers", "tokenizers", "jinja2", "numpy"]
SECTIONS = {  # name -> packages it cannot run without, optional ones, (min, cap) seconds on GPU and in --tiny
    "factcheck": dict(needs=BASE + ["pandas", "tqdm", "pysbd"], optional=["bm25s", "scipy"], gpu=(60, 200), tiny=(5, 120)),
    "simpo": dict(needs=BASE + ["trl", "datasets", "accelerate", "pyarrow", "dill", "multiprocess", "xxhash"], optional=[],
                  gpu=(60, 150), tiny=(5, 120)),
    "ffrr": dict(needs=BASE + ["pandas", "tqdm", "sentence_transformers", "faiss"], optional=[], gpu=(45, 120), tiny=(5, 120)),
}
PROBED_TOO = ["fastcore"]  # leaf_nb/ffrr.py imports it at present; a section missing a package it imports is skipped all the same
RESERVE_S = 5.0  # kept back to write the JSON

# what each section runs: "gpu" the papers' sizes (timed on the H200), "tiny" the same code on shapes a CPU runs in seconds
FACTCHECK = {  # sentences checked batched and one at a time; new tokens per query and per CoT verdict (random weights never stop early)
    "gpu": dict(shape="llama3-8b", dtype="bfloat16", batched=64, sequential=4, batch_size=64, query_tokens=64, rater_tokens=256),
    "tiny": dict(shape="tiny", dtype="float32", batched=8, sequential=2, batch_size=8, query_tokens=8, rater_tokens=8),
}
SIMPO = {  # simpo_step.py's own flags; on the GPU its defaults are the paper's: 4 pairs of 1536 + 512 tokens
    "gpu": ["--shape", "llama3-8b", "--device", "cuda", "--gradient-checkpointing", "--steps", "2", "--warmup-steps", "1"],
    "tiny": ["--shape", "tiny", "--device", "cpu", "--steps", "1", "--warmup-steps", "1", "--batch", "2",
             "--prompt-tokens", "32", "--answer-tokens", "16"],
}
FFRR = {  # ffrr_step.py's flags and the models handed to it; max_length 256 and 120 words per document are PAPER_FFRR's
    "gpu": dict(shape="llama3-8b", encoder="roberta-base", dtype="bfloat16", batch_size=32, levels=["d", "q", "d+q"], steps=2,
                max_length=256, doc_words=120, refresh_docs=4096),
    "tiny": dict(shape="tiny", encoder="tiny", dtype="float32", batch_size=8, levels=["d", "q", "d+q"], steps=1, max_length=32,
                 doc_words=30, refresh_docs=96),
}


# ---------------------------------------------------------------- the parent: probe, budget, children, JSON

def hidden() -> set[str]:
    return {x for x in os.environ.get("GPU_CHECK_HIDE", "").split(",") if x}


def available(name: str) -> bool:
    "Importable here (without importing it), and not hidden by --hide."
    return name not in hidden() and importlib.util.find_spec(name) is not None


def probe() -> dict[str, str | None]:
    "Version of every package a section uses; None where it is missing (or hidden)."
    names = sorted({p for s in SECTIONS.values() for p in s["needs"] + s["optional"]} | {"leaf_nb", *PROBED_TOO})
    out = {}
    for n in names:
        if not available(n): out[n] = None; continue
        try: out[n] = importlib.metadata.version(DIST.get(n, n))
        except importlib.metadata.PackageNotFoundError: out[n] = "present"
    return out


def gpu_line() -> str | None:
    "nvidia-smi's name, memory and driver, without importing torch."
    if shutil.which("nvidia-smi") is None: return None
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
        return r.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


def write_json(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str))
    os.replace(tmp, path)


def run_child(name: str, a, timeout: float, work: Path) -> dict:
    "Run one section in a fresh interpreter under `timeout`; its JSON (partial if it was cut off) plus status."
    out = work / f"{name}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", name, "--child-out", str(out),
           "--deadline", repr(time.time() + timeout), *a.passthrough]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TRL_EXPERIMENTAL_SILENCE": "1", "TOKENIZERS_PARALLELISM": "false",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    t0 = time.perf_counter()
    try:
        rc = subprocess.run(cmd, env=env, timeout=timeout).returncode
        timed_out = False
    except subprocess.TimeoutExpired:
        rc, timed_out = None, True
    res = json.loads(out.read_text()) if out.exists() else {}
    res["seconds"] = round(time.perf_counter() - t0, 1)
    if timed_out:
        res["status"], res["reason"] = "timed out", f"stopped after {timeout:.0f} s (its share of the budget); results so far kept"
    elif res.get("status") in (None, "running"):
        res["status"], res["reason"] = "failed", f"the section's process exited with code {rc} before it finished (see the log)"
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--tiny", action="store_true", help="tiny shapes on the CPU: proves the script in well under a minute")
    ap.add_argument("--out", type=Path, default=Path("gpu_check.json"), help="the JSON to write")
    ap.add_argument("--budget-s", type=float, default=420.0, help="wall-clock seconds for the whole run; sections that would overrun are skipped")
    ap.add_argument("--sections", nargs="+", default=list(SECTIONS), choices=list(SECTIONS))
    ap.add_argument("--hide", default="", help="comma-separated import names to treat as missing (simulates a bare machine)")
    ap.add_argument("--child", choices=list(SECTIONS), help=argparse.SUPPRESS)
    ap.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.hide: os.environ["GPU_CHECK_HIDE"] = ",".join(sorted(hidden() | set(a.hide.split(","))))
    if a.child: return child(a)

    t0 = time.time()
    deadline = t0 + a.budget_s
    a.passthrough = ["--tiny"] if a.tiny else []
    packages = probe()
    missing = sorted(n for n, v in packages.items() if v is None)
    print(f"gpu_check: {'tiny shapes on the CPU' if a.tiny else 'paper shapes on the GPU'}, budget {a.budget_s:.0f} s", flush=True)
    print(f"missing packages: {', '.join(missing) or 'none'}", flush=True)
    for n in missing:
        if n in WHEELS: print(f"  {n}: carry the wheel {WHEELS[n]} (see this script's docstring)", flush=True)
    report = {"script": "benchmarks/gpu_check.py", "mode": "tiny" if a.tiny else "gpu", "budget_s": a.budget_s,
              "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t0)),
              "environment": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
                              "nvidia_smi": gpu_line(), "hidden": sorted(hidden())},
              "packages": packages, "missing": missing,
              "weights": "random: models are built from published configs; throughput, memory and step time depend on the shapes, not on the values",
              "tokenizer": "byte-level BPE trained at start on data/medcorpus.jsonl and leaf_nb's prompt templates (6,144 entries; "
                           "the real prompts come out at about SmolLM2's token counts)",
              "sections": {}}
    write_json(a.out, report)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as work:
        for name in a.sections:
            spec = SECTIONS[name]
            lo, cap = spec["tiny" if a.tiny else "gpu"]
            left = deadline - time.time() - RESERVE_S
            lacking = [p for p in spec["needs"] if packages.get(p) is None]
            if lacking:
                res = {"status": "skipped", "reason": "missing: " + ", ".join(lacking)}
            elif left < lo:
                res = {"status": "skipped", "reason": f"budget: {max(left, 0):.0f} s left, the section needs about {lo} s"}
            else:
                print(f"\n=== {name} (up to {min(cap, left):.0f} s)", flush=True)
                res = run_child(name, a, min(cap, left), Path(work))
            report["sections"][name] = res
            report["wall_s"] = round(time.time() - t0, 1)
            write_json(a.out, report)
            print(f"=== {name}: {res['status']}{': ' + res['reason'] if res.get('reason') else ''}", flush=True)
    report["wall_s"] = round(time.time() - t0, 1)
    write_json(a.out, report)
    print("\n" + summary(report), flush=True)
    print(f"\nwrote {a.out} in {report['wall_s']} s", flush=True)
    return 0


def summary(report: dict) -> str:
    "A short table of the headline figures (the device tool returns the end of the output)."
    def figures(name: str, r: dict) -> str:
        if name == "factcheck":
            return "; ".join(f"{k} {v['checks_per_s']:.3g} checks/s" + (f" ({v['ratio_to_70']:.2f} of 70)" if "ratio_to_70" in v else "")
                             for k, v in r.get("runs", {}).items() if "checks_per_s" in v)
        if name == "simpo":
            return "; ".join(f"{x.get('shape')}: " + (x["error"] if "error" in x else f"{x.get('median_step_seconds', float('nan')):.3g} s/step"
                             + (f", peak {x['peak_memory_gib']:.1f} GiB" if x.get("peak_memory_gib") is not None else ""))
                             for x in r.get("simpo_step", []))
        ref = r.get("refresh") or {}
        return "; ".join(([f"refresh {ref['tokenizing_docs_per_s']} docs/s tokenizing, {ref['kept_docs_per_s']} from kept tokens"]
                          if "kept_docs_per_s" in ref else [])
                         + [f"{x.get('level')} {x.get('cache')}: {x.get('s/step')} s/step, {x.get('ratings/step')} ratings/step"
                            for x in r.get("ffrr_step", [])])
    lines = ["| section | status | figures |", "|---|---|---|"]
    for name, s in report["sections"].items():
        try: figs = figures(name, s.get("results", {}))
        except (KeyError, TypeError, ValueError) as e: figs = f"(unreadable: {e!r}; see the JSON)"
        lines.append(f"| {name} | {s['status']}{' (' + s['reason'] + ')' if s.get('reason') else ''} | {figs or '-'} |")
    return "\n".join(lines)


# ---------------------------------------------------------------- a child: one section

class Recorder:
    "The section's JSON, rewritten at every change, so a child stopped at its time limit leaves what it measured."
    def __init__(self, path: Path, deadline: float):
        self.path, self.deadline = path, deadline
        self.data = {"status": "running", "results": {}}
        self.save()

    def left(self) -> float: return self.deadline - time.time()
    def set(self, key, value): self.data["results"][key] = value; self.save()
    def save(self): write_json(self.path, self.data)


def child(a) -> int:
    rec = Recorder(a.child_out, a.deadline)
    try:
        import torch
        cuda = torch.cuda.is_available()
        rec.set("environment", {"torch": torch.__version__, "cuda": torch.version.cuda if cuda else None,
                                "device": torch.cuda.get_device_name() if cuda else platform.processor() or "cpu",
                                "transformers": importlib.metadata.version("transformers")})
        if not a.tiny and not cuda:
            rec.data.update(status="skipped", reason="no CUDA device: the paper shapes need a GPU (run --tiny on a CPU)")
        else:
            {"factcheck": factcheck, "simpo": simpo, "ffrr": ffrr}[a.child](a, rec, "cpu" if a.tiny else "cuda")
            if rec.data["status"] == "running": rec.data["status"] = "ran"
    except ModuleNotFoundError as e:  # a package the section's imports need that the table above does not list
        rec.data.update(status="skipped", reason=f"missing: {e.name} (imported by the section's code)")
        traceback.print_exc()
    except Exception as e:
        rec.data.update(status="failed", reason=f"{type(e).__name__}: {e}".splitlines()[0][:300],
                        traceback=traceback.format_exc().splitlines()[-12:])
        traceback.print_exc()
    rec.save()
    return 0


def factcheck(a, rec: Recorder, device: str) -> None:
    "Checks/s of leaf_nb's fact-checker: SAFE-style single calls vs `fact_check` batched, CoT vs logprob verdicts."
    import factcheck_throughput as ft
    import gpu_check_parts as parts
    from leaf_nb.factcheck import FactCheckSettings, _knowledge, fact_check
    from leaf_nb.llm import user
    from leaf_nb.prompts import NOT_SUPPORTED_LABEL, SUPPORTED_LABEL, UNPARSED, fact_check_prompt, parse_query, query_prompt
    from leaf_nb.retrieve import passage_text
    from leaf_nb.text import split_sentences

    P = FACTCHECK["tiny" if a.tiny else "gpu"]
    t = time.perf_counter()
    tok = parts.train_tokenizer()
    model = parts.causal_lm(P["shape"], tok, device, P["dtype"])
    n_params = sum(p.numel() for p in model.parameters())
    lm = parts.in_memory_lm(model, tok, f"{P['shape']}-random", P["batch_size"])
    retriever = parts.topped_up_retriever(use_bm25=available("bm25s"))
    lm.generate([user("warm up")], max_tokens=2)
    lm.label_logprobs([user("warm up")], [SUPPORTED_LABEL, NOT_SUPPORTED_LABEL])
    rec.set("setup", {**P, "device": device, "parameters": n_params, "tokenizer_vocab": len(tok),
                      "retrieval": "BM25 (bm25s) over data/medcorpus.jsonl, topped up to k=3 with fixed passages" if retriever.bm25 is not None
                                   else "fixed passages of data/medcorpus.jsonl (bm25s missing)",
                      "context": "benchmarks/factcheck_throughput.py's QUESTION for every answer",
                      "answers": "distinct sentences of data/medcorpus.jsonl, 4 per answer (batched), 1 per answer (sequential)",
                      "replies": "random weights never stop early: every query runs query_tokens, every CoT verdict rater_tokens",
                      "setup_seconds": round(time.perf_counter() - t, 1)})
    answers = parts.corpus_answers(P["batched"])
    singles = parts.corpus_answers(P["sequential"], per_answer=1)
    runs: dict[str, dict] = {}
    rec.set("runs", runs)
    tokens = lambda prompt: len(tok(lm.render(prompt), add_special_tokens=False)["input_ids"])

    def finish(key: str, n: int, seconds: float, extra: dict) -> None:
        r = {"sentences": n, "seconds": round(seconds, 3), "checks_per_s": n / seconds, **extra}
        if device == "cuda":
            r["ratio_to_70"] = r["checks_per_s"] / ROOFLINE_CHECKS_PER_S
        runs[key] = r
        rec.set("runs", runs)
        print(f"  {key}: {n} sentences in {seconds:.1f} s = {n / seconds:.3g} checks/s", flush=True)

    for mode in ("logprob", "cot"):  # batched: the pipeline's own mode, one call per stage
        key = f"batched_{mode}"
        if rec.left() < (3 if a.tiny else 20): runs[key] = {"skipped": "budget"}; continue
        s = FactCheckSettings(verdict=mode, query_max_tokens=P["query_tokens"], rater_max_tokens=P["rater_tokens"])
        writer, rater = lm.derive(), lm.derive()
        writer.seconds = rater.seconds = 0.0
        retriever.topped_up = 0
        t = time.perf_counter()
        res = fact_check(answers, [ft.QUESTION] * len(answers), llm=writer, retriever=retriever, rater=rater, settings=s)
        sec = time.perf_counter() - t
        rows = res.sentences
        rating_tokens = [tokens(user(fact_check_prompt(r.text, [passage_text(ti, tx) for ti, tx in zip(r.evidence_titles, r.evidence_texts)],
                                                       ft.QUESTION, reasoning=mode == "cot"))) for r in rows.itertuples()]
        mean_tok = sum(rating_tokens) / len(rating_tokens)
        extra = {"verdict": mode, "batch_size": P["batch_size"], "query_seconds": round(writer.seconds, 3),
                 "rating_seconds": round(rater.seconds, 3), "retrieval_and_rest_seconds": round(sec - writer.seconds - rater.seconds, 3),
                 "rating_checks_per_s": len(rows) / rater.seconds,
                 "query_prompt_tokens_mean": sum(tokens(user(query_prompt(x, ft.QUESTION))) for x in rows.text) / len(rows),
                 "rating_prompt_tokens": {"mean": mean_tok, "min": min(rating_tokens), "max": max(rating_tokens)},
                 "new_tokens": {"query": P["query_tokens"], "rating": P["rater_tokens"] if mode == "cot" else 0},
                 "passages_topped_up": retriever.topped_up, "summary": res.summary()}
        if device == "cuda" and mode == "logprob":  # one prompt pass per check: what the roofline counts
            roof = H200_BF16_FLOPS / (2 * n_params * mean_tok)  # the 70 checks/s formula at these prompts' length
            extra.update(rating_roofline_checks_per_s=roof, rating_ratio_to_roofline=extra["rating_checks_per_s"] / roof,
                         rating_ratio_to_70=extra["rating_checks_per_s"] / ROOFLINE_CHECKS_PER_S)
        finish(key, len(rows), sec, extra)

    def rate_logprob(one, sent, hits):  # the logprob twin of factcheck_throughput.sequential's rating call
        return one.label_logprobs([user(fact_check_prompt(sent, _knowledge(hits), ft.QUESTION, reasoning=False))],
                                  [SUPPORTED_LABEL, NOT_SUPPORTED_LABEL])

    for mode in ("logprob", "cot"):  # SAFE-style: one sentence at a time, one call each for its query and its verdict
        key = f"sequential_{mode}"
        s = FactCheckSettings(verdict=mode, query_max_tokens=P["query_tokens"], rater_max_tokens=P["rater_tokens"])
        one = lm.derive(batch_size=1)
        done, t = 0, time.perf_counter()
        for ans in singles:
            if rec.left() < (3 if a.tiny else 15): break
            if mode == "cot":
                ft.sequential(one, retriever, [ans], s)  # benchmarks/factcheck_throughput.py's loop, as it is
            else:
                for sent in split_sentences(ans):
                    q = parse_query(one.generate([user(query_prompt(sent, ft.QUESTION))], max_tokens=s.query_max_tokens)[0][0])
                    rate_logprob(one, sent, retriever.search([sent if q == UNPARSED else q], k=s.k)[0])
            done += len(split_sentences(ans))
        sec = time.perf_counter() - t
        if not done: runs[key] = {"skipped": "budget"}; rec.set("runs", runs); continue
        finish(key, done, sec, {"verdict": mode, "batch_size": 1, "new_tokens": {"query": P["query_tokens"], "rating": P["rater_tokens"] if mode == "cot" else 0},
                                "of_planned": P["sequential"]})
    derived = {}
    for mode in ("logprob", "cot"):
        b, q = runs.get(f"batched_{mode}", {}), runs.get(f"sequential_{mode}", {})
        if "checks_per_s" in b and "checks_per_s" in q: derived[f"batched_over_sequential_{mode}"] = b["checks_per_s"] / q["checks_per_s"]
    lp, cot = runs.get("batched_logprob", {}), runs.get("batched_cot", {})
    if "rating_seconds" in lp and "rating_seconds" in cot:  # the same prompts rated twice: the difference is CoT's decoding
        derived["cot_decode_ms_per_step"] = 1000 * (cot["rating_seconds"] - lp["rating_seconds"]) / P["rater_tokens"]
        derived["cot_decode_batch"] = min(P["batch_size"], cot["sentences"])
    rec.set("derived", derived)
    if device == "cuda":
        rec.set("roofline", {"checks_per_s": ROOFLINE_CHECKS_PER_S,
                             "basis": "704-token checks of an 8B model: 2 x 8.03e9 x 704 FLOP each at 790 TFLOP/s (H200 bf16, measured here)"})


def simpo(a, rec: Recorder, device: str) -> None:
    "benchmarks/simpo_step.py's own `main`, with its own flags; its tokenizer comes from the one trained here."
    import gpu_check_parts as parts
    import leaf_nb.llm
    import simpo_step
    with tempfile.TemporaryDirectory(prefix="gpu-check-simpo-") as work:
        tok_dir = parts.save_tokenizer(parts.train_tokenizer(), Path(work) / "tokenizer")
        # simpo_step.run loads its tokenizer from leaf_nb.llm.embedded_dir(), the embedded SmolLM2, not on the GPU machine
        leaf_nb.llm.embedded_dir = lambda *args, **kwargs: tok_dir
        argv = SIMPO["tiny" if a.tiny else "gpu"]
        out = Path(work) / "simpo_step.json"
        rec.set("argv", argv)
        rc = simpo_step.main(argv + ["--json", str(out)])
        rec.set("simpo_step", json.loads(out.read_text()) if out.exists() else [])
    if rc != 0: rec.data.update(status="failed", reason="simpo_step.py completed no shape (see simpo_step)")


def ffrr(a, rec: Recorder, device: str) -> None:
    "benchmarks/ffrr_step.py's own `main`, with a random RoBERTa policy encoder and the random 8B-shaped LM as the verifier."
    import ffrr_step
    import gpu_check_parts as parts
    import leaf_nb.retrieve
    P = FFRR["tiny" if a.tiny else "gpu"]
    tok = parts.train_tokenizer()
    model = parts.causal_lm(P["shape"], tok, device, P["dtype"])
    rec.set("setup", {**P, "device": device, "llm_parameters": sum(p.numel() for p in model.parameters()),
                      "verifier": f"the random {P['shape']}-shaped LM through leaf_nb's Transformers backend (the paper's is GPT-3.5, an API)",
                      "policy": f"random {P['encoder']} sentence-transformers encoder, mean pooling"})
    with tempfile.TemporaryDirectory(prefix="gpu-check-ffrr-") as work:
        encoder = parts.encoder_folder(P["encoder"], tok, Path(work) / "encoder")
        import policy_refresh
        pool = parts.refresh_pool(P["refresh_docs"])
        rec.set("refresh", {"encoder": f"random {P['encoder']}", "max_length": P["max_length"],
                            **policy_refresh.measure(pool, str(encoder), P["max_length"], repeats=1)})
        # ffrr_step.main builds the embedded SmolLM2 and MiniLM, which are not on the GPU machine: hand it ours instead
        ffrr_step.embedded = lambda cache=None, progress=False: parts.in_memory_lm(model, tok, f"{P['shape']}-random", P["batch_size"], cache)
        leaf_nb.retrieve.embedded_encoder = lambda: encoder
        out = Path(work) / "ffrr_step.json"
        argv = ["--levels", *P["levels"], "--steps", str(P["steps"]), "--k", "3", "--max-length", str(P["max_length"]),
                "--doc-words", str(P["doc_words"]), "--json", str(out)]
        rec.set("argv", argv)
        sys.argv = ["ffrr_step.py", *argv]  # ffrr_step.main reads sys.argv
        ffrr_step.main()
        rec.set("ffrr_step", json.loads(out.read_text()) if out.exists() else [])


if __name__ == "__main__":
    sys.exit(main())
