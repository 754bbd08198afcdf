"""The FFRR paper's rules, one test each, on scripted LLMs: each test states the rule (section of the paper) and would fail
on a retriever, prompt or baseline that follows another rule (the ones this project ran before issue 15 among them)."""
from collections import Counter
from dataclasses import replace
from itertools import product
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import precision_recall_fscore_support

from leaf_nb.cache import Cache
from leaf_nb.data import CLAIM_LABELS, Claim, Report, load_claims
from leaf_nb.evaluate import f1_from_pr, macro_prf, randomization_test, score_table, significance
from leaf_nb.ffrr import (BASELINES, PAPER_FFRR, VERIFY_DEMOS, Policy, Verifier, dataset_stats, decompose, decompose_prompt, drop_leaks,
                          leak_free_pool, replug_loss, retrieve_evidence, run_episodes)
from leaf_nb.ffrr_baselines import PAPER_PROMPTING, direct_prompt, react_rows, verify_edit_rows
from leaf_nb.llm import LM

from test_ffrr import CLAIMS, DOCS, POOL, Telling

DATA = Path(__file__).resolve().parents[1] / "data"
FIXTURES = (("rawfc_sample", "rawfc"), ("liarraw_sample", "liar-raw"))


def fixture_claims():
    return [c for root, ds in FIXTURES for s in ("train", "val", "test") for c in load_claims(DATA / root, ds, s)]


def verifier(tmp_path, name="c.sqlite", lm=Telling):
    return Verifier(lm("double", cache=Cache(tmp_path / name), progress=False), CLAIM_LABELS["rawfc"])


@pytest.fixture(scope="module")
def policy():
    return Policy(POOL, max_length=64, tau=0.05, progress=False)


def copies(claim, n):
    "n copies of a claim under distinct ids: one batch rolls out n independent episodes (one random stream each)."
    return [replace(claim, event_id=f"{claim.event_id}-{i}") for i in range(n)]


def test_question_level_picks_the_lowest_r_q_question_with_probability_one_minus_epsilon(tmp_path, policy):
    # §4.2: "top-1 document sampling is intentionally biased towards the questions that receive lower r_q ... we sort the
    # questions reversely by the score and use the ε-greedy method". The telling question's top-1 document says "confirmed",
    # so its r_q is high; the other question's is low. With ε = 0.1 and two questions, P(low first) = 0.9 + 0.1 / 2.
    batch = copies(CLAIMS[0], 300)
    qs = {c.event_id: ["Did inspectors confirm that cars cross the Carrow Bridge again?", "Did drivers use a detour in May?"] for c in batch}
    ver = verifier(tmp_path)
    eps = run_episodes(batch, policy, ver, replace(PAPER_FFRR, level="q", max_picks=1), np.random.default_rng(7), qs)
    r_q = {st.query: st.reward for ep in eps for st in ep.steps}
    assert r_q["Did drivers use a detour in May?"] < r_q["Did inspectors confirm that cars cross the Carrow Bridge again?"]
    low_first = np.mean([ep.steps[0].query == "Did drivers use a detour in May?" for ep in eps])
    assert 0.90 <= low_first <= 0.99, low_first
    assert 0.02 <= np.mean([ep.steps[0].explored for ep in eps]) <= 0.2


def test_document_exploitation_samples_from_pi_over_the_top_k(tmp_path, policy):
    # §4.1: with probability 1 − ε, d̃ ~ π_θ(c, K), the distribution of π_θ over the top-K documents of D' (not its argmax).
    s = replace(PAPER_FFRR, epsilon=0.0, max_picks=1, tau=0.05)
    eps = run_episodes(copies(CLAIMS[0], 600), policy, verifier(tmp_path), s, np.random.default_rng(3))
    rows, logits = policy.retrieve([CLAIMS[0].claim], 20)
    l = logits[0].numpy()
    top = np.argsort(-l, kind="stable")[:3]
    want = np.exp(l[top] - l[top].max()); want /= want.sum()
    got = Counter(ep.steps[0].choice for ep in eps)
    assert set(got) <= set(top.tolist()) and len(got) >= 2
    assert np.allclose([got[j] / 600 for j in top], want, atol=0.06), (got, want)


