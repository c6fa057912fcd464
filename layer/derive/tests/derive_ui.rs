//! `#[derive(Layer)]`'s refusals: each misuse is a compile error with a spanned message
//! (`tests/ui/*.rs`, the expected messages beside them in `*.stderr`). What it accepts is
//! compiled by the test suite (`tests/tests/layer.rs`).
//!
//! Here, in the derive's own crate, because trybuild builds the crate's dependencies and
//! dev-dependencies again in a project of its own: here those are `dtcast-layer` and the crates
//! below it, where in `dtcast-layer` (whose dev-dependencies hold the facade, for its doc
//! examples) they also took in clap, cudarc, indicatif and proptest. Only refusals, so that
//! trybuild type-checks (`cargo check`) instead of building: nothing is code-generated. Together
//! this test went from 160-237 s of a CI run to TODO.

#[test]
fn the_derive_refuses_each_misuse_with_a_spanned_message() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
