#![no_main]
//! `cargo +nightly fuzz run gguf_header`: the body is `dtcast_tests::fuzz::gguf_header`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| dtcast_tests::fuzz::gguf_header(data));
