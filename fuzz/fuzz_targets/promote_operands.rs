#![no_main]
//! `cargo +nightly fuzz run promote_operands`: the body is `dtcast_tests::fuzz::promote_operands`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| dtcast_tests::fuzz::promote_operands(data));
