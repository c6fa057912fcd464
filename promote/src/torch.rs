//! PyTorch 2.15's promotion rules.

use dtcast_dtype::{DType, TorchSupport};

use crate::error::PromoteError;
use crate::operand::Operand;
use crate::policy::Policy;
use crate::state::ResultTypeState;

/// PyTorch's promotion rules (2.15), exactly: `c10::promoteTypes`, ATen's `result_type` and
/// `canCast`.
///
/// `default_dtype` is what `torch.set_default_dtype` sets (float32 unless changed); the default
/// complex dtype follows from it (float16 → complex32, float32 and bfloat16 → complex64,
/// float64 → complex128).
///
/// ```
/// use dtcast_dtype::{DType, TorchSupport};
/// use dtcast_promote::{Operand, Policy, ScalarKind, Torch};
/// let torch = Torch::new(DType::Float64)?;
/// let ops = [Operand::Tensor(DType::Int32), Operand::WrappedScalar(ScalarKind::Complex)];
/// assert_eq!(torch.result_type(&ops)?, DType::Complex128);
/// assert!(Torch::new(DType::Int32).is_err());
/// # Ok::<(), dtcast_promote::PromoteError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Torch {
    default_dtype: DType,
}

impl Default for Torch {
    /// The rules with torch's initial default dtype, float32.
    fn default() -> Self {
        Torch {
            default_dtype: DType::Float32,
        }
    }
}

impl Torch {
    /// The rules with another default dtype: float16, bfloat16, float32 or float64 (torch's
    /// `set_default_dtype` refuses anything else).
    pub fn new(default_dtype: DType) -> Result<Self, PromoteError> {
        match default_dtype {
            DType::Float16 | DType::BFloat16 | DType::Float32 | DType::Float64 => {
                Ok(Torch { default_dtype })
            }
            other => Err(PromoteError::InvalidDefaultDType(other)),
        }
    }
}

/// The types of `promoteTypes`' lookup table, in its row order.
const TABLE_TYPES: [DType; 14] = [
    DType::UInt8,
    DType::Int8,
    DType::Int16,
    DType::Int32,
    DType::Int64,
    DType::Float16,
    DType::Float32,
    DType::Float64,
    DType::Complex32,
    DType::Complex64,
    DType::Complex128,
    DType::Bool,
    DType::BFloat16,
    DType::BComplex32,
];

/// `c10::promoteTypes`' table for 2.15 (with the new bcomplex32 row and column).
#[rustfmt::skip]
const TABLE: [[DType; 14]; 14] = {
    const U1: DType = DType::UInt8;
    const I1: DType = DType::Int8;
    const I2: DType = DType::Int16;
    const I4: DType = DType::Int32;
    const I8: DType = DType::Int64;
    const F2: DType = DType::Float16;
    const F4: DType = DType::Float32;
    const F8: DType = DType::Float64;
    const C2: DType = DType::Complex32;
    const C4: DType = DType::Complex64;
    const C8: DType = DType::Complex128;
    const B1: DType = DType::Bool;
    const BF: DType = DType::BFloat16;
    const CB: DType = DType::BComplex32;
    [
        //u1 i1  i2  i4  i8  f2  f4  f8  c2  c4  c8  b1  bf  cb
        [U1, I2, I2, I4, I8, F2, F4, F8, C2, C4, C8, U1, BF, CB], // u1
        [I2, I1, I2, I4, I8, F2, F4, F8, C2, C4, C8, I1, BF, CB], // i1
        [I2, I2, I2, I4, I8, F2, F4, F8, C2, C4, C8, I2, BF, CB], // i2
        [I4, I4, I4, I4, I8, F2, F4, F8, C2, C4, C8, I4, BF, CB], // i4
        [I8, I8, I8, I8, I8, F2, F4, F8, C2, C4, C8, I8, BF, CB], // i8
        [F2, F2, F2, F2, F2, F2, F4, F8, C2, C4, C8, F2, F4, C4], // f2
        [F4, F4, F4, F4, F4, F4, F4, F8, C4, C4, C8, F4, F4, C4], // f4
        [F8, F8, F8, F8, F8, F8, F8, F8, C8, C8, C8, F8, F8, C8], // f8
        [C2, C2, C2, C2, C2, C2, C4, C8, C2, C4, C8, C2, C4, C4], // c2
        [C4, C4, C4, C4, C4, C4, C4, C8, C4, C4, C8, C4, C4, C4], // c4
        [C8, C8, C8, C8, C8, C8, C8, C8, C8, C8, C8, C8, C8, C8], // c8
        [U1, I1, I2, I4, I8, F2, F4, F8, C2, C4, C8, B1, BF, CB], // b1
        [BF, BF, BF, BF, BF, F4, F4, F8, C4, C4, C8, BF, BF, CB], // bf
        [CB, CB, CB, CB, CB, C4, C4, C8, C4, C4, C8, CB, CB, CB], // cb
    ]
};

