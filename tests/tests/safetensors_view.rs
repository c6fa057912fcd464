//! The `safetensors` feature: dtcast tensors through the `safetensors` crate (the format's
//! reference implementation) both ways, checked against dtcast's own reader and writer.

use dtcast::layer::checkpoint::{save, Checkpoint};
use dtcast::{DType, Tensor, TensorError};

fn tensors() -> Vec<(String, Tensor)> {
    let f32s = Tensor::from_vec(vec![1.0f32, -2.5, 3.0e38, 0.0], &[2, 2]).unwrap();
    vec![
        ("a.f32".to_owned(), f32s.clone()),
        ("b.bf16".to_owned(), f32s.to(DType::BFloat16).unwrap()),
        ("c.e4m3".to_owned(), f32s.to(DType::Float8E4M3Fn).unwrap()),
        (
            "d.i64".to_owned(),
            Tensor::from_vec(vec![7i64, -1, 0], &[3]).unwrap(),
        ),
        ("e.f4".to_owned(), f32s.to(DType::Float4E2M1Fn).unwrap()),
        (
            "f.bool".to_owned(),
            Tensor::from_vec(vec![true, false], &[2]).unwrap(),
        ),
    ]
}

#[test]
fn safetensors_serialize_writes_what_dtcast_reads_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let ours = tensors();
    // safetensors::serialize of dtcast tensors, read by dtcast's strict reader.
    let views: Vec<(String, dtcast::device::SafetensorsView)> = ours
        .iter()
        .map(|(n, t)| (n.clone(), t.to_safetensors_view().unwrap()))
        .collect();
    let bytes = safetensors::serialize(views, None).unwrap();
    let path = dir.path().join("by-safetensors.safetensors");
    std::fs::write(&path, &bytes).unwrap();
    // (safetensors orders a file's tensors by dtype alignment, then name: compare by name.)
    let read: std::collections::HashMap<String, Tensor> = Checkpoint::open(&path)
        .unwrap()
        .load()
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(read.len(), ours.len());
    for (n, want) in &ours {
        let got = &read[n];
        assert_eq!(
            (got.dtype(), got.shape()),
            (want.dtype(), want.shape()),
            "{n}"
        );
        assert_eq!(got.to_bytes().unwrap(), want.to_bytes().unwrap(), "{n}");
    }
    // dtcast's writer, read by safetensors' own parser into dtcast tensors.
    let path = dir.path().join("by-dtcast.safetensors");
    save(&path, &ours, &[]).unwrap();
    let file = std::fs::read(&path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&file).unwrap();
    for (n, want) in &ours {
        let got = Tensor::from_safetensors(&st.tensor(n).unwrap()).unwrap();
        assert_eq!(
            (got.dtype(), got.shape()),
            (want.dtype(), want.shape()),
            "{n}"
        );
        assert_eq!(got.to_bytes().unwrap(), want.to_bytes().unwrap(), "{n}");
    }
}

#[test]
fn a_dtype_safetensors_cannot_store_is_an_error_naming_it() {
    let z = Tensor::from_vec(vec![0.0f64; 2], &[1, 2])
        .unwrap()
        .to(DType::Complex128)
        .unwrap();
    let e = z.to_safetensors_view().unwrap_err();
    assert!(matches!(
        e,
        TensorError::Unstorable {
            dtype: DType::Complex128,
            ..
        }
    ));
    assert_eq!(e.to_string(), "safetensors cannot store complex128 tensors");
}
