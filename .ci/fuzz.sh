#!/usr/bin/env bash
# Bounded fuzzing of the engine (crate engine_rs/fuzz): every target for FUZZ_SECONDS seconds.
#
#   FUZZ_SECONDS  seconds per target (default 20)
#   FUZZ_TARGETS  targets to run (default: kbnf_compile recognize matcher_ops)
#   FUZZ_ENGINE   driver    (default) stable Rust, deterministic seeded mutations of the checked-in
#                           corpus, no coverage feedback; prints executions per target
#                 libfuzzer nightly Rust + libFuzzer with sanitizer coverage (the flags cargo-fuzz
#                           uses, without ASan; `cargo +nightly fuzz run <target> --features
#                           libfuzzer` works too where cargo-fuzz is installed)
#   FUZZ_SEED     driver seed (default 24301)
#
# Exit status is non-zero when any target finds a crash (inputs are saved under
# engine_rs/fuzz/artifacts/<target>/; reproduce with
# `cargo run --release --bin drive -- <target> --replay <file>` in engine_rs/fuzz).
set -euo pipefail
cd "$(dirname "$0")/../engine_rs/fuzz"
SECS="${FUZZ_SECONDS:-20}"
TARGETS="${FUZZ_TARGETS:-kbnf_compile recognize matcher_ops}"
ENGINE="${FUZZ_ENGINE:-driver}"
status=0
case "$ENGINE" in
driver)
    cargo build --release --bin drive
    for t in $TARGETS; do
        ./target/release/drive "$t" "$SECS" --seed "${FUZZ_SEED:-24301}" --timeout 20 || status=$?
    done
    ;;
libfuzzer)
    # The build cargo-fuzz makes (without ASan): sanitizer coverage for libFuzzer's feedback.
    export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
    triple="$(rustc +nightly -vV | sed -n 's/^host: //p')"
    cargo +nightly build --release --features libfuzzer --target "$triple" \
        --bin kbnf_compile --bin recognize --bin matcher_ops \
        --target-dir target/libfuzzer
    for t in $TARGETS; do
        # New inputs go to artifacts/corpus-<target>; the checked-in corpus is only read.
        mkdir -p "artifacts/$t" "artifacts/corpus-$t"
        "target/libfuzzer/$triple/release/$t" "artifacts/corpus-$t" "corpus/$t" \
            -max_total_time="$SECS" -timeout=20 -rss_limit_mb=4096 -dict=kbnf.dict \
            -artifact_prefix="artifacts/$t/" -print_final_stats=1 || status=$?
    done
    ;;
*)
    echo "unknown FUZZ_ENGINE=$ENGINE (expected driver or libfuzzer)" >&2
    exit 2
    ;;
esac
exit "$status"
