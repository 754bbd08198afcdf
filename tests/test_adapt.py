"""Adapting a paper notebook without editing code: a prompt file passed as a parameter reaches the model's requests."""
from pathlib import Path

import papermill as pm
import yaml

from leaf_nb.prompts import PAPER_PROMPTS

ROOT = Path(__file__).resolve().parents[1]
TABLE1 = ROOT / "nbs" / "papers" / "leaf" / "table1_filtered_accuracy.ipynb"


def reply(body, number):
    "Any answer will do: the notebook's parsers record what they cannot read."
    return ("ok", "The answer is A.\n```\nnaloxone opioid antagonist\n```\n[Supported]")


def test_fact_check_prompt_swapped_through_a_notebook_parameter(scripted, tmp_path):
    srv = scripted(reply)
    marker = "Instructions (from a student's prompt file):"
    prompts = tmp_path / "prompts.yaml"
    prompts.write_text(yaml.safe_dump({"fact_check": PAPER_PROMPTS.fact_check.replace("Instructions:", marker, 1)}))
    pm.execute_notebook(str(TABLE1), str(tmp_path / "out.ipynb"), cwd=str(TABLE1.parent), progress_bar=False, kernel_name="python3",
                        parameters={"llm": f"openai:{srv.base_url}#scripted@test", "prompts": str(prompts), "replay": "",
                                    "rater_max_tokens": 31, "verdict": "cot", "cache": str(tmp_path / "cache.sqlite"), "out_dir": str(tmp_path / "figures")})
    rater = [b["messages"][-1]["content"] for b in srv.requests if b.get("max_tokens") == 31]  # the rater's requests, by their budget
    assert rater and all(t.startswith(marker) for t in rater), rater[:1]
    assert sum(marker in m["content"] for b in srv.requests for m in b.get("messages", [])) == len(rater)  # nowhere else
