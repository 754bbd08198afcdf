"""The paper profiles rehearsed at the papers' own size, on this machine: every paper notebook run the way a
workstation runs it (`leaf-nb reproduce NB --profile ...`: server specs, tokenizer folders, saved indexes, work_dir,
provenance), against `profiles/rehearsal.yaml`: stand-in servers (`leaf_nb.standin`, one process per served model, on
the profile's ports), the embedded models where a local folder is needed, and synthetic data in each real format at
its real size (`benchmarks/rehearsal_data.py`: MIRAGE's 7,663 questions, MedQA-USMLE, RAWFC, LIAR-RAW, a 1M-passage
MedRAG corpus).

    nice -n 10 python benchmarks/paper_scale.py --data /tmp/rehearsal/data --only table1_filtered_accuracy
    nice -n 10 python benchmarks/paper_scale.py --data /tmp/rehearsal/data              # every paper notebook
    python benchmarks/paper_scale.py --data /tmp/rehearsal/data --rss-curve           # Table 1 at 1k and 4.1k questions (7.6k: the plain run)
    python benchmarks/paper_scale.py --data /tmp/rehearsal/data --resume-check        # kill -9 Table 1 half way, rerun, count
    python benchmarks/paper_scale.py --data /tmp/rehearsal/data --two-jobs            # Table 1 and leakage at once, one cache
    python benchmarks/paper_scale.py --data /tmp/rehearsal/data --only table4_ranking_delta --units 1   # a stated part
    python benchmarks/paper_scale.py --table                                          # the cost tables from the CSVs (Markdown)

Per notebook it writes one row to `benchmarks/results/paper_scale.csv`: model calls and HTTP requests, prompt and
completion tokens (the stand-in's `usage`, about four characters a token) by model, harness wall time, the peak RSS of the
whole `leaf-nb reproduce` process tree (psutil, every 0.5 s; the stand-in servers apart), the cache's size on disk,
the calls the `--dry-run` estimates beside the ones made, and the GPU hours projected at the stated throughputs (see
`project`). Calls by stage come from a second dry run after the real one: its requests are all in the cache, so it
walks the real run's path and labels each call with its stage (the dry-run log), which also gives
`benchmarks/results/calls_per_question.csv` (calls per question or claim and tokens per call, by notebook and stage).
Training is capped at `--max-train-steps` optimiser steps (the table says so); every data stage runs in full.

Each stand-in here runs in a small wrapper (`_standin`, below) that appends one line per request to a log: the body's
hash, the model, `max_tokens` and the usage. The logs count the calls, and the resume check finds repeats in them.
Timings taken on a busy machine are marked so (the `other_busy_cpus` column: CPUs other processes kept busy, sampled
before the run and measured over it, the larger of the two); the issue's targets (Table 1: peak RSS <= 4 GB, harness <= 30 min on 2 cores) are checked on idle runs.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from results_csv import other_busy_cpus  # noqa: E402

RESULTS = HERE / "results"
PROFILE = REPO / "profiles" / "rehearsal.yaml"
BIN = Path(sys.executable).parent

# Throughputs the GPU time is projected at (stated, not measured here): prefill of a vLLM-served 8B on one H200, the
# project's figure (33k prompt tokens/s); decode of Llama-3.1-8B with vLLM on one H100 at full batch, about 12.5k
# generated tokens/s (published third-party benchmarks, 2025). A model of P parameters is taken at (8.03e9 / P) x those
# rates per GPU: both phases at full batch are bound by the FLOPs per token, 2P. An upper bound: vLLM's prefix cache
# would skip the prompt prefixes that the five searches of one sentence share.
PREFILL_8B, DECODE_8B, P_8B = 33_000.0, 12_500.0, 8.03e9
PARAMS = {"meta-llama/Meta-Llama-3-70B-Instruct": 70.6e9, "Qwen/Qwen2-72B-Instruct": 72.7e9, "meta-llama/Meta-Llama-3-8B-Instruct": 8.03e9,
          "meta-llama/Llama-2-7b-chat-hf": 6.74e9, "dmis-lab/selfbiorag_7b": 6.74e9, "gpt-3.5-turbo": None}  # None: an API, no GPU of ours
UNITS = {"ffrr": "claim", "leaf": "question", "selfbiorag": "question"}


def log(*a): print(*a, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ the profile, filled in
def expand(value, env: dict, where: str):
    "`${NAME}` in every string of `value` replaced from `env`; a string that is one `${NAME}` of a number becomes the number."
    if isinstance(value, dict): return {k: expand(v, env, where) for k, v in value.items()}
    if isinstance(value, list): return [expand(v, env, where) for v in value]
    if not isinstance(value, str): return value
    def sub(m):
        if m[1] not in env: raise ValueError(f"{where}: ${{{m[1]}}} is not set (known: {', '.join(sorted(env))})")
        return str(env[m[1]])
    out = re.sub(r"\$\{(\w+)\}", sub, value)
    return int(out) if re.fullmatch(r"\$\{\w+\}", value) and re.fullmatch(r"-?\d+", out) else out


def standin_command(work: Path, latency: float = 0.0, support_rate: float = 0.97) -> str:
    """The `serve:` command (leaf_nb.selftrain.ServedFolder) of the self-training rehearsals: a logged stand-in server per
    round's model folder, answering under the folder's name with its tokenizer, as `vllm serve` would on a workstation;
    its requests go to `requests_served.jsonl` beside the other stand-ins' logs."""
    q = shlex.quote
    return (f"{{python}} {q(str(Path(__file__).resolve()))} _standin --port {{port}} --log {q(str(work / 'standin' / 'requests_served.jsonl'))}"
            f" --model {{name}} --tokenizer {{model}} --latency-per-token {latency:g} --support-rate {support_rate:g}")


def portable(text: str) -> str:
    """`text` (a row's overrides) without this machine's folders: the repository's files named in-repo (the serve:
    stand-in), the models folder as the profile names it, `${LEAF_NB_MODELS}`."""
    from leaf_nb.llm import embedded_dir
    return text.replace(str(REPO) + "/", "").replace(str(embedded_dir().parent), "${LEAF_NB_MODELS}")


def concrete_profile(data: Path, work: Path, steps: int, src: Path = PROFILE, free_ports: bool = False,
                     latency: float = 0.0, support_rate: float = 0.97) -> tuple[Path, dict, dict]:
    """The rehearsal profile with its `${...}` filled in (and, with `free_ports`, each server port moved to a free one, so
    that two rehearsals can run at once), written to `work`; its models, and its per-notebook overrides."""
    import yaml
    from leaf_nb.llm import embedded_dir, free_port
    env = {"LEAF_NB_REHEARSAL": str(data), "LEAF_NB_MODELS": str(embedded_dir().parent), "MAX_TRAIN_STEPS": steps,
           "SERVE_STANDIN": standin_command(work, latency, support_rate)}
    prof = expand(yaml.safe_load(src.read_text()), env, str(src))
    if free_ports:
        moved: dict[str, str] = {}
        def move(v):
            if isinstance(v, dict): return {k: move(x) for k, x in v.items()}
            if not isinstance(v, str): return v
            return re.sub(r"127\.0\.0\.1:(\d+)", lambda m: "127.0.0.1:" + moved.setdefault(m[1], str(free_port())), v)
        prof["models"] = move(prof["models"])
    overrides = prof.pop("rehearsal", {}) or {}
    path = work / "rehearsal.yaml"
    path.write_text(f"# {src.name} with ${{LEAF_NB_REHEARSAL}} = {data}, written by benchmarks/paper_scale.py\n" + yaml.safe_dump(prof, sort_keys=False))
    return path, prof, overrides


def served(models: dict) -> dict[int, dict]:
    "port -> {names, tokenizer} of every `openai:http://127.0.0.1:PORT/v1#NAME` spec in the profile's models."
    ports: dict[int, dict] = {}
    for entry in models.values():
        if not isinstance(entry, dict): entry = {"spec": entry}
        for key in ("spec", "served"):
            m = re.fullmatch(r"openai:http://127\.0\.0\.1:(\d+)/v1#(.+)", str(entry.get(key) or ""))
            if not m: continue
            p = ports.setdefault(int(m[1]), {"names": [], "tokenizer": None})
            if m[2] not in p["names"]: p["names"].append(m[2])
            p["tokenizer"] = p["tokenizer"] or entry.get("tokenizer")
    return ports


# ------------------------------------------------------------------ stand-in servers with a request log
def standin_child(a) -> None:
    "`_standin`: leaf_nb.standin's server with each request appended to `--log` (hash, model, max_tokens, usage)."
    import asyncio
    from leaf_nb import standin
    Path(a.log).parent.mkdir(parents=True, exist_ok=True)  # a served round (standin_command) may be the first to log
    out = open(a.log, "a", buffering=1)

    class Logged(standin.Replies):
        def complete(self, body, chat=False):
            payload, delay = super().complete(body, chat)
            key = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]
            out.write(json.dumps({"t": round(time.time(), 3), "model": body.get("model"), "key": key, "chat": chat,
                                  "max_tokens": body.get("max_tokens"), "bias": bool(body.get("logit_bias")),
                                  "completions": len(payload["choices"]),  # a completions request may carry a list of prompts
                                  **payload["usage"]}) + "\n")
            return payload, delay

    replies = Logged(a.model, a.seed, a.support_rate, a.latency_per_token, a.tokenizer)
    asyncio.run(standin._serve(replies, "127.0.0.1", a.port, lambda port: print(f"http://127.0.0.1:{port}/v1", flush=True)))


