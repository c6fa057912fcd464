#![no_main]
//! `cargo +nightly fuzz run dequantize_int`: the body is `dtcast_tests::fuzz::dequantize_int`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| dtcast_tests::fuzz::dequantize_int(data));
