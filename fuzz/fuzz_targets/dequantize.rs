#![no_main]
//! `cargo +nightly fuzz run dequantize`: the body is `dtcast_tests::fuzz::dequantize`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| dtcast_tests::fuzz::dequantize(data));