class Servers:
    """One logged stand-in process per port of the profile; `logs` are their request logs. The log `requests_served.jsonl`
    is the self-training rehearsals' (`standin_command`: a stand-in per round's model, started by the notebook) and is
    counted with the others."""
    def __init__(self, ports: dict[int, dict], logs: Path, latency: float = 0.0, support_rate: float = 0.97):
        self.ports, self.logdir, self.latency, self.support_rate, self.procs = ports, logs, latency, support_rate, []
        self.keys: list[int | str] = [*ports, "served"]  # the logs: one per port, and the served rounds'

    def __enter__(self):
        import select
        self.logdir.mkdir(parents=True, exist_ok=True)
        for port, p in self.ports.items():
            cmd = [sys.executable, str(Path(__file__).resolve()), "_standin", "--port", str(port), "--log", str(self.log(port)),
                   "--latency-per-token", str(self.latency), "--support-rate", str(self.support_rate),
                   *[x for n in p["names"] for x in ("--model", n)],
                   *(["--tokenizer", str(p["tokenizer"])] if p["tokenizer"] else [])]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(self.logdir / f"standin_{port}.err", "w"), stdin=subprocess.DEVNULL)
            self.procs.append(proc)
        for proc, port in zip(self.procs, self.ports):
            if not select.select([proc.stdout], [], [], 120)[0] or not proc.stdout.readline().startswith(b"http://"):
                self.__exit__()
                raise RuntimeError(f"stand-in on port {port} did not start: {(self.logdir / f'standin_{port}.err').read_text()[-2000:]}")
        return self

    def log(self, key: int | str) -> Path: return self.logdir / f"requests_{key}.jsonl"

    def mark(self) -> dict[int | str, int]:
        "Each log's size in bytes now: what a run adds is read from here."
        return {p: self.log(p).stat().st_size if self.log(p).exists() else 0 for p in self.keys}

    def since(self, mark: dict[int, int]):
        "The requests logged after `mark`, one dict each (read lazily, log by log)."
        for p in self.keys:
            if not self.log(p).exists(): continue
            with open(self.log(p), "rb") as f:
                f.seek(mark.get(p, 0))
                for line in f:
                    if line.endswith(b"\n"): yield {**json.loads(line), "port": p}

    def count_since(self, mark: dict[int, int]) -> int:
        "Requests logged after `mark` (complete lines; counted without parsing)."
        n = 0
        for p in self.keys:
            if not self.log(p).exists(): continue
            with open(self.log(p), "rb") as f:
                f.seek(mark.get(p, 0))
                while (block := f.read(1 << 20)): n += block.count(b"\n")
        return n

    def __exit__(self, *exc):
        for proc in self.procs:
            if proc.poll() is None: proc.terminate()
        for proc in self.procs:
            try: proc.wait(10)
            except subprocess.TimeoutExpired: proc.kill()


# ------------------------------------------------------------------ one notebook, watched
class TreeWatch:
    """Polls a process and all its descendants every `every` s: the peak of their summed RSS, of the largest single one, and
    of their summed anonymous memory (RSS less its file-backed and shared pages: what the processes allocated, without the
    pages of memory-mapped index and corpus files, which the kernel can drop and re-read)."""
    def __init__(self, pid: int, every: float = 0.5):
        import threading
        self.pid, self.every, self.peak, self.peak_single, self.peak_anon, self.samples = pid, every, 0, 0, 0, []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        import psutil
        try: root = psutil.Process(self.pid)
        except psutil.NoSuchProcess: return
        t0 = time.time()
        while not self._stop.is_set():
            total = single = anon = 0
            try: procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess: break
            for p in procs:
                try: m = p.memory_info()
                except psutil.Error: continue
                total += m.rss; single = max(single, m.rss); anon += m.rss - m.shared
            self.peak, self.peak_single, self.peak_anon = max(self.peak, total), max(self.peak_single, single), max(self.peak_anon, anon)
            self.samples.append((round(time.time() - t0, 1), total, anon))
            self._stop.wait(self.every)

    def stop(self) -> "TreeWatch":
        self._stop.set(); self._t.join(); return self


def cache_mb(path: Path) -> float:
    return sum(os.path.getsize(p) for p in (str(path), f"{path}-wal") if os.path.exists(p)) / 2**20


def leaf_nb_cmd(nb: Path, profile: Path, overrides: dict, extra: list[str] = ()) -> list[str]:
    cmd = [str(BIN / "leaf-nb"), "reproduce", str(nb), "--profile", str(profile), *extra]
    for k, v in overrides.items(): cmd += ["-p", k, v if isinstance(v, str) else json.dumps(v)]
    return cmd


def _machine_busy_s() -> float:
    "CPU seconds the whole machine has been busy (not idle, not waiting on I/O) since boot."
    f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(f) - f[3] - f[4]) / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    """CPU seconds of this benchmark: itself, its children it has waited for (a finished notebook's whole tree) and its live
    descendants (the stand-in servers, a running notebook)."""
    import psutil
    t = os.times()
    own = t.user + t.system + t.children_user + t.children_system
    for p in psutil.Process().children(recursive=True):
        try: c = p.cpu_times(); own += c.user + c.system
        except psutil.Error: pass
    return own


def run_watched(cmd: list[str], env: dict, log_to: Path, timeout: float | None, kill_when=None) -> dict:
    """Run `cmd`, watching its process tree; `kill_when()` true: SIGKILL the whole tree (the resume check). Also measures
    `other_busy_during`: CPUs that processes outside this benchmark kept busy over the run, on average."""
    busy0, own0 = _machine_busy_s(), _own_cpu_s()
    t = time.perf_counter()
    with open(log_to, "w") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=err, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
        watch, killed = TreeWatch(proc.pid), False
        try:
            while proc.poll() is None:
                if timeout and time.perf_counter() - t > timeout:
                    os.killpg(proc.pid, signal.SIGKILL); proc.wait(); raise TimeoutError(f"{cmd[2]}: over {timeout:.0f} s")
                if kill_when is not None and kill_when():
                    os.killpg(proc.pid, signal.SIGKILL); proc.wait(); killed = True
                    break
                time.sleep(0.2)
        except BaseException:  # Ctrl-C or SIGTERM (main's handler): the tree has a session of its own, so neither reached it
            if proc.poll() is None: os.killpg(proc.pid, signal.SIGKILL); proc.wait()
            raise
        finally:
            watch.stop()
    wall = time.perf_counter() - t
    other = max(0.0, (_machine_busy_s() - busy0) - (_own_cpu_s() - own0)) / max(wall, 1e-9)
    return {"rc": proc.returncode, "wall_s": wall, "other_busy_during": round(other, 2), "peak_rss_gb": watch.peak / 2**30,
            "peak_single_gb": watch.peak_single / 2**30, "peak_anon_gb": watch.peak_anon / 2**30, "killed": killed, "rss_samples": watch.samples}


def dry_child(a) -> None:
    "`_dry`: `leaf_nb.runs.reproduce`'s dry run of one notebook, keeping its log (every request with its stage)."
    from leaf_nb.runs import _output_folder, _papermill, run_parameters
    nb = Path(a.notebook).resolve()
    params = run_parameters(nb, profile=a.profile, files=[nb.with_name(nb.stem + ".paper.yaml")], overrides=json.loads(a.overrides))
    params["out_dir"] = a.out_dir  # a dry run's tables are stand-ins: never over the real ones
    Path(a.log).unlink(missing_ok=True)
    Path(a.log).touch()
    executed = _output_folder(nb, params) / f"{nb.stem}.executed.ipynb"
    _papermill(nb, executed, params, {"LEAF_NB_DRY_RUN": a.log}, None)


def dry_run(nb: Path, profile: Path, overrides: dict, cache: Path, work: Path, timeout: float | None, tag: str) -> tuple[list[dict], dict]:
    "The dry-run log's lines for `nb` (with `cache`), and how the run went."
    logf = work / "dry" / f"{nb.stem}.{tag}.jsonl"
    logf.parent.mkdir(parents=True, exist_ok=True)
    overrides = dry_overrides(nb, overrides, work / "dry" / f"{nb.stem}.{tag}.work")
    cmd = [sys.executable, str(Path(__file__).resolve()), "_dry", "--notebook", str(nb), "--profile", str(profile),
           "--overrides", json.dumps(overrides), "--log", str(logf), "--out-dir", str(work / "dry" / f"{nb.stem}.{tag}.out")]
    res = run_watched(cmd, {**os.environ, "LEAF_NB_CACHE": str(cache)}, work / "logs" / f"{nb.stem}.dry-{tag}.log", timeout)
    lines = [json.loads(l) for l in logf.read_text().splitlines() if l.strip()] if logf.exists() else []
    return lines, res


def dry_overrides(nb: Path, overrides: dict, fresh: Path) -> dict:
    """A dry run's -p values: FFRR's notebooks keep each finished method's rows in `work_dir` (run_methods' rows_path) and
    skip a method found there, so a dry run on the real run's work_dir would ask only for the claim decompositions; it
    gets the empty folder `fresh` instead, and walks every method again with every call answered from the cache."""
    import papermill as pm
    if nb.parent.name != "ffrr" or "work_dir" not in pm.inspect_notebook(str(nb)): return overrides
    shutil.rmtree(fresh, ignore_errors=True)
    return {**overrides, "work_dir": str(fresh)}


