//! Layer traversal, `Layer::astype` and safetensors checkpoints.
//!
//! This crate will hold the `Layer` trait (named parameter and buffer traversal), `astype` / `to`
//! written once on top of it, its derive macro, and checkpoint reading and writing. It is built by
//! issue 5; until then it holds nothing.
#![forbid(unsafe_code)]
