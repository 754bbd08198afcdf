"""Self-training on the real components: TRL's CPO trainer in SimPO mode on the embedded SmolLM2-135M (its loss
checked against the LEAF paper's Eq. 3 computed by hand), a run killed with SIGKILL after its first checkpoint and
resumed, one model per dataset, preference pairs and Table 4's tie rules under generated score tables, the
reward scorer's HTTP route against a stand-in server, and another prompt reaching the samples, the checker and the
evaluation answers (and samples of another prompt refused, not mixed)."""
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

import math

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings as hsettings, strategies as st

from leaf_nb.cache import Cache
from leaf_nb.data import Question
from leaf_nb.factcheck import FactCheckSettings
from leaf_nb.fcrag import AnswerSettings
from leaf_nb.llm import LM, Transformers, embedded_dir, load_llm, user
from leaf_nb.retrieve import BM25
from leaf_nb.prompts import ANSWER_PROMPT, PAPER_PROMPTS, Prompts, answer_prompt
from leaf_nb.selftrain import (PAPER_SIMPO, SMOKE_SFT, SMOKE_SIMPO, TIES, TRAIN_META, LeafChecker, RewardModelScorer,
                               SampleSettings, preference_pairs, question_picks, rank_samples, ranking_table, sample_answers,
                               self_train, self_train_datasets, simpo_loss, train_sft, train_simpo)

DATA = Path(__file__).resolve().parents[1] / "data"

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


def test_killed_training_resumes_from_its_last_checkpoint(tmp_path, tiny_lm):
    """SIGKILL a training process once its first checkpoint is on disk; the rerun resumes there (TRL's resume_from_checkpoint).
    On the small random Llama (`tiny_lm`): checkpoints and resume do not depend on the model's size."""
    data = [{"prompt": user(QUESTION), "completion": [{"role": "assistant", "content": a}]}
            for a in ["Naloxone reverses opioid toxicity.\nAnswer: A", "Naloxone is an opioid antagonist.\nAnswer: A", "A"]]
    s = replace(SMOKE_SFT, max_steps=2, save_steps=1, max_length=128)
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    (tmp_path / "settings.json").write_text(json.dumps(asdict(s)))
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "leaf_nb.selftrain", "sft", "--base", str(tiny_lm), "--data", str(tmp_path / "data.jsonl"),
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
    run = train_sft(tiny_lm, data, s, output_dir=out, progress=False)
    assert run.resumed_from == 1 and run.steps == 2 and not run.reused
    assert [x["step"] for x in run.log if "loss" in x] == [1, 2]  # step 1 from the killed run, step 2 from this one, none twice
    assert not list(out.glob("run-sft-*")), "checkpoints are removed once the model is saved"
    assert train_sft(tiny_lm, data, s, output_dir=out, progress=False).reused
    # the resumed weights are those of an uninterrupted run with the same data, settings and seed
    straight = train_sft(tiny_lm, data, s, output_dir=tmp_path / "straight", progress=False)
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


def test_launcher_trains_the_same_model_in_another_process(tmp_path, tiny_lm):
    """`launcher=` runs the same training under `accelerate launch` (here one CPU process): the weights match an in-process
    run (on the small random Llama: the launcher's path does not depend on the model)."""
    data = [{"prompt": user(QUESTION), "completion": [{"role": "assistant", "content": "Naloxone reverses opioid toxicity.\nAnswer: A"}]}]
    s = replace(SMOKE_SFT, max_steps=1, max_length=128)
    accelerate = Path(sys.executable).parent / "accelerate"
    launched = train_sft(tiny_lm, data, s, output_dir=tmp_path / "launched", progress=False,
                         launcher=f"{accelerate} launch --cpu --num_processes 1 --num_machines 1 --mixed_precision no --dynamo_backend no")
    here = train_sft(tiny_lm, data, s, output_dir=tmp_path / "here", progress=False)
    assert launched.fingerprint == here.fingerprint and launched.steps == here.steps == 1 and not launched.reused
    from safetensors.torch import load_file
    a, b = load_file(launched.path / "model.safetensors"), load_file(here.path / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def _mean_logp(model, ids: list[int], labels: list[int]) -> tuple[float, int]:
    "log π(y|x) / |y| by hand: the mean log-probability of the completion tokens (labels != -100), each given the tokens before it."
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1].float()
    target = torch.tensor(labels[1:])
    keep = target != -100
    logp = torch.log_softmax(logits, dim=-1)[keep].gather(1, target[keep, None]).squeeze(1)
    return float(logp.mean()), int(keep.sum())


