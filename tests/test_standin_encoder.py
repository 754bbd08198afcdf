"""The rehearsal's stand-in for FFRR's encoder (`benchmarks/rehearsal_data.build_standin_encoder`, `profiles/rehearsal.yaml`'s
`roberta_base`): it builds offline in a fresh folder, the same seed gives the same weights, it loads the way FFRR's `Policy`
loads an encoder folder (`load_encoder`), embeds documents with MiniLM's tokenizer, and one REINFORCE step of
`FFRRTrainer` moves its weights."""
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import rehearsal_data  # noqa: E402
from leaf_nb.cache import Cache  # noqa: E402
from leaf_nb.data import CLAIM_LABELS, Claim  # noqa: E402
from leaf_nb.ffrr import PAPER_FFRR, FFRRTrainer, Policy, Verifier  # noqa: E402
from leaf_nb.llm import LM  # noqa: E402
from leaf_nb.retrieve import embedded_encoder, load_encoder  # noqa: E402

DOCS = ["The Carrow Bridge reopened to traffic in May after repairs, the city said.",
        "Inspectors confirmed that cars cross the Carrow Bridge again.",
        "Chewing gum sales in Brindle Valley shops rose this year.",
        "The gum ban story was invented by a satire site about Brindle Valley.",
        "A new bakery opened on Main Street.", "The zoo welcomed two red pandas."]
POOL = [{"id": f"d{i}", "title": "", "content": t} for i, t in enumerate(DOCS)]
CLAIMS = [Claim("rawfc", "c1", "The Carrow Bridge reopened to traffic in May.", "true"),
          Claim("rawfc", "c2", "Brindle Valley banned chewing gum in all shops.", "false")]


class Leaning(LM):
    "An LLM double whose label scores depend on the documents (so rewards differ between picks): 'confirmed' raises true."
    kind = "leaning"

    def _label_logprobs(self, pairs):
        for i, (p, label) in enumerate(pairs):
            text = p if isinstance(p, str) else p[-1]["content"]
            yield i, {"true": 2.0 * text.count("confirmed"), "false": 2.0 * text.count("invented")}.get(label, 0.0) - 1.0


def test_the_standin_encoder_builds_loads_embeds_and_trains(tmp_path):
    from transformers import AutoTokenizer
    folder = rehearsal_data.build_standin_encoder(tmp_path / "models")
    assert folder.parent == tmp_path / "models" and (folder / "modules.json").exists()
    assert rehearsal_data.build_standin_encoder(tmp_path / "models") == folder  # built once, then reused
    again = rehearsal_data.build_standin_encoder(tmp_path / "other")  # the same seed: the same weights
    assert (again / "model.safetensors").read_bytes() == (folder / "model.safetensors").read_bytes()

    model = load_encoder(folder)  # FFRR's Policy loads h100.yaml's RoBERTa folder this way
    kinds = [type(m).__name__ for m in model]
    assert kinds == ["Transformer", "Pooling"], kinds  # no Normalize: FFRR's h(q)ᵀh(d) is the raw dot product (§5)
    assert model[1].get_config_dict()["pooling_mode"] == "mean"
    cfg = model[0].auto_model.config
    assert {k: getattr(cfg, k) for k in rehearsal_data.STANDIN_ENCODER} == rehearsal_data.STANDIN_ENCODER
    mini = AutoTokenizer.from_pretrained(str(embedded_encoder()), local_files_only=True)  # the embedded MiniLM's
    assert model.tokenizer(DOCS)["input_ids"] == mini(DOCS)["input_ids"]
    assert str(embedded_encoder()) not in str(folder)

    policy = Policy(POOL, str(folder), max_length=64, progress=False)
    e = policy.encode(DOCS).numpy()
    assert e.shape == (len(DOCS), cfg.hidden_size) and np.isfinite(e).all()
    assert np.linalg.matrix_rank(e) == len(DOCS)  # distinct texts, distinct embeddings

    lp = policy.log_probs([CLAIMS[0].claim], [[0, 1, 2, 3]])[0]
    lp[1].backward()  # log π_θ(d|q): its gradient reaches the embeddings and every layer
    grads = {n: p.grad for n, p in policy.model.named_parameters() if "pooler" not in n}  # the pooler is unused, as RoBERTa's is
    assert all(g is not None and float(g.abs().sum()) > 0 for g in grads.values()), [n for n, g in grads.items() if g is None]
    policy.model.zero_grad()

    before = policy.parameters_digest()
    ver = Verifier(Leaning("leaning", cache=Cache(tmp_path / "c.sqlite"), progress=False), CLAIM_LABELS["rawfc"])
    s = replace(PAPER_FFRR, lr=1e-2, warmup=0.0, epochs=1, max_steps=1, batch_size=2, candidates=4, k=2, max_picks=2,
                max_length=64, shots=0)
    log = FFRRTrainer(policy, ver, CLAIMS, s, progress=False).train()
    assert len(log) == 1 and np.isfinite(log.loss).all() and policy.parameters_digest() != before  # REINFORCE moved it



def test_an_ffrr_dry_run_gets_a_work_dir_of_its_own(tmp_path):
    "The labelling dry run after an FFRR rehearsal must not find the real run's finished rows (it would label only the decompositions)."
    import paper_scale
    papers = REPO / "nbs" / "papers"
    fresh = tmp_path / "dry.work"
    fresh.mkdir(); (fresh / "rows.jsonl").write_text("{}\n")  # left by an earlier dry run: emptied
    over = paper_scale.dry_overrides(papers / "ffrr" / "table2_verification.ipynb", {"max_steps": 2, "work_dir": "/real"}, fresh)
    assert over == {"max_steps": 2, "work_dir": str(fresh)} and not fresh.exists()
    leaf = {"n_questions": 3}
    assert paper_scale.dry_overrides(papers / "leaf" / "table1_filtered_accuracy.ipynb", leaf, fresh) == leaf
