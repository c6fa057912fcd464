//! The `ndarray` feature: `ArrayD<T>` to and from dtcast tensors for every element type, checked
//! element by element against the bytes read with bytemuck, and in ndarray's logical order for
//! views of any layout.

use dtcast::dtype::half::{bf16, f16};
use dtcast::dtype::num_complex::Complex;
use dtcast::dtype::*;
use dtcast::{DType, Element, Tensor, TensorError};
use dtcast_tests::random_bytes;
use ndarray::{s, ArrayD, IxDyn};

/// Random elements of `T` (bools 0 or 1), read from random bytes by bytemuck.
fn random_elements<T: Element>(n: usize, seed: u64) -> (Vec<u8>, Vec<T>) {
    let mut bytes = random_bytes(n * size_of::<T>(), seed);
    if T::DTYPE == DType::Bool {
        bytes.iter_mut().for_each(|b| *b &= 1);
    }
    let elements = bytemuck::checked::cast_slice::<u8, T>(&bytes).to_vec();
    (bytes, elements)
}

fn round_trip<T: Element>(seed: u64) {
    let shape = [3usize, 1, 5];
    let (bytes, elements) = random_elements::<T>(15, seed);
    let t = Tensor::from_bytes(&bytes, T::DTYPE, &shape).unwrap();
    let a = t.to_ndarray::<T>().unwrap();
    assert_eq!(a.shape(), shape, "{}", T::DTYPE);
    // Row-major: element [i, 0, k] is number 5 i + k (compared as bits: NaNs included).
    for i in 0..3 {
        for k in 0..5 {
            let (got, want) = (&a[[i, 0, k]], &elements[5 * i + k]);
            assert_eq!(
                bytemuck::bytes_of(got),
                bytemuck::bytes_of(want),
                "{}",
                T::DTYPE
            );
        }
    }
    let back = Tensor::from_ndarray(&a).unwrap();
    assert_eq!((back.dtype(), back.shape()), (T::DTYPE, &shape[..]));
    assert_eq!(back.to_bytes().unwrap(), bytes, "{}", T::DTYPE);
    let via_try = ArrayD::<T>::try_from(&t).unwrap();
    assert_eq!(
        Tensor::try_from(&via_try).unwrap().to_bytes().unwrap(),
        bytes
    );
}

#[test]
fn every_element_type_round_trips() {
    macro_rules! each {
        ($($ty:ty),* $(,)?) => {{
            let mut seed = 1;
            $( round_trip::<$ty>(seed); seed += 1; )*
            seed - 1
        }};
    }
    let types = each!(
        bool,
        u8,
        i8,
        i16,
        i32,
        i64,
        u16,
        u32,
        u64,
        f16,
        bf16,
        f32,
        f64,
        Complex<f16>,
        Complex<f32>,
        Complex<f64>,
        Complex<bf16>,
        Float8E4M3Fn,
        Float8E5M2,
        Float8E4M3Fnuz,
        Float8E5M2Fnuz,
        Float8E8M0Fnu,
        Float8E4M3,
        Float8E3M4,
        Float8E4M3B11Fnuz,
        Float8E5M3Fnu,
        Float4E2M1FnX2,
    );
    // Every dtype with a whole-byte element type is covered (the packed sub-byte dtypes have none).
    let byte_sized = DType::ALL.iter().filter(|d| d.bits() % 8 == 0).count();
    assert_eq!(types, byte_sized as u64);
}

#[test]
fn views_of_any_layout_are_read_in_logical_order() {
    let a = ArrayD::from_shape_vec(IxDyn(&[3, 4]), (0..12).map(|x| x as f32).collect()).unwrap();
    let t = Tensor::from_ndarray(&a.t()).unwrap();
    assert_eq!(t.shape(), [4, 3]);
    assert_eq!(
        t.to_vec::<f32>().unwrap(),
        [0., 4., 8., 1., 5., 9., 2., 6., 10., 3., 7., 11.]
    );
    // Every other column of rows 1..3, reversed: a strided view with a negative stride.
    let v = a.slice(s![1..3, ..;-2]);
    let t = Tensor::from_ndarray(&v.into_dyn()).unwrap();
    assert_eq!(t.shape(), [2, 2]);
    assert_eq!(t.to_vec::<f32>().unwrap(), [7., 5., 11., 9.]);
    // A 0-dim array.
    let scalar = ArrayD::from_elem(IxDyn(&[]), 2.5f64);
    let t = Tensor::from_ndarray(&scalar).unwrap();
    assert_eq!(
        (t.shape(), t.to_vec::<f64>().unwrap()),
        (&[][..], vec![2.5])
    );
    assert_eq!(t.to_ndarray::<f64>().unwrap(), scalar);
}

#[test]
fn the_element_type_must_be_the_dtype() {
    let t = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    let e = t.to_ndarray::<f64>().unwrap_err();
    assert_eq!(
        e,
        TensorError::DType {
            actual: DType::Float32,
            requested: DType::Float64
        }
    );
    // Cast first, as the error says.
    let a = t.to(DType::BFloat16).unwrap().to_ndarray::<bf16>().unwrap();
    assert_eq!(a.as_slice().unwrap(), [bf16::ONE, bf16::from_f32(2.0)]);
    // Packed sub-byte tensors have no element type to read into.
    let f4 = t.to(DType::Float4E2M1Fn).unwrap();
    assert!(f4.to_ndarray::<u8>().is_err());
}