def _eq3(chosen: list[float], rejected: list[float], beta: float, gamma: float) -> float:
    "LEAF paper, Eq. 3: mean over pairs of −log σ(β/|y_w| log π(y_w|x) − β/|y_l| log π(y_l|x) − γ)."
    return float(np.mean([math.log1p(math.exp(-(beta * w - beta * l - gamma))) for w, l in zip(chosen, rejected)]))


def test_trl_simpo_loss_is_the_papers_eq3(tmp_path):
    """TRL's SimPO loss (CPOTrainer, loss_type='simpo', simpo_gamma=1.4) equals Eq. 3 computed by hand from the
    model's own log-probabilities with γ = 1.4 as the margin inside σ; reading 1.4 as SimPO's γ/β ratio would not."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from leaf_nb.selftrain import _config, _cpo, _prepare
    base = embedded_dir()
    pairs = preference_pairs(_rows(), "leaf")
    s = replace(SMOKE_SIMPO, per_device_batch_size=2, max_length=128)
    assert (s.beta, s.gamma) == (PAPER_SIMPO.beta, PAPER_SIMPO.gamma) == (2.5, 1.4)
    trl_loss = simpo_loss(base, pairs, s)  # TRL's evaluation loop: its tokenisation, padding and loss
    tok = AutoTokenizer.from_pretrained(str(base), local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32, local_files_only=True).eval()
    recs, _ = _prepare("simpo", pairs, tok, s)
    rows = _cpo().CPOTrainer(model=model, args=_config("simpo", s, tmp_path / "run", progress=False),
                             train_dataset=Dataset.from_list(recs), processing_class=tok).train_dataset  # the sequences TRL builds
    chosen, rejected = [], []
    for r, rec in zip(rows, recs):
        w, nw = _mean_logp(model, r["chosen_input_ids"], r["chosen_labels"])
        l, nl = _mean_logp(model, r["rejected_input_ids"], r["rejected_labels"])
        answer = rec["chosen"][0]["content"]
        assert tok.decode(r["chosen_input_ids"][-nw:]).startswith(answer)  # |y_w| counts the answer's tokens (and the turn's end)
        chosen.append(w); rejected.append(l)
    assert max(abs(w - l) for w, l in zip(chosen, rejected)) > 0.1  # the two answers differ, so β's placement matters
    by_hand = _eq3(chosen, rejected, s.beta, s.gamma)
    print(f"TRL {trl_loss:.6f}  Eq. 3 with γ = 1.4: {by_hand:.6f}  with γ = 1.4 × β: {_eq3(chosen, rejected, s.beta, s.gamma * s.beta):.6f}")
    assert abs(trl_loss - by_hand) < 1e-4
    assert abs(trl_loss - _eq3(chosen, rejected, s.beta, s.gamma * s.beta)) > 0.5  # 1.4 is not a γ/β ratio here
    assert abs(trl_loss - _eq3(chosen, rejected, 1.0, s.gamma)) > 1e-3  # and β scales the log-probabilities, not γ


@st.composite
def tied_tables(draw):
    "Samples with few distinct scores, so ties at the top and bottom are common; correctness drawn independently."
    rows = []
    for q in range(draw(st.integers(1, 6))):
        for i in range(draw(st.integers(1, 5))):
            rows.append({"dataset": "medqa", "qid": f"q{q}", "sample": i, "prompt": f"question {q}", "answer": f"a{q}-{i}",
                         "leaf_score": draw(st.sampled_from([0.0, 0.5, 1.0, 1.0, float("nan")])),
                         "correct": float(draw(st.booleans()))})
    return pd.DataFrame(rows)


@hsettings(max_examples=80, deadline=None)
@given(tied_tables(), st.integers(0, 2**31 - 1))
def test_tie_rules_of_table4(rows, seed):
    "Each tie rule, checked against a direct computation per question; 'skip' counts exactly the questions SimPO pairs."
    picks = {t: question_picks(rows, "leaf", t, seed).set_index("qid") for t in TIES}
    ranked = rank_samples(rows, "leaf", seed).set_index("qid")
    for q, g in rows.groupby("qid"):
        s = g[g.leaf_score.notna()]
        if s.empty:
            assert not any(p.loc[q, "counted"] for p in picks.values()); continue
        top, bottom = s[s.leaf_score == s.leaf_score.max()], s[s.leaf_score == s.leaf_score.min()]
        e = picks["expected"].loc[q]
        assert e.counted and e.highest == top.correct.mean() and e.lowest == bottom.correct.mean()
        f = picks["first"].loc[q]
        assert f.highest == top.sort_values("sample").correct.iloc[0] and f.lowest == bottom.sort_values("sample").correct.iloc[0]
        r = picks["random"].loc[q]
        assert r.highest in set(top.correct) and r.lowest in set(bottom.correct)
        k = picks["skip"].loc[q]
        assert k.counted == (ranked.loc[q, "status"] in ("ok", "identical"))
        if k.counted: assert k.highest == g.set_index(g.index).correct[ranked.loc[q, "best"]]
        if len(s) == 1 or s.leaf_score.nunique() == 1: assert e.highest == e.lowest  # one score: nothing to rank
    table, _ = ranking_table(rows, ["leaf"], ["medqa"], ties="expected")
    counted = picks["expected"][picks["expected"].counted]
    if len(counted):
        assert table.loc["Δ (leaf)", "medqa"] == pytest.approx(100 * (counted.highest - counted.lowest).mean())


class _Parity(LM):
    "Checker double, structural: queries are the STATEMENT field; a sentence is supported when its length is even."
    kind = "parity-test"
    @staticmethod
    def _statement(prompt) -> str: return prompt[-1]["content"].split("STATEMENT:\n", 1)[1].split("\n", 1)[0]
    def _generate(self, reqs):
        for i, r in enumerate(reqs): yield i, f"```\n{self._statement(r.prompt)}\n```"
    def _label_logprobs(self, pairs):
        for i, (p, label) in enumerate(pairs): yield i, -0.01 if (label == "[Supported]") == (len(self._statement(p)) % 2 == 0) else -5.0


def _tiny(folder: Path) -> Path:
    "A 2-layer, 64-wide model with the embedded model's tokenizer and chat template, random weights (seed 0)."
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    src = embedded_dir()
    cfg = AutoConfig.from_pretrained(src, local_files_only=True)
    cfg.update(dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16))
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(folder)
    AutoTokenizer.from_pretrained(src, local_files_only=True).save_pretrained(folder)
    return folder


def test_each_dataset_trains_and_scores_its_own_model(tmp_path):
    """The paper's Tables 3 and 5 train 'separately on each dataset': each model sees only its dataset's samples and
    answers only its dataset's questions; the pooled variant is one model for all."""
    tiny = _tiny(tmp_path / "tiny")
    qs = [Question("medqa", f"m{i}", f"Medical question {i}?", {"A": "one", "B": "two", "C": "three"}, "A") for i in range(3)] + \
         [Question("bioasq", f"b{i}", f"Is fact {i} true?", {"A": "yes", "B": "no"}, "B") for i in range(3)]
    checker = LeafChecker(_Parity("parity", progress=False), BM25(DATA / "medcorpus.jsonl", progress=False),
                          settings=FactCheckSettings(n_searches=1, verdict="logprob"))
    kw = dict(method="simpo", sampling=SampleSettings(n=3, max_tokens=12), settings=replace(SMOKE_SIMPO, max_steps=1, learning_rate=1e-3),
              answer=AnswerSettings(max_tokens=6), cache=Cache(tmp_path / "c.sqlite"), progress=False)
    runs = self_train_datasets(tiny, qs, qs, checker, tmp_path / "work", **kw)
    assert list(runs.runs) == ["medqa", "bioasq"]
    for d, r in runs.runs.items():
        assert set(r.samples.dataset) == {d} and set(r.answers.dataset) == {d}
        assert r.metrics.status.iloc[-1] == "trained"
    assert runs.runs["medqa"].models[-1] != runs.runs["bioasq"].models[-1]
    assert set(runs.answers.query("round == 1").dataset) == {"medqa", "bioasq"}
    pooled = self_train_datasets(tiny, qs, qs, checker, tmp_path / "work", per_dataset=False, **kw)
    assert list(pooled.runs) == ["pooled"] and set(pooled.samples.dataset) == {"medqa", "bioasq"}
    with pytest.raises(ValueError, match="no training questions"):
        self_train_datasets(tiny, qs[:3], qs, checker, tmp_path / "work", **kw)


