"The `leaf-nb` console script, as a user runs it."
import json
import subprocess
import sys
from pathlib import Path

LEAF_NB = str(Path(sys.executable).with_name("leaf-nb"))


def run(*args, timeout=300):
    return subprocess.run([LEAF_NB, *args], capture_output=True, text=True, timeout=timeout)


def test_generate_embedded(tmp_path):
    out = run("generate", "--llm", "embedded", "--cache", str(tmp_path / "c.sqlite"), "What is metformin used for?")
    assert out.returncode == 0, out.stderr
    text = out.stdout.lower()
    assert len(text.split()) >= 5 and any(w in text for w in ("diabetes", "blood sugar", "glucose")), out.stdout


def test_generate_through_server(server, tmp_path):
    spec = f"openai:{server.base_url}#{server.alias}"
    out = run("generate", "--llm", spec, "--json", "-n", "2", "--temperature", "0.8", "--seed", "1",
              "--cache", str(tmp_path / "c.sqlite"), "What is metformin used for?")
    assert out.returncode == 0, out.stderr
    completions = json.loads(out.stdout)
    assert len(completions) == 2 and all(c.strip() for c in completions)


def test_dead_server_is_one_clear_line():
    out = run("generate", "--llm", "openai:http://127.0.0.1:9/v1#m", "--no-cache", "hello", timeout=120)
    assert out.returncode == 2
    assert "127.0.0.1:9" in out.stderr and "Traceback" not in out.stderr
