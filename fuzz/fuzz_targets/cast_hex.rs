#![no_main]
//! `cargo +nightly fuzz run cast_hex`: the body is `dtcast_tests::fuzz::cast_hex`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| dtcast_tests::fuzz::cast_hex(data));
