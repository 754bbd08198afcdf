"""Fixtures shared by the tests: a real llama.cpp OpenAI-compatible server on loopback, a scripted HTTP server
that misbehaves on purpose (malformed JSON, empty completions, closed connections, slow requests) and counts how many
requests it holds at once, and a small random causal LM for the tests of training mechanics."""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from leaf_nb.llm import LlamaCppServer


@pytest.fixture(scope="session")
def server():
    "llama-cpp-python's server serving the embedded SmolLM2 GGUF, for the whole test session."
    with LlamaCppServer() as s:
        yield s


# Two layers of width 256 on SmolLM2's vocabulary: 13.8M parameters against 135M. Training mechanics (TRL's checkpoints,
# resume after SIGKILL, a launcher in another process) are the same on it and take seconds instead of minutes. Not
# smaller: the kill test must land between two checkpoints, and at this size they are about 2 s apart (width 64: 0.2 s).
TINY_LM = {"num_hidden_layers": 2, "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 64}


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory):
    """A seeded, randomly initialised Llama of `TINY_LM`'s size with the embedded SmolLM2's tokenizer, chat template and
    vocabulary, saved as a transformers folder. A test double for the training machinery only: it writes noise, so the
    tests that judge a trained model (its loss, its answers) and the notebooks train the real embedded model."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from leaf_nb.llm import embedded_dir
    src, out = embedded_dir(), tmp_path_factory.mktemp("models") / "tiny-llama-l2-h256-seed0"
    config = AutoConfig.from_pretrained(src, local_files_only=True)
    for k, v in TINY_LM.items(): setattr(config, k, v)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(out)
    AutoTokenizer.from_pretrained(src, local_files_only=True).save_pretrained(out)
    return out


class ScriptedServer:
    """An OpenAI-compatible endpoint on loopback whose answers come from `script(request_json, number) -> action`:
    `("ok", text)`, `("sleep", seconds, text)`, `("malformed",)` (HTTP 200, broken JSON), `("no_choices",)`,
    `("null_content",)`, `("close",)` (drop the connection), `("status", code)`, `("logprob", token_text, logprob)` (a
    one-token completion with its log-probability, as label scoring asks for) or `("one_choice", text)` (one choice even
    for a list of prompts; `ok` answers a list with one choice per prompt). It records every request body and the
    most requests it held at once (overall and per `max_tokens` value, which tells the stages of a pipeline apart)."""

    def __init__(self, script, model="scripted", models_entry=None):
        self.script, self.model = script, model
        self.models_entry = models_entry or {"id": model, "object": "model", "created": 0, "owned_by": "test",
                                             "root": f"/models/{model}", "max_model_len": 4096}
        self.requests, self.lock = [], threading.Lock()
        self.in_flight = self.max_in_flight = 0
        self.in_flight_by, self.max_in_flight_by = {}, {}
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            def log_message(self, *a): pass

            def _send(self, code, body: bytes):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._send(200, json.dumps({"object": "list", "data": [owner.models_entry]}).encode())

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                tag = body.get("max_tokens")
                with owner.lock:
                    number = len(owner.requests)
                    owner.requests.append(body)
                    owner.in_flight += 1
                    owner.in_flight_by[tag] = owner.in_flight_by.get(tag, 0) + 1
                    owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
                    owner.max_in_flight_by[tag] = max(owner.max_in_flight_by.get(tag, 0), owner.in_flight_by[tag])
                try:
                    self._answer(body, owner.script(body, number))
                finally:
                    with owner.lock:
                        owner.in_flight -= 1
                        owner.in_flight_by[tag] -= 1

            def _answer(self, body, action):
                kind = action[0]
                if kind == "sleep":
                    time.sleep(action[1]); action = ("ok", action[2]); kind = "ok"
                if kind == "close":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if kind == "status": return self._send(action[1], b'{"error": {"message": "scripted failure"}}')
                if kind == "malformed": return self._send(200, b'{"id": "cmpl-1", "choices": [{"text": "unterminated')
                chat = "messages" in body
                if kind == "logprob":
                    text, lp = action[1], action[2]
                    choices = [{"index": 0, "text": text, "finish_reason": "length",
                                "logprobs": {"tokens": [text], "token_logprobs": [lp], "top_logprobs": [{text: lp}], "text_offset": [0]}}]
                elif kind == "no_choices": choices = []
                elif kind == "null_content":
                    choices = [{"index": 0, "finish_reason": "length",
                                **({"message": {"role": "assistant", "content": None}} if chat else {"text": None})}]
                elif kind == "one_choice":  # whatever was asked: a server that drops prompts of a list
                    choices = [{"index": 0, "finish_reason": "stop", "text": action[1]}]
                else:  # one choice per prompt of a list, as the OpenAI API answers
                    n = len(body["prompt"]) if isinstance(body.get("prompt"), list) else 1
                    choices = [{"index": i, "finish_reason": "stop",
                                **({"message": {"role": "assistant", "content": action[1]}} if chat else {"text": action[1]})}
                               for i in range(n)]
                payload = {"id": "cmpl-1", "object": "chat.completion" if chat else "text_completion", "created": 0,
                           "model": owner.model, "choices": choices,
                           "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
                self._send(200, json.dumps(payload).encode())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self): return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self): self.thread.start(); return self

    def __exit__(self, *exc):
        self.httpd.shutdown(); self.httpd.server_close()


@pytest.fixture
def scripted():
    "Start a `ScriptedServer` with the given script; stopped after the test."
    started = []
    def start(script, **kw):
        s = ScriptedServer(script, **kw).__enter__()
        started.append(s)
        return s
    yield start
    for s in started: s.__exit__()
