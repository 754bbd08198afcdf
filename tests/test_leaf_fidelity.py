"""Fidelity to the LEAF paper: each test pins something the paper states (or, where it is silent, the choice we
documented as ours) in the fact-checker, FC-RAG, the MedRAG baseline, Factcheck-GPT and the Table 1/2 notebooks.
Every test here failed on the code before these were made faithful. Scripted models read the prompts' sections,
request parameters or call order, never the prompts' wording."""
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from leaf_nb.data import Question
from leaf_nb.factcheck import PAPER_LEAF, FactCheckSettings, fact_check, leaf_score, question_context
from leaf_nb.fcrag import AnswerSettings, fc_rag, fcrag_outcomes, medrag_answers
from leaf_nb.llm import LM
from leaf_nb.prompts import (ANSWER_PROMPT, FACT_CHECK_PROMPT, FCRAG_PROMPT, NOT_SUPPORTED, QUERY_PROMPT, SUPPORTED,
                             UNPARSED, answer_prompt, fcrag_prompt, query_prompt)
from leaf_nb.retrieve import BM25

ROOT = Path(__file__).resolve().parents[1]
LEAF_NBS = ROOT / "nbs" / "papers" / "leaf"
ONE_SEARCH = FactCheckSettings(n_searches=1, query_max_tokens=17, rater_max_tokens=23)
Q = Question("medqa", "q1", "Which drug reverses opioid overdose?", {"A": "Naloxone", "B": "Flumazenil"}, "A")


@pytest.fixture(scope="module")
def bm25():
    return BM25(ROOT / "data" / "medcorpus.jsonl", progress=False)


def field(prompt: str, name: str) -> str:
    "One section of a prompt: the text after `NAME:` up to the next blank line."
    return prompt.split(f"{name}:\n", 1)[1].split("\n\n", 1)[0]


def text(req) -> str:
    return req.prompt[-1]["content"]


class Writer(LM):
    "Query writer: searches the STATEMENT's own words."
    kind = "fidelity-writer"

    def _generate(self, reqs):
        for i, r in enumerate(reqs):
            yield i, "```\n" + field(text(r), "STATEMENT") + "\n```"


class Rater(LM):
    "Rater: supports a STATEMENT that contains `good`."
    kind = "fidelity-rater"

    def __init__(self, good: str, **kw):
        super().__init__(f"rater-{good}", progress=False, **kw)
        self.good = good

    def _generate(self, reqs):
        for i, r in enumerate(reqs):
            yield i, "Reasoning.\n[Supported]" if self.good in field(text(r), "STATEMENT") else "Reasoning.\n[Not Supported]"


class Answerer(LM):
    "Answers B without KNOWLEDGE; its n-th answer with KNOWLEDGE for a question says 'attempt n' and picks A."
    kind = "fidelity-answerer"

    def __init__(self, **kw):
        super().__init__("answerer", progress=False, **kw)
        self.seen, self.prompts = {}, []

    def _generate(self, reqs):
        for i, r in enumerate(reqs):
            t = text(r)
            self.prompts.append(t)
            if "KNOWLEDGE:" not in t:
                yield i, "Flumazenil reverses opioids, so the answer is B."
                continue
            q = field(t, "QUESTION")
            self.seen[q] = self.seen.get(q, 0) + 1
            yield i, f"In attempt {self.seen[q]} naloxone reverses the opioid overdose, so the answer is A."


# ---- Table 6, "Fact-check with context" -------------------------------------------------------------------

