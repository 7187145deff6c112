#!/usr/bin/env bash
# The README's test command: install test dependencies, build the engine, run cargo and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e '.[test]'
cargo test --release --manifest-path engine_rs/Cargo.toml
python3 -m pytest -q
