//! The `safetensors` crate's side (feature `safetensors`): a dtcast tensor handed to
//! `safetensors::serialize` ([`SafetensorsView`]), and a tensor read from a
//! `safetensors::SafeTensors` ([`Tensor::from_safetensors`]).
//!
//! `Tensor` is not itself a `safetensors::View`: `View::dtype` cannot fail, and complex32,
//! complex128 and bcomplex32 have no safetensors dtype. [`Tensor::to_safetensors_view`] checks
//! the dtype once and reads the bytes to the host; the view then serializes.

use std::borrow::Cow;

use dtcast_dtype::DType;
use safetensors::tensor::{Dtype, TensorView, View};
use serde::de::value::{Error as NameError, StrDeserializer};
use serde::Deserialize;

use crate::{Tensor, TensorError};

/// A tensor as `safetensors::serialize` takes it: a storable dtype, the shape, the bytes on the
/// host (sub-byte elements packed, as safetensors stores them).
///
/// ```
/// use dtcast_device::Tensor;
/// let w = Tensor::from_vec(vec![1.0f32, -2.0], &[2])?;
/// let bytes = safetensors::serialize([("w", w.to_safetensors_view()?)], None)?;
/// let file = safetensors::SafeTensors::deserialize(&bytes)?;
/// let back = Tensor::from_safetensors(&file.tensor("w")?)?;
/// assert_eq!(back.to_vec::<f32>()?, [1.0, -2.0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct SafetensorsView {
    dtype: Dtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

/// safetensors' dtype of the same name as `dtype`'s row in the dtype table (its own
/// deserializer reads the name: no second table of names here).
fn safetensors_dtype(dtype: DType) -> Option<Dtype> {
    let name = dtype.safetensors_name()?;
    Dtype::deserialize(StrDeserializer::<NameError>::new(name)).ok()
}

impl Tensor {
    /// The tensor as a `safetensors::View` (its bytes copied to the host), or an error naming
    /// a dtype safetensors cannot store.
    pub fn to_safetensors_view(&self) -> Result<SafetensorsView, TensorError> {
        let dtype = safetensors_dtype(self.dtype()).ok_or(TensorError::Unstorable {
            dtype: self.dtype(),
            format: "safetensors",
        })?;
        Ok(SafetensorsView {
            dtype,
            shape: self.shape().to_vec(),
            data: self.to_bytes()?,
        })
    }

    /// A CPU tensor holding a copy of a tensor of a `safetensors::SafeTensors` file.
    pub fn from_safetensors(view: &TensorView<'_>) -> Result<Tensor, TensorError> {
        let name = view.dtype().to_string();
        let dtype = DType::from_safetensors_name(&name).ok_or_else(|| TensorError::Target {
            input: name.clone(),
            as_dtype: format!("safetensors dtype {name} has no dtcast dtype"),
            as_device: "not a device".to_owned(),
        })?;
        Tensor::from_bytes(view.data(), dtype, view.shape())
    }
}

impl View for SafetensorsView {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}
