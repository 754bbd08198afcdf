"""Self-BioRAG: the threshold δ sets the retrieval rate (property tests and the real embedded critic), the δ sweep read
from a no-retrieval and a forced-retrieval run equals adaptive retrieval run at each δ, the weights decide which candidate
wins, a run that dies half-way resumes from the cache without repeating a call, another answer template reaches every
candidate and baseline, and Figure 4's baselines (the base model without retrieval and with only its top passage) and
split by Self-BioRAG's prediction."""
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings, strategies as st

from leaf_nb.cache import Cache
from leaf_nb.data import Question, load_mirage
from leaf_nb.llm import LM, LMError, embedded
from leaf_nb.retrieve import BM25
from leaf_nb.factcheck import question_context
from leaf_nb.prompts import ANSWER_PROMPT, FCRAG_PROMPT, Prompts
from leaf_nb.selfbiorag import (BASELINES, FULLY_SUPPORTED, NO_RETRIEVAL, RELEVANCE_TOKENS, RELEVANT, RETRIEVAL, RETRIEVAL_TOKENS,
                                SUPPORT_TOKENS, BaselineSettings, PromptCritic, SelfBioRAGSettings, base_answers, decide,
                                decision_split, delta_sweep, retrieval_prob, select, self_biorag)

DATA = Path(__file__).resolve().parents[1] / "data"
probs = st.lists(st.floats(0.0, 1.0), min_size=1, max_size=40)


@given(probs, st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_delta_sets_the_retrieval_rate(p, d1, d2):
    assert decide(p, "adaptive", 0.0).all()  # δ = 0: always
    assert not decide(p, "adaptive", 1.0).any()  # δ = 1: never
    lo, hi = sorted((d1, d2))
    assert decide(p, "adaptive", lo).sum() >= decide(p, "adaptive", hi).sum()  # a higher δ never retrieves more
    assert decide(p, "always", hi).all() and not decide(p, "never", lo).any()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(-1, 1), st.floats(-30, -0.1)), min_size=2, max_size=6),
       st.sampled_from(["relevance", "support", "utility"]))
def test_a_dominant_weight_picks_the_candidate_it_favours(cands, favoured):
    rows = pd.DataFrame(cands, columns=["relevance", "support", "utility", "answer_logprob"]).assign(
        question=0, evidence_id=[f"p{i}" for i in range(len(cands))], answer_tokens=5)
    top = np.sort(rows[favoured].to_numpy())[-2:]
    assume(top[1] - top[0] > 1e-3)  # a near tie at the top: no weight separates them from the answer term
    weights = {"w_rel": 0.0, "w_sup": 0.0, "w_use": 0.0, {"relevance": "w_rel", "support": "w_sup", "utility": "w_use"}[favoured]: 1e5}
    chosen = select(rows, SelfBioRAGSettings(answer_term="mean", **weights))
    assert chosen.chosen.sum() == 1
    assert chosen.evidence_id[chosen.chosen].item() == rows.evidence_id[rows[favoured].idxmax()]