def test_fact_check_criterion_is_support_by_the_context():
    steps = {int(m[1]): m[2] for m in re.finditer(r"^(\d)\. (.*)$", FACT_CHECK_PROMPT, re.M)}
    assert "whether the CONTEXT supports the STATEMENT" in steps[2]  # the CONTEXT is what supports
    assert "sound action or a sound piece of reasoning" in steps[2]  # "a proper action or reasoning given the CONTEXT"
    assert "KNOWLEDGE to help you decide where you need it" in steps[2]  # KNOWLEDGE "if necessary"
    assert "KNOWLEDGE backs up" not in FACT_CHECK_PROMPT
    assert "step by step" in steps[3] and "evidence that supports it" in steps[4]
    assert "restate the STATEMENT" in steps[5]  # restated before the final answer
    assert "[Supported]" in steps[6] and "[Not Supported]" in steps[6] and "square brackets" in steps[6]
    assert FACT_CHECK_PROMPT.index("restate the STATEMENT") < FACT_CHECK_PROMPT.index("KNOWLEDGE:\n")  # instructions first


# ---- Table 6, "Query generation with context", and SAFE's several searches ---------------------------------

def test_query_prompt_shows_knowledge_and_asks_for_new_information():
    assert re.findall(r"\{(\w+)\}", QUERY_PROMPT) == ["knowledge", "context", "statement"]
    assert "ONE search query" in QUERY_PROMPT and "new information, not already in the KNOWLEDGE" in QUERY_PROMPT
    p = query_prompt("Naloxone reverses opioids.", "Which drug?", ["Naloxone is an opioid antagonist."])
    assert "Naloxone is an opioid antagonist." in field(p, "KNOWLEDGE")


class Explorer(LM):
    "Query writer whose n-th query is the n-th topic, n read from how many documents its KNOWLEDGE holds."
    kind = "fidelity-explorer"
    topics = ["naloxone opioid antagonist", "warfarin vitamin K reversal", "heparin protamine reversal"]

    def __init__(self, **kw):
        super().__init__("explorer", progress=False, **kw)
        self.prompts = []

    def _generate(self, reqs):
        for i, r in enumerate(reqs):
            self.prompts.append(text(r))
            n = field(text(r), "KNOWLEDGE").count("<document index=")
            yield i, f"```\n{self.topics[min(n // 3, 2)]}\n```"


class SpyRater(Rater):
    kind = "fidelity-spy-rater"

    def _generate(self, reqs):
        self.prompts = [text(r) for r in reqs]
        yield from super()._generate(reqs)


def test_several_searches_accumulate_knowledge(bm25):
    writer, rater = Explorer(), SpyRater("never")
    res = fact_check(["Naloxone reverses opioid toxicity."], [question_context(Q.question, Q.options)], llm=writer,
                     retriever=bm25, rater=rater, settings=FactCheckSettings(n_searches=3))
    row = res.sentences.iloc[0]
    assert row.n_searches == 3 and list(row.queries) == Explorer.topics
    assert list(row.evidence_search) == [1, 1, 1, 2, 2, 2, 3, 3, 3]  # k = 3 per search, 9 in all
    first_ids = row.evidence_ids[:3]
    second_prompt_knowledge = field(writer.prompts[1], "KNOWLEDGE")
    assert second_prompt_knowledge.count("<document index=") == 3  # search 2 is written with search 1's documents
    assert field(writer.prompts[2], "KNOWLEDGE").count("<document index=") == 6
    assert field(rater.prompts[0], "KNOWLEDGE").count("<document index=") == 9  # the rater sees the union
    assert len(set(row.evidence_ids)) == 9 and len(first_ids) == 3


def test_paper_settings_of_the_checker():
    assert (PAPER_LEAF.k, PAPER_LEAF.n_searches, PAPER_LEAF.use_context, PAPER_LEAF.verdict) == (3, 5, True, "cot")
    assert leaf_score([SUPPORTED, NOT_SUPPORTED, SUPPORTED, SUPPORTED]) == 0.75  # supported / all sentences


# ---- answer prompts: "a detailed reasoning", plain = FC-RAG without KNOWLEDGE ----------------------------------

def test_answer_prompts_ask_for_detailed_reasoning():
    for p in (FCRAG_PROMPT, ANSWER_PROMPT):
        assert "detailed" in p and "brief" not in p.lower()
    rp, ap = fcrag_prompt(Q.question, Q.options, ["doc"]), answer_prompt(Q.question, Q.options)
    strip = lambda p: p.split("\n\n")[0]  # the instructions paragraph
    assert strip(ap) == re.sub(r" You may draw on the documents.*?ignore them\.", "", strip(rp))
    assert rp.rstrip().endswith("ANSWER:") and ap.rstrip().endswith("ANSWER:")


