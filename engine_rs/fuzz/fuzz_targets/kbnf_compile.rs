//! libFuzzer entry point for the `kbnf_compile` target (logic in `structout_fuzz::kbnf_compile`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    structout_fuzz::kbnf_compile(data);
});