def test_tau_is_the_papers_and_divides_the_raw_dot_product():
    # §6.1.2: "set the temperature τ = 1"; §5: π_θ(d|q) ∝ exp(h(q)ᵀh(d)/τ), a plain dot product.
    assert PAPER_FFRR.tau == 1.0 and PAPER_FFRR.normalize is False
    from sentence_transformers import SentenceTransformer
    p = Policy(POOL[:4], max_length=64, progress=False)
    assert p.tau == 1.0
    raw = SentenceTransformer(modules=[m for m in p.model if type(m).__name__ != "Normalize"])
    p.set_encoder(raw)
    q, d = raw.encode(["a bridge"], convert_to_tensor=True)[0], raw.encode([p.doc(1)], convert_to_tensor=True)[0]
    assert abs(float(p.logits(["a bridge"], [[1]])[0][0]) - float(q @ d)) < 1e-3 * max(1.0, abs(float(q @ d)))


def test_hybrid_runs_document_steps_over_the_sampled_questions_documents(tmp_path, policy):
    # §4.3: "each optimization step at question level is followed by a sequence of steps at document level", with rewards
    # r_{d_ij} = score(y | c, d_ij) "for any sampled intermediate question q_i" and two separate ε-greedy controllers.
    qs = {"c1": ["Did drivers use a detour in May?", "Did inspectors confirm that cars cross the Carrow Bridge again?"]}
    s = replace(PAPER_FFRR, level="d+q", terminate=False, max_picks=2, candidates=8, epsilon_q=0.0, epsilon=1.0)
    ep = run_episodes(CLAIMS[:1], policy, verifier(tmp_path), s, np.random.default_rng(0), qs)[0]
    assert ep.steps[0].level == "q" and ep.steps[1].level == "d"
    current = None
    for st in ep.steps:
        if st.level == "q": current = st
        else: assert st.query == current.query != CLAIMS[0].claim and st.rows == current.rows and st.explored  # ε = 1 at the document controller
    assert not any(st.explored for st in ep.steps if st.level == "q")  # ε_q = 0 at the question controller
    assert ep.final_steps == [st for st in ep.steps if st.level == "q"][:s.k]


def test_an_episode_runs_until_the_termination_test_and_r_g_rates_the_first_min_k_kappa(tmp_path, policy):
    # §4.1: "the selection stops if argmax Σ_{i=1}^{κ} score = y ... κ is a free number"; r_g uses k = min(K, κ) documents.
    s = replace(PAPER_FFRR, terminate=False, candidates=7, tau=0.05)
    ep = run_episodes(CLAIMS[:1], policy, verifier(tmp_path), s, np.random.default_rng(0))[0]
    assert len(ep.steps) == 7 and ep.final_steps == ep.steps[:3]  # κ = |D'| > K
    ep = run_episodes(CLAIMS[:1], policy, verifier(tmp_path), replace(s, terminate=True), np.random.default_rng(0))[0]
    summed = np.cumsum([st.probs for st in ep.steps], axis=0)
    assert ep.terminated and summed[-1].argmax() == 0 and all(x.argmax() != 0 for x in summed[:-1])
    assert ep.final_steps == ep.steps[:min(3, len(ep.steps))]


class Many(LM):
    "Writes six questions for any claim."
    kind = "many"

    def _generate(self, reqs):
        for i, _ in enumerate(reqs):
            yield i, "\n".join(f"Question: Is the claim's fact number {j} on record?" for j in range(1, 7))


def test_the_llm_decides_how_many_questions(tmp_path):
    # §4.2: "We instruct LLM to determine the number of questions automatically using demonstration examples."
    q = decompose(CLAIMS[:1], Many("m", progress=False))
    assert len(q.questions[0]) == 6
    text = decompose_prompt("x")[0]["content"]
    assert "at most" not in text and text.count("Claim:") == 3  # two demonstrations (§6.1.2), then the claim
    assert PAPER_FFRR.max_questions >= 10


