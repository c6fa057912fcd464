#![no_main]
//! `cargo +nightly fuzz run dtype_name`: the body is `dtcast_tests::fuzz::dtype_name`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| dtcast_tests::fuzz::dtype_name(data));
