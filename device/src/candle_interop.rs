//! candle's side (feature `candle`): CPU `candle_core::Tensor`s to and from dtcast tensors, and
//! [`candle_to_dtype`], which casts a candle tensor with dtcast's kernels.
//!
//! Copies: candle keeps CPU data in a `Vec<T>` behind a lock and dtcast keeps host data in
//! 16-byte-aligned words, so neither can adopt the other's buffer: [`Tensor::from_candle`] and
//! [`Tensor::to_candle`] copy the bytes once. [`candle_to_dtype`] copies nothing besides the cast:
//! it reads candle's storage in place and hands the cast's output `Vec` to candle.
//!
//! candle's dtypes and dtcast's, row by row ([`candle_dtype`]): `u8`, `u32`, `i16`, `i32`,
//! `i64`, `bf16`, `f16`, `f32`, `f64`, `f8e4m3` (= float8_e4m3fn: candle stores safetensors'
//! F8_E4M3 in it), and candle's storage-only `f6e2m3`, `f6e3m2`, `f4` (packed as safetensors
//! packs them) and `f8e8m0`, which candle cannot cast itself and dtcast can.

use std::ops::Range;

use candle_core::{CpuStorage, Storage};
use dtcast_cast::{cast_into_scratch, CastMode};
use dtcast_dtype::DType;
use rayon::prelude::*;

use crate::cpu::host_bytes;
use crate::{Tensor, TensorError};

