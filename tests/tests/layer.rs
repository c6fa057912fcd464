//! Layer traversal and all-or-nothing conversion (issue 5's example, torch's naming order).

use std::collections::HashMap;

use dtcast::device::cuda_available;
use dtcast::layer::{Linear, Sequential};
use dtcast::{CastMode, DType, Device, Layer, LayerError, Tensor};

#[derive(Layer)]
struct Block {
    #[param]
    weight: Tensor,
    #[param]
    bias: Tensor,
    #[buffer]
    steps: Tensor,
    #[buffer]
    #[keep_dtype]
    scale: Tensor,
}

#[derive(Layer)]
struct Net {
    #[param]
    embed: Tensor,
    #[layer]
    blocks: Vec<Block>,
}

fn block(big: f32) -> Block {
    Block {
        weight: Tensor::from_vec(vec![0.5f32, big, -1.0, 2.0], &[2, 2]).unwrap(),
        bias: Tensor::from_vec(vec![0.25f32, 0.0], &[2]).unwrap(),
        steps: Tensor::from_vec(vec![7i64], &[1]).unwrap(),
        scale: Tensor::from_vec(vec![0.1f32], &[1]).unwrap(),
    }
}

fn net() -> Net {
    Net {
        embed: Tensor::from_vec(vec![1.0f32; 6], &[3, 2]).unwrap(),
        blocks: vec![block(1.5), block(1e5)],
    }
}

fn names(v: Vec<(String, Tensor)>) -> Vec<String> {
    v.into_iter().map(|(n, _)| n).collect()
}

fn dtypes(l: &impl Layer) -> Vec<(String, DType)> {
    l.named_tensors()
        .into_iter()
        .map(|(n, t)| (n, t.dtype()))
        .collect()
}

#[test]
fn the_issue_example_works_as_written() -> Result<(), LayerError> {
    let mut net = net();
    assert_eq!(
        names(net.named_parameters()),
        [
            "embed",
            "blocks.0.weight",
            "blocks.0.bias",
            "blocks.1.weight",
            "blocks.1.bias"
        ]
    );
    assert_eq!(
        names(net.named_buffers()),
        [
            "blocks.0.steps",
            "blocks.0.scale",
            "blocks.1.steps",
            "blocks.1.scale"
        ]
    );
    assert_eq!(net.named_tensors().len(), 9);

    net.astype(DType::BFloat16)?; // weights bf16; steps (int64) and scale (keep_dtype) unchanged
    for (name, dt) in dtypes(&net) {
        let want = if name.ends_with("steps") {
            DType::Int64
        } else if name.ends_with("scale") {
            DType::Float32
        } else {
            DType::BFloat16
        };
        assert_eq!(dt, want, "{name}");
    }
    assert!(matches!(
        net.astype(DType::Int32),
        Err(LayerError::NotFloating(DType::Int32))
    ));

    // A weight holds 1e5, which float16 cannot: Checked mode fails and nothing changes.
    let mut fresh = self::net();
    let before: Vec<Vec<u8>> = fresh
        .named_tensors()
        .iter()
        .map(|(_, t)| t.to_bytes().unwrap())
        .collect();
    let before_dtypes = dtypes(&fresh);
    let err = fresh
        .astype_with(DType::Float16, CastMode::Checked)
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("tensor `blocks.1.weight`: element 1 (100000.0) overflows float16"),
        "{err}"
    );
    assert_eq!(dtypes(&fresh), before_dtypes);
    let after: Vec<Vec<u8>> = fresh
        .named_tensors()
        .iter()
        .map(|(_, t)| t.to_bytes().unwrap())
        .collect();
    assert_eq!(after, before);

    net.astype_all(DType::Float64)?; // every tensor but keep_dtype ones, the int64 buffer too
    for (name, dt) in dtypes(&net) {
        assert_eq!(
            dt,
            if name.ends_with("scale") {
                DType::Float32
            } else {
                DType::Float64
            },
            "{name}"
        );
    }
    assert_eq!(net.blocks[0].steps.to_vec::<f64>().unwrap(), [7.0]);
    Ok(())
}

