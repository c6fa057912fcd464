//! `#[derive(Layer)]`'s refusals: each misuse is a compile error with a spanned message
//! (`tests/ui/*.rs`, the expected messages beside them in `*.stderr`); what it accepts compiles
//! and runs (`tests/ui_pass/*.rs`).

#[test]
fn the_derive_refuses_each_misuse_with_a_spanned_message() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/*.rs");
    t.pass("ui_pass/*.rs");
}
