//! The `candle` feature: candle CPU tensors to and from dtcast tensors, and `to_dtype` with
//! dtcast's kernels. Expected values: `dtcast::cast` on the same bytes (whose rules the torch and
//! ml_dtypes fixtures hold), candle's own casts where nothing is lost (widening), and the formats'
//! definitions.

use candle_core::{DType as C, Device as CandleDevice, Tensor as CandleTensor};
use dtcast::candle::{candle_dtype, dtype_of_candle, to_dtype, to_dtype_with};
use dtcast::{CastMode, DType, Tensor, TensorError};
use dtcast_tests::random_bytes;

/// Every dtype both libraries have, with candle's name.
const SHARED: [(DType, C); 14] = [
    (DType::UInt8, C::U8),
    (DType::UInt32, C::U32),
    (DType::Int16, C::I16),
    (DType::Int32, C::I32),
    (DType::Int64, C::I64),
    (DType::BFloat16, C::BF16),
    (DType::Float16, C::F16),
    (DType::Float32, C::F32),
    (DType::Float64, C::F64),
    (DType::Float8E4M3Fn, C::F8E4M3),
    (DType::Float6E2M3Fn, C::F6E2M3),
    (DType::Float6E3M2Fn, C::F6E3M2),
    (DType::Float4E2M1Fn, C::F4),
    (DType::Float8E8M0Fnu, C::F8E8M0),
];

/// A candle CPU tensor of `dtype` over `bytes` (packed for sub-byte dtypes).
fn candle_from_bytes(bytes: &[u8], dtype: C, shape: &[usize]) -> CandleTensor {
    CandleTensor::from_raw_buffer(bytes, dtype, shape, &CandleDevice::Cpu).unwrap()
}

/// The bytes of a candle CPU tensor, through dtcast's reader.
fn bytes_of(t: &CandleTensor) -> Vec<u8> {
    Tensor::from_candle(t).unwrap().to_bytes().unwrap()
}

#[test]
fn dtype_rows_agree_both_ways() {
    for (ours, theirs) in SHARED {
        assert_eq!(candle_dtype(ours), Some(theirs), "{ours}");
        assert_eq!(dtype_of_candle(theirs).unwrap(), ours, "{theirs:?}");
    }
    let shared: Vec<DType> = SHARED.iter().map(|r| r.0).collect();
    for d in DType::ALL {
        if !shared.contains(&d) {
            assert_eq!(candle_dtype(d), None, "{d}");
        }
    }
}

#[test]
fn to_dtype_equals_dtcast_cast_for_every_pair_and_mode() {
    // 96 elements: whole bytes for every packed dtype (float6 packs 4 per 3 bytes).
    let n = 96;
    for (seed, (from, cfrom)) in SHARED.iter().enumerate() {
        let src = random_bytes(from.storage_bytes(n).unwrap(), 0x9E37_79B9 + seed as u64);
        let t = candle_from_bytes(&src, *cfrom, &[8, 12]);
        for (to, cto) in SHARED {
            for mode in [CastMode::Torch, CastMode::Saturate] {
                let got = to_dtype_with(&t, to, mode).unwrap();
                assert_eq!((got.dtype(), got.dims()), (cto, &[8, 12][..]));
                let mut want = vec![0u8; to.storage_bytes(n).unwrap()];
                dtcast::cast(&src, *from, &mut want, to, mode).unwrap();
                assert_eq!(bytes_of(&got), want, "{from} -> {to} ({mode})");
            }
        }
    }
}

#[test]
fn tensors_of_many_blocks_cast_and_convert_whole() {
    // Several of the implementation's 8192-element blocks and a ragged tail, packed and not.
    let n = 3 * 8192 + 40;
    for (i, (from, to)) in [
        (DType::Float32, DType::BFloat16),
        (DType::Float4E2M1Fn, DType::Float16),
        (DType::BFloat16, DType::Float6E3M2Fn),
        (DType::Float8E4M3Fn, DType::Float64),
    ]
    .into_iter()
    .enumerate()
    {
        let src = random_bytes(from.storage_bytes(n).unwrap(), 1234 + i as u64);
        let t = candle_from_bytes(&src, candle_dtype(from).unwrap(), &[n]);
        let mut want = vec![0u8; to.storage_bytes(n).unwrap()];
        dtcast::cast(&src, from, &mut want, to, CastMode::Torch).unwrap();
        assert_eq!(bytes_of(&to_dtype(&t, to).unwrap()), want, "{from} -> {to}");
        let ours = Tensor::from_bytes(&src, from, &[n]).unwrap();
        assert_eq!(bytes_of(&ours.to_candle().unwrap()), src, "{from}");
    }
}

#[test]
fn widening_agrees_with_candles_own_casts() {
    // Where nothing is lost both libraries must give the same values.
    let values = [0.0f32, -0.0, 1.5, -3.25, 65504.0, 1.0e-3, 448.0, -2.0e-5];
    let f32s = CandleTensor::new(&values, &CandleDevice::Cpu).unwrap();
    for (narrow, wide) in [
        (C::BF16, C::F32),
        (C::F16, C::F32),
        (C::F32, C::F64),
        (C::BF16, C::F64),
    ] {
        let x = f32s.to_dtype(narrow).unwrap();
        let theirs = x.to_dtype(wide).unwrap();
        let ours = to_dtype(&x, dtype_of_candle(wide).unwrap()).unwrap();
        assert_eq!(bytes_of(&ours), bytes_of(&theirs), "{narrow:?} -> {wide:?}");
    }
    let ints = CandleTensor::new(&[0u8, 1, 127, 255], &CandleDevice::Cpu).unwrap();
    for wide in [C::U32, C::I64, C::F32, C::F64, C::BF16] {
        let theirs = ints.to_dtype(wide).unwrap();
        let ours = to_dtype(&ints, dtype_of_candle(wide).unwrap()).unwrap();
        assert_eq!(bytes_of(&ours), bytes_of(&theirs), "u8 -> {wide:?}");
    }
}

