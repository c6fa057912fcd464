//! The `Layer` trait: traversal written once, behaviour plugged in.

use std::collections::{BTreeMap, HashMap};

use dtcast_device::{CastMode, Device, IntoTarget, Tensor, ToOptions};
use dtcast_dtype::DType;

use crate::error::LayerError;
use crate::state::{IncompatibleKeys, LoadOptions, StateDict, TensorSource};
use crate::visit::{Path, TensorKind, Visitor, VisitorMut};

/// One tensor of a layer tree, with its dotted name.
#[derive(Clone, Debug)]
pub struct NamedTensor {
    /// The dotted name (`blocks.0.weight`).
    pub name: String,
    /// Parameter or buffer.
    pub kind: TensorKind,
    /// `#[keep_dtype]`: `astype` leaves it alone.
    pub keep_dtype: bool,
    /// The tensor (sharing its storage with the layer's).
    pub tensor: Tensor,
}

/// A model, or a part of one: it shows its own tensors and its children to a visitor.
///
/// Implement it with `#[derive(Layer)]` (attributes `#[param]`, `#[buffer]`, `#[layer]`,
/// `#[keep_dtype]`) or by hand with [`visit`](Layer::visit) and [`visit_mut`](Layer::visit_mut):
/// own tensors first in registration order, then each child between `enter(name)` and `exit()`.
/// Everything else is provided.
///
/// ```
/// use dtcast::layer::{Layer, Linear};
/// use dtcast::Tensor;
/// use dtcast::DType;
/// let mut lin = Linear::new(Tensor::from_vec(vec![0.5f32; 6], &[2, 3])?, Some(Tensor::from_vec(vec![0.0f32; 2], &[2])?));
/// lin.astype(DType::BFloat16)?;
/// let names: Vec<String> = lin.named_parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["weight", "bias"]);
/// assert!(lin.named_tensors().iter().all(|(_, t)| t.dtype() == DType::BFloat16));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Layer {
    /// Shows every tensor to `visitor`: own tensors, then each child between `enter` and `exit`.
    fn visit(&self, visitor: &mut dyn Visitor);

    /// The same traversal, letting `visitor` replace tensors. It must visit exactly what `visit`
    /// visits, in the same order.
    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut);

    /// Every tensor, with dotted names, in PyTorch's `state_dict` order.
    fn tensors(&self) -> Vec<NamedTensor> {
        struct Collect(Path, Vec<NamedTensor>);
        impl Visitor for Collect {
            fn enter(&mut self, name: &str) {
                self.0.push(name);
            }
            fn exit(&mut self) {
                self.0.pop();
            }
            fn tensor(&mut self, name: &str, kind: TensorKind, keep_dtype: bool, tensor: &Tensor) {
                self.1.push(NamedTensor {
                    name: self.0.name(name),
                    kind,
                    keep_dtype,
                    tensor: tensor.clone(),
                });
            }
        }
        let mut c = Collect(Path::default(), Vec::new());
        self.visit(&mut c);
        c.1
    }

    /// `(name, tensor)` for every parameter (torch's `named_parameters`).
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        select(self.tensors(), Some(TensorKind::Parameter))
    }

    /// `(name, tensor)` for every buffer (torch's `named_buffers`).
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        select(self.tensors(), Some(TensorKind::Buffer))
    }

    /// `(name, tensor)` for every parameter and buffer (torch's `state_dict` order).
    fn named_tensors(&self) -> Vec<(String, Tensor)> {
        select(self.tensors(), None)
    }

    /// Converts floating and complex tensors to `dtype` (Torch cast mode), leaving integer and
    /// bool tensors and `#[keep_dtype]` tensors alone — torch's `Module.to(dtype)`. A dtype that is
    /// neither floating nor complex is an error. All-or-nothing.
    fn astype(&mut self, dtype: DType) -> Result<(), LayerError> {
        self.astype_with(dtype, CastMode::Torch)
    }

    /// [`astype`](Layer::astype) with a cast mode: if any tensor fails (Checked mode finds an
    /// out-of-range value, say) the layer is left exactly as it was.
    fn astype_with(&mut self, dtype: DType, mode: CastMode) -> Result<(), LayerError> {
        if !(dtype.is_floating_point() || dtype.is_complex()) {
            return Err(LayerError::NotFloating(dtype));
        }
        let options = ToOptions {
            mode,
            ..Default::default()
        };
        convert_all(self, |t| {
            let convert = (t.tensor.dtype().is_floating_point() || t.tensor.dtype().is_complex())
                && !t.keep_dtype;
            convert.then_some((None, Some(dtype), options))
        })
    }

    /// Converts every tensor but `#[keep_dtype]` ones to `dtype`, integer and bool buffers too —
    /// torch's `Module.type(dtype)`, but all-or-nothing.
    fn astype_all(&mut self, dtype: DType) -> Result<(), LayerError> {
        self.astype_all_with(dtype, CastMode::Torch)
    }

    /// [`astype_all`](Layer::astype_all) with a cast mode.
    fn astype_all_with(&mut self, dtype: DType, mode: CastMode) -> Result<(), LayerError> {
        let options = ToOptions {
            mode,
            ..Default::default()
        };
        convert_all(self, |t| {
            (!t.keep_dtype).then_some((None, Some(dtype), options))
        })
    }

    /// Moves every tensor to `device`. All-or-nothing.
    fn to_device(&mut self, device: Device) -> Result<(), LayerError> {
        convert_all(self, |_| Some((Some(device), None, ToOptions::default())))
    }

    /// torch's `Module.to`: a device moves every tensor; a dtype converts the floating and complex
    /// ones (not `#[keep_dtype]`); `(device, dtype)` does both. All-or-nothing.
    fn to(&mut self, target: impl IntoTarget) -> Result<(), LayerError>
    where
        Self: Sized,
    {
        let target = target.into_target()?;
        if let Some(dt) = target.dtype {
            if !(dt.is_floating_point() || dt.is_complex()) {
                return Err(LayerError::NotFloating(dt));
            }
        }
        convert_all(self, |t| {
            let floating = t.tensor.dtype().is_floating_point() || t.tensor.dtype().is_complex();
            let dtype = target.dtype.filter(|_| floating && !t.keep_dtype);
            (target.device.is_some() || dtype.is_some()).then_some((
                target.device,
                dtype,
                ToOptions::default(),
            ))
        })
    }

    /// Replaces every tensor by the one of the same name in `tensors` (shapes must match; dtypes
    /// and devices are taken from the new tensors). Names missing from `tensors`, or left over in
    /// it, are an error naming them. All-or-nothing.
    fn load_tensors(&mut self, tensors: &HashMap<String, Tensor>) -> Result<(), LayerError> {
        let own = self.tensors();
        let mut missing = Vec::new();
        let mut replacements = Vec::with_capacity(own.len());
        for t in &own {
            match tensors.get(&t.name) {
                None => missing.push(t.name.clone()),
                Some(new) if new.shape() != t.tensor.shape() => {
                    return Err(LayerError::ShapeMismatch {
                        name: t.name.clone(),
                        expected: t.tensor.shape().to_vec(),
                        found: new.shape().to_vec(),
                    });
                }
                Some(new) => replacements.push(new.clone()),
            }
        }
        let known: std::collections::HashSet<&str> = own.iter().map(|t| t.name.as_str()).collect();
        let mut unexpected: Vec<String> = tensors
            .keys()
            .filter(|k| !known.contains(k.as_str()))
            .cloned()
            .collect();
        unexpected.sort();
        if !missing.is_empty() || !unexpected.is_empty() {
            return Err(LayerError::Names {
                missing,
                unexpected,
            });
        }
        replace_in_order(self, replacements);
        Ok(())
    }

    /// torch's `state_dict()`: every tensor by dotted name, in the model's order (the tensors
    /// share their storage with the model's).
    fn state_dict(&self) -> StateDict {
        self.tensors()
            .into_iter()
            .map(|t| (t.name, t.tensor))
            .collect()
    }

    /// torch's `load_state_dict`: each tensor of `source` is copied into the model's tensor of the
    /// same name — converted to that tensor's dtype (unless
    /// [`keep_file_dtypes`](LoadOptions::keep_file_dtypes)) on its device; shapes must match.
    /// Strict by default: a missing or unexpected key is an error naming them all
    /// ([`LayerError::Names`]); non-strict loads what matches and reports the rest. All or
    /// nothing: on error the model is unchanged.
    ///
    /// ```
    /// use dtcast::layer::{Layer, Linear, LoadOptions, StateDict};
    /// use dtcast::Tensor;
    /// use dtcast::DType;
    /// let mut lin = Linear::new(Tensor::from_vec(vec![0.0f32; 2], &[1, 2])?, None);
    /// let mut state = StateDict::new();
    /// state.insert("weight".into(), Tensor::from_vec(vec![1.5f64, -2.0], &[1, 2])?);
    /// state.insert("extra".into(), Tensor::from_vec(vec![1u8], &[1])?);
    /// assert!(lin.load_state_dict(&state, LoadOptions::default()).is_err()); // `extra`
    /// let skipped = lin.load_state_dict(&state, LoadOptions::default().strict(false))?;
    /// assert_eq!(skipped.unexpected, ["extra"]);
    /// let w = &lin.state_dict()["weight"];
    /// assert_eq!((w.dtype(), w.to_vec::<f32>()?), (DType::Float32, vec![1.5, -2.0]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn load_state_dict(
        &mut self,
        source: &dyn TensorSource,
        options: LoadOptions,
    ) -> Result<IncompatibleKeys, LayerError> {
        let own: Vec<(String, Tensor)> = self.state_dict().into_iter().collect();
        let (replacements, skipped) = crate::state::plan_load(&own, source, options)?;
        replace_in_order(self, replacements);
        Ok(skipped)
    }

    /// Saves the model's [`state_dict`](Layer::state_dict) as a safetensors file at `path`
    /// (atomically: the file appears complete or not at all), with `metadata` in its header
    /// (`&Default::default()` for none).
    ///
    /// ```
    /// use dtcast::layer::{Layer, Linear};
    /// use dtcast::Tensor;
    /// let path = std::env::temp_dir().join(format!("dtcast-doc-layer-save-{}.safetensors", std::process::id()));
    /// let lin = Linear::new(Tensor::from_vec(vec![0.25f32; 6], &[2, 3])?, None);
    /// lin.save(&path, &[("format".to_owned(), "pt".to_owned())].into())?;
    /// let mut other = Linear::new(Tensor::from_vec(vec![0.0f32; 6], &[2, 3])?, None);
    /// other.load(&path)?;
    /// assert_eq!(other.state_dict()["weight"].to_vec::<f32>()?, [0.25; 6]);
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn save(
        &self,
        path: impl AsRef<std::path::Path>,
        metadata: &BTreeMap<String, String>,
    ) -> Result<(), LayerError>
    where
        Self: Sized,
    {
        let tensors: Vec<(String, Tensor)> = self.state_dict().into_iter().collect();
        let metadata: Vec<(String, String)> = metadata
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        crate::checkpoint::save(path, &tensors, &metadata)
    }

    /// Loads the safetensors file at `path` into the model:
    /// [`load_state_dict`](Layer::load_state_dict) with the default options (each tensor into the
    /// model's dtype and device, strict keys). All or nothing.
    fn load(&mut self, path: impl AsRef<std::path::Path>) -> Result<(), LayerError>
    where
        Self: Sized,
    {
        let path = path.as_ref();
        let source = crate::checkpoint::load_map(path)?;
        self.load_state_dict(&source, LoadOptions::default())
            .map(|_| ())
    }
}

