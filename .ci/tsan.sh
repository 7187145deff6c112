#!/usr/bin/env bash
# The engine's thread tests (engine_rs/tests/threads.rs: one compiled grammar shared by 8 threads,
# concurrent cache compiles, parallel recognizers) under ThreadSanitizer, with std rebuilt
# instrumented (-Zbuild-std) so that races inside Arc/Mutex uses are seen too. Any reported race
# fails the run (halt_on_error).
#
# Needs a nightly toolchain with the rust-src component; where there is none the script says so
# and exits 0 (the same tests run uninstrumented in `cargo test`). TSAN_REQUIRED=1 makes a missing
# toolchain an error.
set -euo pipefail
cd "$(dirname "$0")/../engine_rs"
host="$(rustc -vV | sed -n 's/^host: //p')"
if ! rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src'; then
    echo "tsan: skipped (no nightly toolchain with rust-src: rustup component add rust-src --toolchain nightly)"
    [ "${TSAN_REQUIRED:-0}" = 1 ] && exit 1
    exit 0
fi
RUSTFLAGS="-Zsanitizer=thread" TSAN_OPTIONS="halt_on_error=1" \
    cargo +nightly test -Zbuild-std --target "$host" --target-dir target/tsan --release \
    --test threads
echo "tsan: no data races reported"
