"""Rater agreement (leaf_nb.agreement, issue 24): the three published layouts and our own load from our fixtures, bad rows
stop with file:line, the label mapping is a parameter every table names, every checker reaches its method through the
method's own functions (LEAF's rater sees Table 1's prompt, byte for byte), the metrics are scikit-learn's, thresholds are
chosen on the development split only, every stage is one batched call through the cache (a rerun after a kill repeats
none), and `rater_eval` (the `leaf-nb rater-eval` command) prints, writes and prices a run; once on the real embedded model."""
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.calibration import calibration_curve
from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score, f1_score

from leaf_nb.agreement import (ALL, DEFAULT_MAPPING, EXCLUDED, METRICS, AgreementSettings, FactcheckGPTStance, LabelMapping,
                               LeafRater, SupportCritic, _features, _from_counts, agreement_metrics, calibration_error,
                               choose_threshold, confusion, development_split, evaluate, intervals, judge, load_aggrefact,
                               load_agreement, load_factcheck_bench, load_healthfc, load_jsonl, rater_eval, reliability, remap,
                               sample_rows, score)
from leaf_nb.cache import Cache
from leaf_nb.data import BenchmarkError
from leaf_nb.llm import LM, LMError
from leaf_nb.prompts import NOT_SUPPORTED, SUPPORTED, UNPARSED
from leaf_nb.retrieve import Hit
from leaf_nb.selfbiorag import PromptCritic

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data" / "agreement"
FILES = {"factcheck-bench": DATA / "factcheck_bench_sample.jsonl", "healthfc": DATA / "healthfc_sample.csv",
         "aggrefact": DATA / "aggrefact_sample.csv", "jsonl": DATA / "claims_sample.jsonl"}


class Scripted(LM):
    """Test double for every checker: it reads no wording, only how long the prompt is, and counts its backend calls
    (one per batch the cache passes on) and the requests in them. `fail_after` raises after that many results (a kill)."""
    kind = "scripted-agreement-test"

    def __init__(self, *a, fail_after=None, **kw):
        super().__init__(*a, **kw)
        self.batches, self.requests, self.fail_after, self.prompts = 0, 0, fail_after, []

    def _tick(self, i):
        self.requests += 1
        if self.fail_after is not None and self.requests > self.fail_after: raise LMError("killed")

    def _generate(self, reqs):
        self.batches += 1
        for i, r in enumerate(reqs):
            self._tick(i)
            self.prompts.append(r.prompt)
            text = r.prompt[-1]["content"]
            if "\nEVIDENCE:\n" in text: yield i, "A" if len(text) % 2 else "C"
            else: yield i, "Reasoning. [Supported]" if len(text) % 3 else "No label here."

    def _label_logprobs(self, pairs):
        self.batches += 1
        for i, (p, label) in enumerate(pairs):
            self._tick(i)
            self.prompts.append((p, label))
            yield i, -0.1 * ((len(p[-1]["content"]) + len(label)) % 17) - 0.05


def all_rows():
    return pd.concat([load_agreement(p, f) for f, p in FILES.items()], ignore_index=True)


# ---------------------------------------------------------------- the layouts
def test_each_layout_loads_into_one_schema():
    fcb, hfc, agg, own = (load_agreement(p, f) for f, p in FILES.items())
    assert list(fcb.columns) == list(hfc.columns) == list(agg.columns) == list(own.columns)
    assert (len(fcb), len(hfc), len(agg), len(own)) == (15, 10, 10, 10)
    assert set(fcb.source_label) == {"completely-support", "partially-support", "refute", "irrelevant"}
    assert fcb.evidence.map(len).eq(1).all() and fcb.question.isna().all() and fcb.id.tolist() == [str(i) for i in range(1, 16)]
    # HealthFC: byte-order mark read, labels 0/1/2 kept as written, a quoted line break moves the next record's line
    assert hfc.source_label.tolist().count("1") == 3 and hfc.id.tolist()[:4] == ["2", "3", "5", "6"]
    assert "en_explanation" in hfc.extra[0] and "de_claim" in hfc.extra[0] and "en_top_sentences" not in hfc.extra[0]
    assert hfc.evidence.map(len).min() >= 2 and all(isinstance(s, str) and s for ev in hfc.evidence for s in ev)
    # LLM-AggreFact: each row's dataset is its source; its contamination identifier kept
    assert sorted(agg.source.unique()) == ["fixture-answers", "fixture-summaries"] and "contamination_identifier" in agg.extra[0]
    # ours: questions where given, the source field
    assert own.question.notna().sum() == 7 and set(own.source) == {"own-fixture"} and own.evidence.map(len).max() == 2


