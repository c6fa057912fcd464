//! `#[derive(Layer)]`'s refusals: each misuse is a compile error with a spanned message
//! (`tests/ui/*.rs`, the expected messages beside them in `*.stderr`). What it accepts is
//! compiled by the test suite (`tests/tests/layer.rs`).
//!
//! Only refusals, so that trybuild type-checks its project (`cargo check`) instead of building
//! it: nothing is code-generated. With one accepted case among them it built every dependency
//! (this crate's and its dev-dependencies', the facade's clap, cudarc and indicatif among them),
//! 160-237 s of a CI run. Not in the derive's own crate: as a proc-macro's dev-dependency,
//! `dtcast-layer` is resolved apart from the workspace's features, and the test build compiled
//! dtcast-cast a second time for it. Not in `dtcast-layer`'s tests: trybuild's project takes the
//! running crate's dev-dependencies too, and type-checking the facade's and proptest's took about
//! 78 s of a CI run (`src/lib.rs`).

#[test]
fn the_derive_refuses_each_misuse_with_a_spanned_message() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