MINE = Prompts(answer="Answer as a pharmacist would.\n" + ANSWER_PROMPT, query="Search the pharmacology shelf.\n" + PAPER_PROMPTS.query,
               fact_check_label="Judge it as a pharmacist.\n" + PAPER_PROMPTS.fact_check_label)
QS = [Question("medqa", f"m{i}", f"Medical question {i}?", {"A": "one", "B": "two", "C": "three"}, "A") for i in range(3)]


class _Recorder(_Parity):
    "The parity double, keeping the text of every request it gets (generate and label scoring alike)."
    kind = "recorder-selftrain-test"
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.asked = []
    def _generate(self, reqs):
        reqs = list(reqs)
        self.asked += [r.prompt[-1]["content"] for r in reqs]
        for i, r in enumerate(reqs):
            yield i, "It is option one.\nAnswer: A" if "STATEMENT:" not in r.prompt[-1]["content"] else f"```\n{self._statement(r.prompt)}\n```"
    def _label_logprobs(self, pairs):
        pairs = list(pairs)
        self.asked += [p[-1]["content"] for p, _ in pairs]
        yield from super()._label_logprobs(pairs)


def test_another_answer_prompt_reaches_the_samples_and_is_not_mixed(tmp_path):
    "Samples are drawn with the prompt given; a file of samples drawn with another prompt is refused, not extended."
    rec = _Recorder("r", progress=False)
    rows = sample_answers(QS, rec, SampleSettings(n=2), out=tmp_path / "s.jsonl", progress=False, prompts=MINE)
    assert rec.asked and all(t.startswith("Answer as a pharmacist would.") for t in rec.asked)
    assert rows.prompt.str.startswith("Answer as a pharmacist would.").all()
    with pytest.raises(ValueError, match="another answer prompt"):
        sample_answers(QS, rec, SampleSettings(n=2), out=tmp_path / "s.jsonl", progress=False)  # the paper's prompt, same file
    plain = sample_answers(QS, rec, SampleSettings(n=2), progress=False)
    assert plain.prompt.tolist() == [answer_prompt(q.question, q.options) for q in QS for _ in range(2)]