def test_aggrefact_reads_the_same_from_jsonl_and_parquet(tmp_path):
    csv_rows = load_aggrefact(FILES["aggrefact"])
    recs = pd.read_csv(FILES["aggrefact"], dtype={"label": int})
    recs.to_json(tmp_path / "agg.jsonl", orient="records", lines=True)
    recs.to_parquet(tmp_path / "agg.parquet")
    for name in ("agg.jsonl", "agg.parquet"):
        other = load_aggrefact(tmp_path / name)
        assert other[["source", "claim", "evidence", "source_label", "label"]].equals(csv_rows[["source", "claim", "evidence", "source_label", "label"]])


BAD = [("factcheck_bench_unknown_stance.jsonl", "factcheck-bench", ":2: unknown stance 'supports'"),
       ("factcheck_bench_missing_evidence.jsonl", "factcheck-bench", ":3: missing field `evidence`"),
       ("factcheck_bench_truncated.jsonl", "factcheck-bench", ":3: not valid JSON"),
       ("healthfc_unknown_label.csv", "healthfc", ":5: label '3'"),
       ("healthfc_missing_column.csv", "healthfc", ":1: missing column en_top_sentences or en_sentences"),
       ("healthfc_latin1.csv", "healthfc", ":2: not UTF-8"),
       ("aggrefact_bad_label.csv", "aggrefact", ":4: label 'yes'"),
       ("claims_bad_evidence.jsonl", "jsonl", ":2: field `evidence`"),
       ("claims_duplicate_id.jsonl", "jsonl", ":3: duplicate id 'own-01' (first at line 1)")]


@pytest.mark.parametrize("name,fmt,message", BAD)
def test_bad_rows_name_file_and_line(name, fmt, message):
    with pytest.raises(BenchmarkError) as e:
        load_agreement(DATA / "bad" / name, fmt)
    assert f"{name}{message}" in str(e.value), str(e.value)


@pytest.mark.parametrize("fmt", ["factcheck-bench", "jsonl", "aggrefact"])
def test_broken_jsonl_files(tmp_path, fmt):
    good = FILES[fmt].read_text(encoding="utf-8").splitlines()[0] if fmt != "aggrefact" else json.dumps(
        {"dataset": "d", "doc": "Doc.", "claim": "Claim.", "label": 1})
    cases = {"missing.jsonl": (None, "missing.jsonl"), "empty.jsonl": ("", "no rows"), "list.jsonl": ("[1, 2]\n", "list.jsonl:1: expected a JSON object"),
             "cut.jsonl": (good + "\n" + good[:-9] + "\n", "cut.jsonl:2: not valid JSON"),
             "latin.jsonl": (None, "latin.jsonl:2: not UTF-8")}
    for name, (text, message) in cases.items():
        if text is not None: (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "latin.jsonl").write_bytes((good + "\n").encode() + (good.replace("e", "é", 1) + "\n").encode("latin-1"))
    for name, (_, message) in cases.items():
        with pytest.raises((BenchmarkError, FileNotFoundError), match=message):
            load_agreement(tmp_path / name, fmt)


def test_broken_csv_files(tmp_path):
    (tmp_path / "quote.csv").write_text('dataset,doc,claim,label\na,"unterminated,c,1\n')
    (tmp_path / "short.csv").write_text("dataset,doc,claim,label\na,b,c\n")
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "blank.csv").write_text("dataset,doc,claim,label\nsumm,,A claim.,1\n")
    for name, message in [("quote.csv", "quote.csv:2: malformed CSV"), ("short.csv", "short.csv:2: 3 fields"),
                          ("empty.csv", "empty file"), ("blank.csv", "blank.csv:2: field `doc` must be a non-empty string")]:
        with pytest.raises(BenchmarkError, match=message): load_aggrefact(tmp_path / name)
    with pytest.raises(ValueError, match="unknown format 'fever'"): load_agreement(FILES["jsonl"], "fever")