class Both(Rater):
    "One model for queries and verdicts, told apart by the request's max_tokens (ONE_SEARCH's two limits)."
    kind = "fidelity-both"

    def _generate(self, reqs):
        for i, r in enumerate(reqs):
            if r.max_tokens == ONE_SEARCH.query_max_tokens:
                yield i, "```\n" + field(text(r), "STATEMENT") + "\n```"
            else:
                yield i, next(super()._generate([r]))[1]


# ---- FC-RAG loops until the answer passes, up to a cap ------------------------------------------------------------

def test_fcrag_loops_until_the_answer_passes(bm25):
    rows = fc_rag([Q], Answerer(), bm25, rater=Both("attempt 3"), check=ONE_SEARCH)
    assert rows["round"].tolist() == [0, 1, 2, 3]  # three re-answer rounds with the default cap
    assert rows.passed.tolist() == [False, False, False, True] and rows.final.tolist()[-1]
    out = fcrag_outcomes(rows).iloc[0]
    assert (out.rounds, bool(out.passed), out.stop) == (3, True, "passed")


def test_fcrag_stops_at_the_cap(bm25):
    rows = fc_rag([Q], Answerer(), bm25, rater=Rater("never"), writer=Writer("w", progress=False),
                  settings=AnswerSettings(max_rounds=4), check=ONE_SEARCH)
    assert rows["round"].tolist() == [0, 1, 2, 3, 4] and set(rows.stop) == {"cap"} and not rows.passed.any()


def test_fcrag_knowledge_is_the_unsupported_sentences_documents(bm25):
    answerer = Answerer()
    rows = fc_rag([Q], answerer, bm25, rater=Rater("attempt 1"), writer=Writer("w", progress=False), check=ONE_SEARCH)
    knowledge = field(answerer.prompts[1], "KNOWLEDGE")
    assert rows.knowledge_ids[1] and all(f'<document index="{n}">' in knowledge for n in range(1, len(rows.knowledge_ids[1]) + 1))


def test_fcrag_rater_writes_the_queries(bm25):
    # SAFE has one model (the 'rater') write the queries and rate; LEAF replaced that model with Qwen2-72B
    answerer = Answerer()
    fc_rag([Q], answerer, bm25, rater=Both("attempt 1"), check=ONE_SEARCH)
    assert not any("STATEMENT:" in p for p in answerer.prompts)


# ---- the MedRAG baseline is MedRAG's setting --------------------------------------------------------------------

class SpyBM25(BM25):
    def search(self, queries, k):
        self.asked, self.k = list(queries), k
        return super().search(queries, k)


class JSONAnswerer(LM):
    kind = "fidelity-json"

    def _generate(self, reqs):
        for i, r in enumerate(reqs):
            self.last = r.prompt
            yield i, json.dumps({"step_by_step_thinking": "Naloxone blocks opioid receptors.", "answer_choice": "A"})


def test_medrag_baseline_follows_medrag():
    spy = SpyBM25(ROOT / "data" / "medcorpus.jsonl", progress=False)
    lm = JSONAnswerer("json", progress=False)
    rows = medrag_answers([Q], lm, spy)
    assert AnswerSettings().k == 32 and spy.k == 32  # MedRAG's default number of snippets
    assert spy.asked == [Q.question]  # the question alone is the query
    system, user = lm.last
    assert system["role"] == "system" and "step by step" in system["content"] and '"answer_choice"' in system["content"]
    assert rows.option.tolist() == ["A"] and len(rows.evidence_ids[0]) == 32


class ProseAnswerer(LM):
    kind = "fidelity-prose"

    def _generate(self, reqs):
        for i, _ in enumerate(reqs):
            yield i, "Naloxone. Answer: A"


