//! ATen's `ResultTypeState`: promotion over operands of three priorities.

use dtcast_dtype::DType;

use crate::error::PromoteError;
use crate::operand::{Operand, ScalarKind};
use crate::policy::Policy;
use crate::torch::Torch;

/// The running state of torch's `result_type`: the promoted dtype of the tensors with dimensions,
/// of the 0-dim tensors, and of the wrapped scalars, kept apart until [`finish`](Self::finish)
/// combines them by category.
///
/// Feed operands one at a time when they arrive one at a time (an iterator of tensors, say):
///
/// ```
/// use dtcast_dtype::DType;
/// use dtcast_promote::{Operand, ResultTypeState, ScalarKind, Torch};
/// let torch = Torch::default();
/// let mut state = ResultTypeState::default();
/// state.update(&torch, Operand::Tensor(DType::UInt8))?;
/// state.update(&torch, Operand::ZeroDim(DType::Int64))?;
/// assert_eq!(state.finish(&torch)?, DType::UInt8); // same category: the tensor wins
/// state.update(&torch, Operand::WrappedScalar(ScalarKind::Float))?;
/// assert_eq!(state.finish(&torch)?, DType::Float32); // higher category: the scalar wins
/// # Ok::<(), dtcast_promote::PromoteError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResultTypeState {
    /// Promoted dtype of the tensors with dimensions (`dimResult`).
    pub dim: Option<DType>,
    /// Promoted dtype of the 0-dim tensors (`zeroResult`).
    pub zero_dim: Option<DType>,
    /// Promoted dtype of the wrapped scalars (`wrappedResult`).
    pub wrapped: Option<DType>,
}

/// `promote_skip_undefined`: promotion where "no dtype yet" is the identity.
fn promote_skip_undefined(
    torch: &Torch,
    a: Option<DType>,
    b: Option<DType>,
) -> Result<Option<DType>, PromoteError> {
    match (a, b) {
        (Some(a), Some(b)) => torch.promote_types(a, b).map(Some),
        (a, None) => Ok(a),
        (None, b) => Ok(b),
    }
}

impl ResultTypeState {
    /// Adds one operand (`update_result_type_state`). A wrapped float scalar takes the default
    /// dtype and a wrapped complex scalar the default complex dtype; int and bool scalars stay
    /// int64 and bool.
    pub fn update(&mut self, torch: &Torch, operand: Operand) -> Result<(), PromoteError> {
        let (slot, dtype) = match operand {
            Operand::Tensor(dt) => (&mut self.dim, dt),
            Operand::ZeroDim(dt) => (&mut self.zero_dim, dt),
            Operand::WrappedScalar(kind) => {
                let dt = match kind {
                    ScalarKind::Float => torch.default_dtype(),
                    ScalarKind::Complex => torch.default_complex_dtype(),
                    ScalarKind::Bool | ScalarKind::Int => kind.wrapped_dtype(),
                };
                (&mut self.wrapped, dt)
            }
        };
        *slot = promote_skip_undefined(torch, *slot, Some(dtype))?;
        Ok(())
    }

    /// The result: `combine_categories(dim, combine_categories(zero_dim, wrapped))`.
    pub fn finish(&self, torch: &Torch) -> Result<DType, PromoteError> {
        let lower = combine_categories(torch, self.zero_dim, self.wrapped)?;
        combine_categories(torch, self.dim, lower)?.ok_or(PromoteError::NoOperands)
    }
}

/// ATen's `combine_categories(higher, lower)`: the higher-priority class decides unless the lower
/// one has a higher category; a complex lower class keeps a floating higher class's width.
fn combine_categories(
    torch: &Torch,
    higher: Option<DType>,
    lower: Option<DType>,
) -> Result<Option<DType>, PromoteError> {
    let is = |d: Option<DType>, f: fn(DType) -> bool| d.is_some_and(f);
    if is(higher, DType::is_complex) {
        return Ok(higher);
    }
    if is(lower, DType::is_complex) {
        return match higher {
            Some(h) if h.is_floating_point() => h
                .to_complex()
                .map(Some)
                .ok_or(PromoteError::NoComplexType(h)),
            _ => Ok(lower),
        };
    }
    if is(higher, DType::is_floating_point) {
        return Ok(higher);
    }
    if higher == Some(DType::Bool) || is(lower, DType::is_floating_point) {
        return promote_skip_undefined(torch, higher, lower);
    }
    Ok(higher.or(lower))
}

#[cfg(test)]
mod tests {
    use super::*;
    use DType::*;

    fn rt(ops: &[Operand]) -> DType {
        Torch::default().result_type(ops).unwrap()
    }

    #[test]
    fn examples_from_the_reference() {
        // torch-semantics.md §3, observed with torch 2.15 (default float32).
        use Operand::{Tensor as T, WrappedScalar as W, ZeroDim as Z};
        use ScalarKind::*;
        assert_eq!(rt(&[T(Int32), W(Int)]), Int32);
        assert_eq!(rt(&[T(Int32), W(Float)]), Float32);
        assert_eq!(rt(&[T(Int32), W(Complex)]), Complex64);
        assert_eq!(rt(&[T(DType::Bool), W(Int)]), Int64);
        assert_eq!(rt(&[T(UInt8), Z(Float64)]), Float64);
        assert_eq!(rt(&[T(Float16), W(Complex)]), Complex32);
        assert_eq!(rt(&[T(BFloat16), W(Complex)]), BComplex32);
        assert_eq!(rt(&[T(Float32), Z(Complex128)]), Complex64);
        assert_eq!(rt(&[T(Complex32), Z(Float64)]), Complex32);
        assert_eq!(rt(&[Z(Int32), Z(Float16)]), Float16);
        assert_eq!(rt(&[W(Int), W(Float)]), Float32);
        assert_eq!(rt(&[W(ScalarKind::Bool), W(Int)]), Int64);
        assert_eq!(rt(&[T(UInt16), W(Complex)]), Complex64);
        assert_eq!(rt(&[T(UInt64), Z(Int64)]), UInt64);
        assert_eq!(rt(&[T(Float8E4M3Fn), W(Float)]), Float8E4M3Fn);
    }

    #[test]
    fn empty_operands_are_an_error() {
        assert_eq!(
            Torch::default().result_type(&[]),
            Err(PromoteError::NoOperands)
        );
    }
}
