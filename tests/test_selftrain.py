"""Self-training on the real components: TRL's CPO trainer in SimPO mode on the embedded SmolLM2-135M, a run
killed with SIGKILL after its first checkpoint and resumed, preference pairs under generated score tables, and
the reward scorer's HTTP route against a stand-in server."""
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, replace
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings as hsettings, strategies as st

from leaf_nb.cache import Cache
from leaf_nb.llm import Transformers, embedded_dir, load_llm, user
from leaf_nb.selftrain import (SMOKE_SFT, SMOKE_SIMPO, TRAIN_META, RewardModelScorer, preference_pairs, simpo_loss,
                               train_sft, train_simpo)

QUESTION = "Which drug reverses opioid-induced respiratory depression?\nA. Naloxone\nB. Flumazenil\nAnswer with the letter."


def _rows():
    "Sampled answers to two questions with LEAF scores: the pairs come from `preference_pairs`, as in the notebooks."
    answers = [("q1", "Naloxone, an opioid antagonist, reverses it.\nAnswer: A", 1.0),
               ("q1", "Flumazenil reverses opioids.\nAnswer: B", 0.0),
               ("q2", "Metformin is first-line for type 2 diabetes.\nAnswer: A", 1.0),
               ("q2", "Insulin is always first-line.\nAnswer: B", 0.5)]
    prompts = {"q1": QUESTION, "q2": "Which drug is first-line for type 2 diabetes?\nA. Metformin\nB. Insulin\nAnswer with the letter."}
    return pd.DataFrame([{"dataset": "medqa", "qid": q, "sample": i % 2, "prompt": prompts[q], "answer": a, "leaf_score": s}
                         for i, (q, a, s) in enumerate(answers)])


def test_simpo_smoke_run_lowers_its_loss_and_reloads(tmp_path):
    pairs = preference_pairs(_rows(), "leaf")
    assert (pairs.status == "ok").all()
    s = replace(SMOKE_SIMPO, per_device_batch_size=2, max_steps=2, max_length=128)
    base = embedded_dir()
    before = simpo_loss(base, pairs, s)
    run = train_simpo(base, pairs, s, output_dir=tmp_path, progress=False)
    after = simpo_loss(run.path, pairs, s)
    print(f"SimPO loss on the training pairs: {before:.3f} before, {after:.3f} after")
    assert (run.steps, run.n_examples, run.reused) == (2, 2, False)
    assert after < before - 0.05, (before, after)  # TRL's own SimPO loss on the training pairs went down
    # the saved folder is an ordinary model folder: it reloads through the LM seam and generates
    lm = Transformers(run.path, cache=None, progress=False)
    text = lm.generate([user(QUESTION)], max_tokens=8)[0][0]
    assert text.strip()
    assert load_llm(f"hf:{run.path}").model_id == run.path.name != base.name
    meta = json.loads((run.path / TRAIN_META).read_text())
    assert meta["settings"]["beta"] == 2.5 and meta["settings"]["gamma"] == 1.4


def _complete_checkpoints(out: Path) -> list[int]:
    "Steps of the checkpoints whose trainer_state.json (the trainer writes it last) is complete JSON."
    steps = []
    for p in out.glob("run-sft-*/checkpoint-*/trainer_state.json"):
        try: json.loads(p.read_text()); steps.append(int(p.parent.name.split("-")[1]))
        except (json.JSONDecodeError, OSError): pass
    return sorted(steps)


def test_killed_training_resumes_from_its_last_checkpoint(tmp_path):
    "SIGKILL a training process once its first checkpoint is on disk; the rerun resumes there (TRL's resume_from_checkpoint)."
    data = [{"prompt": user(QUESTION), "completion": [{"role": "assistant", "content": a}]}
            for a in ["Naloxone reverses opioid toxicity.\nAnswer: A", "Naloxone is an opioid antagonist.\nAnswer: A", "A"]]
    s = replace(SMOKE_SFT, max_steps=2, save_steps=1, max_length=128)
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    (tmp_path / "settings.json").write_text(json.dumps(asdict(s)))
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "leaf_nb.selftrain", "sft", "--base", str(embedded_dir()), "--data", str(tmp_path / "data.jsonl"),
           "--out", str(out), "--settings", str(tmp_path / "settings.json"), "--quiet"]
    err = (tmp_path / "stderr.log").open("w")  # a file, not a pipe: a full pipe would block the child
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.time() + 600
    while not _complete_checkpoints(out):
        assert proc.poll() is None, "training ended before it could be killed:\n" + (tmp_path / "stderr.log").read_text()[-3000:]
        assert time.time() < deadline, "no checkpoint within 10 minutes"
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not list(out.glob("sft-*")), "the killed run must not leave a final model"
    saved = _complete_checkpoints(out)
    assert saved == [1]  # killed after its first checkpoint, before the second
    run = train_sft(embedded_dir(), data, s, output_dir=out, progress=False)
    assert run.resumed_from == 1 and run.steps == 2 and not run.reused
    assert [x["step"] for x in run.log if "loss" in x] == [1, 2]  # step 1 from the killed run, step 2 from this one, none twice
    assert not list(out.glob("run-sft-*")), "checkpoints are removed once the model is saved"
    assert train_sft(embedded_dir(), data, s, output_dir=out, progress=False).reused
    # the resumed weights are those of an uninterrupted run with the same data, settings and seed
    straight = train_sft(embedded_dir(), data, s, output_dir=tmp_path / "straight", progress=False)
    assert straight.fingerprint == run.fingerprint and straight.resumed_from is None
    from safetensors.torch import load_file
    a, b = load_file(run.path / "model.safetensors"), load_file(straight.path / "model.safetensors")
    assert a.keys() == b.keys()
    print("largest weight difference, resumed vs uninterrupted:", max(float((a[k] - b[k]).abs().max()) for k in a))
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


