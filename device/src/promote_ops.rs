//! `promote_operands`: the common dtype of tensors and scalars, and the tensors cast to it.

use dtcast_dtype::DType;
use dtcast_promote::{at_least, Operand, Policy, ScalarKind};

use crate::error::TensorError;
use crate::tensor::Tensor;

/// One operand of a mixed operation.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    /// A tensor (0-dim when its shape is empty).
    Tensor(&'a Tensor),
    /// A Python-style scalar.
    Scalar(ScalarKind),
}

/// Computes the dtype an operation over `args` runs in under `policy` — raised to at least
/// `lowest` when given (an integer `sum` runs in int64) — and returns it with every tensor cast to
/// it (tensors already of that dtype are shared, not copied), in order. Like OneFlow's
/// `TensorProcessor`.
///
/// ```
/// use dtcast_device::{promote_operands, Arg, Tensor};
/// use dtcast_dtype::DType;
/// use dtcast_promote::{ScalarKind, Torch};
/// let a = Tensor::from_vec(vec![1i32, 2], &[2])?;
/// let b = Tensor::from_vec(vec![0.5f64], &[])?; // 0-dim, but of a higher category: it decides
/// let (dt, tensors) = promote_operands(&[Arg::Tensor(&a), Arg::Tensor(&b), Arg::Scalar(ScalarKind::Int)], &Torch::default(), None)?;
/// assert_eq!(dt, DType::Float64);
/// assert_eq!(tensors[0].to_vec::<f64>()?, [1.0, 2.0]);
/// # Ok::<(), dtcast_device::TensorError>(())
/// ```
pub fn promote_operands(
    args: &[Arg<'_>],
    policy: &dyn Policy,
    lowest: Option<DType>,
) -> Result<(DType, Vec<Tensor>), TensorError> {
    let operands: Vec<Operand> = args
        .iter()
        .map(|a| match a {
            Arg::Tensor(t) if t.shape().is_empty() => Operand::ZeroDim(t.dtype()),
            Arg::Tensor(t) => Operand::Tensor(t.dtype()),
            Arg::Scalar(kind) => Operand::WrappedScalar(*kind),
        })
        .collect();
    let mut common = policy.result_type(&operands)?;
    if let Some(lowest) = lowest {
        common = at_least(common, lowest);
    }
    let tensors = args
        .iter()
        .filter_map(|a| match a {
            Arg::Tensor(t) => Some(t.to(common)),
            Arg::Scalar(_) => None,
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((common, tensors))
}