#[derive(Layer)]
struct BatchNorm {
    #[param]
    weight: Tensor,
    #[param]
    bias: Tensor,
    #[buffer]
    running_mean: Tensor,
    #[buffer]
    running_var: Tensor,
    #[buffer]
    num_batches_tracked: Tensor,
}

#[derive(Layer)]
struct TorchExample {
    #[param]
    cp: Tensor,
    #[buffer]
    ibuf: Tensor,
    #[buffer]
    bbuf: Tensor,
    #[buffer]
    np_buf: Tensor,
    #[layer]
    layer: Sequential,
    /// Not registered: never visited, never converted (torch's plain tensor attributes), said
    /// with `#[skip]` (a tensor field without an attribute is a compile error).
    #[allow(dead_code)]
    #[skip]
    plain: Tensor,
}

fn t(shape: &[usize]) -> Tensor {
    Tensor::zeros(shape, DType::Float32, Device::Cpu).unwrap()
}

#[test]
fn names_follow_torch_registration_order() {
    // torch-semantics.md §7: own tensors first in registration order, then children; Sequential
    // children are named 0, 1, ...
    let m = TorchExample {
        cp: t(&[2]),
        ibuf: Tensor::from_vec(vec![1i64], &[1]).unwrap(),
        bbuf: Tensor::from_vec(vec![true], &[1]).unwrap(),
        np_buf: t(&[1]),
        layer: Sequential::new()
            .push(Linear::new(t(&[3, 2]), Some(t(&[3]))))
            .push(BatchNorm {
                weight: t(&[3]),
                bias: t(&[3]),
                running_mean: t(&[3]),
                running_var: t(&[3]),
                num_batches_tracked: Tensor::from_vec(vec![0i64], &[]).unwrap(),
            }),
        plain: t(&[5]),
    };
    assert_eq!(
        names(m.named_parameters()),
        [
            "cp",
            "layer.0.weight",
            "layer.0.bias",
            "layer.1.weight",
            "layer.1.bias"
        ]
    );
    assert_eq!(
        names(m.named_buffers()),
        [
            "ibuf",
            "bbuf",
            "np_buf",
            "layer.1.running_mean",
            "layer.1.running_var",
            "layer.1.num_batches_tracked"
        ]
    );
    assert_eq!(
        names(m.named_tensors())[..5],
        ["cp", "ibuf", "bbuf", "np_buf", "layer.0.weight"]
    );
}

/// Fields `#[derive(Layer)]` leaves out: a `#[skip]`ped `Option<Tensor>` and a field that holds
/// no tensor at all (only a tensor field needs an attribute).
#[derive(Layer)]
struct WithPlainFields {
    #[param]
    weight: Tensor,
    #[skip]
    cache: Option<Tensor>,
    steps: u32,
}

#[test]
fn skipped_and_plain_fields_are_not_part_of_the_layer() {
    let mut b = WithPlainFields {
        weight: t(&[2]),
        cache: Some(t(&[4])),
        steps: 3,
    };
    assert_eq!(names(b.named_tensors()), ["weight"]);
    assert_eq!(b.state_dict().len(), 1);
    b.astype(DType::BFloat16).unwrap();
    assert_eq!(b.weight.dtype(), DType::BFloat16);
    assert_eq!(b.cache.as_ref().map(Tensor::dtype), Some(DType::Float32));
    assert_eq!(b.steps, 3);
}

#[derive(Layer)]
struct Optional {
    #[param]
    weight: Tensor,
    #[param]
    bias: Option<Tensor>,
    #[layer]
    extra: Option<Linear>,
}

#[test]
fn absent_tensors_and_layers_are_skipped() -> Result<(), LayerError> {
    let mut o = Optional {
        weight: t(&[2]),
        bias: None,
        extra: None,
    };
    assert_eq!(names(o.named_tensors()), ["weight"]);
    o.extra = Some(Linear::new(t(&[1, 2]), None));
    o.bias = Some(t(&[2]));
    // The field names the child; the Option around it adds no segment of its own, and a Linear
    // without a bias has only a weight.
    assert_eq!(names(o.named_tensors()), ["weight", "bias", "extra.weight"]);
    o.astype(DType::Float16)?;
    assert!(o
        .named_tensors()
        .iter()
        .all(|(_, t)| t.dtype() == DType::Float16));
    Ok(())
}

