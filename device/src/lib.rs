//! Devices, backends and `Tensor::to`.
//!
//! This crate will own where bytes live: `Device` (parsed with torch's grammar), the `Backend`
//! trait (CPU through `dtcast-cast`, CUDA through cudarc), `Tensor` and `Tensor::to`. It is built
//! by issue 4; until then it holds nothing.
#![forbid(unsafe_code)]
