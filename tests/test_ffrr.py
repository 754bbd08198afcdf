"""FFRR end to end on a toy pool where the LLM's feedback is known: the learning signal raises the telling
document's rank, a frozen policy does not move, a run killed mid-epoch resumes to the same weights without
new LLM calls, repeated (claim, documents) pairs cost one call, and the loaders and metrics hold up."""
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings as hsettings, strategies as st
from sklearn.metrics import precision_recall_fscore_support

from leaf_nb.cache import Cache
from leaf_nb.data import CLAIM_LABELS, BenchmarkError, Claim, load_claims, report_corpus
from leaf_nb.ffrr import (PAPER_FFRR, FFRRTrainer, Policy, Step, Verifier, decompose, macro_prf, ordered_steps,
                          policy_rows, run_episodes, verify_prompt)
from leaf_nb.llm import LM
from leaf_nb.prompts import UNPARSED

DATA = Path(__file__).resolve().parents[1] / "data"

CLAIMS = [Claim("rawfc", "c1", "The Carrow Bridge reopened to traffic in May.", "true"),
          Claim("rawfc", "c2", "Brindle Valley banned chewing gum in all shops.", "false"),
          Claim("rawfc", "c3", "The Harlow county fair added a robotics contest.", "true"),
          Claim("rawfc", "c4", "A photo shows a shark on the flooded Lake Ardent highway.", "false")]
DOCS = {
    "c1a": "The Carrow Bridge reopened to traffic in May after repairs, the city said.",
    "c1b": "Carrow Bridge traffic in May: drivers used a detour while the bridge was closed.",
    "c1c": "Inspectors confirmed that cars cross the Carrow Bridge again.",
    "c2a": "Brindle Valley council debated chewing gum in shops and on pavements.",
    "c2b": "Chewing gum sales in Brindle Valley shops rose this year.",
    "c2c": "The gum ban story was invented by a satire site about Brindle Valley.",
    "c3a": "The Harlow county fair added new contests this year, including a pie contest.",
    "c3b": "Robotics clubs at Harlow schools prepared for the county fair.",
    "c3c": "Organisers confirmed a student robotics competition at the Harlow fair.",
    "c4a": "The Lake Ardent highway flooded after the storm; photos show deep water.",
    "c4b": "A shark photo spread online after the Lake Ardent flood.",
    "c4c": "Photo experts said the shark picture was invented from an older image.",
    **{f"x{i}": t for i, t in enumerate(["The school board approved a new lunch menu.", "A new bakery opened on Main Street.",
        "The library extended its opening hours.", "Bus fares will stay the same next year.", "The marathon drew a record number of runners.",
        "A storm knocked out power in the north of the county.", "The zoo welcomed two red pandas.", "The museum reopened its dinosaur hall."])}}
POOL = [{"id": i, "title": "", "content": t} for i, t in DOCS.items()]
FAST = replace(PAPER_FFRR, lr=3e-4, warmup=0.0, epochs=3, max_length=64, tau=0.05, max_picks=3)
# the toy departs from the paper's settings so that three steps show the effect: a higher learning rate, episodes of at most
# three picks and a sharper softmax (MiniLM's embeddings are unit-norm, so the paper's tau = 1 makes pi nearly uniform)


class Telling(LM):
    """The LLM double: it leans to 'half'; a document saying 'confirmed' makes it say 'true', one saying 'invented' 'false'.
    So for every toy claim exactly one document (the `c?c` one) reliably raises the gold label's score."""
    kind = "telling"

    def _label_logprobs(self, pairs):
        for i, (p, label) in enumerate(pairs):
            text = p if isinstance(p, str) else p[-1]["content"]
            kn = text.split("KNOWLEDGE:", 1)[1].split("CLAIM:", 1)[0] if "KNOWLEDGE:" in text else ""
            boost = {"true": 3.0 * kn.count("confirmed"), "false": 3.0 * kn.count("invented")}.get(label, 0.0)
            yield i, (0.0 if label == "half" else -1.0) + boost


def verifier(tmp_path, name="c.sqlite"):
    return Verifier(Telling("telling", cache=Cache(tmp_path / name), progress=False), CLAIM_LABELS["rawfc"])


def telling_ranks(policy):
    ranked = [[policy.corpus.id(r) for r, _ in hits] for hits in policy.search([c.claim for c in CLAIMS], len(POOL))]
    return [ids.index(c.event_id + "c") + 1 for c, ids in zip(CLAIMS, ranked)]