def stage_table(lines: list[dict]) -> dict[tuple[str, str], dict]:
    "(model, stage) -> requests, cached, prompt characters and max_tokens summed, from a dry-run log."
    out: dict[tuple[str, str], dict] = {}
    for l in lines:
        stage = re.sub(r", part \d+/\d+$", "", l["stage"])  # fact_check's prompt chunks as one stage
        stage = re.sub(r" \(search \d+\)$", "", stage)  # LEAF's search rounds as one stage
        s = out.setdefault((l["model"], stage), {"calls": 0, "cached": 0, "prompt_chars": 0, "max_tokens": 0, "ops": set(), "max_tokens_values": set()})
        s["calls"] += 1; s["cached"] += bool(l["cached"]); s["prompt_chars"] += l["prompt_chars"]; s["max_tokens"] += l["max_tokens"]
        s["ops"].add(l["op"]); s["max_tokens_values"].add(l["max_tokens"])
    return out


# ------------------------------------------------------------------ GPU time
def gpu_hours(model: str, prompt_tokens: float, completion_tokens: float, prefill: float, decode: float) -> float | None:
    "GPU hours on H100/H200-class GPUs at the stated rates, scaled by the model's parameters (None for an API model)."
    p = PARAMS.get(model, P_8B)
    if p is None: return None
    scale = P_8B / p
    return (prompt_tokens / (prefill * scale) + completion_tokens / (decode * scale)) / 3600


# ------------------------------------------------------------------ set-up: data, indexes, reward model
def prepare(a, needs: set[str]) -> tuple[Path, dict, dict]:
    """Generate (or reuse) the data, build (or reuse) the indexes that the notebooks' parameters `needs` name and the test
    reward model and FFRR's stand-in encoder; the filled-in profile."""
    sys.path.insert(0, str(HERE))
    from rehearsal_data import generate
    a.data.mkdir(parents=True, exist_ok=True)
    generate(a.data, a.seed, a.passages, a.fraction)
    a.work.mkdir(parents=True, exist_ok=True)
    profile, prof, overrides = concrete_profile(a.data, a.work, a.max_train_steps, free_ports=a.free_ports,
                                                latency=a.latency_per_token, support_rate=a.support_rate)
    builds = []
    (a.work / "logs").mkdir(parents=True, exist_ok=True)
    for key, kind in (("index", "bm25"), ("medrag_index", "lucene")):
        out = Path(prof[key])
        if (out / "retriever.json").exists() or key not in needs: continue
        log(f"building the {kind} index over {a.data / 'medrag'} -> {out}")
        busy = other_busy_cpus(a.busy_sample_s)
        cmd = [str(BIN / "leaf-nb"), "index", str(a.data / "medrag"), "--retriever", kind, "--out", str(out), "--overwrite"]
        res = run_watched(cmd, {**os.environ, "TQDM_DISABLE": "1"}, a.work / "logs" / f"index_{kind}.log", None)
        if res["rc"] != 0: raise RuntimeError(f"leaf-nb index --retriever {kind} failed: {(a.work / 'logs' / f'index_{kind}.log').read_text()[-2000:]}")
        builds.append({"retriever": kind, "passages": a.passages, "build_s": round(res["wall_s"], 1),
                       "peak_rss_gb": round(res["peak_rss_gb"], 2), "other_busy_cpus": busy})
    if builds:
        with open(a.work / "index_builds.jsonl", "a") as f: f.writelines(json.dumps(b) + "\n" for b in builds)
    from leaf_nb.selftrain import build_test_reward_model
    from rehearsal_data import build_standin_encoder
    build_test_reward_model(a.data / "models")
    built = build_standin_encoder(a.data / "models")  # FFRR's encoder, roberta_base
    if Path(prof["models"]["roberta_base"]["spec"]) != built:
        raise RuntimeError(f"{PROFILE.name}'s roberta_base is {prof['models']['roberta_base']['spec']}, the stand-in encoder built is {built}")
    return profile, prof, overrides


# ------------------------------------------------------------------ one notebook's rehearsal
def notebook_overrides(nb: Path, overrides: dict, extra: dict | None = None) -> dict:
    "The -p values of one notebook's rehearsal: the profile's `rehearsal:` entries for all and for it (out_dir gets the paper's folder), then `extra`."
    over = {**(overrides.get("all") or {}), **(overrides.get(nb.stem) or {}), **(extra or {})}
    if "out_dir" in over: over["out_dir"] = str(Path(over["out_dir"]) / nb.parent.name)  # <out_dir>/<paper>/rehearsal/, as figures/ is
    return over


def rehearse(nb: Path, a, profile: Path, prof: dict, overrides: dict, servers: Servers, extra: dict | None = None,
             tag: str = "", kill_at: int | None = None, keep_keys: bool = False) -> dict:
    "Run one paper notebook against the rehearsal profile; its row of paper_scale.csv (and its stage counts)."
    name = nb.stem + (f"@{tag}" if tag else "")
    over = notebook_overrides(nb, overrides, extra)
    cache = a.work / "cache" / f"{name}.sqlite"
    if a.fresh:
        for s in ("", "-wal", "-shm"): Path(f"{cache}{s}").unlink(missing_ok=True)
    cache.parent.mkdir(parents=True, exist_ok=True)
    (a.work / "logs").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "LEAF_NB_CACHE": str(cache), "TQDM_DISABLE": "1", "PYTHONWARNINGS": "ignore"}
    busy = other_busy_cpus(a.busy_sample_s)
    mark = servers.mark()
    kill_when = None
    if kill_at is not None:
        state = {"t": 0.0}
        def kill_when():  # the logs counted at most every 2 s: the kill lands near `kill_at`, not on it
            if time.time() - state["t"] < 2: return False
            state["t"] = time.time()
            return servers.count_since(mark) >= kill_at
    log(f"{name}: running ({'an empty' if a.fresh else 'reusing the'} cache {cache})")
    res = run_watched(leaf_nb_cmd(nb, profile, over), env, a.work / "logs" / f"{name}.log", a.timeout, kill_when)
    (a.work / "logs" / f"{name}.rss.json").write_text(json.dumps(res["rss_samples"]))  # (seconds, bytes) of the whole tree
    with open(a.work / "slices.jsonl", "a") as f:  # where this run's requests sit in the stand-in logs (the resume check's reference)
        f.write(json.dumps({"notebook": nb.stem, "tag": tag, "rc": res["rc"], "killed": res["killed"], "over": over,
                            "support_rate": a.support_rate, "latency_per_token": a.latency_per_token,
                            "start": mark, "end": servers.mark()}) + "\n")
    row = {"notebook": nb.stem, "tag": tag, "rc": res["rc"], "killed": res["killed"], "harness_s": round(res["wall_s"], 1),
           "peak_rss_gb": round(res["peak_rss_gb"], 3), "peak_single_gb": round(res["peak_single_gb"], 3),
           "peak_anon_gb": round(res["peak_anon_gb"], 3), "cache_mb": round(cache_mb(cache), 1),
           "other_busy_cpus": max(busy, res["other_busy_during"]),  # before the run, or over it: the larger
           "max_train_steps": a.max_train_steps,
           "overrides": portable(json.dumps(over, sort_keys=True))}
    by_model: dict[str, dict] = {}
    groups: dict[tuple, list] = {}  # (model, max_tokens, logit_bias) -> [completions, completion tokens]
    keys = {} if keep_keys else None
    n_sent = 0
    for r in servers.since(mark):
        n_sent += 1
        m = by_model.setdefault(r["model"], {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0})
        m["requests"] += 1; m["prompt_tokens"] += r["prompt_tokens"]; m["completion_tokens"] += r["completion_tokens"]
        g = groups.setdefault((r["model"], r["max_tokens"], r["bias"]), [0, 0]); g[0] += r.get("completions", 1); g[1] += r["completion_tokens"]
        if keys is not None: keys[r["key"]] = keys.get(r["key"], 0) + 1
    row["http_requests"] = n_sent
    row["prompt_tokens"] = sum(m["prompt_tokens"] for m in by_model.values())
    row["completion_tokens"] = sum(m["completion_tokens"] for m in by_model.values())
    hours = [gpu_hours(m, v["prompt_tokens"], v["completion_tokens"], a.prompt_tokens_per_s, a.tokens_per_s) for m, v in by_model.items()]
    row["gpu_hours"] = round(sum(h for h in hours if h is not None), 2)
    row["by_model"] = json.dumps(by_model, sort_keys=True)
    row["_groups"], row["_keys"] = groups, keys
    if res["rc"] != 0 and not res["killed"]:
        row["error"] = (a.work / "logs" / f"{name}.log").read_text()[-1500:].replace("\n", " | ")
        log(f"{name}: FAILED (rc {res['rc']}); see {a.work / 'logs' / f'{name}.log'}")
        return row
    if res["killed"]: return row
    if a.fresh: row["calls"] = stored_model_calls(cache)  # an empty cache at the start: every model call it holds, this run made
    if not a.stages: return row
    log(f"{name}: {n_sent:,} requests in {res['wall_s']:.0f} s; labelling them by stage (dry run over the full cache)")
    lines, dres = dry_run(nb, profile, over, cache, a.work, a.timeout, f"replay{('-' + tag) if tag else ''}")
    stages = stage_table(lines)
    row["calls"] = sum(s["calls"] for s in stages.values())
    row["calls_not_cached_in_replay"] = sum(s["calls"] - s["cached"] for s in stages.values())  # 0: the replay walked the real path
    row["replay_s"] = round(dres["wall_s"], 1)
    row["stages"] = json.dumps({f"{m} | {s}": v["calls"] for (m, s), v in stages.items()})
    owners: dict[tuple, list] = {}  # (model, max_tokens) -> the generate stages that use it
    for (m, st), d in stages.items():
        if d["ops"] == {"generate"} and len(d["max_tokens_values"]) == 1: owners.setdefault((m, next(iter(d["max_tokens_values"]))), []).append(st)
    srows = []
    for (m, st), d in stages.items():
        per, basis = None, "measured"
        if d["ops"] == {"label_logprob"}: per, basis = 1.0, "one forced token per request"
        else:
            sent = [(g, mt) for (gm, mt, bias), g in groups.items() if gm == m and not bias and mt in d["max_tokens_values"]]
            if sent:  # the stand-in logs' requests of this model and max_tokens: this stage's, or shared with others
                per = round(sum(g[1] for g, _ in sent) / max(1, sum(g[0] for g, _ in sent)), 1)
                shared = sorted({x for _, mt in sent for x in owners.get((m, mt), [st])} - {st})
                if shared or len(d["max_tokens_values"]) > 1: basis = "mean over the requests it shares a max_tokens with: " + ", ".join(shared or [st])
        srows.append({"model": m, "stage": st, "calls": d["calls"], "cached": d["cached"], "prompt_chars": d["prompt_chars"],
                      "completion_tokens_per_call": per, "completion_basis": basis, "ops": "/".join(sorted(d["ops"])),
                      "max_tokens_values": "/".join(map(str, sorted(d["max_tokens_values"])))})
    row["_stage_rows"] = srows
    return row