def test_medrag_reply_that_is_not_json_is_unparsed(bm25):
    rows = medrag_answers([Q], ProseAnswerer("p", progress=False), bm25, AnswerSettings(k=3))
    assert rows.option.tolist() == [UNPARSED] and rows.correct.tolist() == [0.0]


# ---- Factcheck-GPT, the baseline of Tables 1 and 3 --------------------------------------------------------------

class FCGPT(LM):
    "Every Factcheck-GPT stage, told apart by the prompt's sections; counts its batched calls."
    kind = "fidelity-fcgpt"

    def __init__(self, **kw):
        super().__init__("fcgpt", progress=False, **kw)
        self.gen_calls = 0

    def reply(self, t):
        if "\nTEXT:\n" in t:
            return json.dumps([s.strip() + "." for s in field(t, "TEXT").split(".") if s.strip()])
        if "\nCLAIMS:\n" in t:
            return json.dumps(["No" if c.startswith("I ") else "Yes" for c in json.loads(field(t, "CLAIMS"))])
        if "\nEVIDENCE:\n" in t:
            claim = t.rsplit("CLAIM:\n", 1)[1].strip()
            return "A" if "naloxone" in claim.lower() and "sepsis" not in claim.lower() else "B"
        return "Search: " + t.rsplit("CLAIM:", 1)[1].strip()

    def _generate(self, reqs):
        self.gen_calls += 1
        for i, r in enumerate(reqs):
            yield i, self.reply(text(r))


def test_factcheckgpt_pipeline_and_checker(bm25):
    from leaf_nb.factcheckgpt import NOT_CHECKWORTHY, FactcheckGPTChecker, factcheckgpt
    from leaf_nb.selftrain import check_samples
    lm = FCGPT()
    answers = ["Naloxone reverses opioid toxicity. I think it is the best choice. Naloxone cures sepsis.",
               "Naloxone is an opioid antagonist. I would pick it."]
    res = factcheckgpt(answers, ["Which drug reverses an opioid overdose?"] * 2, llm=lm, retriever=bm25)
    assert lm.gen_calls == 4  # claims, check-worthiness, search questions, stances: one batched call each
    assert res.sentences.verdict.tolist() == [SUPPORTED, NOT_CHECKWORTHY, NOT_SUPPORTED, SUPPORTED, NOT_CHECKWORTHY]
    assert res.answers.passed.tolist() == [False, True]  # passes when every check-worthy claim is supported
    assert all(len(e) == 5 for e in res.sentences.evidence_ids[res.sentences.checkworthy])  # 5 evidence pieces per claim
    for col in ("answer", "sentence", "text", "query", "query_status", "evidence_ids", "evidence_titles", "evidence_texts",
                "reasoning", "verdict", "p_supported"):
        assert col in res.sentences
    samples = pd.DataFrame({"dataset": "medqa", "qid": ["q1", "q1"], "sample": [0, 1], "answer": answers,
                            "context": ["Which drug reverses an opioid overdose?"] * 2})
    rows, _ = check_samples(samples, FactcheckGPTChecker(FCGPT(), bm25))
    assert rows.factcheckgpt_passed.tolist() == [False, True] and rows.factcheckgpt_score.tolist() == [0.5, 1.0]


# ---- the paper notebooks: the paper's numbers beside ours, and every profile value explained -------------------

def _notebook_source(name: str) -> str:
    cells = json.loads((LEAF_NBS / name).read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells)


@pytest.mark.parametrize("name, numbers", [
    ("table1_filtered_accuracy.ipynb", ["73.53", "77.35", "86.52", "74.21", "74.60", "86.01", "Factcheck-GPT"]),
    ("table2_fcrag.ipynb", ["68.58", "77.52", "75.66", "79.71", "87.86"]),
])
def test_table_notebooks_show_the_papers_numbers(name, numbers):
    src = _notebook_source(name)
    assert "beside_paper(" in src
    for n in numbers:
        assert n in src, n


