"""Property tests for `leaf_nb.prompts`: the parsers never guess and never raise, and retrieved text
cannot break out of its fence. The worked examples live in nbs/api/02_prompts.ipynb."""
import re

from hypothesis import given, settings, strategies as st

import json

from leaf_nb.prompts import (NOT_SUPPORTED, NOT_SUPPORTED_LABEL, SUPPORTED, SUPPORTED_LABEL, UNPARSED,
                             answer_prompt, fact_check_prompt, fcrag_prompt, format_knowledge, format_options,
                             medrag_prompt, parse_json_choice, parse_option, parse_query, parse_verdict, query_prompt)

FAST = settings(max_examples=150, deadline=None)
OPTIONS = {"A": "Warfarin", "B": "Heparin", "C": "Aspirin", "D": "Clopidogrel", "E": "Apixaban"}

# text that leans on the characters the parsers care about, plus arbitrary unicode
PUNCT = st.sampled_from(list("[]()<>/:*_`'\"\n .,-") + ["```", "[Supported]", "[Not Supported]", "</document>",
                                                         "STATEMENT:", "Answer:", "option ", "(C)", "A "])
TEXT = st.lists(st.one_of(st.text(max_size=12), PUNCT), max_size=12).map("".join)
NO_BRACKETS = TEXT.map(lambda s: s.replace("[", "").replace("]", ""))
VERDICTS = st.sampled_from([(SUPPORTED_LABEL, SUPPORTED), (NOT_SUPPORTED_LABEL, NOT_SUPPORTED),
                            ("[supported]", SUPPORTED), ("[NOT SUPPORTED]", NOT_SUPPORTED),
                            ("[Not-Supported]", NOT_SUPPORTED), ("[Unsupported]", NOT_SUPPORTED),
                            ("**[Supported]**", SUPPORTED), ('"[Not supported]"', NOT_SUPPORTED)])


@FAST
@given(TEXT)
def test_parsers_never_raise_and_return_known_values(text):
    assert parse_verdict(text) in {SUPPORTED, NOT_SUPPORTED, UNPARSED}
    assert parse_option(text, OPTIONS) in set(OPTIONS) | {UNPARSED}
    q = parse_query(text)
    assert q == UNPARSED or (q and q == q.strip())


@FAST
@given(TEXT)
def test_verdict_label_at_the_end_wins(text):
    assert parse_verdict(text + SUPPORTED_LABEL) == SUPPORTED
    assert parse_verdict(text + NOT_SUPPORTED_LABEL) == NOT_SUPPORTED


@FAST
@given(st.lists(st.tuples(NO_BRACKETS, VERDICTS), min_size=1, max_size=6), NO_BRACKETS)
def test_last_verdict_label_wins(chunks, tail):
    text = "".join(prose + label for prose, (label, _) in chunks) + tail
    assert parse_verdict(text) == chunks[-1][1][1]


@FAST
@given(NO_BRACKETS)
def test_no_bracketed_label_is_unparsed(text):
    assert parse_verdict(text) == UNPARSED


single_line_query = st.text(min_size=1, max_size=60).filter(
    lambda q: q.strip() and "`" not in q and len(q.splitlines()) == 1 and "\n" not in q)


@FAST
@given(TEXT.filter(lambda p: "```" not in p), single_line_query, st.sampled_from(["", "text", "sql"]))
def test_query_round_trips_through_a_code_block(prose, query, tag):
    reply = f"{prose}\n```{tag}\n{query}\n```\n"
    assert parse_query(reply) == " ".join(query.split())


@FAST
@given(TEXT, st.sampled_from(sorted(OPTIONS)))
def test_answer_statement_at_the_end_wins(text, letter):
    assert parse_option(f"{text}Answer: ({letter})", OPTIONS) == letter
    assert parse_option(f"{text}\nAnswer: ({letter})", OPTIONS) == letter


@FAST
@given(TEXT.filter(lambda t: not re.search(r"[(\[]\s*[A-Ea-e]\s*[)\]]", t)), st.sampled_from(sorted(OPTIONS)))
def test_answer_after_text_without_parenthesised_letters(text, letter):
    assert parse_option(text + f"Answer: ({letter})", OPTIONS) == letter


@FAST
@given(st.lists(TEXT, max_size=5))
def test_knowledge_stays_fenced_and_verdict_free(docs):
    kn = format_knowledge(docs)
    assert kn.count("<document") == len(docs)
    assert kn.count("</document>") == len(docs)
    assert re.findall(r'<document index="(\d+)">\n', kn) == [str(i) for i in range(1, len(docs) + 1)]
    assert SUPPORTED_LABEL not in kn and NOT_SUPPORTED_LABEL not in kn
    assert parse_verdict(kn) == UNPARSED
    for h in ("STATEMENT:", "CONTEXT:", "KNOWLEDGE:", "QUESTION:", "OPTIONS:"):
        assert h not in kn


@FAST
@given(TEXT, st.lists(TEXT, max_size=4), TEXT)
def test_fact_check_prompt_keeps_its_structure(statement, docs, context):
    p = fact_check_prompt(statement, docs, context=context)
    for h in ("KNOWLEDGE:", "CONTEXT:", "STATEMENT:"):  # the values themselves are not rewritten
        assert p.count(h) == 1 + statement.strip().count(h) + context.strip().count(h)
    block = p.split("KNOWLEDGE:\n", 1)[1].split("\n\nCONTEXT:\n", 1)[0]
    assert block == format_knowledge(docs)
    assert parse_verdict(block) == UNPARSED


@FAST
@given(st.text(), st.text(), st.lists(st.text(), max_size=4),
       st.dictionaries(st.sampled_from(list("ABCDE")), st.text(), max_size=5))
