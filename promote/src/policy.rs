//! The [`Policy`] trait: the seam between promotion rules and the code that uses them.

use dtcast_dtype::DType;

use crate::casting::Casting;
use crate::error::PromoteError;
use crate::operand::Operand;

/// A set of promotion rules.
///
/// Object safe: code that needs promotion takes `&dyn Policy`, so a user can swap PyTorch's
/// lattice ([`Torch`](crate::Torch)) for another one. Implementers write the four required
/// methods; the rest is provided.
///
/// Implementers must make `promote_types` commutative. `result_type` should not depend on the
/// operands' order; [`NumPy`](crate::NumPy)'s does where its reference does (NumPy's reduction of
/// three or more dtypes with ml_dtypes' dtypes), and is documented so.
pub trait Policy: Send + Sync + core::fmt::Debug {
    /// The common dtype of two dtypes (torch's `promote_types`).
    fn promote_types(&self, a: DType, b: DType) -> Result<DType, PromoteError>;

    /// The dtype an operation over `operands` computes in (torch's `result_type`, generalised to
    /// any number of operands).
    fn result_type(&self, operands: &[Operand]) -> Result<DType, PromoteError>;

    /// Whether the result of an operation in `from` may be written to an output of dtype `to`
    /// (torch's `can_cast`): never to a lower category, but narrowing within a category is fine.
    fn can_cast(&self, from: DType, to: DType) -> bool;

    /// `can_cast` at one of NumPy's casting levels (see [`Casting`] for what each means in a
    /// policy other than NumPy). By default: `no` and `equiv` allow a dtype to itself, `safe`
    /// allows `from → to` when `promote_types(from, to) == to`, `same_kind` is
    /// [`can_cast`](Policy::can_cast), `unsafe` allows any two dtypes of the policy.
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// use dtcast_promote::{Casting, Policy, Torch};
    /// let torch = Torch::default();
    /// assert!(torch.can_cast_with(DType::Int8, DType::Int64, Casting::Safe));
    /// assert!(!torch.can_cast_with(DType::Int64, DType::Int8, Casting::Safe));
    /// assert!(torch.can_cast_with(DType::Int64, DType::Int8, Casting::SameKind));
    /// assert!(!torch.can_cast_with(DType::Float32, DType::Int8, Casting::SameKind));
    /// assert!(torch.can_cast_with(DType::Float32, DType::Int8, Casting::Unsafe));
    /// ```
    fn can_cast_with(&self, from: DType, to: DType, casting: Casting) -> bool {
        match casting {
            Casting::No | Casting::Equiv => from == to && self.has_dtype(from),
            Casting::Safe => self.promote_types(from, to) == Ok(to),
            Casting::SameKind => self.can_cast(from, to),
            Casting::Unsafe => self.has_dtype(from) && self.has_dtype(to),
        }
    }

    /// The dtype that Python float scalars and integer-to-float operations produce.
    fn default_dtype(&self) -> DType;