def test_leaf_checker_uses_its_prompts():
    "The checker's query and verdict templates are the ones it was given; without any, the paper's."
    bm25 = BM25(DATA / "medcorpus.jsonl", progress=False)
    quick = FactCheckSettings(n_searches=1, verdict="logprob")
    answers, contexts = ["Naloxone reverses opioids. It is given first."], ["QUESTION: Which drug?"]
    rec = _Recorder("r", progress=False)
    LeafChecker(rec, bm25, settings=quick, prompts=MINE)(answers, contexts)
    assert sum(t.startswith("Search the pharmacology shelf.") for t in rec.asked) == 2  # one query per sentence
    assert sum(t.startswith("Judge it as a pharmacist.") for t in rec.asked) == 4  # two labels per sentence
    plain = _Recorder("r", progress=False)
    LeafChecker(plain, bm25, settings=quick)(answers, contexts)
    assert len(plain.asked) == 6 and not any("pharmac" in t for t in plain.asked)


def test_self_train_samples_and_evaluates_with_its_prompt(tmp_path):
    "A self-training round samples and scores every model with the answer prompt given (the evaluation requests in the cache say so)."
    import sqlite3
    tiny, cache = _tiny(tmp_path / "tiny"), Cache(tmp_path / "c.sqlite")
    checker = LeafChecker(_Parity("parity", progress=False), BM25(DATA / "medcorpus.jsonl", progress=False),
                          settings=FactCheckSettings(n_searches=1, verdict="logprob"))
    res = self_train(tiny, QS, QS, checker, tmp_path / "work", method="simpo", prompts=MINE, sampling=SampleSettings(n=3, max_tokens=12),
                     settings=replace(SMOKE_SIMPO, max_steps=1, learning_rate=1e-3), answer=AnswerSettings(max_tokens=6), cache=cache,
                     progress=False)
    assert res.samples.prompt.str.startswith("Answer as a pharmacist would.").all()
    reqs = [json.loads(r) for (r,) in sqlite3.connect(cache.path).execute("SELECT request FROM entries WHERE request IS NOT NULL")]
    greedy = [r["prompt"][-1]["content"] for r in reqs if r["op"] == "generate" and r["params"]["temperature"] == 0]
    assert len(greedy) == len(QS) * len(res.metrics[res.metrics.accuracy.notna()])  # every evaluated model answered every question
    assert all(t.startswith("Answer as a pharmacist would.") for t in greedy)