def test_healthfc_annotated_layout_reads_gold_sentences(tmp_path):
    import csv
    head = ["en_claim", "en_sentences", "en_ids", "label"]
    with open(tmp_path / "a.csv", "w", newline="", encoding="utf-8-sig") as f:
        w = csv.writer(f); w.writerow(head)
        w.writerow(["Does it work?", str(["First.", "It works in trials.", "Last."]), "[1]", "0"])
        w.writerow(["Does it?", "[1, 2]", "[0]", "2"])
    with pytest.raises(BenchmarkError, match="a.csv:3: field `en_sentences` must be a list of str"):
        load_healthfc(tmp_path / "a.csv")


# ---------------------------------------------------------------- the label mapping
def test_label_mapping_is_a_parameter_and_the_source_label_is_kept():
    rows = all_rows()
    lenient = LabelMapping(partially_support=SUPPORTED, not_enough_information=EXCLUDED)
    re = remap(rows, lenient)
    assert (re.source_label == rows.source_label).all()
    partial, nei = rows.source_label == "partially-support", (rows.format == "healthfc") & (rows.source_label == "1")
    assert (rows.label[partial | nei] == NOT_SUPPORTED).all() and (re.label[partial] == SUPPORTED).all() and (re.label[nei] == EXCLUDED).all()
    assert (re.label[~(partial | nei)] == rows.label[~(partial | nei)]).all()
    assert load_factcheck_bench(FILES["factcheck-bench"], lenient).label.tolist() == re.label[rows.format == "factcheck-bench"].tolist()
    with pytest.raises(ValueError, match="not_enough_information"): LabelMapping(not_enough_information="maybe")
    result = evaluate(rows, [LeafRater(Scripted("s", progress=False), "logprob")], AgreementSettings(n_boot=50), lenient)
    assert result.mapping == lenient.name and (result.table().labels == lenient.name).all()
    j = result.judgments
    assert set(result.metrics.query("source == @ALL and metric == 'balanced_accuracy'").n) == {int(((j.split == "test") & (j.label != EXCLUDED)).sum())}
    assert (j.label == EXCLUDED).sum() == nei.sum()  # excluded rows are still judged (so another mapping costs no call), never scored


# ---------------------------------------------------------------- the checkers reach their methods' own functions
def test_leaf_rater_sends_table1s_fact_check_prompt(tmp_path):
    "The same (statement, knowledge, context) through fact_check's own rating step and through LeafRater: identical requests."
    from leaf_nb.factcheck import FactCheckSettings, _rate
    rows = pd.concat([load_jsonl(FILES["jsonl"]), load_healthfc(FILES["healthfc"])], ignore_index=True)
    hits = [[Hit(str(j), 0.0, "", e) for j, e in enumerate(ev)] for ev in rows.evidence]
    ctx = [q if isinstance(q, str) else None for q in rows.question]
    for verdict in ("cot", "logprob"):
        a, b = Scripted("a", progress=False), Scripted("b", progress=False)
        _rate(list(rows.claim), hits, ctx, a, FactCheckSettings(verdict=verdict))
        LeafRater(b, verdict)(rows)
        assert a.prompts == b.prompts and len(a.prompts) == len(rows) * (1 if verdict == "cot" else 2)
    # and through one cache, Table 1's rating calls answer LeafRater's: not one new call
    cache = Cache(tmp_path / "c.sqlite")
    first = Scripted("same", cache=cache, progress=False)
    _rate(list(rows.claim), hits, ctx, first, FactCheckSettings(verdict="cot"))
    again = Scripted("same", cache=cache, progress=False)
    LeafRater(again, "cot")(rows)
    assert (first.calls, again.calls) == (len(rows), 0)