/// Row / column of each dtype in [`TABLE`] (`usize::MAX` for dtypes handled before the lookup).
const TABLE_INDEX: [usize; DType::COUNT] = {
    let mut index = [usize::MAX; DType::COUNT];
    let mut i = 0;
    while i < TABLE_TYPES.len() {
        index[TABLE_TYPES[i].index()] = i;
        i += 1;
    }
    index
};

impl Policy for Torch {
    fn name(&self) -> &'static str {
        "torch"
    }

    /// torch 2.15's dtypes: not ml_dtypes' float8_e4m3, float8_e3m4, float8_e4m3b11fnuz,
    /// float6 and float4_e2m1fn.
    fn has_dtype(&self, dtype: DType) -> bool {
        dtype.torch_support() != TorchSupport::Absent
    }

    /// `c10::promoteTypes`: a dtype torch lacks (float8_e4m3, float6, float4...) is an error;
    /// equal types promote to themselves; float8 with anything else is an error; uint16/32/64
    /// and uint1/2/4 promote only with floating types (to the floating type, float4_e2m1fn_x2
    /// included); the rest is the table, which has no row for int1/2/4 and float4_e2m1fn_x2.
    fn promote_types(&self, a: DType, b: DType) -> Result<DType, PromoteError> {
        if let Some(dtype) = [a, b]
            .into_iter()
            .find(|d| d.torch_support() == TorchSupport::Absent)
        {
            return Err(PromoteError::NotInPolicy {
                dtype,
                policy: "torch",
            });
        }
        if a == b {
            return Ok(a);
        }
        if a.is_float8() || b.is_float8() {
            return Err(PromoteError::Float8 { a, b });
        }
        if a.is_barebones_unsigned() || b.is_barebones_unsigned() {
            return if a.is_floating_point() {
                Ok(a)
            } else if b.is_floating_point() {
                Ok(b)
            } else {
                Err(PromoteError::BarebonesUnsigned { a, b })
            };
        }
        match (TABLE_INDEX[a.index()], TABLE_INDEX[b.index()]) {
            (usize::MAX, _) | (_, usize::MAX) => Err(PromoteError::NoTableEntry { a, b }),
            (i, j) => Ok(TABLE[i][j]),
        }
    }

    fn result_type(&self, operands: &[Operand]) -> Result<DType, PromoteError> {
        for op in operands {
            if let Operand::Tensor(dtype) | Operand::ZeroDim(dtype) = *op {
                if dtype.torch_support() == TorchSupport::Absent {
                    return Err(PromoteError::NotInPolicy {
                        dtype,
                        policy: "torch",
                    });
                }
            }
        }
        let mut state = ResultTypeState::default();
        for &op in operands {
            state.update(self, op)?;
        }
        state.finish(self)
    }

    /// `c10::canCast`: not complex → real, not floating → integer, not non-bool → bool.
    fn can_cast(&self, from: DType, to: DType) -> bool {
        !(from.is_complex() && !to.is_complex()
            || from.is_floating_point() && to.is_integral(false)
            || from != DType::Bool && to == DType::Bool)
    }

    fn default_dtype(&self) -> DType {
        self.default_dtype
    }

    /// `c10::get_default_complex_dtype`: complex32 for a float16 default, complex128 for float64,
    /// complex64 otherwise (bfloat16 included).
    fn default_complex_dtype(&self) -> DType {
        match self.default_dtype {
            DType::Float16 => DType::Complex32,
            DType::Float64 => DType::Complex128,
            _ => DType::Complex64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operand::ScalarKind;

    fn rt(ops: &[Operand]) -> DType {
        Torch::default().result_type(ops).unwrap()
    }

    #[test]
    fn result_type_examples_from_the_reference() {
        // torch-semantics.md §3, observed with torch 2.15 (default float32).
        use DType::*;
        use Operand::{Tensor as T, WrappedScalar as W, ZeroDim as Z};
        use ScalarKind::{Complex, Float, Int};
        assert_eq!(rt(&[T(Int32), W(Int)]), Int32);
        assert_eq!(rt(&[T(Int32), W(Float)]), Float32);
        assert_eq!(rt(&[T(Int32), W(Complex)]), Complex64);
        assert_eq!(rt(&[T(Bool), W(Int)]), Int64);
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

    #[test]
    fn table_is_symmetric_and_bool_is_its_identity() {
        for (i, row) in TABLE.iter().enumerate() {
            for (j, cell) in row.iter().enumerate() {
                assert_eq!(*cell, TABLE[j][i]);
            }
            assert_eq!(TABLE[i][TABLE_INDEX[DType::Bool.index()]], TABLE_TYPES[i]);
            assert_eq!(TABLE[i][i], TABLE_TYPES[i]);
        }
    }

    #[test]
    fn every_dtype_outside_the_table_is_handled_before_the_lookup() {
        for dt in DType::ALL {
            let in_table = TABLE_INDEX[dt.index()] != usize::MAX;
            let storage_only = dt.torch_support() != TorchSupport::Casts;
            assert_eq!(
                !in_table,
                dt.is_float8() || dt.is_barebones_unsigned() || storage_only,
                "{dt}"
            );
        }
    }

    #[test]
    fn cells_the_reference_calls_out() {
        // torch-semantics.md §2 "notable cells".
        let t = Torch::default();
        let p = |a, b| t.promote_types(a, b).unwrap();
        assert_eq!(p(DType::UInt8, DType::Int8), DType::Int16);
        assert_eq!(p(DType::Int64, DType::Float16), DType::Float16);
        assert_eq!(p(DType::Float16, DType::BFloat16), DType::Float32);
        assert_eq!(p(DType::Float16, DType::Complex64), DType::Complex64);
        assert_eq!(p(DType::Float32, DType::Complex32), DType::Complex64);
        assert_eq!(p(DType::UInt32, DType::BFloat16), DType::BFloat16);
        assert!(t.promote_types(DType::UInt16, DType::Complex64).is_err());
        assert!(t
            .promote_types(DType::Float8E4M3Fn, DType::Float8E5M2)
            .is_err());
        assert_eq!(p(DType::Float8E5M2, DType::Float8E5M2), DType::Float8E5M2);
    }

    #[test]
    fn default_complex_follows_default_dtype() {
        let c = |d| Torch::new(d).unwrap().default_complex_dtype();
        assert_eq!(c(DType::Float16), DType::Complex32);
        assert_eq!(c(DType::BFloat16), DType::Complex64);
        assert_eq!(c(DType::Float32), DType::Complex64);
        assert_eq!(c(DType::Float64), DType::Complex128);
        assert_eq!(
            Torch::new(DType::Float8E4M3Fn),
            Err(PromoteError::InvalidDefaultDType(DType::Float8E4M3Fn))
        );
    }
}
