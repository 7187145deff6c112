#!/usr/bin/env bash
# Static checks: ruff (lint and format of the Python sources, rules in [tool.ruff.lint] of
# pyproject.toml), mypy (strict on every module of structout, see [tool.mypy]), stubtest
# (structout/_engine.pyi against the built engine), and rustfmt and clippy on the engine (every
# target: library, Python module, tests, benches, examples; any warning fails) and its fuzz crate.
# Needs the engine built into structout/ (pip install -e .), ruff and mypy (the `test` extra),
# and the rustfmt and clippy components of the Rust toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m ruff check structout tests bench
python3 -m ruff format --check structout tests bench
python3 -m mypy
# This checkout's structout first on the path (not an installed copy).
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" python3 -m mypy.stubtest structout._engine \
    --mypy-config-file pyproject.toml
cargo fmt --manifest-path engine_rs/Cargo.toml --check
cargo clippy --manifest-path engine_rs/Cargo.toml --release --features python --all-targets \
    -- -D warnings
# The fuzz crate is a workspace of its own (its libFuzzer targets need nightly: not linted here).
cargo fmt --manifest-path engine_rs/fuzz/Cargo.toml --check
cargo clippy --manifest-path engine_rs/fuzz/Cargo.toml --release --all-targets -- -D warnings
