#![no_main]
//! `cargo +nightly fuzz run quantize`: the body is `dtcast_tests::fuzz::quantize`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| dtcast_tests::fuzz::quantize(data));