def test_replug_tailored_to_the_levels_scores_the_papers_documents(tmp_path, policy):
    # §6.1.3: REPLUG (q) optimises one KL over the top-1 documents of K questions; REPLUG (d+q) the KL of the top-K
    # documents of each of the K questions, combined with the KL of those top-1 documents.
    qs = {c.event_id: [f"{c.claim} Who said so?", f"Where did it happen: {c.claim}", f"When? {c.claim}"] for c in CLAIMS[:2]}
    K = 2
    for level, per_claim in (("d", K), ("q", K), ("d+q", K * K + K)):
        loss, r = replug_loss(CLAIMS[:2], policy, verifier(tmp_path, f"{level}.sqlite"), replace(PAPER_FFRR, objective="replug", level=level, k=K), qs)
        assert r.size == 2 * per_claim, (level, r.size)
        assert loss.requires_grad and np.isfinite(loss.item())


def test_the_verification_prompt_has_two_demonstrations_of_its_own(tmp_path):
    # §6.1.2: "we set the shot number of demonstration examples to 2", in the format of Table 4.
    for labels in (CLAIM_LABELS["rawfc"], CLAIM_LABELS["liar-raw"]):
        msgs = Verifier(Telling("t", progress=False), labels).prompt("A claim.", ["A document."])
        assert [m["role"] for m in msgs] == ["system"] + ["user", "assistant"] * 2 + ["user"]
        assert all(m["content"] in labels for m in msgs if m["role"] == "assistant")
    fixture_texts = {c.claim for c in fixture_claims()} | {c.claim for c in CLAIMS} | set(DOCS.values())
    demo_texts = {c for ds in VERIFY_DEMOS.values() for c, docs, _ in ds} | {d for ds in VERIFY_DEMOS.values() for _, docs, _ in ds for d in docs}
    assert not demo_texts & fixture_texts
    assert len(direct_prompt("A claim.", CLAIM_LABELS["rawfc"])) == 1  # direct prompting: zero-shot, no evidence
    with pytest.raises(ValueError, match="direct prompting has a prompt of its own"):
        Verifier(Telling("t", progress=False), CLAIM_LABELS["rawfc"]).prompt("A claim.", None)


def test_the_leak_filter_removes_what_reveals_a_verdict():
    # §6.1.1: documents with leaks of the ground truth are removed (leak detection after Glockner et al., 2022; our rules).
    kept, removed = drop_leaks(fixture_claims())
    assert sorted(removed.id) == ["lr_0018/0", "rf_0002/0"] and set(removed.rule) == {"verdict statement"}
    assert sum(len(c.reports) for c in kept) == 106
    pool, _ = leak_free_pool([c for c in fixture_claims() if c.dataset == "rawfc"])
    assert len(pool) == 53 and "rf_0002/0" not in {d["id"] for d in pool} and "rf_0002/1" in {d["id"] for d in pool}
    site = Claim("rawfc", "z", "x", "true", reports=(Report("Plain text.", extra={"link": "https://www.politifact.com/factchecks/x/"}),
                                                    Report("We looked at the records; fact-checkers disagreed."), Report("Rain fell.")))
    _, rm = drop_leaks([site])
    assert rm.rule.tolist() == ["source", "fact-check wording"]


def test_table1_statistics_are_computed_from_the_loaded_claims():
    kept, _ = drop_leaks(fixture_claims())
    raw = dataset_stats([c for c in kept if c.dataset == "rawfc"], CLAIM_LABELS["rawfc"])
    assert raw["Claim"] == 18 and raw["# true"] + raw["# half"] + raw["# false"] == 18
    assert raw["Avg. doc per claim"] == round(53 / 18, 1)
    sents = [len(r.sentences) for c in kept if c.dataset == "rawfc" for r in c.reports]
    assert raw["Avg. sentence per doc"] == round(np.mean(sents), 1)