def test_the_double_makes_one_document_telling(tmp_path):
    ver = verifier(tmp_path)
    for c in CLAIMS:
        ids = [k for k in DOCS if k.startswith(c.event_id)]
        p = ver.gold(ver.probs([c.claim] * len(ids), [[DOCS[i]] for i in ids]), [c.label] * len(ids))
        assert ids[int(p.argmax())] == c.event_id + "c" and p.max() > 0.8 and np.delete(p, p.argmax()).max() < 0.3


def test_ffrr_training_raises_the_telling_documents_and_a_frozen_policy_stays(tmp_path):
    ver = verifier(tmp_path)
    trained = Policy(POOL, max_length=64, tau=0.05, progress=False)
    before = telling_ranks(trained)
    assert all(r > 1 for r in before), before  # the untrained encoder prefers other documents
    log = FFRRTrainer(trained, ver, CLAIMS, FAST, progress=False).train()
    assert telling_ranks(trained) == [1, 1, 1, 1]
    assert log.r_d.iloc[-1] > log.r_d.iloc[0]  # the episodes find the telling documents sooner

    frozen = Policy(POOL, max_length=64, tau=0.05, progress=False)
    digest = frozen.parameters_digest()
    flog = FFRRTrainer(frozen, ver, CLAIMS, replace(FAST, epochs=2), frozen=True, progress=False).train()
    assert frozen.parameters_digest() == digest and telling_ranks(frozen) == before  # index refreshed at each epoch end, ranking unchanged
    assert flog.loss.isna().all() and (flog.prompts > 0).all()  # it rolled out and rated episodes, and learned nothing


def test_gradient_reaches_the_encoder_not_the_index(tmp_path):
    import torch
    p = Policy(POOL, max_length=64, tau=0.05, progress=False)
    rows = p.candidates([CLAIMS[0].claim], 20)
    before = p.search([CLAIMS[0].claim], 20)[0]
    lp = p.log_probs([CLAIMS[0].claim], rows)[0]
    (-lp[rows[0].index(list(DOCS).index("c1c"))]).backward()
    grads = [q.grad for n, q in p.model.named_parameters() if "pooler" not in n]  # mean pooling leaves BERT's pooler unused
    assert all(g is not None for g in grads) and sum(float(g.abs().sum()) > 0 for g in grads) > 0.9 * len(grads)
    torch.optim.SGD(p.model.parameters(), lr=1.0).step()
    assert p.search([CLAIMS[0].claim], 20)[0] != before  # queries use the new encoder ...
    old_index = p.index.reconstruct_n(0, len(POOL)).copy()
    p.refresh()  # ... and the documents' index embeddings change only when refreshed
    assert not np.allclose(old_index, p.index.reconstruct_n(0, len(POOL)))


def test_resume_after_a_kill_mid_epoch_gives_the_same_weights_without_new_llm_calls(tmp_path, monkeypatch):
    s, claims = replace(FAST, epochs=2, batch_size=1), CLAIMS[:2]  # two steps per epoch
    ref = Policy(POOL, max_length=64, tau=0.05, progress=False)
    FFRRTrainer(ref, verifier(tmp_path, "ref.sqlite"), claims, s, progress=False).train()

    out, ver = tmp_path / "run", verifier(tmp_path, "run.sqlite")
    real_step = FFRRTrainer.step
    done = []

    def dying_step(self, batch, rng):
        if len(done) == 3: raise KeyboardInterrupt("killed")  # during the 2nd step of epoch 2
        done.append(1)
        return real_step(self, batch, rng)

    monkeypatch.setattr(FFRRTrainer, "step", dying_step)
    with pytest.raises(KeyboardInterrupt):
        FFRRTrainer(Policy(POOL, max_length=64, tau=0.05, progress=False), ver, claims, s, out_dir=out, progress=False).train()
    monkeypatch.setattr(FFRRTrainer, "step", real_step)
    assert json.loads((out / "checkpoint" / "state.json").read_text())["epoch"] == 1
    assert len((out / "steps.jsonl").read_text().splitlines()) == 3  # the 3rd step was logged but not checkpointed

    resumed = Policy(POOL, max_length=64, tau=0.05, progress=False)
    log = FFRRTrainer(resumed, ver, claims, s, out_dir=out, progress=False).train()
    assert log.step.tolist() == [0, 1, 2, 3]
    assert log.llm_calls[2] == 0  # the replayed step made the same choices: all its ratings came from the cache
    assert resumed.parameters_digest() == ref.parameters_digest()
    assert telling_ranks(resumed) == telling_ranks(ref)