#[test]
fn to_moves_and_converts_like_module_to() -> Result<(), LayerError> {
    let mut net = net();
    net.to((Device::Cpu, DType::Float16))?;
    let d = dtypes(&net);
    assert!(d.iter().all(|(n, dt)| *dt
        == if n.ends_with("steps") {
            DType::Int64
        } else if n.ends_with("scale") {
            DType::Float32
        } else {
            DType::Float16
        }));
    net.to_device(Device::Cpu)?;
    assert!(matches!(
        net.to(DType::Int64),
        Err(LayerError::NotFloating(_))
    ));
    if !cuda_available() {
        let before = dtypes(&net);
        let e = net.to(Device::Cuda(0)).unwrap_err();
        assert!(e.to_string().contains("CUDA is not available"), "{e}");
        assert_eq!(dtypes(&net), before);
        assert!(net
            .named_tensors()
            .iter()
            .all(|(_, t)| t.device() == Device::Cpu));
    }
    Ok(())
}

#[test]
fn load_tensors_checks_names_and_shapes_and_changes_nothing_on_error() {
    let mut a = net();
    let src: HashMap<String, Tensor> = net()
        .named_tensors()
        .into_iter()
        .map(|(n, t)| (n, t.to(DType::Float64).unwrap()))
        .collect();
    a.load_tensors(&src).unwrap();
    assert_eq!(a.embed.dtype(), DType::Float64);

    let mut b = net();
    let mut partial = src.clone();
    partial.remove("blocks.1.bias");
    partial.insert("extra.weight".to_owned(), t(&[1]));
    let e = b.load_tensors(&partial).unwrap_err();
    assert_eq!(
        e.to_string(),
        "tensor names do not match; missing: blocks.1.bias; unexpected: extra.weight"
    );
    assert_eq!(b.embed.dtype(), DType::Float32);

    let mut wrong = src;
    wrong.insert("embed".to_owned(), t(&[2, 3]));
    let e = b.load_tensors(&wrong).unwrap_err();
    assert!(
        matches!(e, LayerError::ShapeMismatch { ref name, .. } if name == "embed"),
        "{e}"
    );
}

#[test]
fn a_layer_saves_and_loads_back_through_safetensors_by_name() {
    use dtcast::layer::checkpoint::{load_map, save, Checkpoint};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("net.safetensors");
    let mut src = net();
    src.astype(DType::BFloat16).unwrap();
    save(&path, &src.named_tensors(), &[]).unwrap();
    let order: Vec<String> = Checkpoint::open(&path)
        .unwrap()
        .entries()
        .iter()
        .map(|e| e.name.clone())
        .collect();
    assert_eq!(order, names(src.named_tensors()));
    let mut dst = net();
    dst.load_tensors(&load_map(&path).unwrap()).unwrap();
    for ((n1, a), (n2, b)) in src.named_tensors().iter().zip(dst.named_tensors()) {
        assert_eq!(n1, &n2);
        assert_eq!(a.dtype(), b.dtype());
        assert_eq!(a.to_bytes().unwrap(), b.to_bytes().unwrap());
    }
}

/// A client of the facade's prelude alone: a derived model saved, a checkpoint of another dtype
/// loaded into it (the model keeps its dtypes, as torch's `load_state_dict` copies into them),
/// missing and unexpected keys reported, `astype`, every error `?`-ed into `dtcast::Error`.
mod prelude_client {
    use dtcast::prelude::*;

    #[derive(Layer)]
    struct Model {
        #[layer]
        proj: Linear,
        #[buffer]
        #[keep_dtype]
        step: Tensor,
    }

    fn model(w: f32) -> Result<Model, Error> {
        Ok(Model {
            proj: Linear::new(
                Tensor::from_vec(vec![w; 6], &[2, 3])?,
                Some(Tensor::from_vec(vec![0.5f32, -0.5], &[2])?),
            ),
            step: Tensor::from_vec(vec![3i64], &[1])?,
        })
    }

