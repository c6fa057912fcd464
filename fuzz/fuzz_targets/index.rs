#![no_main]
//! `cargo +nightly fuzz run index`: the body is `dtcast_tests::fuzz::index`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| dtcast_tests::fuzz::index(data));