/// How a tensor of one candle dtype is built from cast output.
#[derive(Clone, Copy)]
enum Build {
    /// `Tensor::from_vec` over a `Vec` of the element type (no copy of the output).
    Typed(fn(usize, &[usize], &Fill<'_>) -> Built),
    /// `Tensor::from_raw_buffer` over packed bytes (candle's storage-only dtypes).
    Raw,
}

type Built = Result<candle_core::Tensor, TensorError>;

/// Writes the bytes of output elements `range` (the whole output at once, or blocks of
/// [`BLOCK`] elements from several threads).
type Fill<'a> = dyn Fn(Range<usize>, &mut [u8]) -> Result<(), TensorError> + Sync + 'a;

/// Elements per block written through a cache-resident scratch buffer: a multiple of 8, so a
/// block of any packed source dtype starts on a byte.
const BLOCK: usize = 8192;

/// One row per dtype both libraries have: dtcast's dtype, candle's, how to build candle's.
const CANDLE_DTYPES: [(DType, candle_core::DType, Build); 14] = {
    use candle_core::DType as C;
    [
        (DType::UInt8, C::U8, Build::Typed(typed::<u8>)),
        (DType::UInt32, C::U32, Build::Typed(typed::<u32>)),
        (DType::Int16, C::I16, Build::Typed(typed::<i16>)),
        (DType::Int32, C::I32, Build::Typed(typed::<i32>)),
        (DType::Int64, C::I64, Build::Typed(typed::<i64>)),
        (
            DType::BFloat16,
            C::BF16,
            Build::Typed(typed::<dtcast_dtype::half::bf16>),
        ),
        (
            DType::Float16,
            C::F16,
            Build::Typed(typed::<dtcast_dtype::half::f16>),
        ),
        (DType::Float32, C::F32, Build::Typed(typed::<f32>)),
        (DType::Float64, C::F64, Build::Typed(typed::<f64>)),
        (
            DType::Float8E4M3Fn,
            C::F8E4M3,
            Build::Typed(typed::<float8::F8E4M3>),
        ),
        (DType::Float6E2M3Fn, C::F6E2M3, Build::Raw),
        (DType::Float6E3M2Fn, C::F6E3M2, Build::Raw),
        (DType::Float4E2M1Fn, C::F4, Build::Raw),
        (DType::Float8E8M0Fnu, C::F8E8M0, Build::Raw),
    ]
};

/// candle's dtype for a dtcast dtype, or `None` where candle has none (bool, int8, the other
/// float8 formats, complex, ...).
///
/// ```
/// use dtcast_device::candle_dtype;
/// use dtcast_dtype::DType;
/// assert_eq!(candle_dtype(DType::BFloat16), Some(candle_core::DType::BF16));
/// assert_eq!(candle_dtype(DType::Float8E4M3Fn), Some(candle_core::DType::F8E4M3));
/// assert_eq!(candle_dtype(DType::Float8E5M2), None);
/// ```
pub fn candle_dtype(dtype: DType) -> Option<candle_core::DType> {
    CANDLE_DTYPES
        .iter()
        .find(|row| row.0 == dtype)
        .map(|row| row.1)
}

/// dtcast's dtype for a candle dtype (every candle dtype of this version has one).
///
/// ```
/// use dtcast_device::dtype_of_candle;
/// use dtcast_dtype::DType;
/// assert_eq!(dtype_of_candle(candle_core::DType::F4)?, DType::Float4E2M1Fn);
/// # Ok::<(), dtcast_device::TensorError>(())
/// ```
pub fn dtype_of_candle(dtype: candle_core::DType) -> Result<DType, TensorError> {
    CANDLE_DTYPES
        .iter()
        .find(|row| row.1 == dtype)
        .map(|row| row.0)
        .ok_or_else(|| interop(format!("candle dtype {dtype:?} has no dtcast dtype")))
}

fn interop(message: String) -> TensorError {
    TensorError::Interop {
        library: "candle",
        message,
    }
}

fn candle_error(e: candle_core::Error) -> TensorError {
    interop(e.to_string())
}

fn row_of(dtype: DType) -> Result<(candle_core::DType, Build), TensorError> {
    CANDLE_DTYPES
        .iter()
        .find(|row| row.0 == dtype)
        .map(|row| (row.1, row.2))
        .ok_or(TensorError::Unstorable {
            dtype,
            format: "candle",
        })
}

/// A candle CPU tensor of `n` elements of `T` and shape `shape`, its bytes written by `fill`.
///
/// The output is written once: each block is filled into a small scratch buffer (in cache) and
/// moved into the uninitialised `Vec` candle takes over — a zeroed buffer would cost a pass of
/// its own wherever the allocator reuses memory (calloc clears it).
fn typed<T: candle_core::WithDType + bytemuck::Pod>(
    n: usize,
    shape: &[usize],
    fill: &Fill<'_>,
) -> Built {
    let mut data: Vec<T> = Vec::new();
    data.try_reserve_exact(n)
        .map_err(|_| TensorError::OutOfMemory {
            bytes: n.saturating_mul(size_of::<T>()),
        })?;
    // Fresh memory faults in as it is first written: on huge pages, 512 times less often.
    dtcast_cast::prefer_huge_pages(&mut data.spare_capacity_mut()[..n]);
    data.spare_capacity_mut()[..n]
        .par_chunks_mut(BLOCK)
        .enumerate()
        .try_for_each_init(
            || vec![T::zeroed(); BLOCK],
            |scratch, (i, out)| {
                let scratch = &mut scratch[..out.len()];
                fill(
                    i * BLOCK..i * BLOCK + out.len(),
                    bytemuck::cast_slice_mut(scratch),
                )?;
                for (o, s) in out.iter_mut().zip(scratch.iter()) {
                    o.write(*s);
                }
                Ok::<(), TensorError>(())
            },
        )?;
    // SAFETY: `try_reserve_exact` made room for `n` elements, and the loop above wrote every one
    // of the first `n` (its chunks cover them, each element of each chunk is written; on error
    // we returned before this line).
    unsafe { data.set_len(n) };
    candle_core::Tensor::from_vec(data, shape.to_vec(), &candle_core::Device::Cpu)
        .map_err(candle_error)
}

/// Builds a candle CPU tensor of `dtype` and `shape` whose bytes `fill` writes.
fn build(dtype: DType, shape: &[usize], fill: &Fill<'_>) -> Built {
    let (candle, how) = row_of(dtype)?;
    let n: usize = shape.iter().product();
    match how {
        Build::Typed(make) => make(n, shape, fill),
        Build::Raw => {
            let bytes = dtype.storage_bytes(n).map_err(|_| {
                TensorError::Cast(dtcast_cast::CastError::NotByteAligned { dtype, elements: n })
            })?;
            let mut data =
                dtcast_cast::zeroed_vec::<u8>(bytes).ok_or(TensorError::OutOfMemory { bytes })?;
            fill(0..n, &mut data)?;
            candle_core::Tensor::from_raw_buffer(&data, candle, shape, &candle_core::Device::Cpu)
                .map_err(candle_error)
        }
    }
}

/// The bytes of a CPU storage (every variant; sub-byte dtypes packed).
fn storage_bytes(storage: &CpuStorage) -> &[u8] {
    match storage {
        CpuStorage::U8(v) => v,
        CpuStorage::U32(v) => bytemuck::cast_slice(v),
        CpuStorage::I16(v) => bytemuck::cast_slice(v),
        CpuStorage::I32(v) => bytemuck::cast_slice(v),
        CpuStorage::I64(v) => bytemuck::cast_slice(v),
        CpuStorage::BF16(v) => bytemuck::cast_slice(v),
        CpuStorage::F16(v) => bytemuck::cast_slice(v),
        CpuStorage::F32(v) => bytemuck::cast_slice(v),
        CpuStorage::F64(v) => bytemuck::cast_slice(v),
        CpuStorage::F8E4M3(v) => bytemuck::cast_slice(v),
        CpuStorage::F6E2M3(v)
        | CpuStorage::F6E3M2(v)
        | CpuStorage::F4(v)
        | CpuStorage::F8E8M0(v) => v,
    }
}

/// Runs `f` over a candle CPU tensor's dtype, shape and element bytes (read in place; a strided
/// tensor is made contiguous first, by candle).
fn with_candle_bytes<R>(
    t: &candle_core::Tensor,
    f: impl FnOnce(DType, &[usize], &[u8]) -> Result<R, TensorError>,
) -> Result<R, TensorError> {
    if !t.is_contiguous() {
        return with_candle_bytes(&t.contiguous().map_err(candle_error)?, f);
    }
    let dtype = dtype_of_candle(t.dtype())?;
    let (storage, layout) = t.storage_and_layout();
    let cpu = match &*storage {
        Storage::Cpu(cpu) => cpu,
        Storage::Cuda(_) | Storage::Metal(_) => {
            return Err(interop(format!(
                "the tensor is on {:?}; dtcast converts CPU candle tensors (move it with \
                 `to_device(&Device::Cpu)` first)",
                t.device().location()
            )))
        }
    };
    let (start, end) = layout
        .contiguous_offsets()
        .ok_or_else(|| interop("the tensor's layout is not contiguous".to_owned()))?;
    let offset = |elements: usize| {
        dtype.storage_bytes(elements).map_err(|_| {
            TensorError::Cast(dtcast_cast::CastError::NotByteAligned { dtype, elements })
        })
    };
    let bytes = storage_bytes(cpu)
        .get(offset(start)?..offset(end)?)
        .ok_or_else(|| interop("the tensor's layout lies outside its storage".to_owned()))?;
    f(dtype, t.dims(), bytes)
}

/// Casts a CPU candle tensor to `dtype` with dtcast's kernels ([`CastMode::Torch`]: torch's
/// bytes), returning a candle tensor — candle's own CPU casts are scalar, round some integer
/// casts twice, and cannot cast float4, float6 or float8_e8m0 at all.
///
/// The target must be a dtype candle has ([`candle_dtype`]); other dtypes are an error (cast
/// to a dtcast [`Tensor`] with [`Tensor::from_candle`] and [`Tensor::to`] instead).
///
/// ```
/// use dtcast_device::candle_to_dtype;
/// use dtcast_dtype::DType;
/// let t = candle_core::Tensor::new(&[1.0f32, 448.0, 1000.0], &candle_core::Device::Cpu)?;
/// let f8 = candle_to_dtype(&t, DType::Float8E4M3Fn)?;
/// assert_eq!(f8.dtype(), candle_core::DType::F8E4M3);
/// // torch 2.15's float8_e4m3fn: 1000 is out of range and saturates to 448.
/// let back = candle_to_dtype(&f8, DType::Float32)?.to_vec1::<f32>()?;
/// assert_eq!(back, [1.0, 448.0, 448.0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn candle_to_dtype(t: &candle_core::Tensor, dtype: DType) -> Built {
    candle_to_dtype_with(t, dtype, CastMode::Torch)
}

/// [`candle_to_dtype`] in a chosen [`CastMode`] (`Checked` fails on the first value the target
/// cannot hold, and returns no tensor).
pub fn candle_to_dtype_with(t: &candle_core::Tensor, dtype: DType, mode: CastMode) -> Built {
    with_candle_bytes(t, |from, shape, src| {
        // Block bounds are multiples of 8 elements and `src` holds whole bytes: every bound
        // is a byte (the fallback is never taken).
        let bytes = |elements: usize| from.storage_bytes(elements).unwrap_or(src.len());
        build(dtype, shape, &|range: Range<usize>, dst: &mut [u8]| {
            let src = &src[bytes(range.start)..bytes(range.end)];
            Ok(cast_into_scratch(src, from, dst, dtype, mode)?)
        })
    })
}

impl Tensor {
    /// A dtcast CPU tensor holding a copy of a CPU candle tensor (same dtype, shape and values;
    /// a strided tensor is made contiguous by candle first).
    ///
    /// ```
    /// use dtcast_device::Tensor;
    /// use dtcast_dtype::DType;
    /// let c = candle_core::Tensor::new(&[[1u32, 2], [3, 4]], &candle_core::Device::Cpu)?;
    /// let t = Tensor::from_candle(&c.t()?)?; // transposed: made contiguous
    /// assert_eq!((t.dtype(), t.shape()), (DType::UInt32, &[2, 2][..]));
    /// assert_eq!(t.to_vec::<u32>()?, [1, 3, 2, 4]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_candle(t: &candle_core::Tensor) -> Result<Tensor, TensorError> {
        with_candle_bytes(t, |dtype, shape, bytes| {
            Tensor::from_bytes(bytes, dtype, shape)
        })
    }

