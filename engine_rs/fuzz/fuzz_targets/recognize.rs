//! libFuzzer entry point for the `recognize` target (logic in `structout_fuzz::recognize`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    structout_fuzz::recognize(data);
});