def test_table_notebooks_run_the_baselines():
    t1, t2 = _notebook_source("table1_filtered_accuracy.ipynb"), _notebook_source("table2_fcrag.ipynb")
    assert "factcheckgpt(" in t1
    assert "fcrag_outcomes(" in t2 and "medrag_answers(" in t2


@pytest.mark.parametrize("name", ["table1_filtered_accuracy.paper.yaml", "table2_fcrag.paper.yaml"])
def test_paper_profiles_explain_every_value(name):
    lines = [l for l in (LEAF_NBS / name).read_text().splitlines() if l.strip() and not l.lstrip().startswith("#")]
    assert lines
    for line in lines:
        assert re.match(r"^\w+:", line), line
        comment = line.split("  # ", 1)[1] if "  # " in line else ""
        assert "paper" in comment.lower() or "our choice" in comment.lower() or "medrag" in comment.lower() \
            or "factcheck-gpt" in comment.lower() or "safe" in comment.lower(), line


# ---- issue 22: the paper's own questions, found by their text (Figures 7-9, the appendix's worked example) -------------

SAMPLE_OPENINGS = ["A 13-year-old boy", "A 36-year-old nursing home worker", "A 72-year-old woman", "A 49-year-old woman",
                   "While in the ICU, a 62-year-old male", "A previously healthy 6-year-old boy"]  # LEAF paper, Figures 8-9, samples 1-6


def _profile(name: str) -> dict:
    import yaml
    return yaml.safe_load((LEAF_NBS / name).read_text())


