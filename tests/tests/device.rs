//! Devices (torch's grammar, `torch_device.json`) and `Tensor::to`.

use dtcast::device::{cuda_available, promote_operands, Arg, ParseDeviceError};
use dtcast::promote::ScalarKind;
use dtcast::{CastMode, DType, Device, Tensor, TensorError, ToOptions, Torch, View};
use dtcast_tests::rows;

#[test]
fn device_strings_follow_torch() {
    // Where dtcast differs from torch, on purpose (each listed in Device's docs):
    // - `gpu` / `gpu:N` are accepted as CUDA (Paddle's names); torch refuses them;
    // - device types dtcast has no backend for (mps, meta, xpu, ...) are refused as unsupported.
    // Every string torch accepts for cpu and cuda prints as torch prints it (`cuda`, `cpu:0`).
    let rows = rows("torch_device.json");
    assert!(rows.len() >= 20);
    for r in &rows {
        let (input, want) = (r[0].as_str().unwrap(), r[1].as_str().unwrap());
        let got = input.parse::<Device>();
        match (want.strip_prefix("error: "), &got) {
            (None, Ok(d)) => assert_eq!(d.to_string(), want, "{input}"),
            (None, Err(ParseDeviceError::Unsupported { kind, .. })) => {
                assert!(
                    ["mps", "meta", "xpu"].contains(&kind.as_str()),
                    "{input}: {got:?}"
                )
            }
            (Some(msg), Ok(d)) if input.starts_with("gpu") => {
                assert!(msg.starts_with("Expected one of"), "{input}");
                assert!(d.is_cuda());
            }
            (Some(msg), Err(e)) => {
                let class_ok = match e {
                    ParseDeviceError::Empty => msg == "Device string must not be empty",
                    ParseDeviceError::Invalid(_) => msg.starts_with("Invalid device string"),
                    ParseDeviceError::UnknownType { .. } => msg.starts_with("Expected one of"),
                    _ => false,
                };
                assert!(class_ok, "{input}: torch says {msg}, dtcast {e}");
                // torch's text, except that dtcast's list of device types also names `gpu`.
                assert!(
                    e.to_string()
                        .replace(", gpu device type", " device type")
                        .starts_with(msg),
                    "{input}: {e}"
                );
            }
            (want, got) => panic!("{input}: torch {want:?}, dtcast {got:?}"),
        }
    }
}

#[test]
fn index_less_and_indexed_devices_resolve_when_used() -> Result<(), TensorError> {
    use dtcast::device::{current_cuda_device, resolve_device, set_current_cuda_device};
    // torch.device("cuda") and torch.device("cuda:0") differ as values, as "cpu" and "cpu:0" do.
    assert_ne!(Device::CudaCurrent, Device::Cuda(0));
    assert_ne!(Device::CpuIndexed(0), Device::Cpu);
    assert_eq!(
        (Device::CudaCurrent.type_name(), Device::CudaCurrent.index()),
        ("cuda", None)
    );
    assert_eq!(Device::CpuIndexed(2).index(), Some(2));
    // Used, `cuda` is the current device (0 unless set) and `cpu:N` the host.
    assert_eq!(current_cuda_device(), 0);
    assert_eq!(resolve_device(Device::CudaCurrent), Device::Cuda(0));
    set_current_cuda_device(3);
    assert_eq!(resolve_device(Device::CudaCurrent), Device::Cuda(3));
    set_current_cuda_device(0);
    assert_eq!(resolve_device(Device::CpuIndexed(5)), Device::Cpu);
    // A CPU tensor moved to `cpu:0` stays where it is, shares its storage and reports `cpu`.
    let t = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?;
    let same = t.to("cpu:0")?;
    assert!(same.shares_storage(&t));
    assert_eq!(same.device().to_string(), "cpu");
    if cuda_available() {
        // `cuda` lands on the current device, and a tensor there reports `cuda:0`.
        let g = t.to("cuda")?;
        assert_eq!(g.device(), Device::Cuda(0));
        assert!(g.to(Device::CudaCurrent)?.shares_storage(&g));
    } else {
        let e = t.to("cuda").unwrap_err();
        assert!(matches!(e, TensorError::CudaUnavailable(_)), "{e:?}");
    }
    Ok(())
}