    #[test]
    fn save_load_into_the_models_dtypes_and_report_keys() -> Result<(), Error> {
        let dir = tempfile::tempdir().unwrap();
        let f32_path = dir.path().join("f32.safetensors");
        // A bfloat16 checkpoint of the same model, loaded into a float32 model: values cast
        // into float32 (torch's copy_), the dtypes stay float32 (int64 stays int64).
        let mut bf16_model = model(1.0 + 1.0 / 128.0)?;
        bf16_model.astype(DType::BFloat16)?;
        let bf16_path = dir.path().join("bf16.safetensors");
        bf16_model.save(&bf16_path, &[("format".to_owned(), "pt".to_owned())].into())?;
        let mut m = model(0.0)?;
        m.load(&bf16_path)?;
        let state = m.state_dict();
        let order: Vec<&str> = state.keys().map(String::as_str).collect();
        assert_eq!(order, ["step", "proj.weight", "proj.bias"]);
        assert_eq!(state["proj.weight"].dtype(), DType::Float32);
        assert_eq!(
            state["proj.weight"].to_vec::<f32>()?,
            [1.0 + 1.0 / 128.0; 6]
        );
        assert_eq!(state["step"].to_vec::<i64>()?, [3]);
        // keep_file_dtypes: the checkpoint's dtypes come along.
        let mut kept = model(0.0)?;
        let source = dtcast::layer::checkpoint::load_map(&bf16_path)?;
        kept.load_state_dict(&source, LoadOptions::default().keep_file_dtypes(true))?;
        assert_eq!(kept.state_dict()["proj.weight"].dtype(), DType::BFloat16);
        // Strict (the default): missing and unexpected keys are an error naming them, and the
        // model is unchanged.
        m.save(&f32_path, &Default::default())?;
        let mut partial = dtcast::layer::checkpoint::load_map(&f32_path)?;
        partial.remove("proj.bias");
        partial.insert("proj.extra".to_owned(), Tensor::from_vec(vec![1u8], &[1])?);
        let mut fresh = model(9.0)?;
        let e = fresh
            .load_state_dict(&partial, LoadOptions::default())
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "tensor names do not match; missing: proj.bias; unexpected: proj.extra"
        );
        assert_eq!(fresh.state_dict()["proj.weight"].to_vec::<f32>()?, [9.0; 6]);
        // Non-strict: what matches is loaded, the rest reported as torch reports it.
        let skipped = fresh.load_state_dict(&partial, LoadOptions::default().strict(false))?;
        assert_eq!(skipped.missing, ["proj.bias"]);
        assert_eq!(skipped.unexpected, ["proj.extra"]);
        assert_eq!(
            fresh.state_dict()["proj.weight"].to_vec::<f32>()?,
            [1.0 + 1.0 / 128.0; 6]
        );
        assert_eq!(
            fresh.state_dict()["proj.bias"].to_vec::<f32>()?,
            [0.5, -0.5]
        );
        // A shape that differs is an error whatever the strictness.
        partial.insert(
            "proj.bias".to_owned(),
            Tensor::from_vec(vec![0f32; 3], &[3])?,
        );
        let e = fresh.load_state_dict(&partial, LoadOptions::default().strict(false));
        assert!(e.unwrap_err().to_string().contains("proj.bias"));
        Ok(())
    }

    #[test]
    fn every_crates_error_converts_into_dtcast_error_with_its_chain() {
        use std::error::Error as _;
        let missing = std::path::Path::new("/nonexistent/dtcast/model.safetensors");
        let e: Error = model(0.0).unwrap().load(missing).unwrap_err().into();
        assert!(matches!(e, Error::Layer(_)), "{e:?}");
        assert!(
            e.to_string()
                .contains("/nonexistent/dtcast/model.safetensors"),
            "{e}"
        );
        // The I/O error under the layer error is still there.
        let io = e.source().and_then(|s| s.downcast_ref::<std::io::Error>());
        assert_eq!(
            io.map(|io| io.kind()),
            Some(std::io::ErrorKind::NotFound),
            "{e:?}"
        );
        let e: Error = "float9".parse::<DType>().unwrap_err().into();
        assert!(matches!(e, Error::ParseDType(_)));
        let e: Error = Torch::default()
            .promote_types(DType::Float8E4M3Fn, DType::Float8E5M2)
            .unwrap_err()
            .into();
        assert!(matches!(e, Error::Promote(_)), "{e}");
    }
}