def _medqa_file(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_figure7_profile_names_the_papers_six_questions_and_finds_them(tmp_path):
    from leaf_nb.data import questions_by_stem
    prof = _profile("fig7_option_frequency.paper.yaml")
    stems, options = prof["question_stems"], prof["question_options"]
    assert [s[:len(o)] for s, o in zip(stems, SAMPLE_OPENINGS)] == SAMPLE_OPENINGS  # the paper's six, in its order
    assert [len(o) for o in options] == [5] * 6 and options[0][4] == "Surgical pinning of the femoral head"
    assert options[2] == ["64", "16", "8", "4", "32"] and options[5][0] == "Bacillary angiomatosis"  # choices 1-5 = A-E
    # in a file in MedQA-USMLE's layout, with the questions in another order, curly quotes and a distractor, each stem
    # finds its own question and the run keeps the paper's order
    records = [{"question": "A 70-year-old man has chest pain. What next?", "options": dict(zip("ABCDE", "VWXYZ")), "answer_idx": "A"}]
    records += [{"question": s.replace("'", "\u2019") + ", seen  today. Which is best?", "options": dict(zip("ABCDE", o)), "answer_idx": "C"}
                for s, o in reversed(list(zip(stems, options)))]
    found = questions_by_stem(_medqa_file(tmp_path / "test.jsonl", records), stems, options=options)
    assert [q.qid for q in found] == [f"test-{i:05d}" for i in (6, 5, 4, 3, 2, 1)]
    assert [q.options["E"] for q in found] == [o[4] for o in options]


def test_a_copy_that_differs_from_the_papers_printout_is_refused(tmp_path):
    from leaf_nb.data import BenchmarkError, questions_by_stem
    prof = _profile("table7_worked_example.paper.yaml")
    stem, options, answer = prof["question_stem"], prof["question_options"], prof["question_answer"]
    assert stem.startswith("A 13-year-old boy presents to the emergency department with severe knee, hip, and groin pain")
    assert (answer, options[4], len(options)) == ("E", "Surgical pinning of the femoral head", 5)  # "(E) ... (Correct)"
    good = {"question": stem + ". Which of the following is the best management?", "options": dict(zip("ABCDE", options)), "answer_idx": "E"}
    f = _medqa_file(tmp_path / "test.jsonl", [good])
    assert questions_by_stem(f, [stem], options=[options], answers=[answer])[0].answer == "E"
    wrong_answer = _medqa_file(tmp_path / "a.jsonl", [{**good, "answer_idx": "D"}])
    with pytest.raises(BenchmarkError, match="its answer is 'D', the paper's is 'E'"):
        questions_by_stem(wrong_answer, [stem], options=[options], answers=[answer])
    four = _medqa_file(tmp_path / "b.jsonl", [{**good, "options": dict(zip("ABCD", options)), "answer_idx": "D"}])  # MIRAGE's 4-option form
    with pytest.raises(BenchmarkError, match="differ from the paper's"):
        questions_by_stem(four, [stem], options=[options])


def test_a_stem_missing_from_the_file_or_found_twice_names_the_file_and_the_stem():
    from leaf_nb.data import BenchmarkError, questions_by_stem
    fixture = ROOT / "data" / "medqa_us_sample.jsonl"
    stems = _profile("fig7_option_frequency.paper.yaml")["question_stems"]
    with pytest.raises(BenchmarkError, match=r"medqa_us_sample\.jsonl: no question starts with 'A 13-year-old boy presents"):
        questions_by_stem(fixture, stems)
    with pytest.raises(BenchmarkError, match=r"medqa_us_sample\.jsonl: 2 questions start with 'A 6-year-old girl' \(medqa_us_sample-00003, medqa_us_sample-00004\)"):
        questions_by_stem(fixture, ["A 6-year-old girl"])


def test_figure7_and_table7_notebooks_pick_questions_by_stem():
    f7, t7 = _notebook_source("fig7_option_frequency.ipynb"), _notebook_source("table7_worked_example.ipynb")
    assert "questions_by_stem(benchmark, question_stems, dataset, question_options)" in f7 and "question_ids" not in f7
    assert "questions_by_stem(benchmark, [question_stem]" in t7 and "question_id " not in t7


# ---- issue 22: Table 7 gains the appendix's Fact-Check-Then-RAG walk-through (Figures 2 and 6) ----------------------------

def test_fcrag_from_a_given_answer_re_answers_from_its_unsupported_sentences_documents(bm25):
    from leaf_nb.fcrag import unsupported_knowledge
    answerer, given = Answerer(), "Flumazenil is the antidote, so the answer is B. Opioids depress breathing."
    rows = fc_rag([Q], answerer, bm25, rater=Rater("attempt 1"), writer=Writer("w", progress=False), check=ONE_SEARCH,
                  settings=AnswerSettings(max_rounds=1), answers=[given])
    assert rows["round"].tolist() == [0, 1] and rows.answer[0] == given and rows.passed.tolist() == [False, True]
    assert len(answerer.prompts) == 1  # the given answer is round 0: the answerer is asked only for the re-answer
    first = fact_check([given], [question_context(Q.question, Q.options)], llm=Writer("w", progress=False), retriever=bm25,
                       rater=Rater("attempt 1"), settings=ONE_SEARCH)
    ids, texts = unsupported_knowledge(first.sentences)
    assert list(rows.knowledge_ids[1]) == ids and all(t in field(answerer.prompts[0], "KNOWLEDGE") for t in texts)


def test_table7_runs_fcrag_on_the_shown_response():
    src = _notebook_source("table7_worked_example.ipynb")
    assert "fc_rag([q], answerer, retriever" in src and "answers=[answers[show]]" in src and "unsupported_knowledge(" in src
    assert _profile("table7_worked_example.paper.yaml")["fcrag_max_rounds"] == 1  # the appendix answers once more


# ---- issue 22: searches per sentence, both readings in Table 1 -------------------------------------------------------------

def test_table1_shows_the_one_search_reading_beside_the_profiles():
    src = _notebook_source("table1_filtered_accuracy.ipynb")
    assert "replace(leaf_settings, n_searches=1)" in src and "LEAF1 = " in src and "reading_calls(" in src
    prof = _profile("table1_filtered_accuracy.paper.yaml")
    assert prof["single_search"] is True and prof["n_searches"] == 5


def test_the_one_search_reading_costs_only_the_rater_calls_whose_documents_differ(tmp_path, bm25):
    # Table 1's claim: after the several-search check, the one-search check asks no query the cache lacks (its one query
    # prompt per sentence is the first search's) and one rater call per sentence whose later searches found new documents
    from leaf_nb.cache import Cache
    cache = Cache(tmp_path / "c.sqlite")
    writer, rater = Explorer(cache=cache), Rater("never", cache=cache)
    answers = ["Naloxone reverses opioid toxicity. It is given intravenously.", "Flumazenil reverses opioids."]
    ctx = [question_context(Q.question, Q.options)] * 2
    several = fact_check(answers, ctx, llm=writer, retriever=bm25, rater=rater, settings=FactCheckSettings(n_searches=3))
    asked, rated = writer.calls, rater.calls
    one = fact_check(answers, ctx, llm=writer, retriever=bm25, rater=rater, settings=FactCheckSettings(n_searches=1))
    assert writer.calls == asked
    more = [any(s > 1 for s in es) for es in several.sentences.evidence_search]
    assert rater.calls - rated == sum(more) and any(more)
    assert one.sentences["query"].tolist() == several.sentences["query"].tolist()
    assert all(list(a) == list(b)[:3] for a, b in zip(one.sentences.evidence_ids, several.sentences.evidence_ids))


# ---- issue 22: the leakage notebook measures the retrieval Table 2's MedRAG baseline runs ---------------------------------

def test_medrag_retrieve_is_the_baselines_search_and_leakage_measures_it():
    from leaf_nb.fcrag import medrag_retrieve
    spy = SpyBM25(ROOT / "data" / "medcorpus.jsonl", progress=False)
    hits = medrag_retrieve([Q], spy, 5)
    assert spy.asked == [Q.question] and spy.k == 5 and len(hits[0]) == 5  # the question alone, no options
    src = _notebook_source("leakage.ipynb")
    assert "medrag_retrieve(questions, medrag_retriever, rag_k)" in src and "retriever.search(contexts" not in src
    assert "medrag_index = " in src and "MedRAG-style" not in src


# ---- issue 22: what the notebooks say the paper says -----------------------------------------------------------------------

def test_table3_calls_its_sft_settings_our_reading_of_the_simpo_table_and_t08_our_choice():
    text = (LEAF_NBS / "table3_sft.paper.yaml").read_text()
    preset = next(l for l in text.splitlines() if l.startswith("train_preset:"))
    assert "our reading of LEAF paper, Table 8" in preset and "Training with SimPO" in preset
    temp = next(l for l in text.splitlines() if l.startswith("temperature:"))
    assert "not stated for SFT" in temp and "our choice" in temp
    src = _notebook_source("table3_sft.ipynb")
    assert "five answers per question at T=0.8" not in src and "our reading of Table 8" in src


def test_the_medrag_baseline_index_is_medrags_rrf4():
    # MedRAG's standard RAG fuses BM25, Contriever, SPECTER and MedCPT (its RRF-4); the profiles build and name that one
    shared = (ROOT / "profiles" / "h100.yaml").read_text()
    line = next(l for l in shared.splitlines() if l.startswith("medrag_index:"))
    assert "RRF-4" in line and "medrag_encoders:" in shared
    assert "--retriever RRF-4 --encoder" in (ROOT / "data" / "README.md").read_text()
    header = (LEAF_NBS / "table2_fcrag.paper.yaml").read_text()
    assert "--retriever RRF-4" in header and "one index over the four corpora" in header
    from leaf_nb.retrieve import MEDRAG_DENSE, RRF_PRESET_SETTINGS, RRF_PRESETS
    assert RRF_PRESETS["RRF-4"] == ("bm25", "contriever", "specter", "medcpt") and RRF_PRESET_SETTINGS["RRF-4"]["k0"] == 100
    assert MEDRAG_DENSE["specter"]["metric"] == "l2" and all(not s["normalize"] for s in MEDRAG_DENSE.values())
