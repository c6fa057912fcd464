//! `#[derive(Layer)]`'s compile-fail cases: the crate is its test, `tests/derive_ui.rs`. A crate
//! of its own because trybuild's project depends on every dependency of the crate that runs it,
//! dev-dependencies included: run from `dtcast-layer`'s tests, it type-checked the facade's (clap,
//! indicatif, safetensors) and proptest's afresh.