#[test]
fn ordinals_that_torch_would_wrap_are_refused() {
    assert!(matches!(
        "cuda:300".parse::<Device>(),
        Err(ParseDeviceError::OrdinalOutOfRange { .. })
    ));
    assert!(matches!(
        "cuda:128".parse::<Device>(),
        Err(ParseDeviceError::OrdinalOutOfRange { .. })
    ));
    assert_eq!("cuda:127".parse(), Ok(Device::Cuda(127)));
    assert!(matches!(
        "cuda:99999999999999999999".parse::<Device>(),
        Err(ParseDeviceError::OrdinalOutOfRange { .. })
    ));
    assert!(matches!(
        "CPU".parse::<Device>(),
        Err(ParseDeviceError::UnknownType { .. })
    ));
}

/// The facade example of issue 4, as a client crate writes it.
#[test]
fn the_facade_example_works_as_written() -> Result<(), TensorError> {
    let t = Tensor::from_vec(vec![1.0f32, 2.5, -3.0, 300.0], &[2, 2])?;
    assert!(t.to(DType::Float32)?.shares_storage(&t));
    let c = t.to_with(
        DType::Float32,
        ToOptions {
            copy: true,
            ..Default::default()
        },
    )?;
    assert!(!c.shares_storage(&t));
    assert_eq!(c.to_vec::<f32>()?, [1.0, 2.5, -3.0, 300.0]);
    let u: Vec<u8> = t.to(DType::UInt8)?.to_vec::<u8>()?; // [1, 2, 253, 44], as torch
    assert_eq!(u, [1, 2, 253, 44]);
    let both = t.to((Device::Cpu, DType::Int32))?;
    assert_eq!(both.to_vec::<i32>()?, [1, 2, -3, 300]);
    let like = t.to(&both)?;
    assert_eq!((like.dtype(), like.device()), (DType::Int32, Device::Cpu));
    let s = t.to("float64")?;
    assert_eq!(s.to_vec::<f64>()?, [1.0, 2.5, -3.0, 300.0]);
    assert!(t.to("cuda:0").is_err() || cuda_available());
    Ok(())
}

#[test]
fn to_shares_storage_only_when_nothing_changes() -> Result<(), TensorError> {
    let t = Tensor::from_vec(vec![1i64, 2, 3], &[3])?;
    assert!(t.to(Device::Cpu)?.shares_storage(&t));
    assert!(t.to((Device::Cpu, DType::Int64))?.shares_storage(&t));
    assert!(t.to("cpu")?.shares_storage(&t));
    assert!(!t.to(DType::Int32)?.shares_storage(&t));
    assert!(!t
        .to_with(
            Device::Cpu,
            ToOptions {
                copy: true,
                ..Default::default()
            }
        )?
        .shares_storage(&t));
    Ok(())
}

