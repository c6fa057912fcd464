//! State dicts: a model's tensors as an ordered map, and loading one back into a model the way
//! torch's `load_state_dict` does (into the model's own dtypes and devices, keys checked).

use std::collections::{BTreeMap, HashMap};

use dtcast_device::{CastMode, Tensor, ToOptions};

use crate::error::LayerError;

/// A model's tensors by dotted name, in PyTorch's `state_dict` order (parameters and buffers as
/// the model registers them, children in between), like torch's `OrderedDict`.
pub type StateDict = indexmap::IndexMap<String, Tensor>;

/// Named tensors to load from: a [`StateDict`], a `HashMap` (what
/// [`load_map`](crate::checkpoint::load_map) gives) or a `BTreeMap`.
pub trait TensorSource {
    /// The tensor named `name`.
    fn tensor(&self, name: &str) -> Option<&Tensor>;
    /// Every name.
    fn names(&self) -> Vec<&str>;
}

impl TensorSource for StateDict {
    fn tensor(&self, name: &str) -> Option<&Tensor> {
        self.get(name)
    }
    fn names(&self) -> Vec<&str> {
        self.keys().map(String::as_str).collect()
    }
}

impl<S: std::hash::BuildHasher> TensorSource for HashMap<String, Tensor, S> {
    fn tensor(&self, name: &str) -> Option<&Tensor> {
        self.get(name)
    }
    fn names(&self) -> Vec<&str> {
        self.keys().map(String::as_str).collect()
    }
}

impl TensorSource for BTreeMap<String, Tensor> {
    fn tensor(&self, name: &str) -> Option<&Tensor> {
        self.get(name)
    }
    fn names(&self) -> Vec<&str> {
        self.keys().map(String::as_str).collect()
    }
}

/// How [`Layer::load_state_dict`](crate::Layer::load_state_dict) loads.
///
/// ```
/// use dtcast::layer::LoadOptions;
/// let lenient = LoadOptions::default().strict(false).keep_file_dtypes(true);
/// assert!(!lenient.is_strict());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadOptions {
    strict: bool,
    keep_file_dtypes: bool,
    mode: CastMode,
}

impl Default for LoadOptions {
    /// torch's defaults: strict, each tensor copied into the model's dtype (torch's `copy_`,
    /// dtcast's Torch cast mode) on the model's device.
    fn default() -> LoadOptions {
        LoadOptions {
            strict: true,
            keep_file_dtypes: false,
            mode: CastMode::Torch,
        }
    }
}

impl LoadOptions {
    /// torch's `strict`: when true (the default), a key missing from the source or one the model
    /// does not have is an error naming them, and nothing is loaded; when false, the keys both
    /// have are loaded and the others reported ([`IncompatibleKeys`]).
    pub fn strict(mut self, strict: bool) -> LoadOptions {
        self.strict = strict;
        self
    }

    /// Keep each loaded tensor's own dtype instead of casting it into the model's (the model's
    /// dtypes then change, as with [`Layer::load_tensors`](crate::Layer::load_tensors)).
    pub fn keep_file_dtypes(mut self, keep: bool) -> LoadOptions {
        self.keep_file_dtypes = keep;
        self
    }

    /// The cast mode of the casts into the model's dtypes (default Torch: torch's `copy_`).
    pub fn mode(mut self, mode: CastMode) -> LoadOptions {
        self.mode = mode;
        self
    }

    /// Whether loading is strict.
    pub fn is_strict(&self) -> bool {
        self.strict
    }
}

/// The keys a non-strict load skipped, as torch's `load_state_dict` reports them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IncompatibleKeys {
    /// The model's tensors the source did not have (left as they were), in model order.
    pub missing: Vec<String>,
    /// The source's tensors the model does not have (ignored), sorted.
    pub unexpected: Vec<String>,
}

impl IncompatibleKeys {
    /// Whether every key matched.
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.unexpected.is_empty()
    }
}

/// What [`Layer::load_state_dict`](crate::Layer::load_state_dict) puts into a model whose
/// tensors are `own` (name, tensor, in visiting order): every tensor converted first (nothing is
/// replaced here), or the error; with the keys it skipped.
pub(crate) fn plan_load(
    own: &[(String, Tensor)],
    source: &dyn TensorSource,
    options: LoadOptions,
) -> Result<(Vec<Tensor>, IncompatibleKeys), LayerError> {
    let mut keys = IncompatibleKeys::default();
    let mut replacements = Vec::with_capacity(own.len());
    for (name, tensor) in own {
        let Some(new) = source.tensor(name) else {
            keys.missing.push(name.clone());
            replacements.push(tensor.clone());
            continue;
        };
        if new.shape() != tensor.shape() {
            return Err(LayerError::ShapeMismatch {
                name: name.clone(),
                expected: tensor.shape().to_vec(),
                found: new.shape().to_vec(),
            });
        }
        let dtype = if options.keep_file_dtypes {
            new.dtype()
        } else {
            tensor.dtype()
        };
        let target = dtcast_device::Target {
            device: Some(tensor.device()),
            dtype: Some(dtype),
        };
        let to = ToOptions {
            mode: options.mode,
            ..ToOptions::default()
        };
        let loaded = new
            .to_with(target, to)
            .map_err(|source| LayerError::Tensor {
                name: name.clone(),
                source,
            })?;
        replacements.push(loaded);
    }
    let known: std::collections::HashSet<&str> = own.iter().map(|(n, _)| n.as_str()).collect();
    keys.unexpected = source
        .names()
        .into_iter()
        .filter(|k| !known.contains(k))
        .map(str::to_owned)
        .collect();
    keys.unexpected.sort();
    if options.strict && !keys.is_empty() {
        return Err(LayerError::Names {
            missing: keys.missing,
            unexpected: keys.unexpected,
        });
    }
    Ok((replacements, keys))
}
