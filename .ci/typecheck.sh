#!/usr/bin/env bash
# Static checks: ruff (lint and format of the Python sources), mypy (strict on the public modules,
# see [tool.mypy] in pyproject.toml) and stubtest (structout/_engine.pyi against the built engine).
# Needs the engine built into structout/ (pip install -e .), ruff and mypy (the `test` extra).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m ruff check structout tests bench
python3 -m ruff format --check structout tests bench
python3 -m mypy
# This checkout's structout first on the path (not an installed copy).
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" python3 -m mypy.stubtest structout._engine \
    --mypy-config-file pyproject.toml
