//! libFuzzer entry point for the `matcher_ops` target (logic in `structout_fuzz::matcher_ops`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    structout_fuzz::matcher_ops(data);
});
