//! Element conversion between every pair of dtcast dtypes.
//!
//! This crate will hold the cast kernels: `CastMode` (Torch, Saturate, Checked, Exact), scalar
//! converters bit-exact with PyTorch 2.15's CPU casts, SIMD fast paths chosen at run time, and
//! multi-threaded slice kernels. It is built by issue 3; until then it holds nothing.
#![forbid(unsafe_code)]