def test_builders_never_raise_on_unicode(statement, context, docs, options):
    for p in (query_prompt(statement), query_prompt(statement, context), query_prompt(statement, context, docs),
              fact_check_prompt(statement, docs), fact_check_prompt(statement, docs, context),
              fact_check_prompt(statement, docs, context, reasoning=False), fcrag_prompt(context, options, docs),
              answer_prompt(context, options), medrag_prompt(context, options, docs)[1]["content"]):
        assert isinstance(p, str) and p
    assert format_options(options).count("\n") >= len(options) - 1


@FAST
@given(TEXT, st.lists(TEXT, max_size=4), TEXT)
def test_query_prompt_shows_the_knowledge_gathered_so_far(statement, docs, context):
    p = query_prompt(statement, context, docs)
    for h in ("KNOWLEDGE:", "CONTEXT:", "STATEMENT:"):
        assert p.count(h) == 1 + statement.strip().count(h) + context.strip().count(h)
    block = p.split("KNOWLEDGE:\n", 1)[1].split("\n\nCONTEXT:\n", 1)[0]
    assert block == format_knowledge(docs)
    assert "[Supported]" not in p.split("KNOWLEDGE:\n", 1)[0]  # the query writer is never asked for a verdict


@FAST
@given(TEXT)
def test_json_choice_never_raises_and_never_guesses(text):
    got = parse_json_choice(text, OPTIONS)
    assert got in set(OPTIONS) | {UNPARSED}
    if got != UNPARSED:  # a key comes only from a JSON object's answer_choice
        assert "answer_choice" in text


@FAST
@given(TEXT, st.sampled_from(sorted(OPTIONS)), st.sampled_from(["", "```json\n{}\n```", "```\n{}\n```"]))
def test_json_choice_round_trips(thinking, letter, fence):
    reply = json.dumps({"step_by_step_thinking": thinking, "answer_choice": letter})
    assert parse_json_choice(fence.format(reply) if fence else reply, OPTIONS) == letter
    # as MIRAGE's evaluate.py reads it: words around the JSON, or the object cut off after the choice, keep the answer
    assert parse_json_choice(f"Answer: {letter}\n" + reply + " I hope this helps.", OPTIONS) == letter
    assert parse_json_choice(reply[:reply.rindex('"answer_choice"')] + f'"answer_choice": "{letter}', OPTIONS) == letter


# --- the fence, against the implementation it replaced (issue 21: linear time, a document fenced once) -------------
# The reference is the fence as it was at commit 0888053, copied here: a per-character generator over every character,
# and a rewrite of the whole text until no bracket changes. The fast fence must give exactly its output.
import unicodedata

from leaf_nb.prompts import _defuse_labels, _drop_invisible, defuse

_OLD_BRACKETED = re.compile(r"\[([^\[\]]*)\]")
_OLD_FENCE_TAG = re.compile(r"<(\s*/?\s*document)", re.I)
_OLD_HEADER = re.compile(r"(KNOWLEDGE|CONTEXT|STATEMENT|QUESTION|OPTIONS|ANSWER)\s*:", re.I)


def old_drop_invisible(text):
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def old_defuse_labels(text):
    while True:
        out = _OLD_BRACKETED.sub(lambda m: f"({m[1]})" if re.search("support", m[1], re.I) else m[0], text)
        if out == text: return out
        text = out


def old_defuse(text):
    text = old_drop_invisible(text)
    text = _OLD_FENCE_TAG.sub(r"&lt;\1", text)
    text = _OLD_HEADER.sub(r"\1 -", text)
    return old_defuse_labels(text).strip()


def old_format_knowledge(docs):
    if not docs: return "(no documents were retrieved)"
    return "\n".join(f'<document index="{i}">\n{old_defuse(d)}\n</document>' for i, d in enumerate(docs, 1))


# brackets nested and unbalanced, 'support' in every case (and Unicode's case-insensitive look-alikes), format characters
FENCE_BITS = st.sampled_from(["[", "]", "[[", "]]", "support", "SUPPORT", "Supported", "Not Supported", "unsupported",
                              "\u017fupport", "sup", "port", "(", ")", " ", "\n", "x", "\u200b", "\u202e", "\U000e0041",
                              "\u00ad", "\u2060", "\ufeff", "</document>", "< / DOCUMENT >", "STATEMENT:", "Answer :", "\u00e9"])
FENCE_TEXT = st.lists(st.one_of(FENCE_BITS, st.text(max_size=6)), max_size=40).map("".join)
MANY = settings(max_examples=600, deadline=None)


@MANY
@given(st.one_of(FENCE_TEXT, st.text()))
def test_fence_steps_equal_the_old_fence(text):
    assert _drop_invisible(text) == old_drop_invisible(text)
    assert _defuse_labels(text) == old_defuse_labels(text)
    assert defuse(text) == old_defuse(text)


@MANY
@given(st.lists(st.one_of(FENCE_TEXT, st.text()), max_size=4))
def test_knowledge_equals_the_old_fence(docs):
    assert format_knowledge(docs) == old_format_knowledge(docs)
    assert format_knowledge(docs) == format_knowledge(docs)  # a remembered document is fenced as the first time


def test_deep_nesting_is_turned_in_one_pass():
    "Nesting 3,000 deep: the old fence needed a rewrite of the whole text per level; the new one gives its result."
    deep = "[" * 3000 + "Supported" + "]" * 3000 + " [1] [x [y] support]"
    assert _defuse_labels(deep) == "(" * 3000 + "Supported" + ")" * 3000 + " [1] [x [y] support]"
    assert _defuse_labels(deep[:2000] + deep[-2000:]) == old_defuse_labels(deep[:2000] + deep[-2000:])