fn select(tensors: Vec<NamedTensor>, kind: Option<TensorKind>) -> Vec<(String, Tensor)> {
    tensors
        .into_iter()
        .filter(|t| kind.is_none_or(|k| t.kind == k))
        .map(|t| (t.name, t.tensor))
        .collect()
}

/// Computes every conversion first; only if all succeed are the tensors replaced.
fn convert_all<L: Layer + ?Sized>(
    layer: &mut L,
    plan: impl Fn(&NamedTensor) -> Option<(Option<Device>, Option<DType>, ToOptions)>,
) -> Result<(), LayerError> {
    let tensors = layer.tensors();
    let mut out = Vec::with_capacity(tensors.len());
    for t in &tensors {
        let new = match plan(t) {
            Some((device, dtype, options)) => {
                let target = dtcast_device::Target { device, dtype };
                t.tensor
                    .to_with(target, options)
                    .map_err(|e| LayerError::Tensor {
                        name: t.name.clone(),
                        source: e,
                    })?
            }
            None => t.tensor.clone(),
        };
        out.push(new);
    }
    replace_in_order(layer, out);
    Ok(())
}

/// Puts `tensors` into the layer in visiting order.
fn replace_in_order<L: Layer + ?Sized>(layer: &mut L, tensors: Vec<Tensor>) {
    struct Put(std::vec::IntoIter<Tensor>);
    impl VisitorMut for Put {
        fn tensor(&mut self, _: &str, _: TensorKind, _: bool, tensor: &mut Tensor) {
            if let Some(t) = self.0.next() {
                *tensor = t;
            }
        }
    }
    layer.visit_mut(&mut Put(tensors.into_iter()));
}

// ---- containers: written once here.

impl<T: Layer> Layer for Vec<T> {
    /// Children named `0`, `1`, ... as in `nn.ModuleList` / `nn.Sequential`.
    fn visit(&self, visitor: &mut dyn Visitor) {
        for (i, layer) in self.iter().enumerate() {
            visitor.enter(&i.to_string());
            layer.visit(visitor);
            visitor.exit();
        }
    }
    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut) {
        for (i, layer) in self.iter_mut().enumerate() {
            visitor.enter(&i.to_string());
            layer.visit_mut(visitor);
            visitor.exit();
        }
    }
}

impl<T: Layer> Layer for Option<T> {
    /// An absent child has no tensors; a present one adds no name segment.
    fn visit(&self, visitor: &mut dyn Visitor) {
        if let Some(layer) = self {
            layer.visit(visitor);
        }
    }
    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut) {
        if let Some(layer) = self {
            layer.visit_mut(visitor);
        }
    }
}

impl<T: Layer + ?Sized> Layer for Box<T> {
    fn visit(&self, visitor: &mut dyn Visitor) {
        (**self).visit(visitor);
    }
    fn visit_mut(&mut self, visitor: &mut dyn VisitorMut) {
        (**self).visit_mut(visitor);
    }
}
