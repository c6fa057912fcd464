//! Scaled low-precision formats: a weight stored as narrow elements (float8_e4m3fn, float4_e2m1fn)
//! plus the scales that give them their size, as the tools that write 2026's checkpoints store
//! them — and their conversion back to dense floats, bit for bit as those tools do it.
//!
//! A [`Scheme`] says how the scales apply: to the whole tensor, to each row ("channel"), to groups
//! of k along a row, or to 2-D blocks; in which dtype they are stored; and whose conventions the
//! arithmetic follows ([`Convention`]: compressed-tensors for vLLM, torchao, DeepSeek-V3, gpt-oss).
//! The references disagree on details that change bytes (the dtype the product is rounded in,
//! E8M0 bytes 0 and 255, a global scale that divides or multiplies); each is followed exactly
//! where its own checkpoints are read.
//!
//! [`quantize()`] and [`dequantize()`] give the references' bytes (every dequantization case of
//! their vectors; every quantization case but nine). The nine hold inf and NaN: there the NaN
//! torch writes — payload and sign — depends on which ATen kernel ran vectorised, and dtcast
//! writes NaN by fixed rules instead (the input's NaN as it is, a scale's NaN over its element's,
//! bfloat16 arithmetic's NaN as `0x7FC0`). The bytes that differ are in the blocks holding a
//! NaN (or everywhere, where a NaN reaches the tensor's global scale).
//!
//! # Names used in this crate
//!
//! - **`ct_…`, `ao_…`** (scheme names, as the reference vectors name them): compressed-tensors'
//!   and torchao's rule for a format — `ct_nvfp4`, `ao_mxfp4_rceil`. The functions that compute
//!   each rule's scales are `rules::compressed_tensors_*` and `rules::torchao_*`.
//! - **amax**: the largest magnitude of the elements one scale covers.
//! - **band**: rows that share no scale with other rows, quantized on one thread while they are
//!   in cache: amaxes, then the band's plan, then its elements.
//! - **run**: consecutive elements that share one factor (a block's row, a group).
//! - **general path**: elements scaled into a float32 buffer and encoded by `dtcast_cast`'s SIMD
//!   casts (or decoded, multiplied and cast back): the definition. A **one-pass form** does the
//!   same steps in registers in one pass over a band (`encode4`, `encode8`, `thresholds`,
//!   `lookup4`, `e4m3`), and is tested against the general path.
//! - **plan**: `rules::Plan` is one band's scales, factors and element arithmetic, from its
//!   amaxes; [`DequantPlan`] the numbers dequantizing works from; [`ScalePlan`] (from
//!   [`Quantizer::plan`]) the same for quantizing on another backend. (In `dtcast_cast`, a
//!   `Plan` is a cast's choice of kernel.)
//! - **thresholds**: for each scale byte, the smallest magnitudes at which each float4 code
//!   starts (`thresholds.rs`); `INF_NAN` is the one at which a value scales to inf or NaN.
//! - **`Word`**: a 16-bit float format's layout (mantissa width, bias), from the dtype table.
//!
//! ```
//! use dtcast_dtype::DType;
//! use dtcast_quant::{dequantize, Quantized, Scheme};
//! // One row of 32 MXFP4 elements (torchao's layout): codes 0x2 (1.0) and 0x7 (6.0) in each
//! // byte, low nibble first, and one E8M0 scale byte 126 (2^-1).
//! let elements = [0x72u8; 16];
//! let q = Quantized { elements: &elements, shape: &[1, 32], scales: &[126], global_scale: None };
//! let out = dequantize(&q, &Scheme::named("ao_mxfp4_floor", DType::Float32)?, DType::Float32)?;
//! let values: Vec<f32> = out.chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
//! assert_eq!(&values[..2], &[0.5, 3.0]);
//! # Ok::<(), dtcast_quant::QuantError>(())
//! ```

mod arith;
mod bitsandbytes;
mod dequant;
mod error;
mod ggml;
mod integer;
mod kernels;
mod plans;
mod quantize;
mod rules;
mod scheme;
mod scratch;

// The kernels by their concern's name (`crate::encode8`), wherever they sit.
#[cfg(target_arch = "x86_64")]
use kernels::x86;
use kernels::{amax16, e4m3, encode4, encode8, lookup4, simd, thresholds};

pub use bitsandbytes::{dequantize_bnb4_into, dequantize_int8_rows_into, Bnb4Scheme, Bnb4Weight};
pub use dequant::{dequantize, dequantize_into, DequantPlan, Quantized, Scales};
pub use error::QuantError;
pub use ggml::GgmlType;
pub use integer::{
    dequantize_int_into, pack_zero_points, quantize_int_rows, IntGroups, IntLayout, IntPart,
    IntQuantized, IntScheme, IntWeight, Strided, ZeroPoints,
};
pub use plans::{matrix_shape, scale_layout, Quantizer, ScalePlan};
pub use quantize::{quantize, quantize_into, quantize_rows, QuantizedTensor, TensorAmax};
pub use scheme::{Convention, Granularity, MxRounding, ScaleRule, Scheme};

/// The README's examples, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// A xorshift64 generator (`seed` nonzero) for the unit tests' random inputs: reproducible, and no
/// dependency.
#[cfg(test)]
pub(crate) fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}