#[test]
fn to_carries_the_cast_mode_and_its_errors() {
    let t = Tensor::from_vec(vec![1.0f32, f32::NAN], &[2]).unwrap();
    let checked = ToOptions {
        mode: CastMode::Checked,
        ..Default::default()
    };
    let e = t.to_with(DType::Int32, checked).unwrap_err();
    assert_eq!(
        e.to_string(),
        "element 1 (NaN) cannot be represented in int32"
    );
    let sat = t
        .to_with(
            DType::Int32,
            ToOptions {
                mode: CastMode::Saturate,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(sat.to_vec::<i32>().unwrap(), [1, 0]);
}

#[test]
fn bad_arguments_are_errors_naming_what_was_wrong() {
    let t = Tensor::from_vec(vec![1u8, 2, 3], &[3]).unwrap();
    let e = t.to("flaot32").unwrap_err().to_string();
    assert!(
        e.contains("`flaot32` is neither a dtype nor a device")
            && e.contains("did you mean `float32`?"),
        "{e}"
    );
    assert_eq!(
        t.to_vec::<f32>().unwrap_err(),
        TensorError::DType {
            actual: DType::UInt8,
            requested: DType::Float32
        }
    );
    assert!(matches!(
        Tensor::from_vec(vec![1.0f32; 5], &[2, 3]),
        Err(TensorError::Shape {
            needed: Some(6),
            given: 5,
            ..
        })
    ));
    // The one size rule for shapes: a dimension, element count or byte size past 2^63 - 1.
    for shape in [&[usize::MAX, 2][..], &[0, 1 << 63], &[1 << 62, 1]] {
        let e = Tensor::zeros(shape, DType::Float32, Device::Cpu).unwrap_err();
        assert!(matches!(e, TensorError::TooLarge(_)), "{shape:?}: {e}");
        assert!(e.to_string().ends_with("is more than 2^63 - 1"), "{e}");
    }
    let e = Tensor::from_vec(Vec::<f32>::new(), &[0, 1 << 63]).unwrap_err();
    assert!(matches!(e, TensorError::TooLarge(_)), "{e}");
}

#[test]
fn zeros_shapes_and_bitcasts() -> Result<(), TensorError> {
    let z = Tensor::zeros(&[2, 3], DType::BFloat16, Device::Cpu)?;
    assert_eq!(
        (z.shape(), z.numel(), z.dtype()),
        (&[2usize, 3][..], 6, DType::BFloat16)
    );
    assert_eq!(z.to_bytes()?, vec![0u8; 12]);
    let t = Tensor::from_vec(vec![1.0f32, -2.0], &[2])?;
    let bytes = t.bitcast(DType::UInt8, &View)?;
    assert_eq!(bytes.shape(), &[8]);
    assert!(bytes.shares_storage(&t));
    assert_eq!(bytes.to_vec::<u8>()?, [0, 0, 0x80, 0x3F, 0, 0, 0, 0xC0]);
    assert_eq!(t.bitcast(DType::Float64, &View)?.shape(), &[1]);
    let odd = Tensor::from_vec(vec![1.0f32; 3], &[3])?;
    assert!(matches!(
        odd.bitcast(DType::Float64, &View),
        Err(TensorError::Bitcast(_))
    )); // 3 is not divisible by 2
    Ok(())
}

#[test]
fn promote_operands_casts_tensors_to_the_common_dtype() -> Result<(), TensorError> {
    let a = Tensor::from_vec(vec![1u8, 200], &[2])?;
    let b = Tensor::from_vec(vec![3i64], &[])?; // 0-dim int64 does not widen uint8
    let (dt, ts) = promote_operands(&[Arg::Tensor(&a), Arg::Tensor(&b)], &Torch::default(), None)?;
    assert_eq!(dt, DType::UInt8);
    assert!(ts[0].shares_storage(&a));
    assert_eq!(ts[1].to_vec::<u8>()?, [3]);
    let (dt, ts) = promote_operands(
        &[Arg::Tensor(&a), Arg::Scalar(ScalarKind::Float)],
        &Torch::default(),
        None,
    )?;
    assert_eq!(dt, DType::Float32);
    assert_eq!(ts[0].to_vec::<f32>()?, [1.0, 200.0]);
    let (dt, _) = promote_operands(&[Arg::Tensor(&a)], &Torch::default(), Some(DType::Int64))?;
    assert_eq!(dt, DType::Int64); // integer sum accumulates in int64
    let u16s = Tensor::from_vec(vec![1u16], &[1])?;
    assert!(matches!(
        promote_operands(
            &[Arg::Tensor(&u16s), Arg::Tensor(&a)],
            &Torch::default(),
            None
        ),
        Err(TensorError::Promote(_))
    ));
    Ok(())
}

#[test]
fn an_allocation_that_cannot_be_had_is_an_error() {
    // 2^60 bytes: the shape is valid, the memory is not there.
    let e = Tensor::zeros(&[1 << 57], DType::Float64, Device::Cpu).unwrap_err();
    assert!(matches!(e, TensorError::OutOfMemory { .. }), "{e}");
}
