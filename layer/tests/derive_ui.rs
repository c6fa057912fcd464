//! `#[derive(Layer)]`'s refusals: each misuse is a compile error with a spanned message
//! (`tests/ui/*.rs`, the expected messages beside them in `*.stderr`); what it accepts compiles
//! and runs (`tests/ui_pass/*.rs`). Here rather than in the test suite crate: trybuild builds
//! the crate's dependencies again in a project of its own, and this crate's are the few the
//! derive needs (the suite's take in candle and ndarray: this test took 257 s of a CI run there,
//! 160 s here).

#[test]
fn the_derive_refuses_each_misuse_with_a_spanned_message() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/ui_pass/*.rs");
}