def test_accuracy_table_has_two_decimals_as_leaf_reports_them():
    # LEAF paper, Tables 3 and 5 print accuracies to two decimals (55.46, 60.17); one decimal would put up to ±0.05 of
    # rounding into every difference from them (issue 22)
    from leaf_nb.selftrain import accuracy_table
    rows = pd.DataFrame({"method": ["m"] * 3 + ["n"] * 3, "dataset": "medqa", "correct": [1.0, 0.0, 0.0, 1.0, 1.0, 0.0]})
    t = accuracy_table(rows, ["m", "n"], ["medqa"])
    assert t.medqa.tolist() == [33.33, 66.67] and t.Average.tolist() == [33.33, 66.67]


def test_reward_scoring_speed_benchmark_splits_the_time(tmp_path):
    """benchmarks/reward_scoring_speed.py on a few synthetic pairs and the test reward model: one fresh process, the
    time split into its parts, the forward passes' arithmetic counted, the row appended (figures, not a speed bound)."""
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "reward_scoring_speed.py"
    out = tmp_path / "speed.csv"
    r = subprocess.run([sys.executable, str(script), "--pairs", "6", "--threads", "1", "--batch-size", "4", "--csv", str(out)],
                       capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    (row,) = pd.read_csv(out).to_dict("records")
    assert (row["source"], row["pairs"], row["threads"], row["batch_size"]) == ("synthetic", 6, 1, 4)
    assert row["forward_s"] > 0 and row["lengths_s"] >= 0 and row["gflop_per_s"] > 0 and 0 <= row["padded_share"] < 1
    assert math.isclose(row["total_s"], row["lengths_s"] + row["forward_s"] + row["other_s"], abs_tol=0.02)
    assert row["mean_tokens"] > 10 and "1 thread(s): 6 pairs (synthetic)" in r.stdout