def test_a_claim_and_document_set_costs_one_llm_call(tmp_path):
    ver = verifier(tmp_path)
    p = Policy(POOL, max_length=64, tau=0.05, progress=False)
    ver.probs([CLAIMS[0].claim], [[DOCS["c1a"], DOCS["c1c"]]])
    calls = ver.llm.calls
    ver.probs([CLAIMS[0].claim] * 3, [[DOCS["c1a"], DOCS["c1c"]]] * 3)
    assert ver.llm.calls == calls
    # the final reward shows a set of documents in an order fixed by the set: two pick orders, one prompt
    a, b = Step("q", [0, 2], 0, "d", reward=0.2), Step("q", [0, 2], 1, "d", reward=0.9)
    assert [s.row for s in ordered_steps([a, b])] == [s.row for s in ordered_steps([b, a])] == [0, 2]
    # the same episodes rolled out again cost nothing
    run_episodes(CLAIMS, p, ver, PAPER_FFRR, np.random.default_rng(1))
    calls = ver.llm.calls
    eps = run_episodes(CLAIMS, p, ver, PAPER_FFRR, np.random.default_rng(1))
    assert ver.llm.calls == calls and all(not math.isnan(e.final) for e in eps)


class Garbled(LM):
    "Writes no question for one claim."
    kind = "garbled"

    def _generate(self, reqs):
        for i, r in enumerate(reqs):
            yield i, "Question: Did inspectors confirm cars cross the bridge?" if "Carrow" in r.prompt[-1]["content"].rsplit("Claim:", 1)[1] else "I cannot say."


def test_unparsed_questions_are_recorded_and_searched_with_the_claim(tmp_path):
    q = decompose(CLAIMS[:2], Garbled("g", progress=False))
    assert q.status.tolist() == ["ok", UNPARSED]
    rows = policy_rows("FFRR (q)", Policy(POOL, max_length=64, tau=0.05, progress=False), CLAIMS[:2], verifier(tmp_path), level="q", questions=q)
    assert rows.questions_status.tolist() == ["ok", UNPARSED]
    assert rows.evidence[1][0].startswith("c2")  # the claim itself was the query


@hsettings(max_examples=60, deadline=None)
@given(st.data())
def test_macro_prf_matches_scikit_learn(data):
    labels = data.draw(st.sampled_from([CLAIM_LABELS["rawfc"], CLAIM_LABELS["liar-raw"]]))
    n = data.draw(st.integers(1, 30))
    gold = data.draw(st.lists(st.sampled_from(labels), min_size=n, max_size=n))
    pred = data.draw(st.lists(st.sampled_from(list(labels) + [UNPARSED]), min_size=n, max_size=n))
    mine = macro_prf(gold, pred, labels)
    ref = precision_recall_fscore_support(gold, pred, labels=list(labels), average="macro", zero_division=0)
    assert np.allclose([mine["precision"], mine["recall"], mine["f1"]], ref[:3], atol=1e-12)


def test_loaders_name_the_file_and_the_field(tmp_path):
    split = tmp_path / "rawfc" / "test"
    split.mkdir(parents=True)
    good = json.loads((DATA / "rawfc_sample" / "test" / "rf_0013.json").read_text())
    (split / "a.json").write_text(json.dumps(good))
    (split / "b.json").write_text(json.dumps({**good, "event_id": "x", "label": "mostly-false"}))
    with pytest.raises(BenchmarkError, match=r"b\.json: field `label`: unknown label 'mostly-false'"):
        load_claims(tmp_path / "rawfc", "rawfc", "test")
    bad_report = {**good, "reports": [{"content": "x", "tokenized": [{"sent": "x", "is_evidence": "yes"}]}]}
    (split / "b.json").write_text(json.dumps(bad_report))
    with pytest.raises(BenchmarkError, match=r"b\.json: field `reports`\[0\]: field `tokenized`\[0\]\.`is_evidence` must be 0 or 1"):
        load_claims(split, "rawfc")
    (tmp_path / "test.json").write_text(json.dumps([good, {k: v for k, v in good.items() if k != "claim"}]))
    with pytest.raises(BenchmarkError, match=r"test\.json\[1\]: missing field `claim`"):
        load_claims(tmp_path, "liar-raw", "test")


def test_fixtures_are_well_formed():
    for root, ds in (("rawfc_sample", "rawfc"), ("liarraw_sample", "liar-raw")):
        claims = [c for s in ("train", "val", "test") for c in load_claims(DATA / root, ds, s)]
        assert 12 <= len(claims) <= 20
        assert all(any(any(r.evidence) for r in c.reports) for c in claims)  # every claim has an evidence sentence
        assert {c.label for c in load_claims(DATA / root, ds, "test")} == set(CLAIM_LABELS[ds])
        pool = report_corpus(claims)
        assert len({d["id"] for d in pool}) == len(pool)
    assert "KNOWLEDGE" in verify_prompt("c", ["d"], CLAIM_LABELS["rawfc"])[0]["content"]
