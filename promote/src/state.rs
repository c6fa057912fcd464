//! ATen's `ResultTypeState`: promotion over operands of three priorities.

use dtcast_dtype::DType;

use crate::error::PromoteError;
use crate::operand::{Operand, ScalarKind};
use crate::policy::Policy;

/// The running state of torch's `result_type`: the promoted dtype of the tensors with dimensions,
/// of the 0-dim tensors, and of the wrapped scalars, kept apart until [`finish`](Self::finish)
/// combines them by category.
///
/// Feed operands one at a time when they arrive one at a time (an iterator of tensors, say); the
/// state works for any [`Policy`]:
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
fn promote_skip_undefined<P: Policy + ?Sized>(
    policy: &P,
    a: Option<DType>,
    b: Option<DType>,
) -> Result<Option<DType>, PromoteError> {
    match (a, b) {
        (Some(a), Some(b)) => policy.promote_types(a, b).map(Some),
        (a, None) => Ok(a),
        (None, b) => Ok(b),
    }
}

impl ResultTypeState {
    /// Adds one operand (`update_result_type_state`). A wrapped float scalar takes the default
    /// dtype and a wrapped complex scalar the default complex dtype; int and bool scalars stay
    /// int64 and bool.
    pub fn update<P: Policy + ?Sized>(
        &mut self,
        policy: &P,
        operand: Operand,
    ) -> Result<(), PromoteError> {
        let wrapped = |kind: ScalarKind| match kind {
            ScalarKind::Float => policy.default_dtype(),
            ScalarKind::Complex => policy.default_complex_dtype(),
            ScalarKind::Bool | ScalarKind::Int => kind.wrapped_dtype(),
        };
        let (slot, dtype) = match operand {
            Operand::Tensor(dt) => (&mut self.dim, dt),
            Operand::ZeroDim(dt) => (&mut self.zero_dim, dt),
            Operand::WrappedScalar(kind) => (&mut self.wrapped, wrapped(kind)),
            // torch ignores the value: `uint8 + 300` is uint8.
            Operand::IntLiteral(_) => (&mut self.wrapped, wrapped(ScalarKind::Int)),
        };
        *slot = promote_skip_undefined(policy, *slot, Some(dtype))?;
        Ok(())
    }

    /// The result: `combine_categories(dim, combine_categories(zero_dim, wrapped))`.
    pub fn finish<P: Policy + ?Sized>(&self, policy: &P) -> Result<DType, PromoteError> {
        let lower = combine_categories(policy, self.zero_dim, self.wrapped)?;
        combine_categories(policy, self.dim, lower)?.ok_or(PromoteError::NoOperands)
    }
}

/// ATen's `combine_categories(higher, lower)`: the higher-priority class decides unless the lower
/// one has a higher category; a complex lower class keeps a floating higher class's width.
fn combine_categories<P: Policy + ?Sized>(
    policy: &P,
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
        return promote_skip_undefined(policy, higher, lower);
    }
    Ok(higher.or(lower))
}
