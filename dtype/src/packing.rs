//! Packed storage of the sub-byte dtypes: the one place where bits become bytes.
//!
//! A buffer of a dtype narrower than a byte is a little-endian bit stream: element `i` occupies
//! bits `i·b .. i·b + b`, counting from the least significant bit of byte 0. For float4/int4 that
//! is two elements per byte with the first in the **low nibble** (torch's `float4_e2m1fn_x2`,
//! safetensors' `F4`); int2/uint2 put four per byte and int1/uint1 eight, first in the lowest
//! bits; float6 puts four elements in three bytes (`F6_E2M3`/`F6_E3M2`).
//!
//! Unpacked, each element is one byte holding its code in the low bits and zeros above — the
//! layout ml_dtypes uses in memory. [`unpack`] and [`pack`] convert between the two.
//!
//! ```
//! use dtcast_dtype::{packing, DType};
//! // float4 codes 2 (1.0) and 7 (6.0), then 1 (0.5) and 12 (-2.0): torch's nvfp4 packing.
//! let mut packed = [0u8; 2];
//! packing::pack(DType::Float4E2M1Fn, &[2, 7, 1, 12], &mut packed)?;
//! assert_eq!(packed, [0x72, 0xC1]);
//! let mut codes = [0u8; 4];
//! packing::unpack(DType::Float4E2M1Fn, &packed, &mut codes)?;
//! assert_eq!(codes, [2, 7, 1, 12]);
//! # Ok::<(), dtcast_dtype::packing::StorageError>(())
//! ```

use core::fmt;

use crate::dtype::DType;

/// A byte count that does not fit a number of elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageError {
    /// `elements` elements of a packed dtype end inside a byte.
    NotByteAligned {
        /// The dtype.
        dtype: DType,
        /// The element count.
        elements: usize,
    },
    /// A packed buffer whose length is not the storage of the unpacked elements.
    Length {
        /// The dtype.
        dtype: DType,
        /// The element count.
        elements: usize,
        /// The bytes given.
        bytes: usize,
    },
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            StorageError::NotByteAligned { dtype, elements } => {
                write!(
                    f,
                    "{elements} {dtype} elements ({} bits each) ",
                    dtype.bits()
                )?;
                // (The count of bits overflowing is the other way `storage_bytes` fails.)
                if elements.checked_mul(dtype.bits()).is_none() {
                    write!(f, "have more bytes than memory can address")
                } else {
                    write!(f, "do not end at a byte boundary")
                }
            }
            StorageError::Length {
                dtype,
                elements,
                bytes,
            } => write!(
                f,
                "{elements} {dtype} elements ({} bits each) are not stored in {bytes} bytes",
                dtype.bits()
            ),
        }
    }
}

impl core::error::Error for StorageError {}

fn check(dtype: DType, elements: usize, bytes: usize) -> Result<(), StorageError> {
    if dtype.storage_bytes(elements)? == bytes {
        Ok(())
    } else {
        Err(StorageError::Length {
            dtype,
            elements,
            bytes,
        })
    }
}

/// Unpacks `codes.len()` elements of `dtype` from `packed` into one byte each (code in the low
/// bits, zeros above). `packed` must hold exactly their storage ([`DType::storage_bytes`]); for a
/// dtype of 8 bits or more this is a copy.
pub fn unpack(dtype: DType, packed: &[u8], codes: &mut [u8]) -> Result<(), StorageError> {
    let bits = dtype.bits();
    if bits >= 8 {
        check(dtype, codes.len() * 8 / bits, packed.len())?;
        codes.copy_from_slice(packed);
        return Ok(());
    }
    check(dtype, codes.len(), packed.len())?;
    if bits == 6 {
        for (group, out) in packed.chunks_exact(3).zip(codes.chunks_exact_mut(4)) {
            let word = u32::from_le_bytes([group[0], group[1], group[2], 0]);
            for (k, c) in out.iter_mut().enumerate() {
                *c = (word >> (6 * k)) as u8 & 0x3F;
            }
        }
        return Ok(());
    }
    match bits {
        4 => unpack_n::<2, 4>(packed, codes),
        2 => unpack_n::<4, 2>(packed, codes),
        _ => unpack_n::<8, 1>(packed, codes),
    }
    Ok(())
}

