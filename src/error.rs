//! [`Error`]: one error type for everything the workspace's crates return, so that `?` works
//! across them.

/// Any error of dtcast's crates. Its text is the crate error's own, and
/// [`source`](std::error::Error::source) continues the crate error's chain (an I/O error under a
/// checkpoint error, say).
///
/// ```
/// use dtcast::prelude::*;
/// fn parse_and_cast() -> Result<[bf16; 2], dtcast::Error> {
///     let dtype: DType = "bfloat16".parse()?; // a ParseDTypeError
///     assert_eq!(dtype, DType::BFloat16);
///     let mut out = [bf16::ZERO; 2];
///     dtcast::cast_slice(&[1.0f32, 2.5], &mut out, CastMode::Checked)?; // a CastError
///     Ok(out)
/// }
/// assert_eq!(parse_and_cast()?, [bf16::ONE, bf16::from_f32(2.5)]);
/// let e: dtcast::Error = "float9".parse::<DType>().unwrap_err().into();
/// assert!(e.to_string().contains("float9"));
/// # Ok::<(), dtcast::Error>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A dtype name that is not one ([`dtcast_dtype::ParseDTypeError`]).
    #[error(transparent)]
    ParseDType(#[from] dtcast_dtype::ParseDTypeError),
    /// Sub-byte storage that does not fit ([`dtcast_dtype::packing::StorageError`]).
    #[error(transparent)]
    Storage(#[from] dtcast_dtype::packing::StorageError),
    /// Promotion ([`dtcast_promote::PromoteError`]).
    #[error(transparent)]
    Promote(#[from] dtcast_promote::PromoteError),
    /// A bitcast ([`dtcast_bitcast::BitcastError`]).
    #[error(transparent)]
    Bitcast(#[from] dtcast_bitcast::BitcastError),
    /// A cast ([`dtcast_cast::CastError`]).
    #[error(transparent)]
    Cast(#[from] dtcast_cast::CastError),
    /// A cast mode name that is not one ([`dtcast_cast::ParseCastModeError`]).
    #[error(transparent)]
    ParseCastMode(#[from] dtcast_cast::ParseCastModeError),
    /// A scaled format ([`dtcast_quant::QuantError`]).
    #[error(transparent)]
    Quant(#[from] dtcast_quant::QuantError),
    /// A tensor ([`dtcast_device::TensorError`]).
    #[error(transparent)]
    Tensor(#[from] dtcast_device::TensorError),
    /// A device name that is not one ([`dtcast_device::ParseDeviceError`]).
    #[error(transparent)]
    ParseDevice(#[from] dtcast_device::ParseDeviceError),
    /// A layer or a checkpoint ([`dtcast_layer::LayerError`]).
    #[error(transparent)]
    Layer(#[from] dtcast_layer::LayerError),
}