class Scripted(LM):
    "Answers A from the naloxone passage and B otherwise; judges the naloxone passage relevant and supporting; can die after `budget` calls."
    kind = "scripted-selfbiorag-test"

    def __init__(self, *args, budget=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.budget = budget

    def _spend(self):
        if self.budget is not None:
            if self.budget == 0: raise LMError("killed")
            self.budget -= 1

    def _generate(self, reqs):
        for i, r in enumerate(reqs):
            self._spend()
            yield i, "Naloxone.\nAnswer: A" if "opioid antagonist" in r.prompt[-1]["content"] else "Flumazenil.\nAnswer: B"

    def _label_logprobs(self, pairs):
        for i, (p, label) in enumerate(pairs):
            self._spend()
            good = "opioid antagonist" in p[-1]["content"]
            if label in RETRIEVAL_TOKENS: yield i, -0.1 if label == RETRIEVAL else -2.3
            elif label in RELEVANCE_TOKENS + SUPPORT_TOKENS: yield i, -0.05 if (label in (RELEVANT, FULLY_SUPPORTED)) == good else -3.0
            elif label.startswith("[Utility"): yield i, -1.0
            else: yield i, -2.0 if "Answer: A" in label else -1.0


PASSAGES = [{"id": "nal", "title": "Naloxone", "content": "Naloxone is an opioid antagonist that reverses opioid overdose."},
            {"id": "flu", "title": "Flumazenil", "content": "Flumazenil reverses benzodiazepine sedation, not opioid overdose."}]
Q = Question("medqa", "q1", "Which drug reverses opioid overdose?", {"A": "Naloxone", "B": "Flumazenil"}, "A")
Q2 = Question("medqa", "q2", "What is given first for an opioid overdose in the emergency room?", {"A": "Naloxone", "B": "Flumazenil"}, "A")


def test_weights_decide_end_to_end():
    bm25 = BM25(PASSAGES, progress=False)
    res = self_biorag([Q], PromptCritic(Scripted("s", progress=False)), bm25, SelfBioRAGSettings(k=2, answer_term="sum"))
    assert res.questions.option.tolist() == ["A"]  # relevance and support outweigh the model's preference for B
    assert res.reselect(w_rel=0.0, w_sup=0.0, w_use=0.0).questions.option.tolist() == ["B"]
    assert res.reselect(w_rel=0.0, w_sup=0.0, w_use=0.0, answer_term="none").questions.evidence_id.tolist() == ["nal"]  # all tie: rank 1


def test_a_killed_run_resumes_without_repeating_calls(tmp_path):
    bm25 = BM25(PASSAGES, progress=False)
    s = SelfBioRAGSettings(k=2, answer_term="sum")
    clean = Scripted("s", cache=Cache(tmp_path / "clean.sqlite"), progress=False)
    want = self_biorag([Q, Q2], PromptCritic(clean), bm25, s)
    store = Cache(tmp_path / "resume.sqlite")
    dying = Scripted("s", cache=store, progress=False, budget=7)  # dies in the middle of the judgments
    with pytest.raises(LMError, match="killed"):
        self_biorag([Q, Q2], PromptCritic(dying), bm25, s)
    again = Scripted("s", cache=store, progress=False)
    got = self_biorag([Q, Q2], PromptCritic(again), bm25, s)
    assert dying.calls == 7 and dying.calls + again.calls == clean.calls
    pd.testing.assert_frame_equal(got.candidates, want.candidates)


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    return embedded(cache=Cache(tmp_path_factory.mktemp("cache") / "c.sqlite"), progress=False)


def test_delta_with_the_embedded_critic(lm):
    """The real prompt critic's P([Retrieval]) on one question per dataset; δ = 1 end to end on two of them, δ = 0 on one.
    (The token critic runs on the embedded model in nbs/api/13_selfbiorag.ipynb.)"""
    qs = [load_mirage(DATA / "mirage_sample.json", d, limit=1)[0] for d in ("medqa", "medmcqa", "pubmedqa", "bioasq", "mmlu")]
    critic, bm25 = PromptCritic(lm), BM25(DATA / "medcorpus.jsonl", progress=False)
    p = retrieval_prob(critic.retrieval(qs))
    assert ((p > 0) & (p < 1)).all() and len(set(p.round(6))) > 1  # real, question-dependent probabilities
    rates = [decide(p, "adaptive", d).mean() for d in np.linspace(0, 1, 21)]
    assert rates[0] == 1.0 and rates[-1] == 0.0 and all(a >= b for a, b in zip(rates, rates[1:]))
    small = SelfBioRAGSettings(mode="adaptive", k=1, max_tokens=4, answer_term="sum")
    assert self_biorag(qs[:2], critic, bm25, replace(small, delta=1.0)).retrieval_rate == 0.0
    every = self_biorag(qs[:1], critic, bm25, replace(small, delta=0.0))
    assert every.retrieval_rate == 1.0 and every.questions.evidence_id.notna().all()
    assert every.candidates.relevance.between(0, 1).all()


class Reader(LM):
    "Base-model double: records the documents in each prompt's KNOWLEDGE field and answers A when the naloxone passage is among them."
    kind = "reader-selfbiorag-test"
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen = []
    def _generate(self, reqs):
        for i, r in enumerate(reqs):
            text = r.prompt[-1]["content"]
            knowledge = text.split("KNOWLEDGE:\n", 1)[1].split("QUESTION:", 1)[0] if "KNOWLEDGE:\n" in text else ""
            self.seen.append(knowledge.count("<document"))
            yield i, "Answer: A" if "opioid antagonist" in knowledge else "Answer: B"


def test_figure4_baselines_and_split():
    """The base model answers once without evidence and once, as the paper's RAG baseline, with only the top passage of
    its top k (the question with its options as the query); the split puts every question under Self-BioRAG's prediction."""
    bm25 = BM25(PASSAGES, progress=False)
    reader = Reader("reader", progress=False)
    base = base_answers([Q, Q2], reader, bm25, BaselineSettings(k=2, use=1, max_tokens=8))
    assert base.method.tolist() == [BASELINES["none"]] * 2 + [BASELINES["rag"]] * 2
    assert sorted(reader.seen) == [0, 0, 1, 1]  # no document without retrieval, exactly one with it
    top = bm25.search([question_context(q.question, q.options) for q in (Q, Q2)], k=2)
    rag = base[base.method == BASELINES["rag"]]
    assert rag.evidence_ids.tolist() == [[hs[0].id] for hs in top] and rag.retrieve.all() and not base.retrieve[:2].any()
    assert rag.option.tolist() == ["A" if hs[0].id == "nal" else "B" for hs in top]
    res = self_biorag([Q, Q2], PromptCritic(Scripted("s", progress=False)), bm25, SelfBioRAGSettings(k=2, answer_term="sum"))
    decisions = res.questions.assign(retrieve=[True, False])
    rows = pd.concat([base, res.questions], ignore_index=True)
    split = decision_split(rows, decisions, "medqa")
    assert split.index.tolist() == [RETRIEVAL, NO_RETRIEVAL] and split.n.tolist() == [1, 1]
    for label, qid in ((RETRIEVAL, "q1"), (NO_RETRIEVAL, "q2")):
        for m in rows.method.unique():
            assert split.loc[label, m] == 100 * rows[(rows.method == m) & (rows.qid == qid)].correct.item()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), min_size=1, max_size=12))
