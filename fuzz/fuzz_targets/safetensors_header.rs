#![no_main]
//! `cargo +nightly fuzz run safetensors_header`: the body is `dtcast_tests::fuzz::safetensors_header`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| dtcast_tests::fuzz::safetensors_header(data));
