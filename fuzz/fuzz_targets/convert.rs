#![no_main]
//! `cargo +nightly fuzz run convert`: the body is `dtcast_tests::fuzz::convert`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| dtcast_tests::fuzz::convert(data));