# ------------------------------------------------------------------ the estimate a dry run gives before a run
SIZE_PARAMS = {"n_questions": "question", "n_eval": "question", "n_test": "claim"}  # the parameter a smaller dry run shrinks


def estimate(nb: Path, a, profile: Path, overrides: dict, manifest: dict) -> dict:
    """What `--dry-run` says the run needs, before it runs: the dry run itself over `--dry-run-units` questions (claims)
    per dataset where the paper profile reads all of them (its calls then scaled to the full count), else in full."""
    import papermill as pm
    import yaml
    declared = pm.inspect_notebook(str(nb))
    pp = yaml.safe_load(nb.with_name(nb.stem + ".paper.yaml").read_text()) or {}
    over = notebook_overrides(nb, overrides)
    size = next((p for p in SIZE_PARAMS if p in declared), None)
    shrink = size is not None and pp.get(size, None) == 0  # the paper reads every question: a smaller dry run, scaled up
    if shrink:
        over[size] = a.dry_run_units
        if size == "n_test" and "n_train" in declared: over["n_train"] = a.dry_run_units
    cache = a.work / "cache" / f"{nb.stem}.estimate.sqlite"
    for s in ("", "-wal", "-shm"): Path(f"{cache}{s}").unlink(missing_ok=True)
    lines, res = dry_run(nb, profile, over, cache, a.work, a.timeout, "estimate")
    if res["rc"] != 0:
        return {"dry_error": (a.work / "logs" / f"{nb.stem}.dry-estimate.log").read_text()[-800:].replace("\n", " | ")}
    _, full = units_of(nb, manifest)
    read = _dry_units_total(nb, manifest, a.dry_run_units) if shrink else full
    return {"dry_units": read, "dry_calls": len(lines), "dry_s": round(res["wall_s"], 1),
            "dry_calls_projected": round(len(lines) * full / max(1, read)),
            "dry_prompt_tokens": round(sum(l["prompt_chars"] for l in lines) / 4 * full / max(1, read)),
            "dry_max_tokens": round(sum(l["max_tokens"] for l in lines) * full / max(1, read))}


# ------------------------------------------------------------------ CSV output
COLUMNS = ["date", "notebook", "tag", "rc", "killed", "questions", "calls", "http_requests", "prompt_tokens", "completion_tokens",
           "harness_s", "peak_rss_gb", "peak_single_gb", "peak_anon_gb", "cache_mb", "out_mb", "gpu_hours", "dry_units", "dry_calls",
           "dry_prompt_tokens", "dry_max_tokens", "dry_calls_projected", "max_train_steps", "other_busy_cpus", "replay_s",
           "calls_not_cached_in_replay", "stages", "by_model", "overrides", "error", "tokens_per_s", "prompt_tokens_per_s",
           "full_units", "command", "note", "commit"]  # commit: the checkout's when the run started (results_csv.measured_version); empty in rows before it
STAGE_COLUMNS = ["date", "notebook", "stage", "model_role", "model", "unit", "units", "calls", "calls_per_unit", "prompt_tokens_per_call",
                 "completion_tokens_per_call", "completion_basis", "max_tokens_values", "ops", "command", "note"]


def append_rows(path: Path, columns: list[str], rows: list[dict], script: str) -> None:
    "results_csv.append_rows, after rewriting a file whose header is not `columns` under it (its rows keep their values)."
    import results_csv
    if path.exists():
        with open(path, newline="") as f: header, old = next(csv.reader(f), []), None
        if header != columns:
            with open(path, newline="") as f: old = list(csv.DictReader(f))
            with open(path, "w", newline="") as f:
                w = csv.DictWriter(f, columns, extrasaction="ignore"); w.writeheader(); w.writerows(old)
    results_csv.append_rows(path, columns, rows, script)


def roles(models: dict) -> dict[str, str]:
    "Served model name -> its entry in the profile (the role a paper profile names it by, e.g. qwen2_72b)."
    out = {}
    for role, entry in models.items():
        for key in ("spec", "served"):
            spec = str((entry if isinstance(entry, dict) else {"spec": entry}).get(key) or "")
            if spec.startswith("openai:") and "#" in spec: out.setdefault(spec.split("#", 1)[1], role)
    return out


def units_of(nb: Path, manifest: dict, per: int | None = None, datasets: list[str] | None = None) -> tuple[str, int]:
    """The notebook's unit and how many its paper profile reads: MIRAGE questions of its datasets; MedQA questions
    (Figure 7's six, the worked example's one); FFRR's test claims (Table 1: every claim of all splits; the validation
    sweeps: the validation claims); the rater-agreement rows of both sets. `per`: at most that many of each dataset;
    `datasets`: these of the profile's datasets only (a run's `--set datasets=...`)."""
    import yaml
    paper = nb.parent.name
    unit = UNITS.get(paper, "question")
    cap = (lambda n: min(n, per)) if per else (lambda n: n)
    pp = yaml.safe_load(nb.with_name(nb.stem + ".paper.yaml").read_text()) or {}
    if datasets is not None and "datasets" in pp: pp["datasets"] = [d for d in pp["datasets"] if d in datasets]
    if nb.stem == "rater_agreement":
        ag = manifest.get("agreement") or {}
        return "row", cap(ag.get("factcheck_bench_rows", 0)) + cap(ag.get("healthfc_claims", 0))
    if paper == "ffrr":
        if "datasets" not in pp: return unit, sum(sum(v.values()) for v in manifest["claims"].values())
        split = "val" if "n_val" in pp else "test"
        return unit, sum(cap(manifest["claims"][d][split]) for d in pp["datasets"] if d in manifest["claims"])
    if str(pp.get("benchmark", "")).startswith("@medqa"):
        return unit, len(pp.get("question_ids") or []) or int(pp.get("n_questions", 1))
    return unit, sum(cap(manifest["mirage"].get(d, 0)) for d in pp.get("datasets", []))


PART_PARAMS = ("n_questions", "n_eval", "n_test", "n_train", "n_val", "n_rows")  # the sizes a paper profile sets to 0 (all)