scores = st.sampled_from([0.0, 0.25, 0.5, 1.0, float("nan")])
texts = st.sampled_from(["a", "a ", "b", "c", "Answer: A", ""])


@st.composite
def score_tables(draw):
    rows = []
    for q in range(draw(st.integers(1, 5))):
        for i in range(draw(st.integers(1, 6))):
            rows.append({"dataset": draw(st.sampled_from(["medqa", "bioasq"])) if i == 0 else rows[-1]["dataset"],
                         "qid": f"q{q}", "sample": i, "prompt": f"question {q}", "answer": draw(texts), "leaf_score": draw(scores)})
    return pd.DataFrame(rows)


@hsettings(max_examples=60, deadline=None)
@given(score_tables(), st.integers(0, 2**31 - 1))
def test_preference_pairs_never_pair_an_answer_with_itself_and_skip_ties(rows, seed):
    pairs = preference_pairs(rows, "leaf", seed=seed)
    assert len(pairs) == rows.groupby(["dataset", "qid"]).ngroups  # one row per question, paired or skipped
    for p in pairs.itertuples():
        g = rows[(rows.dataset == p.dataset) & (rows.qid == p.qid)]
        scored = g[g.leaf_score.notna()]
        if len(scored) < 2: assert p.status == "too_few"; continue
        if scored.leaf_score.nunique() == 1: assert p.status == "tie"; continue  # ties at top and bottom: skipped
        assert p.status in ("ok", "identical")
        if p.status == "identical": continue
        chosen, rejected = p.chosen[0]["content"], p.rejected[0]["content"]
        assert p.chosen_sample != p.rejected_sample and chosen.strip() != rejected.strip()
        assert p.chosen_score == scored.leaf_score.max() > p.rejected_score == scored.leaf_score.min()
        assert chosen == g[g["sample"] == p.chosen_sample].answer.item()  # taken from the question's own samples
        assert rejected == g[g["sample"] == p.rejected_sample].answer.item()
        assert p.prompt == user(g.prompt.iloc[0])
    skipped = pairs[pairs.status != "ok"]
    assert skipped[["prompt", "chosen", "rejected"]].isna().all().all()
    assert preference_pairs(rows, "leaf", seed=seed).equals(pairs)  # deterministic under the seed


class _Pooling(BaseHTTPRequestHandler):
    "Stand-in for vLLM's /pooling route (not vLLM): the reward of a conversation is the answer's length, per token."
    seen = []
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Pooling.seen.append(body)
        n = float(len(body["messages"][-1]["content"]))
        out = json.dumps({"object": "list", "data": [{"index": 0, "object": "pooling", "data": [[0.0], [1.0], [n]]}]}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json"); self.send_header("Content-Length", str(len(out)))
        self.end_headers(); self.wfile.write(out)
    def log_message(self, *a): pass


def test_reward_endpoint_request_parsing_and_cache(tmp_path):
    server = HTTPServer(("127.0.0.1", 0), _Pooling)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        rm = RewardModelScorer(endpoint=url, served_model="armo", cache=Cache(tmp_path / "c.sqlite"), progress=False)
        got = rm.score(["q1", "q2", "q1"], ["abc", "de", "abc"])
        assert got.tolist() == [3.0, 2.0, 3.0] and rm.calls == 2  # last token's reward; a repeated pair is asked once
        assert _Pooling.seen[0]["model"] == "armo"
        assert [m["role"] for m in _Pooling.seen[0]["messages"]] == ["user", "assistant"]
        again = RewardModelScorer(endpoint=url, served_model="armo", cache=Cache(tmp_path / "c.sqlite"), progress=False)
        assert again.score(["q2"], ["de"]).tolist() == [2.0] and again.calls == 0
    finally:
        server.shutdown()


def test_launcher_trains_the_same_model_in_another_process(tmp_path):
    "`launcher=` runs the same training under `accelerate launch` (here one CPU process): the weights match an in-process run."
    data = [{"prompt": user(QUESTION), "completion": [{"role": "assistant", "content": "Naloxone reverses opioid toxicity.\nAnswer: A"}]}]
    s = replace(SMOKE_SFT, max_steps=1, max_length=128)
    accelerate = Path(sys.executable).parent / "accelerate"
    launched = train_sft(embedded_dir(), data, s, output_dir=tmp_path / "launched", progress=False,
                         launcher=f"{accelerate} launch --cpu --num_processes 1 --num_machines 1 --mixed_precision no --dynamo_backend no")
    here = train_sft(embedded_dir(), data, s, output_dir=tmp_path / "here", progress=False)
    assert launched.fingerprint == here.fingerprint and launched.steps == here.steps == 1 and not launched.reused
    from safetensors.torch import load_file
    a, b = load_file(launched.path / "model.safetensors"), load_file(here.path / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