def test_stance_and_critic_use_factcheckgpt_and_selfbiorag_functions():
    from leaf_nb.factcheckgpt import STANCE_PROMPT
    from leaf_nb.selfbiorag import SUPPORT_CRITIC_PROMPT, SUPPORT_TOKENS
    rows = load_healthfc(FILES["healthfc"])
    lm = Scripted("s", progress=False)
    out = FactcheckGPTStance(lm)(rows)
    assert len(lm.prompts) == rows.evidence.map(len).sum()  # one stance per evidence piece
    assert all(p[-1]["content"].startswith(STANCE_PROMPT.split("{")[0]) for p in lm.prompts)
    assert out.verdict.isin([SUPPORTED, NOT_SUPPORTED]).all() and out.p_supported.isna().all()
    assert [v == SUPPORTED for v in out.verdict] == ["support" in s for s in out.stances]
    lm = Scripted("s2", progress=False)
    out = SupportCritic(PromptCritic(lm))(rows)
    assert {label for _, label in lm.prompts} == set(SUPPORT_TOKENS) and len(lm.prompts) == 3 * len(rows)
    assert all(p[-1]["content"].startswith(SUPPORT_CRITIC_PROMPT.split("{")[0]) for p, _ in lm.prompts)
    assert out.p_supported.between(0, 1).all() and ((out.p_supported >= 0.5) == (out.verdict == SUPPORTED)).all()


# ---------------------------------------------------------------- metrics
def test_metrics_are_scikit_learns_with_unparsed_counted_wrong():
    rng = np.random.default_rng(1)
    for _ in range(120):
        n = int(rng.integers(1, 15))
        g, v = rng.choice([SUPPORTED, NOT_SUPPORTED], n), rng.choice([SUPPORTED, NOT_SUPPORTED, UNPARSED], n)
        m = agreement_metrics(g, v)
        wrong = np.where(g == SUPPORTED, NOT_SUPPORTED, SUPPORTED)
        b = np.where(v == UNPARSED, wrong, v)
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert math.isclose(m["balanced_accuracy"], balanced_accuracy_score(g, b))
            k = cohen_kappa_score(g, b, labels=[SUPPORTED, NOT_SUPPORTED])
            assert (math.isnan(k) and math.isnan(m["cohen_kappa"])) or math.isclose(m["cohen_kappa"], k)
            assert math.isclose(m["macro_f1"], f1_score(g, b, labels=[SUPPORTED, NOT_SUPPORTED], average="macro", zero_division=0))
        assert m["unparsed_share"] == np.mean(v == UNPARSED) and m["n"] == n
        fast = _from_counts(_features(g, v).sum(0))  # what the bootstrap computes, at the identity weights
        for k_ in METRICS:
            assert (math.isnan(m[k_]) and math.isnan(fast[k_][0])) or math.isclose(m[k_], fast[k_][0], abs_tol=1e-12)
    # an unparsed verdict is never right, in either class
    assert agreement_metrics([SUPPORTED, NOT_SUPPORTED], [UNPARSED, UNPARSED])["accuracy"] == 0.0
    assert confusion([SUPPORTED, NOT_SUPPORTED], [UNPARSED, SUPPORTED]).values.tolist() == [[0, 0, 1], [1, 0, 0]]


def test_intervals_are_seeded_and_hold_the_estimate():
    rng = np.random.default_rng(2)
    g, v = rng.choice([SUPPORTED, NOT_SUPPORTED], 60), rng.choice([SUPPORTED, NOT_SUPPORTED, UNPARSED], 60, p=[0.4, 0.4, 0.2])
    a, b, c = intervals(g, v, seed=1), intervals(g, v, seed=1), intervals(g, v, seed=2)
    assert a == b and a != c
    point = agreement_metrics(g, v)
    assert all(a[m][0] <= point[m] <= a[m][1] for m in METRICS)
    assert all(math.isnan(x) for x in intervals(g[:1], v[:1])["macro_f1"])


