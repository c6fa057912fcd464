//! The shape rules.

use dtcast_dtype::DType;

use crate::error::BitcastError;

/// A bitcast shape rule: what shape a tensor of `shape` elements of `from` has when its bytes are
/// read as `to`.
pub trait Rule: Send + Sync + core::fmt::Debug {
    /// The rule's name as the CLI spells it (`xla`, `view`).
    fn name(&self) -> &'static str;

    /// The new shape, or why this rule refuses the bitcast.
    fn infer(&self, shape: &[usize], from: DType, to: DType) -> Result<Vec<usize>, BitcastError>;
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
        if (from.is_complex() || to.is_complex()) && from != to {
            return Err(BitcastError::Complex { from, to });
        }
        // Storage widths are powers of two bytes, so one always divides the other.
        let (bits_in, bits_out) = (from.bits(), to.bits());
        let mut out = shape.to_vec();
        if bits_in > bits_out {
            out.push(bits_in / bits_out);
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
}

impl Rule for View {
    fn name(&self) -> &'static str {
        "view"
    }

    fn infer(&self, shape: &[usize], from: DType, to: DType) -> Result<Vec<usize>, BitcastError> {
        let (size_in, size_out) = (from.itemsize(), to.itemsize());
        if size_in == size_out {
            return Ok(shape.to_vec());
        }
        let Some((&last, outer)) = shape.split_last() else {
            return Err(BitcastError::ZeroDim { from, to });
        };
        let mut out = shape.to_vec();
        let new_last = if size_in > size_out {
            let ratio = size_in / size_out;
            last.checked_mul(ratio)
                .ok_or_else(|| BitcastError::Overflow {
                    shape: shape.to_vec(),
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
            if let Some((dim, &stride)) = strides.iter().enumerate().find(|(_, s)| *s % ratio != 0)
            {
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
}