    /// The policy's name, as its errors and `dtcast table` say it (`torch`, `JAX`). By default
    /// the type's name.
    fn name(&self) -> &'static str {
        core::any::type_name::<Self>()
            .rsplit("::")
            .next()
            .unwrap_or("policy")
    }

    /// Whether the policy has `dtype` at all (others are errors in every method). By default
    /// every dtype.
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// use dtcast_promote::{Jax, Policy, Torch};
    /// assert!(!Torch::default().has_dtype(DType::Float6E2M3Fn)); // an ml_dtypes dtype
    /// assert!(Jax::default().has_dtype(DType::Float6E2M3Fn));
    /// assert!(!Jax::default().has_dtype(DType::Complex32)); // torch's
    /// ```
    fn has_dtype(&self, dtype: DType) -> bool {
        let _ = dtype;
        true
    }

    /// The dtype that Python complex scalars produce (torch's default complex dtype). By default
    /// the complex type of [`default_dtype`](Policy::default_dtype), or complex64 where it has none.
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// use dtcast_promote::{Policy, Torch};
    /// assert_eq!(Torch::new(DType::Float64)?.default_complex_dtype(), DType::Complex128);
    /// assert_eq!(Torch::new(DType::BFloat16)?.default_complex_dtype(), DType::Complex64);
    /// # Ok::<(), dtcast_promote::PromoteError>(())
    /// ```
    fn default_complex_dtype(&self) -> DType {
        self.default_dtype()
            .to_complex()
            .unwrap_or(DType::Complex64)
    }

    /// `result_type` for operations that always produce a floating result from integers — `div`,
    /// `true_divide`, `sqrt`, ... (ATen's `promote_integer_inputs_to_float`): an integral or bool
    /// result becomes the default dtype.
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// use dtcast_promote::{Operand, Policy, ScalarKind, Torch};
    /// let torch = Torch::default();
    /// let i32s = [Operand::Tensor(DType::Int32), Operand::Tensor(DType::Int32)];
    /// assert_eq!(torch.result_type_float(&i32s)?, DType::Float32);
    /// let half = [Operand::Tensor(DType::Float16), Operand::WrappedScalar(ScalarKind::Int)];
    /// assert_eq!(torch.result_type_float(&half)?, DType::Float16);
    /// # Ok::<(), dtcast_promote::PromoteError>(())
    /// ```
    fn result_type_float(&self, operands: &[Operand]) -> Result<DType, PromoteError> {
        let common = self.result_type(operands)?;
        Ok(if common.is_integral(true) {
            self.default_dtype()
        } else {
            common
        })
    }

    /// `result_type`, raised to at least `lowest` (OneFlow's "lowest dtype"; torch's integer
    /// `sum` / `prod` / `cumsum` accumulate in int64). See [`at_least`].
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// use dtcast_promote::{Operand, Policy, Torch};
    /// let torch = Torch::default();
    /// let sum = |dt| torch.result_type_at_least(&[Operand::Tensor(dt)], DType::Int64);
    /// assert_eq!(sum(DType::Bool)?, DType::Int64);
    /// assert_eq!(sum(DType::UInt8)?, DType::Int64);
    /// assert_eq!(sum(DType::Float16)?, DType::Float16);
    /// # Ok::<(), dtcast_promote::PromoteError>(())
    /// ```
    fn result_type_at_least(
        &self,
        operands: &[Operand],
        lowest: DType,
    ) -> Result<DType, PromoteError> {
        Ok(at_least(self.result_type(operands)?, lowest))
    }

    /// Checks that the common dtype of an operation can be written to an output (or updated in
    /// place) of dtype `out`, with torch's message when it cannot
    /// (`result type Float can't be cast to the desired output type Int`).
    fn check_output(&self, common: DType, out: DType) -> Result<(), PromoteError> {
        if self.can_cast(common, out) {
            Ok(())
        } else {
            Err(PromoteError::CannotCastOutput { common, out })
        }
    }
}

/// `dtype`, raised to `lowest` when it is in a lower category, or in the same category and not wider.
///
/// This is torch's rule for integer reductions when `lowest` is int64 (every integer and bool
/// becomes int64, floating types stay) and a "compute in at least float32" rule when `lowest` is
/// float32 (bool, integers, float16, bfloat16 and float8 become float32; float64 stays).
///
/// ```
/// use dtcast_dtype::DType;
/// use dtcast_promote::at_least;
/// assert_eq!(at_least(DType::Int32, DType::Int64), DType::Int64);
/// assert_eq!(at_least(DType::Float64, DType::Float32), DType::Float64);
/// assert_eq!(at_least(DType::BFloat16, DType::Float32), DType::Float32);
/// assert_eq!(at_least(DType::Complex64, DType::Float32), DType::Complex64);
/// ```
pub fn at_least(dtype: DType, lowest: DType) -> DType {
    let (rank, lowest_rank) = (dtype.category().rank(), lowest.category().rank());
    // Equal width in the same category goes to `lowest` too: uint64 -> int64, as torch's
    // `get_dtype_from_self` does for integer sums.
    if rank < lowest_rank || (rank == lowest_rank && dtype.bits() <= lowest.bits()) {
        lowest
    } else {
        dtype
    }
}