def test_inference_at_the_question_levels_ranks_by_retrieval_probability():
    # §4.2: "During inference, we return the top-1 documents of K questions that have the highest retrieval probability scores."
    class Stub:
        tau = 1.0
        hits = {"A?": [(1, 5.0), (2, 4.9), (3, 4.9), (4, 4.8)], "B?": [(7, 4.0), (8, 1.0), (9, 1.0), (10, 0.5)]}
        def search(self, queries, k): return [self.hits[q][:k] for q in queries]
    ev = retrieve_evidence(Stub(), [Claim("rawfc", "x", "c", "true")], "q", 1, {"x": ["A?", "B?"]}, candidates=4)
    assert [r for r, _ in ev[0]] == [7]  # A's top-1 has the higher score, B's the higher probability


class Scripted(Telling):
    "ReAct: search with the claim, then finish with 'true' when the observation says 'confirmed'. V&E: sampled chains alternate labels."
    kind = "scripted"

    def _generate(self, reqs):
        for i, r in enumerate(reqs):
            if isinstance(r.prompt, str):
                last = r.prompt.rsplit("Claim:", 1)[1]
                yield i, (" Search.\nAction 1: Search[" + last.split("\n")[0].strip() + "]" if "Observation" not in last
                          else " Done.\nAction 2: Finish[" + ("true" if "confirmed" in last else "maybe") + "]")
            elif r.temperature > 0: yield i, f" Because. Label: {['true', 'false'][r.seed % 2]}"
            else: yield i, "Inspectors confirmed it."


def test_react_and_verify_and_edit_run_end_to_end_over_the_reports(tmp_path):
    trained = Policy(POOL, max_length=64, tau=0.05, progress=False)
    ver = verifier(tmp_path, lm=Scripted)
    rr = react_rows(CLAIMS, ver, trained, replace(PAPER_PROMPTING, react_steps=3))
    assert set(rr.react_status) <= {"finished", "forced: unknown label", "forced: out of steps", "forced: no action"}
    assert all("Observation 1:" in t for t in rr.trajectory) and rr.pred.isin(CLAIM_LABELS["rawfc"]).all()
    ve = verify_edit_rows(CLAIMS, ver, trained, replace(PAPER_PROMPTING, ve_chains=2, ve_sentences=2))
    assert (ve.ve_status == "edited").all() and all(e for e in ve.edited_rationale)
    ve2 = verify_edit_rows(CLAIMS, ver, trained, replace(PAPER_PROMPTING, ve_chains=2, ve_edit_below=0.5))
    assert (ve2.ve_status == "consistent").all()


def test_significance_is_an_approximate_randomisation_on_macro_scores():
    labels = CLAIM_LABELS["rawfc"]
    g, a, b = ["true", "half", "false", "true"], ["true", "half", "true", "true"], ["false", "half", "false", "half"]
    obs = macro_prf(g, a, labels)["f1"] - macro_prf(g, b, labels)["f1"]
    swaps = [([bb if s else aa for aa, bb, s in zip(a, b, sw)], [aa if s else bb for aa, bb, s in zip(a, b, sw)]) for sw in product([0, 1], repeat=4)]
    exact = np.mean([macro_prf(g, x, labels)["f1"] - macro_prf(g, y, labels)["f1"] >= obs - 1e-12 for x, y in swaps])
    assert abs(randomization_test(g, a, b, labels) - exact) < 1e-9
    gold = ["true", "half", "false"] * 10
    rows = pd.concat([pd.DataFrame({"method": m, "event_id": range(30), "gold": gold, "pred": p})
                      for m, p in (("ReAct", ["true"] * 30), ("REPLUG (d)", ["false"] * 30), ("FFRR (d+q)", gold))])
    sig = significance(rows, labels, BASELINES)
    assert sig.marked.all() and set(sig.best_baseline) <= {"ReAct", "REPLUG (d)"}


def _counts(confusion, labels):
    "Gold and predicted labels that give the confusion matrix `confusion` (rows gold, columns predicted)."
    pairs = [(g, p) for i, g in enumerate(labels) for j, p in enumerate(labels) for _ in range(confusion[i][j])]
    return [g for g, _ in pairs], [p for _, p in pairs]