    /// A CPU candle tensor holding a copy of this tensor (read from its device); its dtype must
    /// be one candle has ([`candle_dtype`]).
    ///
    /// ```
    /// use dtcast_device::Tensor;
    /// use dtcast_dtype::half::bf16;
    /// let t = Tensor::from_vec(vec![bf16::ONE, bf16::MAX], &[2])?;
    /// let c = t.to_candle()?;
    /// assert_eq!(c.dtype(), candle_core::DType::BF16);
    /// assert_eq!(c.to_vec1::<bf16>()?, [bf16::ONE, bf16::MAX]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn to_candle(&self) -> Built {
        let downloaded;
        let bytes = match host_bytes(self.storage().as_ref()) {
            Ok(bytes) => bytes,
            Err(_) => {
                downloaded = self.to_bytes()?;
                &downloaded
            }
        };
        let dtype = self.dtype();
        let offset = |elements: usize| dtype.storage_bytes(elements).unwrap_or(bytes.len());
        build(
            dtype,
            self.shape(),
            &|range: Range<usize>, dst: &mut [u8]| {
                dst.copy_from_slice(&bytes[offset(range.start)..offset(range.end)]);
                Ok(())
            },
        )
    }
}

impl TryFrom<&candle_core::Tensor> for Tensor {
    type Error = TensorError;
    /// [`Tensor::from_candle`].
    fn try_from(t: &candle_core::Tensor) -> Result<Tensor, TensorError> {
        Tensor::from_candle(t)
    }
}

impl TryFrom<&Tensor> for candle_core::Tensor {
    type Error = TensorError;
    /// [`Tensor::to_candle`].
    fn try_from(t: &Tensor) -> Built {
        t.to_candle()
    }
}