def part_overrides(nb: Path, units: int, work: Path | None = None) -> dict:
    """`--units N`: every size parameter the paper profile leaves at 0 (all) set to N, so the rehearsal reads N of each
    dataset (FFRR: N training and N test claims; the rater agreement: N rows of each set); the rest as the paper has it.
    With `work`, a notebook that keeps runs in `work_dir` keeps this part's under `work`/runs: in the data folder's, where
    the full run keeps its own, the full run would find the part's and stop ("holds a run with other claims")."""
    import yaml
    import papermill as pm
    pp = yaml.safe_load(nb.with_name(nb.stem + ".paper.yaml").read_text()) or {}
    out = {k: units for k in PART_PARAMS if pp.get(k, None) == 0}
    if work is not None and "work_dir" in pm.inspect_notebook(str(nb)): out["work_dir"] = str(work / "runs")
    return out


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path("/tmp/rehearsal/data"), help="the rehearsal data folder (generated if missing)")
    ap.add_argument("--work", type=Path, default=None, help="caches, logs and the filled-in profile (default: <data>-run beside the data folder)")
    ap.add_argument("--only", nargs="+", default=None, help="notebook names (stems) to run; default: every paper notebook")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--passages", type=int, default=1_000_000)
    ap.add_argument("--fraction", type=float, default=1.0, help="questions and claims at this share of the real counts (tests)")
    ap.add_argument("--max-train-steps", type=int, default=2, help="optimiser steps each training stage may take")
    ap.add_argument("--latency-per-token", type=float, default=0.0, help="the stand-ins' seconds per completion token")
    ap.add_argument("--support-rate", type=float, default=0.97,
                    help="the stand-ins' chance of a [Supported] verdict (our choice: 0.97 passes about half of the ~18-sentence "
                         "answers, so FC-RAG's rounds and SFT's data are what a working pipeline meets; at 0.7 none pass)")
    ap.add_argument("--tokens-per-s", type=float, default=DECODE_8B, help="generated tokens/s of an 8B model per GPU, for the projection")
    ap.add_argument("--prompt-tokens-per-s", type=float, default=PREFILL_8B, help="prompt tokens/s of an 8B model per GPU")
    ap.add_argument("--dry-run-units", type=int, default=20, help="questions (claims) per dataset of the estimating dry run")
    ap.add_argument("--no-estimate", action="store_true", help="skip the estimating dry run")
    ap.add_argument("--no-stages", dest="stages", action="store_false", help="skip the labelling dry run after each run")
    ap.add_argument("--keep-cache", dest="fresh", action="store_false", help="reuse each notebook's cache (default: start empty)")
    ap.add_argument("--rss-curve", action="store_true", help="Table 1 at --rss-curve-sizes questions per dataset (the full run is the plain one)")
    ap.add_argument("--rss-curve-sizes", type=int, nargs="+", default=[200, 1000], help="n_questions per dataset: 200 x 5 = 1,000 and 4,118 questions")
    ap.add_argument("--resume-check", action="store_true", help="Table 1 killed (-9) half way, rerun; repeats and losses counted")
    ap.add_argument("--resume-questions", type=int, default=0, help="--resume-check at this n_questions per dataset (0: in full)")
    ap.add_argument("--resume-reference", type=int, default=0,
                    help="--resume-check: the requests a finished run of that size sent (kill at half of them) instead of a reference run first")
    ap.add_argument("--two-jobs", action="store_true", help="Table 1 and the leakage notebook at once on one cache (they share answers)")
    ap.add_argument("--two-jobs-questions", type=int, default=200, help="Table 1's n_questions per dataset in --two-jobs (leakage: in full)")
    ap.add_argument("--table", action="store_true", help="print the cost tables (Markdown) from the CSVs and stop")
    ap.add_argument("--write", action="store_true", help="with --table: put them between the markers in nbs/index.ipynb and data/README.md")
    ap.add_argument("--units", type=int, default=0,
                    help="rehearse a stated part: N questions (claims, rows) of each dataset where the paper reads all; the row "
                         "(tag uN) keeps the full count, and the cost table carries calls, tokens and GPU time to it in proportion")
    ap.add_argument("--set", nargs="+", default=[], metavar="KEY=JSON", type=_key_value,
                    help="parameters set on every notebook run (-p KEY VALUE), e.g. sample_max_tokens=256; say why in --note")
    ap.add_argument("--timeout", type=float, default=None, help="seconds allowed per notebook")
    ap.add_argument("--free-ports", action="store_true", help="serve on free ports instead of the profile's (another rehearsal holds them)")
    ap.add_argument("--csv", type=Path, default=RESULTS / "paper_scale.csv")
    ap.add_argument("--stage-csv", type=Path, default=RESULTS / "calls_per_question.csv")
    ap.add_argument("--note", default="", help="e.g. 'busy machine'")
    ap.add_argument("--busy-sample-s", type=float, default=3.0)
    a = ap.parse_args(argv)
    if a.table:
        print(cost_tables(a.csv))
        log(f"Table 1's idle-machine run (peak RSS and harness time at 1k, 4.1k and 7.6k questions): {IDLE_COMMAND}")
        if a.write: log(f"rewrote {[str(p.relative_to(REPO)) for p in write_tables(a.csv)] or 'nothing (already up to date)'}")
        return []
    a.data = a.data.resolve()
    a.work = (a.work or a.data.parent / f"{a.data.name}-run").resolve()
    import papermill as pm
    from leaf_nb.runs import paper_notebooks
    nbs = paper_notebooks()
    if a.only:
        unknown = sorted(set(a.only) - {n.stem for n in nbs})
        if unknown: ap.error(f"no paper notebook {unknown}; they are {[n.stem for n in nbs]}")
        nbs = [n for n in nbs if n.stem in a.only]
    if a.rss_curve or a.resume_check: nbs = [n for n in nbs if n.stem == "table1_filtered_accuracy"]
    if a.two_jobs: nbs = [n for n in paper_notebooks() if n.stem in ("table1_filtered_accuracy", "leakage")]
    profile, prof, overrides = prepare(a, {k for nb in nbs for k in pm.inspect_notebook(str(nb))})
    manifest = json.loads((a.data / "manifest.json").read_text())
    rows = []
    with Servers(served(prof["models"]), a.work / "standin", a.latency_per_token, a.support_rate) as servers:
        if a.two_jobs:
            two_jobs(nbs, a, profile, overrides, servers, {"table1_filtered_accuracy": {"n_questions": a.two_jobs_questions}})
            return rows
        for nb in nbs:
            if a.resume_check: rows += resume_check(nb, a, profile, prof, overrides, servers); continue
            share = f"f{a.fraction:g}" if a.fraction < 1 else ""  # a share of the data is tagged: the cost table reads untagged rows as full size
            plans = [({"n_questions": n}, f"n{n}") for n in a.rss_curve_sizes] if a.rss_curve else [({}, share)]
            if a.units: plans = [(part_overrides(nb, a.units, a.work), f"u{a.units}")]
            plans = [({**extra, **dict(a.set)}, tag) for extra, tag in plans]  # --set: stated changes, kept in the row's overrides
            for extra, tag in plans:
                est = {} if a.no_estimate or (tag and tag != share and not a.units) else estimate(nb, a, profile, overrides, manifest)
                started = time.time()
                row = rehearse(nb, a, profile, prof, overrides, servers, extra, tag)
                unit, n_units = units_of(nb, manifest)
                if extra.get("n_questions") and not a.units: n_units = sum(min(extra["n_questions"], v) for d, v in manifest["mirage"].items())
                if "datasets" in extra and not a.units:  # --set datasets=[...]: a stated part, carried to the profile's datasets
                    part = units_of(nb, manifest, datasets=extra["datasets"])[1]
                    if part < n_units: row["full_units"], n_units = n_units, part
                if a.units:  # a stated part of the paper's data: its share, so the table can carry the counts to the full size
                    full, n_units = n_units, units_of(nb, manifest, per=a.units)[1]
                    row["full_units"] = full
                elif a.fraction < 1 and not a.rss_curve:  # data generated at a share: the real count, for the same carrying
                    from rehearsal_data import full_counts
                    row["full_units"] = units_of(nb, full_counts())[1]
                row.update(est, questions=n_units, tokens_per_s=a.tokens_per_s, prompt_tokens_per_s=a.prompt_tokens_per_s,
                           note=a.note, out_mb=round(_du(Path(notebook_overrides(nb, overrides).get("out_dir", "")) / "rehearsal", since=started), 1))
                stage_rows = row.pop("_stage_rows", []); row.pop("_groups", None); row.pop("_keys", None)
                log(f"{nb.stem}{'@' + tag if tag else ''}: " + json.dumps({k: row.get(k) for k in ("rc", "calls", "http_requests", "harness_s", "peak_rss_gb", "cache_mb", "gpu_hours", "dry_calls_projected")}))
                rows.append(row)
                if a.csv: append_rows(a.csv, COLUMNS, [row], "benchmarks/paper_scale.py")
                if a.stage_csv and stage_rows and (tag == share or a.units):
                    srows = [{"notebook": nb.stem, "unit": unit, "units": n_units, **s, "model_role": roles(prof["models"]).get(s["model"], s["model"]),
                              "calls_per_unit": round(s["calls"] / max(1, n_units), 3),
                              "prompt_tokens_per_call": round(s["prompt_chars"] / 4 / max(1, s["calls"]), 1),
                              "note": a.note} for s in stage_rows]
                    append_rows(a.stage_csv, STAGE_COLUMNS, srows, "benchmarks/paper_scale.py")
    return rows


def _key_value(text: str) -> tuple[str, object]:
    "KEY=VALUE with VALUE read as JSON where it parses (numbers, lists), else as a string."
    key, eq, value = text.partition("=")
    if not eq or not key: raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try: return key, json.loads(value)
    except json.JSONDecodeError: return key, value


def _du(folder: Path, since: float = 0.0) -> float:
    """MiB of the files under `folder` last written at or after `since` (a run's start): a data folder's outputs folder
    holds every notebook rehearsed on it, so a row counts only what its own run wrote."""
    if not folder.exists(): return 0.0
    return sum(s.st_size for f in folder.rglob("*") if f.is_file() and (s := f.stat()).st_mtime >= since) / 2**20


def _dry_units_total(nb: Path, manifest: dict, per: int) -> int:
    "How many units the estimating dry run read: `per` of each dataset the paper profile names (capped at its size)."
    import yaml
    pp = yaml.safe_load(nb.with_name(nb.stem + ".paper.yaml").read_text()) or {}
    if nb.parent.name == "ffrr": return sum(min(per, manifest["claims"][d]["test"]) for d in pp.get("datasets", []))
    return sum(min(per, manifest["mirage"].get(d, 0)) for d in pp.get("datasets", [])) or 1