/// Unpacks `PER` elements of `BITS` bits from each byte (sizes known to the compiler, so that
/// the loop vectorises).
fn unpack_n<const PER: usize, const BITS: usize>(packed: &[u8], codes: &mut [u8]) {
    let mask = ((1u16 << BITS) - 1) as u8;
    let (groups, _) = codes.as_chunks_mut::<PER>();
    for (&byte, out) in packed.iter().zip(groups) {
        for (k, c) in out.iter_mut().enumerate() {
            *c = (byte >> (k * BITS)) & mask;
        }
    }
}

/// Packs `PER` codes of `BITS` bits into each byte.
fn pack_n<const PER: usize, const BITS: usize>(codes: &[u8], packed: &mut [u8]) {
    let mask = ((1u16 << BITS) - 1) as u8;
    let (groups, _) = codes.as_chunks::<PER>();
    for (byte, group) in packed.iter_mut().zip(groups) {
        let mut b = 0u8;
        for (k, &c) in group.iter().enumerate() {
            b |= (c & mask) << (k * BITS);
        }
        *byte = b;
    }
}

/// Packs one-byte codes into `dtype`'s storage (the inverse of [`unpack`]); bits of a code above
/// the dtype's width are ignored. `packed` must hold exactly the storage of `codes.len()` elements.
pub fn pack(dtype: DType, codes: &[u8], packed: &mut [u8]) -> Result<(), StorageError> {
    let bits = dtype.bits();
    if bits >= 8 {
        check(dtype, codes.len() * 8 / bits, packed.len())?;
        packed.copy_from_slice(codes);
        return Ok(());
    }
    check(dtype, codes.len(), packed.len())?;
    if bits == 6 {
        for (group, out) in codes.chunks_exact(4).zip(packed.chunks_exact_mut(3)) {
            let word = group
                .iter()
                .enumerate()
                .fold(0u32, |w, (k, &c)| w | u32::from(c & 0x3F) << (6 * k));
            out.copy_from_slice(&word.to_le_bytes()[..3]);
        }
        return Ok(());
    }
    match bits {
        4 => pack_n::<2, 4>(codes, packed),
        2 => pack_n::<4, 2>(codes, packed),
        _ => pack_n::<8, 1>(codes, packed),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_packed_dtype_round_trips_every_code() {
        for dt in DType::ALL.into_iter().filter(|d| d.is_packed()) {
            let codes: Vec<u8> = (0..240u32)
                .map(|i| (i * 7 % 256) as u8 & ((1 << dt.bits()) - 1))
                .collect();
            let mut packed = vec![0u8; dt.storage_bytes(codes.len()).unwrap()];
            pack(dt, &codes, &mut packed).unwrap();
            let mut back = vec![0u8; codes.len()];
            unpack(dt, &packed, &mut back).unwrap();
            assert_eq!(back, codes, "{dt}");
        }
    }

    #[test]
    fn bit_order_is_least_significant_first() {
        // uint1: element 0 is bit 0.
        let mut packed = [0u8; 1];
        pack(DType::UInt1, &[1, 0, 0, 0, 0, 0, 0, 1], &mut packed).unwrap();
        assert_eq!(packed, [0x81]);
        // uint2: element 0 in bits 0-1.
        pack(DType::UInt2, &[3, 0, 1, 2], &mut packed).unwrap();
        assert_eq!(packed, [0b10_01_00_11]);
        // float6: 4 elements in 3 bytes, element 1 starts at bit 6.
        let mut three = [0u8; 3];
        pack(DType::Float6E2M3Fn, &[0, 1, 0, 0x3F], &mut three).unwrap();
        assert_eq!(three, [0x40, 0x00, 0xFC]);
    }

    #[test]
    fn lengths_that_do_not_fit_are_errors() {
        let mut codes = [0u8; 3];
        let err = unpack(DType::Int4, &[0, 0], &mut codes).unwrap_err();
        assert_eq!(
            err,
            StorageError::NotByteAligned {
                dtype: DType::Int4,
                elements: 3
            }
        );
        let mut four = [0u8; 4];
        let err = unpack(DType::Int4, &[0], &mut four).unwrap_err();
        assert_eq!(
            err.to_string(),
            "4 int4 elements (4 bits each) are not stored in 1 bytes"
        );
    }
}