def test_decision_split_is_the_mean_per_prediction(cells):
    "Each cell of the split is the mean correctness of that method over the questions with that prediction; n counts them."
    qids = [f"q{i}" for i in range(len(cells))]
    decisions = pd.DataFrame({"dataset": "medqa", "qid": qids, "retrieve": [c[0] for c in cells]})
    rows = pd.DataFrame({"method": ["a"] * len(cells) + ["b"] * len(cells), "dataset": "medqa", "qid": qids * 2,
                         "correct": [float(c[1]) for c in cells] + [float(c[2]) for c in cells]})
    split = decision_split(pd.concat([rows, rows.assign(dataset="other")]), decisions, "medqa", ["a", "b"])
    for label, want in ((RETRIEVAL, True), (NO_RETRIEVAL, False)):
        part = [c for c in cells if c[0] == want]
        assert split.loc[label, "n"] == len(part)
        if part:
            assert split.loc[label, "a"] == pytest.approx(100 * np.mean([c[1] for c in part]))
            assert split.loc[label, "b"] == pytest.approx(100 * np.mean([c[2] for c in part]))
        else: assert np.isnan(split.loc[label, "a"])


class Doubtful(Scripted):
    "Scripted, but how much it wants retrieval depends on the question's length (the QUESTION field), so δ separates the questions."
    kind = "doubtful-selfbiorag-test"

    def _label_logprobs(self, pairs):
        pairs = list(pairs)
        base = dict(super()._label_logprobs(pairs))
        for i, (p, label) in enumerate(pairs):
            if label in RETRIEVAL_TOKENS:
                question = p[-1]["content"].split("QUESTION:\n", 1)[1].split("\n", 1)[0]
                p_ret = (len(question) % 7 + 0.5) / 8  # 1/16 .. 13/16, by question
                yield i, float(np.log(p_ret if label == RETRIEVAL else 1 - p_ret))
            else: yield i, base[i]


def test_delta_sweep_equals_adaptive_runs(tmp_path):
    "The sweep's retrieval rate and accuracy at each δ are those of `self_biorag` run in adaptive mode at that δ."
    stems = ["Which drug reverses opioid overdose?", "What is given first for an opioid overdose?", "Name the opioid antidote.",
             "Which agent treats an opioid overdose in the emergency room?", "What reverses respiratory depression from opioids?",
             "Which antagonist is used for opioid toxicity?"]
    qs = [Question("medqa", f"q{i}", t, {"A": "Naloxone", "B": "Flumazenil"}, "A" if i % 2 else "B") for i, t in enumerate(stems)]
    bm25, s = BM25(PASSAGES, progress=False), SelfBioRAGSettings(k=2, answer_term="sum")
    critic = PromptCritic(Doubtful("d", cache=Cache(tmp_path / "c.sqlite"), progress=False))
    runs = {m: self_biorag(qs, critic, bm25, replace(s, mode=m)).questions for m in ("never", "always")}
    assert runs["never"].p_retrieve.nunique() > 2  # the questions differ in P([Retrieval])
    deltas = [0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.0]
    sweep = delta_sweep(runs["never"], runs["always"], deltas).set_index("delta")
    calls = critic.lm.calls
    for d in deltas:
        ad = self_biorag(qs, critic, bm25, replace(s, mode="adaptive", delta=d))
        assert sweep.retrieval_rate[d] == pytest.approx(ad.retrieval_rate)
        assert sweep.accuracy[d] == pytest.approx(ad.questions.correct.mean())
    assert critic.lm.calls == calls  # adaptive retrieval asks for nothing the two runs did not
    assert sweep.retrieval_rate.is_monotonic_decreasing and sweep.retrieval_rate[0.0] == 1.0 and sweep.retrieval_rate[1.0] == 0.0


