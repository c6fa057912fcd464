//! ndarray's side (feature `ndarray`): `ArrayD<T>` to and from dtcast tensors for every
//! [`Element`] type `T`.
//!
//! A tensor becomes an array in one copy (its bytes into the array's `Vec`); an array in standard (row-major) layout becomes a tensor in one copy, any other
//! layout is read in logical order. Element types are checked: an `ArrayD<f32>` is made only
//! from a float32 tensor (cast first with [`Tensor::to`]).

use dtcast_dtype::Element;
use ndarray::{ArrayBase, ArrayD, Data, IxDyn};

use crate::{Tensor, TensorError};

impl Tensor {
    /// A CPU tensor holding a copy of `array` (of any layout: read in logical order).
    ///
    /// ```
    /// use dtcast_device::Tensor;
    /// use dtcast_dtype::DType;
    /// let a = ndarray::ArrayD::from_shape_vec(vec![2, 3], (0..6).map(|x| x as f32).collect())?;
    /// let t = Tensor::from_ndarray(&a.t())?; // a transposed view
    /// assert_eq!((t.dtype(), t.shape()), (DType::Float32, &[3, 2][..]));
    /// assert_eq!(t.to_vec::<f32>()?, [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_ndarray<T: Element, S: Data<Elem = T>>(
        array: &ArrayBase<S, IxDyn>,
    ) -> Result<Tensor, TensorError> {
        match array.as_slice() {
            Some(row_major) => Tensor::from_slice(row_major, array.shape()),
            None => Tensor::from_vec(array.iter().copied().collect(), array.shape()),
        }
    }

    /// The tensor as an `ArrayD<T>` (read from its device); `T` must be the tensor's dtype.
    ///
    /// ```
    /// use dtcast_device::Tensor;
    /// use dtcast_dtype::half::bf16;
    /// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
    /// let a = t.to(dtcast_dtype::DType::BFloat16)?.to_ndarray::<bf16>()?;
    /// assert_eq!(a.shape(), [2, 2]);
    /// assert_eq!(a[[1, 0]], bf16::from_f32(3.0));
    /// assert!(t.to_ndarray::<f64>().is_err()); // float32, not float64
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn to_ndarray<T: Element>(&self) -> Result<ArrayD<T>, TensorError> {
        let elements = self.to_vec::<T>()?;
        ArrayD::from_shape_vec(IxDyn(self.shape()), elements).map_err(|e| TensorError::Interop {
            library: "ndarray",
            message: e.to_string(),
        })
    }
}

impl<T: Element> TryFrom<&ArrayD<T>> for Tensor {
    type Error = TensorError;
    /// [`Tensor::from_ndarray`].
    fn try_from(array: &ArrayD<T>) -> Result<Tensor, TensorError> {
        Tensor::from_ndarray(array)
    }
}

impl<T: Element> TryFrom<&Tensor> for ArrayD<T> {
    type Error = TensorError;
    /// [`Tensor::to_ndarray`].
    fn try_from(t: &Tensor) -> Result<ArrayD<T>, TensorError> {
        t.to_ndarray()
    }
}