# ------------------------------------------------------------------ the resume check
def resume_check(nb: Path, a, profile: Path, prof: dict, overrides: dict, servers: Servers) -> list[dict]:
    """Table 1 from an empty cache, killed with SIGKILL (the whole process tree) once it has sent about half its requests,
    then rerun to the end on that cache. Counted from the stand-in logs and the cache:

    - `sent_before_kill`: requests the servers answered before the kill; `stored_before_kill`: model calls the killed
      run's cache held (what it had finished); `unfinished_at_kill` = the difference: requests a server had answered whose
      result the killed process had not committed (in flight on the wire, or among the results `Cache.writer` holds
      before a commit: at most 256 of them or 0.25 s' worth). They are not finished calls, so the rerun sends them again.
      (Table 1's calls are one request each: cot verdicts, no label scoring.)
    - `repeated`: requests sent both before and after the kill; `repeated_finished` = `repeated` - `unfinished_at_kill`,
      the repeats that cannot be unfinished ones: the target is 0.
    - `lost`: calls the finished notebook asked that its cache lacks, counted by the labelling dry run over the final
      cache (it walks the notebook's whole path); the target is 0.

    The half-way point is half the requests of a full run of the same size: from an earlier finished run in these logs
    (`--resume-reference`) or else a first, uninterrupted run (whose requests then also show whether the interrupted run
    asked anything the uninterrupted one did not)."""
    a.fresh, a.stages = True, False
    extra = {"n_questions": a.resume_questions} if a.resume_questions else {}
    size = f"-n{a.resume_questions}" if a.resume_questions else ""
    ref = reference_run(nb, a, servers) if not extra else None
    if ref is None and a.resume_reference: ref = {"http_requests": a.resume_reference, "_keys": None, "tag": "resume-ref (given)"}
    if ref is None: ref = rehearse(nb, a, profile, prof, overrides, servers, extra, tag=f"resume-ref{size}", keep_keys=True)
    first = rehearse(nb, a, profile, prof, overrides, servers, extra, tag=f"resume{size}", kill_at=ref["http_requests"] // 2, keep_keys=True)
    stored = stored_model_calls(a.work / "cache" / f"{nb.stem}@resume{size}.sqlite")  # what the killed run had finished
    a.fresh, a.stages = False, True
    second = rehearse(nb, a, profile, prof, overrides, servers, extra, tag=f"resume{size}", keep_keys=True)
    k_ref, k1, k2 = ref.pop("_keys", None), first.pop("_keys"), second.pop("_keys")
    for r in (ref, first, second): r.pop("_groups", None); r.pop("_stage_rows", None)
    repeated = sum(c - 1 for c in k1.values() if c > 1) + sum(min(c, k1[k]) if k in k1 else 0 for k, c in k2.items())
    unfinished = first["http_requests"] - stored
    counts = {"reference_requests": ref["http_requests"], "sent_before_kill": first["http_requests"], "stored_before_kill": stored,
              "unfinished_at_kill": unfinished, "sent_after": second["http_requests"], "repeated": repeated,
              "repeated_finished": max(0, repeated - unfinished), "lost": second.get("calls_not_cached_in_replay"),
              "calls_asked": second.get("calls"), "killed": first["killed"], "killed_after_s": first["harness_s"]}
    if k_ref is not None:
        both = set(k1) | set(k2)
        counts.update(lost_against_reference=len(set(k_ref) - both), not_in_reference=len(both - set(k_ref)))
    row = {**second, "tag": "resume-check", "http_requests": first["http_requests"] + second["http_requests"], "note": json.dumps(counts)}
    log(f"resume check: {row['note']}")
    rows = [r for r in (ref, first, row) if r.get("notebook")]
    if a.csv: append_rows(a.csv, COLUMNS, rows, "benchmarks/paper_scale.py")
    # the design's promise: no finished call repeated (each repeat is a request that was unfinished at the kill), none lost
    if second["rc"] != 0 or not first["killed"] or counts["repeated_finished"] or counts["repeated"] > counts["unfinished_at_kill"] or counts["lost"]:
        raise SystemExit(f"resume check failed: {row['note']} (rerun rc {second['rc']})")
    return rows


def stored_model_calls(path: Path) -> int:
    "Model calls (generate and label requests, not searches) stored in a cache file."
    import sqlite3
    with sqlite3.connect(path) as c:
        return c.execute("SELECT COUNT(*) FROM entries WHERE json_extract(request, '$.op') IN ('generate', 'label_logprob')").fetchone()[0]


def two_jobs(nbs: list[Path], a, profile: Path, overrides: dict, servers: Servers, extra: dict) -> dict:
    """Two notebooks at once on one cache file (as two `leaf-nb reproduce` on one workstation share the default cache):
    both must finish, neither may meet a locked database, and the cache must hold every request either sent. Requests
    both sent are counted: two runs that ask the same call at the same moment each compute it (the first stored wins)."""
    import threading
    cache = a.work / "cache" / "two-jobs.sqlite"
    for s in ("", "-wal", "-shm"): Path(f"{cache}{s}").unlink(missing_ok=True)
    env = {**os.environ, "LEAF_NB_CACHE": str(cache), "TQDM_DISABLE": "1", "PYTHONWARNINGS": "ignore"}
    mark, results = servers.mark(), {}
    def go(nb):
        results[nb.stem] = run_watched(leaf_nb_cmd(nb, profile, notebook_overrides(nb, overrides, extra.get(nb.stem))), env,
                                       a.work / "logs" / f"{nb.stem}@two-jobs.log", a.timeout)
    threads = [threading.Thread(target=go, args=(nb,)) for nb in nbs]
    for t in threads: t.start()
    for t in threads: t.join()
    keys: dict[str, int] = {}
    for r in servers.since(mark): keys[r["key"]] = keys.get(r["key"], 0) + 1
    from leaf_nb.cache import Cache
    stored = len(Cache(cache))
    locked = [nb.stem for nb in nbs if "database is locked" in (a.work / "logs" / f"{nb.stem}@two-jobs.log").read_text()]
    out = {"notebooks": [nb.stem for nb in nbs], "rc": {k: v["rc"] for k, v in results.items()},
           "wall_s": {k: round(v["wall_s"], 1) for k, v in results.items()}, "requests": sum(keys.values()), "distinct": len(keys),
           "sent_by_both": sum(1 for c in keys.values() if c > 1), "cache_entries": stored, "locked": locked}
    log(f"two jobs on one cache: {json.dumps(out)}")
    if a.csv: append_rows(a.csv, COLUMNS, [{"notebook": "+".join(out["notebooks"]), "tag": "two-jobs", "rc": max(out["rc"].values()),
                                            "http_requests": out["requests"], "cache_mb": round(cache_mb(cache), 1),
                                            "harness_s": max(out["wall_s"].values()), "note": json.dumps(out)}], "benchmarks/paper_scale.py")
    if any(out["rc"].values()) or locked: raise SystemExit(f"two jobs on one cache failed: {json.dumps(out)}")
    return out


def reference_run(nb: Path, a, servers: Servers) -> dict | None:
    "The last finished full-size run of `nb` in these stand-in logs (slices.jsonl), as a row with its request keys; None if none."
    path = a.work / "slices.jsonl"
    done = [json.loads(l) for l in path.read_text().splitlines()] if path.exists() else []
    done = [d for d in done if d["notebook"] == nb.stem and d["tag"] == "" and d["rc"] == 0 and not d["killed"]
            and d.get("support_rate", 0.7) == a.support_rate]  # the same replies, so the same requests (0.7: before the option existed)
    if not done: return None
    last = done[-1]
    keys: dict[str, int] = {}
    n = 0
    for p in servers.keys:
        start, end = last["start"].get(str(p), 0), last["end"].get(str(p), 0)
        if not servers.log(p).exists(): continue
        with open(servers.log(p), "rb") as f:
            f.seek(start)
            for line in f.read(end - start).splitlines():
                k = json.loads(line)["key"]; keys[k] = keys.get(k, 0) + 1; n += 1
    log(f"resume check: the reference is the finished run in the logs ({n:,} requests)")
    return {"notebook": nb.stem, "tag": "resume-ref (earlier run)", "http_requests": n, "_keys": keys, "rc": 0}


# ------------------------------------------------------------------ the cost tables for the README
ARTEFACTS = {"table1_filtered_accuracy": "LEAF Table 1", "table2_fcrag": "LEAF Table 2", "table3_sft": "LEAF Table 3",
             "table4_ranking_delta": "LEAF Table 4", "table5_simpo": "LEAF Table 5", "table7_worked_example": "LEAF Table 7, Figs 3-5",
             "fig7_option_frequency": "LEAF Figure 7", "leakage": "leakage check (ours)", "rater_agreement": "rater agreement (ours)",
             "table1_datasets": "FFRR Table 1", "table2_verification": "FFRR Table 2", "fig4_effect_of_k": "FFRR Figure 4",
             "fig5_final_reward": "FFRR Figure 5", "validation_sweeps": "FFRR §6.1.2 sweeps", "adaptive_retrieval": "Self-BioRAG comparison"}
TIERS = {"Textbooks": 125_847, "StatPearls": 301_202, "PubMed": 23_898_701, "Wikipedia": 29_913_202, "MedCorp": 54_239_952}  # MedRAG's dataset cards
BEGIN, END = "<!-- paper_scale.py --table: begin (generated from benchmarks/results/*.csv; do not edit) -->", "<!-- paper_scale.py --table: end -->"


def _num(x: float, unit: str = "") -> str:
    if x != x: return "—"
    for d, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= d: return f"{x / d:.1f}{suffix}{unit}"
    return f"{x:.0f}{unit}"


def _minutes(s: float) -> str: return "—" if s != s else f"{s / 60:.0f} min" if s >= 60 else f"{s:.0f} s"


FFRR_NOTEBOOKS = {p.stem for p in (REPO / "nbs" / "papers" / "ffrr").glob("*.ipynb")}  # they read no MedRAG passage

TRAINER_NOTE = ("† the peak is the TRL trainer's step, not the data stages: the paper's batch (4 examples of up to 2,048 tokens; "
                "SimPO's 4 pairs are 8 sequences) in fp32 on the CPU, seen in `py-spy dump` at the peak (table5_simpo: `CPOTrainer.concatenated_forward`); "
                "before the first step the run holds 1–4 GB; after it the allocator keeps much of the step's memory (8–13 GB between "
                "steps), with no upward trend over the rounds. On a workstation that step's memory is the GPU's.")

TRAINER_PEAK = ("table3_sft", "table5_simpo")  # the notebooks whose peak RSS is the trainer's step (the † footnote)

ROUTINE_OVERRIDES = ("out_dir", "launcher", "train_overrides", "max_steps", "backend", "llm_tokenizer",
                     "model")  # rehearsal.yaml's, said there


def _datasets_set(overrides) -> list | None:
    "The datasets a row's `--set datasets=...` kept, or None where it ran the profile's own."
    over = json.loads(overrides) if isinstance(overrides, str) and overrides else {}
    return over.get("datasets")


SUMMED = ("questions", "calls", "http_requests", "prompt_tokens", "completion_tokens", "harness_s", "cache_mb", "out_mb",
          "gpu_hours")  # what runs of disjoint datasets add up to; their peaks and busy CPUs are the largest of them


def _joined(ok):
    """One full-size row from runs of single datasets (`--set datasets=...`) that together read the notebook's whole count:
    the latest run of each dataset set, the sets disjoint, their units summing to the full count; None where they do not.
    With it, the row numbers of those runs; the row's `pieces` names each run's datasets, in the order they ran."""
    import pandas as pd
    latest = {}
    for _, x in ok.iterrows():
        ds = _datasets_set(x.overrides)
        if ds is not None and x.full_units == x.full_units: latest[tuple(sorted(ds))] = x
    runs = sorted(latest.values(), key=lambda x: x.name)
    named = [d for x in runs for d in _datasets_set(x.overrides)]
    if len(runs) < 2 or len(set(named)) < len(named) or len({x.full_units for x in runs}) != 1: return None
    if sum(x.questions for x in runs) != runs[0].full_units: return None
    j = runs[-1].copy()
    for c in SUMMED:
        if c in j: j[c] = pd.Series([x[c] for x in runs], dtype=float).sum()  # NaN (not measured) counts as 0
    for c in ("peak_rss_gb", "peak_anon_gb", "other_busy_cpus"):
        if c in j: j[c] = pd.Series([x[c] for x in runs], dtype=float).max()
    over = json.loads(j.overrides); over.pop("datasets")
    j["overrides"], j["full_units"] = json.dumps(over), float("nan")
    j["pieces"] = ", ".join(" and ".join(_datasets_set(x.overrides)) for x in runs)
    return j, {x.name for x in runs}


def notebook_table(path: Path) -> str:
    "Per table and figure, the last full-size rehearsal in paper_scale.csv (or its failure)."
    import pandas as pd
    d = pd.read_csv(path) if path.exists() else pd.DataFrame(columns=COLUMNS)
    if "full_units" not in d: d["full_units"] = float("nan")
    tag = d.tag.fillna("")
    d = d[(tag == "") | tag.str.fullmatch(r"u\d+") | (tag.str.fullmatch(r"f[0-9.e-]+") & d.full_units.notna())]  # full size, or a
    # stated part: --units, or --fraction where the row says the full count (older fraction rows do not, and stay out)
    lines = ["| table / figure | notebook | questions or claims | model calls | HTTP requests | prompt / completion tokens "
             "| harness here | peak RSS (anonymous) | disk: cache + outputs | GPU hours (H100/H200) | training; other changes |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    dagger, subsets = False, []
    for nb, art in ARTEFACTS.items():
        rows = d[d.notebook == nb]
        if not len(rows): continue
        ok = rows[rows.rc == 0]
        whole = ok[~(ok.full_units > ok.questions)]  # a full-size run that finished is shown before any part of one
        # then a part with every dataset in it (a share, or N of each) before one of some datasets, which carries a single
        # dataset's cost per claim to the others (FFRR's LIAR-RAW claims take more calls each than RAWFC's)
        mixed = ok[[_datasets_set(o) is None for o in ok.overrides]]
        # runs of single datasets that add up to the whole count are a full-size run made in pieces, shown as one row
        joined, members = (_joined(ok) if not len(whole) else None) or (None, set())
        r = (whole.iloc[-1] if len(whole) else joined if joined is not None else mixed.iloc[-1] if len(mixed)
             else ok.iloc[-1] if len(ok) else rows.iloc[-1])  # else the last part, else the last failure
        shown = members or {r.name}
        subsets += [(art, nb, x) for x in ok.itertuples() if _datasets_set(x.overrides) is not None and x.Index not in shown]
        if r.rc != 0:
            why = next((x for x in reversed(str(r.error).split(" | ")) if x.strip()), f"exit {r.rc}")[:260] if isinstance(r.error, str) else f"exit {r.rc}"
            why = re.sub(r"/(?:tmp|work|root|home)/\S*", "…", why)  # no machine paths in the README
            lines.append(f"| {art} | `{nb}` | {int(r.questions) if r.questions == r.questions else '—'} | failed: {why} | | | | | | | |")
            continue
        over = json.loads(r.overrides) if isinstance(r.overrides, str) else {}
        capped = "max_steps" in over or "train_overrides" in over  # rehearsal.yaml's training caps, as the row ran them
        said = [f"capped at {int(r.max_train_steps)} step{'s' * (int(r.max_train_steps) != 1)} (`max_train_steps`)"] if capped else []
        # other trainer settings a run set (`--set train_overrides=...`, e.g. a smaller batch): said, and the † footnote,
        # which is about the paper's batch, left off
        trainer = {k: v for k, v in (over.get("train_overrides") or {}).items() if k != "max_steps"}
        if trainer: said.append("trainer " + ", ".join(f"{k} {v}" for k, v in sorted(trainer.items())))
        if str(over.get("backend", "")).startswith("serve:"): said.append("each round's model served (`serve:`, the stand-in)")
        corpus = re.search(r"--passages (\d+)", str(r.command))
        if corpus and int(corpus[1]) != 1_000_000 and nb not in FFRR_NOTEBOOKS: said.append(f"a {int(corpus[1]):,}-passage corpus")
        changed = {k: v for k, v in over.items() if k not in ROUTINE_OVERRIDES + PART_PARAMS}  # --set: stated in the table
        training = "; ".join(said + [f"{k} {v}" for k, v in sorted(changed.items())]) or "—"
        busy = "" if r.other_busy_cpus != r.other_busy_cpus or r.other_busy_cpus < 0.3 else "*"
        anon = f" ({r.peak_anon_gb:.1f})" if "peak_anon_gb" in r and r.peak_anon_gb == r.peak_anon_gb else ""
        anon += "†" if nb in TRAINER_PEAK and not trainer else ""
        dagger = dagger or (nb in TRAINER_PEAK and not trainer)
        part = r.full_units == r.full_units and r.full_units > r.questions
        x = r.full_units / max(1, r.questions) if part else 1.0  # a part: calls, tokens and GPU time carried to the full count
        est = "≈" if part else ""
        units = f"{int(r.questions):,} of {int(r.full_units):,} (×{x:.0f} below)" if part else f"{int(r.questions):,}"
        pieces = r.get("pieces") if joined is not None else None
        if pieces: units += f" ({pieces} run apart)"
        calls = f"{est}{_num(r.calls * x)}" if r.calls == r.calls else "—"
        lines.append(f"| {art} | `{nb}` | {units} | {calls} | {est}{_num(r.http_requests * x)} "
                     f"| {est}{_num(r.prompt_tokens * x)} / {_num(r.completion_tokens * x)} | {_minutes(r.harness_s)}{busy}{' for the part' if part else ''}{f' in {len(members)} runs' if pieces else ''} "
                     f"| {r.peak_rss_gb:.1f}{anon} GB | {_num((r.cache_mb + (r.out_mb if r.out_mb == r.out_mb else 0)) * 2**20, 'B')}{' for the part' if part else ''} | {est}{r.gpu_hours * x:,.1f} | {training} |")
    lines += ["", "\\* taken while other processes kept the machine's two CPUs busy (`other_busy_cpus` in the CSV)."]
    last = {}
    for art, nb, x in subsets: last[(nb, tuple(_datasets_set(x.overrides)))] = (art, x)  # the latest run of each subset
    for (nb, ds), (art, x) in last.items():
        lines += ["", f"{art} (`{nb}`) also ran {' and '.join(ds)} alone at full size: {int(x.questions):,} of its "
                      f"{int(x.full_units):,} {'claims' if nb in FFRR_NOTEBOOKS else 'questions'}, {_num(x.calls)} model calls in {_num(x.http_requests)} HTTP "
                      f"requests, {_minutes(x.harness_s)}{'*' if x.other_busy_cpus >= 0.3 else ''} here, peak RSS {x.peak_rss_gb:.1f} GB."]
    if dagger: lines += ["", TRAINER_NOTE]
    return "\n".join(lines)


# Table 1's targets (peak RSS <= 4 GB, harness <= 30 min on 2 cores) are judged on an idle machine: this command runs it
# at 1,000, 4,118 and all 7,663 questions (tags n200, n1000, n0), each with its peak RSS and anonymous memory, and the
# client settings a paper profile has (OpenAICompatible's defaults: 16 requests in flight, one prompt per request;
# no profile key sets batch_size, so the prompt lists of /v1/completions are not used here).
IDLE_COMMAND = ("python benchmarks/paper_scale.py --only table1_filtered_accuracy --no-stages "
                "--rss-curve --rss-curve-sizes 200 1000 0 --note 'idle machine'")
FULL_COMMAND = ("python benchmarks/paper_scale.py --only table1_filtered_accuracy --no-stages --no-estimate "
                "--note 'idle machine'")  # the full size alone (a row without a tag)


def checks_text(path: Path, results: Path = RESULTS) -> str:
    "Table 1's memory by question count, the resume and two-job checks, and the cache at 1M entries, from the CSVs."
    import pandas as pd
    d = pd.read_csv(path) if path.exists() else pd.DataFrame(columns=COLUMNS)
    t1 = d[(d.notebook == "table1_filtered_accuracy") & (d.rc == 0)]
    out = []
    full = "n0" if (t1.tag == "n0").any() else ""  # n0: the full run of --rss-curve-sizes 0, with its anonymous memory
    curve = [t1[t1.tag.fillna("") == tag].iloc[-1] for tag in ("n200", "n1000", full) if (t1.tag.fillna("") == tag).any()]
    if curve:
        def anon(r): return f" ({r.peak_anon_gb:.2f} GB)" if "peak_anon_gb" in r and r.peak_anon_gb == r.peak_anon_gb else ""
        out.append("- **Table 1's memory by question count** (peak RSS of the `leaf-nb reproduce` tree, memory-mapped index and "
                   "corpus pages included; anonymous memory in brackets where measured): " + "; ".join(
                       f"{int(r.questions):,} questions {r.peak_rss_gb:.2f} GB{anon(r)}" for r in curve) + ".")
    idle = t1[(t1.tag.fillna("").isin(["", "n0"])) & (t1.other_busy_cpus < 0.5)] if "other_busy_cpus" in t1 else t1.iloc[:0]
    if len(idle):
        r = idle.iloc[-1]
        out.append(f"- **Table 1 on an idle machine** (2 cores, nothing else running): {int(r.questions):,} questions, "
                   f"{int(r.http_requests):,} requests in {r.harness_s / 60:.0f} min of harness time (target: 30 min); peak RSS "
                   f"{r.peak_rss_gb:.1f} GB, {r.peak_anon_gb:.1f} GB of it anonymous (target: 4 GB). The other rows were taken while "
                   f"other work shared the cores. Command: `{IDLE_COMMAND if r.tag == 'n0' else FULL_COMMAND}`.")
    else:
        out.append(f"- **Table 1's harness time** is to be measured on an idle machine (2 cores, nothing else running): `{IDLE_COMMAND}`; "
                   "the runs above were taken while other work shared the cores.")
    res = d[d.tag == "resume-check"]
    if len(res):
        r = res.iloc[-1]
        n = json.loads(r.note)
        q = json.loads(r.overrides).get("n_questions") if isinstance(r.overrides, str) else None
        size = f"{5 * q:,} questions ({q} of each dataset)" if q else "all 7,663 questions"
        unfinished = n.get("unfinished_at_kill", n.get("in_flight_at_kill", "?"))
        lost = n["lost"] if n.get("lost") is not None else n.get("lost_against_reference", "?")
        out.append(f"- **Resume at scale**: Table 1 at {size} killed with SIGKILL after {n['sent_before_kill']:,} requests, "
                   f"then rerun on its cache: {n['sent_after']:,} more requests, {n['repeated']} sent twice, against {unfinished} "
                   f"unfinished at the kill (answered by a server, not yet committed to the cache: in flight, or in "
                   f"`Cache.writer`'s batch of at most 256 results or 0.25 s); finished calls repeated: {n.get('repeated_finished', '?')}; "
                   f"calls lost: {lost}.")
    two = d[d.tag == "two-jobs"]
    if len(two):
        n = json.loads(two.iloc[-1].note)
        out.append(f"- **Two jobs on one cache**: {' and '.join(n['notebooks'])} at once, one cache file: both finished "
                   f"(exit codes {sorted(set(n['rc'].values()))}), no locked database, {n['requests']:,} requests of which "
                   f"{n['sent_by_both']:,} were asked by both in the same moment.")
    cs = results / "cache_scale.csv"
    if cs.exists():
        c = pd.read_csv(cs).drop_duplicates("entries", keep="last").sort_values("entries")
        a, b = c.iloc[0], c.iloc[-1]
        out.append(f"- **The cache at {int(b.entries):,} entries** (`benchmarks/cache_scale.py`, {b.db_mb / 1024:.1f} GB): a lookup "
                   f"{b.get_present_us_per_key:.0f} µs per key against {a.get_present_us_per_key:.0f} µs at {int(a.entries):,}, a miss "
                   f"{b.get_absent_us_per_key:.0f} against {a.get_absent_us_per_key:.0f}, a store {b.put_us_per_key:.0f} against "
                   f"{a.put_us_per_key:.0f} (batches of {int(b.batch):,}" + (", busy machine" if str(b.note).startswith("busy") else "") + ").")
    return "\n".join(out)


def tier_table(results: Path = RESULTS) -> str:
    """Each MedRAG corpus with its passage count, and per retriever the index build time and memory: measured at 1M
    passages and carried to the corpus's size along the slope between 1M and 4M (bm25_engines.csv) or in proportion
    (dense, from dense_indexes.csv at 1M: FAISS alone, the encoding not counted)."""
    import pandas as pd
    bm = pd.read_csv(results / "bm25_engines.csv")
    dn = pd.read_csv(results / "dense_indexes.csv")
    def line(engine):
        "Piecewise-linear in the passages through the measured sizes, carried on beyond the largest along its last segment."
        e = bm[bm.engine == engine].drop_duplicates("passages", keep="last").set_index("passages").sort_index()
        xs = list(e.index)
        def at(n, k):
            i = max(1, min(len(xs) - 1, next((j for j, x in enumerate(xs) if x >= n), len(xs) - 1)))
            x0, x1 = xs[i - 1], xs[i]
            return e.loc[x0, k] + (e.loc[x1, k] - e.loc[x0, k]) * (n - x0) / (x1 - x0)
        return at
    bm25s, lucene = line("bm25s"), line("lucene")
    flat, ivfpq = (dn[dn["index"] == k].iloc[-1] for k in ("flat", "ivfpq"))
    out = ["| corpus | passages | bm25s: build / RAM building, searching | Lucene: build / RAM building, searching "
           "| dense flat: vectors in RAM, FAISS build | dense IVF-PQ: index, build + train |",
           "|---|---:|---:|---:|---:|---:|"]
    for tier, n in TIERS.items():
        f = n / 1e6
        out.append(f"| {tier} | {n:,} | {_minutes(bm25s(n, 'build_s'))} / {bm25s(n, 'build_anon_gb'):.1f} GB, {bm25s(n, 'search_peak_gb'):.1f} GB "
                   f"| {_minutes(lucene(n, 'build_s'))} / {lucene(n, 'build_anon_gb'):.1f} GB, {lucene(n, 'search_peak_gb'):.1f} GB "
                   f"| {flat.index_mb * f / 1024:.1f} GB, {_minutes(flat.build_s * f)} | {ivfpq.index_mb * f / 1024:.2f} GB, "
                   f"{_minutes(ivfpq.build_s * f + ivfpq.train_s)} |")
    pm = TIERS["PubMed"]
    lu, iv, fl = lucene(pm, "search_peak_gb"), ivfpq.index_mb * pm / 1e6 / 1024, flat.index_mb * pm / 1e6 / 1024
    last = max(bm[bm.engine == "lucene"].passages)
    out += ["", f"Measured at {', '.join(f'{int(x):,}' for x in sorted(set(bm.passages)))} passages (BM25 engines, two cores) and "
            f"at {int(flat.passages):,} (FAISS); Textbooks and StatPearls lie between measured sizes, PubMed, Wikipedia and MedCorp "
            f"are extrapolated beyond {int(last):,} along the last measured segment (FAISS: in proportion to the passages). "
            f"**PubMed here**: BM25 with Lucene builds in at most {lucene(pm, 'build_anon_gb'):.0f} GB and searches in about {lu:.1f} GB, and a 384-dimensional IVF-PQ dense index holds "
            f"{iv:.1f} GB, about {lu + iv:.0f} GB together (a flat index would hold {fl:.0f} GB of vectors, twice that at 768 "
            f"dimensions), against the 256 GB or more MedRAG's users report for MedRAG's flat 768-dimensional indexes (MedRAG "
            f"issue #35); the corpus stays on disk."]
    return "\n".join(out)


def cost_tables(path: Path) -> str:
    "The two tables the README's \"At scale\" and data/README.md show, between their markers."
    return "\n".join([BEGIN, "", notebook_table(path), "", checks_text(path), "", tier_table(), "", END])


def write_tables(path: Path) -> list[Path]:
    "Replace the block between the markers in nbs/index.ipynb's markdown and in data/README.md; the files changed."
    block, changed = cost_tables(path), []
    readme = REPO / "data" / "README.md"
    text = readme.read_text()
    if BEGIN in text:
        new = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
        if new != text: readme.write_text(new); changed.append(readme)
    index = REPO / "nbs" / "index.ipynb"
    nb = json.loads(index.read_text())
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if BEGIN in src:
            new = src[:src.index(BEGIN)] + block + src[src.index(END) + len(END):]
            if new != src:
                cell["source"] = new.splitlines(keepends=True); changed.append(index)
    if index in changed: index.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return changed


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("_standin", "_dry"):
        ap = argparse.ArgumentParser()
        ap.add_argument("cmd")
        if sys.argv[1] == "_standin":
            ap.add_argument("--port", type=int, required=True); ap.add_argument("--log", required=True)
            ap.add_argument("--model", action="append", required=True); ap.add_argument("--tokenizer", default=None)
            ap.add_argument("--latency-per-token", type=float, default=0.0); ap.add_argument("--seed", type=int, default=0)
            ap.add_argument("--support-rate", type=float, default=0.97)
            standin_child(ap.parse_args())
        else:
            for k in ("notebook", "profile", "overrides", "log", "out-dir"): ap.add_argument(f"--{k}", required=True)
            dry_child(ap.parse_args())
    else:
        # SIGTERM unwinds like Ctrl-C: the notebook's process tree and the stand-in servers are stopped, not orphaned
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
        main()