class Recorder(Scripted):
    "Scripted, keeping the text of every generate request."
    kind = "recorder-selfbiorag-test"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.asked = []

    def _generate(self, reqs):
        reqs = list(reqs)
        self.asked += [r.prompt[-1]["content"] for r in reqs]
        yield from super()._generate(reqs)


def test_another_answer_template_reaches_every_candidate_and_baseline():
    "A reworded answer and FC-RAG template is what the generator sees, with and without evidence; the default is the paper's."
    bm25 = BM25(PASSAGES, progress=False)
    mine = Prompts(answer="Reply as a pharmacist.\n" + ANSWER_PROMPT, fcrag="Reply as a pharmacist.\n" + FCRAG_PROMPT)
    rec = Recorder("r", progress=False)
    for mode in ("never", "always"):
        self_biorag([Q], PromptCritic(rec, prompts=mine), bm25, SelfBioRAGSettings(mode=mode, k=2, answer_term="sum"))
    base_answers([Q], rec, bm25, BaselineSettings(k=2, max_tokens=8), prompts=mine)
    assert len(rec.asked) == 1 + 2 + 2 and all(t.startswith("Reply as a pharmacist.") for t in rec.asked)
    plain = Recorder("r", progress=False)
    self_biorag([Q], PromptCritic(plain), bm25, SelfBioRAGSettings(mode="always", k=2, answer_term="sum"))
    assert not any("pharmacist" in t for t in plain.asked)


# ---- issue 22: what the adaptive-retrieval notebook says the summary reports ----------------------------------------------

ROOT = DATA.parent
NB = ROOT / "nbs" / "papers" / "selfbiorag" / "adaptive_retrieval.ipynb"


def _cells():
    import json
    return ["".join(c["source"]) for c in json.loads(NB.read_text())["cells"]]


def test_the_summarys_per_dataset_shares_stand_beside_the_runs_retrieval_rates():
    # Self-BioRAG summary, §5.2 / Figure 3: "only 12%, 8%, and 11% is retrieved for MedQA, MedMCQA, and MMLU-Med"
    src = "\n".join(_cells())
    assert 'SHARES = pd.DataFrame({"medqa": [12.0], "medmcqa": [8.0], "mmlu": [11.0]}' in src
    assert "beside_paper(rate.loc[[MODES[\"adaptive\"]]" in src
    assert "retrieval rate or a corpus's share of the evidence" in src  # the summary's ambiguity, said
    assert "gives one number" not in src


def test_every_table_says_how_often_retrieval_fired_at_the_runs_delta():
    cells = _cells()
    tables = [c for c in cells if ".to_csv(out /" in c and "rows.jsonl" not in c and "delta_sweep" not in c]
    assert len(tables) >= 6
    for c in tables:  # each saved table carries the retrieval share (the δ sweep carries its own, per δ)
        assert "RETRIEVED" in c or 'values="retrieve"' in c or "share of the questions" in c, c[:200]
    src = "\n".join(cells)
    assert 'RETRIEVED = f"retrieved for (% of questions; adaptive at δ = {delta})"' in src
    assert "in this run it is" in src  # a δ at which retrieval fires for every question is said to be always retrieval


def test_the_72_point_comparison_says_its_baseline():
    src = "\n".join(_cells())
    assert "ours: zero-shot base; the summary's: three-shot kNN" in src and "three-shot examples selected by k-nearest neighbors" in src
    prof = (NB.with_name("adaptive_retrieval.paper.yaml")).read_text()
    assert "no LLaMA2 entry" not in prof and "three-shot" in prof
    assert "llama2_7b:" in (ROOT / "profiles" / "h100.yaml").read_text()