#[test]
fn formats_read_as_their_definitions() {
    // float8_e4m3fn (OCP E4M3, torch, safetensors F8_E4M3): 0x7E is 448, 0x7F NaN, no infinity.
    // (The float8 crate candle uses calls 0x7E infinity.)
    let f8 = candle_from_bytes(&[0x38, 0x7E, 0xFE, 0x7F, 0x01], C::F8E4M3, &[5]);
    let v = to_dtype(&f8, DType::Float32)
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    assert_eq!(&v[..3], [1.0, 448.0, -448.0]);
    assert!(v[3].is_nan());
    assert_eq!(v[4], 2f32.powi(-9)); // smallest subnormal: 2^-6 * 1/8
                                     // float4_e2m1fn, two per byte, the first element in the low nibble: codes 1 (0.5), 2 (1.0),
                                     // 7 (6.0), 0xF (-6.0).
    let f4 = candle_from_bytes(&[0x21, 0xF7], C::F4, &[2, 2]);
    let v = to_dtype(&f4, DType::Float32)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    assert_eq!(v, [0.5, 1.0, 6.0, -6.0]);
    // float8_e8m0fnu: 2^(code - 127).
    let e8 = candle_from_bytes(&[127, 128, 0], C::F8E8M0, &[3]);
    let v = to_dtype(&e8, DType::Float32)
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    assert_eq!(v, [1.0, 2.0, 2f32.powi(-127)]);
}

#[test]
fn tensors_round_trip_through_candle_for_every_shared_dtype() {
    for (i, (dtype, cdtype)) in SHARED.iter().enumerate() {
        let bytes = random_bytes(dtype.storage_bytes(24).unwrap(), 77 + i as u64);
        let t = Tensor::from_bytes(&bytes, *dtype, &[2, 3, 4]).unwrap();
        let c = t.to_candle().unwrap();
        assert_eq!((c.dtype(), c.dims()), (*cdtype, &[2, 3, 4][..]), "{dtype}");
        let back = Tensor::from_candle(&c).unwrap();
        assert_eq!((back.dtype(), back.shape()), (*dtype, &[2, 3, 4][..]));
        assert_eq!(back.to_bytes().unwrap(), bytes, "{dtype}");
        let via_try: CandleTensor = (&t).try_into().unwrap();
        assert_eq!(
            Tensor::try_from(&via_try).unwrap().to_bytes().unwrap(),
            bytes
        );
    }
    // A 0-dim tensor keeps its empty shape.
    let s = Tensor::from_vec(vec![2.5f64], &[])
        .unwrap()
        .to_candle()
        .unwrap();
    assert_eq!(s.dims(), &[] as &[usize]);
    assert_eq!(s.to_scalar::<f64>().unwrap(), 2.5);
}

#[test]
fn strided_and_offset_candle_tensors_read_in_logical_order() {
    let c = CandleTensor::arange(0u32, 12, &CandleDevice::Cpu)
        .unwrap()
        .reshape((3, 4))
        .unwrap();
    let transposed = Tensor::from_candle(&c.t().unwrap()).unwrap();
    assert_eq!(transposed.shape(), [4, 3]);
    assert_eq!(
        transposed.to_vec::<u32>().unwrap(),
        [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]
    );
    // A contiguous view that starts inside the storage (rows 1..3).
    let rows = c.narrow(0, 1, 2).unwrap();
    assert_eq!(
        Tensor::from_candle(&rows).unwrap().to_vec::<u32>().unwrap(),
        [4, 5, 6, 7, 8, 9, 10, 11]
    );
    let cast = to_dtype(&rows, DType::Float16).unwrap();
    assert_eq!(
        cast.flatten_all()
            .unwrap()
            .to_vec1::<dtcast::dtype::half::f16>()
            .unwrap(),
        (4..12)
            .map(|x| dtcast::dtype::half::f16::from_f32(x as f32))
            .collect::<Vec<_>>()
    );
}

#[test]
fn refusals_name_what_is_wrong() {
    let t = CandleTensor::new(&[1.0f32, 1.0e6], &CandleDevice::Cpu).unwrap();
    // A dtype candle does not have.
    let e = to_dtype(&t, DType::Float8E5M2).unwrap_err();
    assert!(
        matches!(
            e,
            TensorError::Unstorable {
                dtype: DType::Float8E5M2,
                format: "candle"
            }
        ),
        "{e:?}"
    );
    assert_eq!(e.to_string(), "candle cannot store float8_e5m2 tensors");
    let c128 = Tensor::from_vec(
        vec![dtcast::dtype::num_complex::Complex::new(1.0f64, 0.0)],
        &[1],
    )
    .unwrap();
    assert!(matches!(
        c128.to_candle(),
        Err(TensorError::Unstorable { .. })
    ));
    // Checked mode: 1e6 does not fit float16, and no tensor comes back.
    let e = to_dtype_with(&t, DType::Float16, CastMode::Checked).unwrap_err();
    assert!(e.to_string().contains("element 1"), "{e}");
    // An element offset inside a byte of packed float4.
    let f4 = candle_from_bytes(&[0x21, 0x43], C::F4, &[4]);
    let e = Tensor::from_candle(&f4.narrow(0, 1, 2).unwrap()).unwrap_err();
    assert!(e.to_string().contains("float4_e2m1fn"), "{e}");
}