def test_macro_f1_is_the_harmonic_mean_of_macro_precision_and_recall():
    # §6.1.1: "macro-average precision (P), recall (R), and F1 (F1 = 2RP/(R+P))". Per-class P = .9/.2/.5 and R = .3/.8/.5 give
    # macro P = R = 53.3, so the paper's F1 is 53.3; the mean of the per-class F1s (scikit-learn's macro F1) would be 42.3.
    labels = CLAIM_LABELS["rawfc"]
    gold, pred = _counts([[27, 60, 3], [3, 16, 1], [0, 4, 4]], labels)
    P, R, _, _ = precision_recall_fscore_support(gold, pred, labels=list(labels), average=None, zero_division=0)
    assert np.allclose(P, [0.9, 0.2, 0.5]) and np.allclose(R, [0.3, 0.8, 0.5])
    m = macro_prf(gold, pred, labels)
    assert [round(100 * m[k], 1) for k in ("precision", "recall", "f1", "mean_class_f1")] == [53.3, 53.3, 53.3, 42.3]
    t = score_table(pd.DataFrame({"method": "A", "gold": gold, "pred": pred}), labels)
    assert (t.loc["A", "f1"], t.loc["A", "mean_class_f1"]) == (53.3, 42.3)


def test_table2s_f1_is_the_harmonic_mean_of_its_own_p_and_r():
    # Table 2, REPLUG (d) on RAWFC: P 51.8, R 56.9, F1 54.2 = 2 · 51.8 · 56.9 / 108.7 (table2_verification checks every row).
    assert round(f1_from_pr(51.8, 56.9), 1) == 54.2
    rng = np.random.default_rng(0)  # and a run's F1 is that function of the run's own P and R, whatever the per-class balance
    for labels in (CLAIM_LABELS["rawfc"], CLAIM_LABELS["liar-raw"]):
        gold, pred = rng.choice(labels, 50).tolist(), rng.choice(labels, 50).tolist()
        m = macro_prf(gold, pred, labels)
        assert abs(m["f1"] - 2 * m["precision"] * m["recall"] / (m["precision"] + m["recall"])) < 1e-12


def test_the_significance_statistic_is_the_papers_f1():
    # Table 2's ∗ compares methods on the F1 the table prints. On these six claims the paper's F1 and the per-class mean give
    # different exact p-values (0.5 and 0.75), and different best baselines (B2 leads on 2PR/(P+R), B1 on the per-class mean).
    labels = CLAIM_LABELS["rawfc"]
    def paper_f1(g, p):
        P, R = precision_recall_fscore_support(g, p, labels=list(labels), average="macro", zero_division=0)[:2]
        return 2 * P * R / (P + R) if P + R else 0.0
    g = ["true", "half", "false", "half", "false", "half"]
    a, b = ["true", "half", "true", "false", "true", "half"], ["half", "half", "false", "true", "true", "half"]
    swaps = [([bb if s else aa for aa, bb, s in zip(a, b, sw)], [aa if s else bb for aa, bb, s in zip(a, b, sw)]) for sw in product([0, 1], repeat=6)]
    exact = np.mean([paper_f1(g, x) - paper_f1(g, y) >= paper_f1(g, a) - paper_f1(g, b) - 1e-12 for x, y in swaps])
    assert exact == 0.5 and abs(randomization_test(g, a, b, labels) - exact) < 1e-9
    g = ["true", "half", "half", "true", "false", "true"]
    preds = {"B1": ["false", "true", "true", "true", "false", "true"], "B2": ["false", "half", "false", "false", "false", "false"], "FFRR (d)": g}
    assert paper_f1(g, preds["B2"]) > paper_f1(g, preds["B1"])
    rows = pd.concat([pd.DataFrame({"method": m, "event_id": range(6), "gold": g, "pred": p}) for m, p in preds.items()])
    sig = significance(rows, labels, ["B1", "B2"], n_resamples=100).set_index("metric")
    assert sig.loc["f1", "best_baseline"] == "B2"
