//! The crate's tests of its own internals (kernels against the scalar rules on every bit
//! pattern, screens, tables), compiled into the library by the `self-test` feature and run by
//! dtcast's test suite (`tests/tests/cast_internals.rs`). Not part of the API.
//!
//! Why not `#[cfg(test)]` unit tests: a unit-test build is a second optimised build of this whole
//! crate, its every per-pair and per-instruction-set kernel — about as long as the library's own
//! build, the largest part of the suite's. Compiled into the library, they cost seconds. So
//! `[lib] test = false`, and each module's tests are plain functions that `list!` names; one
//! that `list!` leaves out is dead code, which the lints refuse, and a `#[test]` attribute in
//! this crate (which would never run) fails the suite, so none is silently skipped.

/// One test: its path (as `cargo test` would name it) and its body, which panics on failure.
#[derive(Debug, Clone, Copy)]
pub struct Test {
    /// `dtcast_cast::<module>::tests::<name>`.
    pub name: &'static str,
    /// Runs the test; a panic is a failure.
    pub run: fn(),
}

/// Every test of the crate, module by module.
pub fn all() -> Vec<Test> {
    let modules = [
        crate::check::tests::TESTS,
        crate::dispatch::tests::TESTS,
        crate::formats::tests::TESTS,
        crate::screen::tests::TESTS,
    ];
    let kernels = crate::kernels::self_tests();
    modules
        .into_iter()
        .chain(kernels)
        .flatten()
        .copied()
        .collect()
}

/// `list!(a, b, ...)` in a module's `tests`: its `TESTS`, naming the functions `a`, `b`, ...
macro_rules! list {
    ($($test:ident),* $(,)?) => {
        /// This module's tests.
        pub(crate) const TESTS: &[crate::self_test::Test] = &[$(
            crate::self_test::Test {
                name: concat!(module_path!(), "::", stringify!($test)),
                run: $test,
            },
        )*];
    };
}
pub(crate) use list;