def test_reliability_bins_and_ece_match_scikit_learn():
    rng = np.random.default_rng(3)
    p = rng.random(80)
    g = np.where(rng.random(80) < p, SUPPORTED, NOT_SUPPORTED)
    rel = reliability(g, p, 10)
    true, pred = calibration_curve(g == SUPPORTED, p, n_bins=10, strategy="uniform")
    assert np.allclose(rel.observed, true) and np.allclose(rel.mean_p, pred) and rel.n.sum() == 80
    ece, lo, hi, n = calibration_error(g, p, 10)
    assert math.isclose(ece, (rel.n * (rel.observed - rel.mean_p).abs()).sum() / 80) and lo <= ece <= hi and n == 80
    assert calibration_error(g, np.where(np.arange(80) < 5, np.nan, p))[3] == 75  # rows without a probability are left out


# ---------------------------------------------------------------- the split and the threshold
def test_threshold_is_chosen_on_the_development_split_only():
    rows = all_rows()
    lm = Scripted("s", progress=False)
    j = judge(rows, [LeafRater(lm, "logprob"), LeafRater(lm, "cot")])
    r = score(j, AgreementSettings(n_boot=50))
    test = (r.judgments.split == "test").to_numpy()
    moved = j.copy()
    moved.loc[test & moved.probabilistic.to_numpy(), "p_supported"] = 0.999  # what the test rows say cannot move the threshold
    assert score(moved, AgreementSettings(n_boot=50)).thresholds.threshold[0] == r.thresholds.threshold[0]
    dev = (r.judgments.split == "development").to_numpy() & r.judgments.probabilistic.to_numpy()
    moved = j.copy()
    moved.loc[dev, "p_supported"] = np.where(moved.label[dev] == SUPPORTED, 0.95, 0.85)
    assert score(moved, AgreementSettings(n_boot=50)).thresholds.threshold[0] == pytest.approx(0.9)  # ... while the development rows do
    n_test = int((r.judgments.query("checker == 'LEAF rater (cot)'").split == "test").sum())
    assert set(r.metrics.query("source == @ALL").n) - {0} <= {n_test}
    # the split depends on the rows and the seed, not on the mapping or the checker
    assert (development_split(rows) == development_split(remap(rows, LabelMapping(partially_support=SUPPORTED)))).all()
    assert (development_split(rows, seed=1) != development_split(rows)).any()
    assert choose_threshold([0.2, 0.4, 0.6, 0.9], [NOT_SUPPORTED, NOT_SUPPORTED, SUPPORTED, SUPPORTED])[0] == 0.5
    assert choose_threshold([0.8, 0.9], [SUPPORTED, SUPPORTED]) == (0.5, "default 0.5: the development split holds one class only")


# ---------------------------------------------------------------- batched, cached, resumable
def test_one_batched_call_per_stage_and_a_rerun_after_a_kill_repeats_none(tmp_path):
    rows = all_rows()
    cache = Cache(tmp_path / "c.sqlite")
    lm = Scripted("s", cache=cache, progress=False)
    checkers = [LeafRater(lm, "cot"), LeafRater(lm, "logprob"), FactcheckGPTStance(lm), SupportCritic(PromptCritic(lm))]
    first = evaluate(rows, checkers, AgreementSettings(n_boot=50))
    assert lm.batches == 4  # one backend call per checker stage, however many rows
    n_calls = lm.calls
    assert n_calls == len(rows) * (1 + 2 + 3) + rows.evidence.map(len).sum()
    again = Scripted("s", cache=cache, progress=False)
    second = evaluate(rows, [LeafRater(again, "cot"), LeafRater(again, "logprob"), FactcheckGPTStance(again), SupportCritic(PromptCritic(again))],
                      AgreementSettings(n_boot=50))
    assert again.calls == 0 and second.metrics.equals(first.metrics)
    # killed after 20 results of the first stage: the rerun makes only the calls that had not finished
    cache2 = Cache(tmp_path / "k.sqlite")
    dying = Scripted("k", cache=cache2, progress=False, fail_after=20)
    with pytest.raises(LMError, match="killed"): evaluate(rows, [LeafRater(dying, "cot")])
    resumed = Scripted("k", cache=cache2, progress=False)
    evaluate(rows, [LeafRater(resumed, "cot")])
    assert (dying.calls, resumed.calls) == (20, len(rows) - 20)


