//! The shape rules.

use alloc::vec;
use alloc::vec::Vec;

use dtcast_dtype::{DType, Excess, ShapeError};

use crate::error::BitcastError;

/// A bitcast shape rule: what shape a tensor of `shape` elements of `from` has when its bytes are
/// read as `to`.
pub trait Rule: Send + Sync + core::fmt::Debug {
    /// The rule's name as the CLI spells it (`xla`, `view`).
    fn name(&self) -> &'static str;

    /// The new shape, or why this rule refuses the bitcast. Both shapes are held to one size
    /// rule ([`dtcast_dtype::MAX_SHAPE_SIZE`]): an input shape, or a result, with a dimension,
    /// element count or byte size past 2^63 - 1 is [`BitcastError::Overflow`].
    fn infer(&self, shape: &[usize], from: DType, to: DType) -> Result<Vec<usize>, BitcastError>;
}

/// Runs a rule's shape computation between the two checks every rule makes: the input shape
/// within the size rule, and the result too.
fn sized(
    shape: &[usize],
    from: DType,
    to: DType,
    rule: impl FnOnce() -> Result<Vec<usize>, BitcastError>,
) -> Result<Vec<usize>, BitcastError> {
    from.shape_elements(shape).map_err(BitcastError::Overflow)?;
    let out = rule()?;
    to.shape_elements(&out).map_err(BitcastError::Overflow)?;
    Ok(out)
}

/// JAX's `lax.bitcast_convert_type` (XLA `BitcastConvert`), with `bool` counted as 8 bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Xla;

/// torch's `Tensor.view(dtype)` on a contiguous tensor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct View;

impl Rule for Xla {
    fn name(&self) -> &'static str {
        "xla"
    }

    fn infer(&self, shape: &[usize], from: DType, to: DType) -> Result<Vec<usize>, BitcastError> {
        sized(shape, from, to, || xla_shape(shape, from, to))
    }
}

fn xla_shape(shape: &[usize], from: DType, to: DType) -> Result<Vec<usize>, BitcastError> {
    if (from.is_complex() || to.is_complex()) && from != to {
        return Err(BitcastError::Complex { from, to });
    }
    // jax counts true widths: int8 -> int4 appends a dimension of 2. Narrowing appends the
    // whole quotient even where the widths do not divide (bfloat16 -> float6 appends 2, as
    // jax does; `bitcast` then refuses such buffers, whose bytes the shape cannot describe);
    // widening needs last dimension × bits_in = bits_out exactly, so 6 -> 8 bits never works.
    let (bits_in, bits_out) = (from.bits(), to.bits());
    let mut out = shape.to_vec();
    if bits_in > bits_out {
        out.push(bits_in / bits_out);
    } else if bits_in < bits_out && !bits_out.is_multiple_of(bits_in) {
        return Err(BitcastError::Widths { from, to });
    } else if bits_in < bits_out {
        let ratio = bits_out / bits_in;
        if shape.last() != Some(&ratio) {
            return Err(BitcastError::LastDimNotRatio {
                from,
                to,
                shape: shape.to_vec(),
                ratio,
            });
        }
        out.pop();
    }
    Ok(out)
}

/// The element size torch's `view` uses: int1..int4 / uint1..uint4 and float4_e2m1fn_x2 count as
/// one byte each (torch stores them one per byte).
fn torch_element_size(dtype: DType) -> Result<usize, BitcastError> {
    match (dtype.byte_size(), dtype.float_format()) {
        (Some(bytes), _) => Ok(bytes),
        (None, None) => Ok(1), // torch's sub-byte integers
        (None, Some(_)) => Err(BitcastError::NotTorch { dtype }),
    }
}

impl Rule for View {
    fn name(&self) -> &'static str {
        "view"
    }

    fn infer(&self, shape: &[usize], from: DType, to: DType) -> Result<Vec<usize>, BitcastError> {
        sized(shape, from, to, || view_shape(shape, from, to))
    }
}

fn view_shape(shape: &[usize], from: DType, to: DType) -> Result<Vec<usize>, BitcastError> {
    if from == to {
        return Ok(shape.to_vec());
    }
    let (size_in, size_out) = (torch_element_size(from)?, torch_element_size(to)?);
    if size_in == size_out {
        return Ok(shape.to_vec());
    }
    let Some((&last, outer)) = shape.split_last() else {
        return Err(BitcastError::ZeroDim { from, to });
    };
    let mut out = shape.to_vec();
    let new_last = if size_in > size_out {
        let ratio = size_in / size_out;
        // (The input's size rule bounds its bytes, not its last dimension beside a 0.)
        last.checked_mul(ratio).ok_or_else(|| {
            BitcastError::Overflow(ShapeError {
                shape: shape.to_vec(),
                dtype: to,
                excess: Excess::Dimension(outer.len()),
            })
        })?
    } else {
        let ratio = size_out / size_in;
        if last % ratio != 0 {
            return Err(BitcastError::LastDimNotDivisible {
                from,
                to,
                last,
                ratio,
            });
        }
        // torch checks the strides of the outer dimensions too. For a contiguous tensor the
        // stride of dim i is the product of the later sizes, each at least 1 — so an empty last
        // dimension gives stride 1, which a ratio > 1 does not divide (torch: zeros(2, 0) → f64).
        let mut strides = vec![0; outer.len()];
        let mut stride = last.max(1);
        for dim in (0..outer.len()).rev() {
            strides[dim] = stride;
            stride = stride.saturating_mul(outer[dim].max(1));
        }
        if let Some((dim, &stride)) = strides.iter().enumerate().find(|(_, s)| *s % ratio != 0) {
            return Err(BitcastError::StrideNotDivisible {
                from,
                to,
                dim,
                stride,
                ratio,
            });
        }
        last / ratio
    };
    if let Some(l) = out.last_mut() {
        *l = new_last;
    }
    Ok(out)
}
