//! Zero-copy reinterpretation of byte buffers.

use alloc::borrow::Cow;
use alloc::vec::Vec;

use bytemuck::checked::{self, CheckedCastError};
use dtcast_dtype::{DType, Element};

use crate::error::BitcastError;
use crate::numel;
use crate::rule::Rule;

/// A buffer read as another dtype: the same bytes, a new dtype and shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bitcast<'a> {
    /// The new dtype.
    pub dtype: DType,
    /// The new shape.
    pub shape: Vec<usize>,
    /// The bytes, unchanged and not copied.
    pub bytes: &'a [u8],
}

/// Reads `bytes` — a contiguous tensor of `shape` elements of `from` — as `to`, by `rule`.
///
/// Checks that the buffer holds exactly the bytes the shape needs (with checked arithmetic: a
/// shape whose size overflows is an error, not a wrap). Never copies.
///
/// ```
/// use dtcast_bitcast::{bitcast, View};
/// use dtcast_dtype::DType;
/// let bytes = 1.0f32.to_le_bytes();
/// let b = bitcast(&View, &bytes, &[1], DType::Float32, DType::UInt8)?;
/// assert_eq!(b.shape, vec![4]);
/// assert_eq!(b.bytes, &[0x00, 0x00, 0x80, 0x3f]);
/// # Ok::<(), dtcast_bitcast::BitcastError>(())
/// ```
pub fn bitcast<'a>(
    rule: &dyn Rule,
    bytes: &'a [u8],
    shape: &[usize],
    from: DType,
    to: DType,
) -> Result<Bitcast<'a>, BitcastError> {
    let n = from.shape_elements(shape).map_err(BitcastError::Overflow)?;
    let expected = match from.storage_bytes(n) {
        Ok(bytes) => bytes,
        Err(_) => {
            return Err(BitcastError::PartialElement {
                dtype: from,
                len: bytes.len(),
            })
        }
    };
    if bytes.len() != expected {
        return Err(BitcastError::ByteLength {
            expected,
            actual: bytes.len(),
        });
    }
    let shape = rule.infer(shape, from, to)?;
    let described = numel(&shape).and_then(|m| to.storage_bytes(m).ok());
    if described != Some(bytes.len()) {
        return Err(BitcastError::Storage {
            rule: rule.name(),
            to,
            shape,
            bytes: bytes.len(),
        });
    }
    Ok(Bitcast {
        dtype: to,
        shape,
        bytes,
    })
}

/// Views little-endian bytes as elements of `T`: borrowed when `bytes` is aligned for `T`, copied
/// only when it is not (a memory-mapped file at an odd offset, say).
///
/// A length that is not a whole number of elements is an error, and so is a byte other than 0 or
/// 1 read as `bool`.
///
/// ```
/// use std::borrow::Cow;
/// use dtcast_bitcast::reinterpret;
/// let words = [1u32, 2, 3];
/// let bytes: &[u8] = bytemuck::cast_slice(&words);
/// let back = reinterpret::<u32>(bytes)?;
/// assert!(matches!(back, Cow::Borrowed(_)));
/// let unaligned = reinterpret::<u32>(&bytes[1..9])?; // misaligned: copied
/// assert_eq!(unaligned.len(), 2);
/// assert!(reinterpret::<bool>(&[0, 1, 2]).is_err());
/// # Ok::<(), dtcast_bitcast::BitcastError>(())
/// ```
pub fn reinterpret<T: Element>(bytes: &[u8]) -> Result<Cow<'_, [T]>, BitcastError> {
    // Every `Element` is whole bytes (the packed dtypes have no element type).
    let size = T::DTYPE.byte_size().unwrap_or(1);
    if !bytes.len().is_multiple_of(size) {
        return Err(BitcastError::PartialElement {
            dtype: T::DTYPE,
            len: bytes.len(),
        });
    }
    match checked::try_cast_slice::<u8, T>(bytes) {
        Ok(slice) => Ok(Cow::Borrowed(slice)),
        Err(CheckedCastError::PodCastError(_)) => bytes
            .chunks_exact(size)
            .enumerate()
            .map(|(index, chunk)| {
                checked::try_pod_read_unaligned::<T>(chunk).map_err(|_| invalid_bool(index, chunk))
            })
            .collect::<Result<Vec<T>, _>>()
            .map(Cow::Owned),
        Err(CheckedCastError::InvalidBitPattern) => {
            // Only bool has invalid patterns; name the first offending element.
            let index = bytes.iter().position(|b| *b > 1).unwrap_or_default();
            Err(invalid_bool(index, &bytes[index..]))
        }
    }
}

fn invalid_bool(index: usize, chunk: &[u8]) -> BitcastError {
    BitcastError::InvalidBool {
        index,
        byte: chunk.first().copied().unwrap_or_default(),
    }
}