# ---------------------------------------------------------------- rater_eval: the CLI command
def test_rater_eval_prints_metrics_and_writes_rows_and_provenance(tmp_path):
    lm = Scripted("scripted-rater", cache=Cache(tmp_path / "c.sqlite"), progress=False)
    text = rater_eval(FILES["factcheck-bench"], "factcheck-bench", rater=lm, verdict="logprob", out=tmp_path / "out")
    lines = text.splitlines()
    assert lines[0].startswith("factcheck_bench_sample.jsonl: 15 rows (factcheck-bench; labels: " + DEFAULT_MAPPING.name)
    for name in ("balanced accuracy", "Cohen's κ", "macro F1", "share unparsed", "expected calibration error", "threshold"):
        assert any(l.startswith(name) and "[" in l for l in lines) or name == "threshold", (name, text)
    assert "chosen on" in text and "wrote rater_eval_rows.jsonl, rater_eval_metrics.csv, rater_eval.provenance.json" in text
    saved = pd.read_json(tmp_path / "out" / "rater_eval_rows.jsonl", lines=True)
    assert len(saved) == 15 and {"claim", "evidence", "source_label", "label", "verdict", "p_supported", "split", "decision"} <= set(saved.columns)
    prov = json.loads((tmp_path / "out" / "rater_eval.provenance.json").read_text())
    assert prov["models"]["LEAF rater (logprob)"]["name"] == "scripted-rater" and prov["parameters"]["format"] == "factcheck-bench"
    assert prov["parameters"]["labels"] == DEFAULT_MAPPING.name and "rater_eval_rows.jsonl" in prov["outputs"]
    got = json.loads(rater_eval(FILES["aggrefact"], "aggrefact", rater=lm, verdict="cot", as_json=True, n=8, seed=3))
    assert got["rows"] == 8 and set(got["metrics"]) == set(METRICS) and got["threshold"] is None
    assert set(got["per_source"]) <= {"fixture-answers", "fixture-summaries"} and got["outputs"] == []


def test_rater_eval_dry_run_calls_no_model(tmp_path):
    lm = Scripted("dry", cache=Cache(tmp_path / "c.sqlite"), progress=False)
    text = rater_eval(FILES["jsonl"], "jsonl", rater=lm, verdict="cot", dry_run=True, max_tokens=300, out=tmp_path / "never")
    assert lm.batches == 0 and "10 model calls to make, 0 already cached" in text and "LEAF verdicts" in text
    assert not (tmp_path / "never").exists()
    costs = json.loads(rater_eval(FILES["jsonl"], "jsonl", rater=lm, verdict="cot", dry_run=True, as_json=True, max_tokens=300))["costs"]
    assert costs[0]["calls"] == 10 and costs[0]["completion_tokens"] == 3000


def test_rater_eval_on_the_embedded_model(tmp_path):
    "The real embedded model end to end: four rows, label-probability verdicts (one forward pass each)."
    text = rater_eval(FILES["jsonl"], "jsonl", rater="embedded", verdict="logprob", n=4, cache=tmp_path / "c.sqlite", out=tmp_path / "o")
    assert "rater SmolLM2-135M-Instruct-Q4_1, logprob verdicts" in text and "balanced accuracy" in text
    saved = pd.read_json(tmp_path / "o" / "rater_eval_rows.jsonl", lines=True)
    assert len(saved) == 4 and saved.p_supported.between(0, 1).all()
    assert json.loads((tmp_path / "o" / "rater_eval.provenance.json").read_text())["models"]["LEAF rater (logprob)"]["calls"] == 8


def test_paper_profile_resolves_the_real_sets():
    from leaf_nb.runs import read_profile, run_parameters
    nb = REPO / "nbs" / "papers" / "leaf" / "rater_agreement.ipynb"
    params = run_parameters(nb, profile="h100", files=[nb.with_name("rater_agreement.paper.yaml")])
    shared = read_profile(REPO / "profiles" / "h100.yaml")
    assert params["factcheck_bench"] == shared["data"]["factcheck_bench"] and params["healthfc"] == shared["data"]["healthfc"]
    assert params["rater"] == shared["models"]["qwen2_72b"]["spec"] + "?batch_size=32" and params["fcgpt_llm"] == shared["models"]["gpt35"]["spec"]
    assert params["replay"] == "" and params["profile"] == "h100"
