//! [`Shape`]: a tensor's dimensions as a checkpoint header lists them, held without an
//! allocation of their own up to [`Shape::INLINE`] dimensions (every tensor of a real
//! checkpoint), so that a header of a million tensors costs a million names and nothing more.

use std::fmt;
use std::ops::Deref;

/// A tensor's dimensions. Reads as a `[usize]` (`shape[0]`, `shape.len()`, `shape.iter()`).
///
/// ```
/// use dtcast::layer::checkpoint::Shape;
/// let s = Shape::from(&[4096, 11008][..]);
/// assert_eq!(s, [4096, 11008]);
/// assert_eq!(s.iter().product::<usize>(), 45_088_768);
/// assert_eq!(format!("{s:?}"), "[4096, 11008]");
/// let big = Shape::from(vec![1; 9]);
/// assert_eq!(big.len(), 9);
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Shape(Dims);

#[derive(Clone, PartialEq, Eq, Hash)]
enum Dims {
    /// Up to [`Shape::INLINE`] dimensions, the first `len` of `dims`.
    Inline {
        len: u8,
        dims: [usize; Shape::INLINE],
    },
    /// More.
    Heap(Box<[usize]>),
}

impl Shape {
    /// How many dimensions are held inline.
    pub const INLINE: usize = 5;

    /// The dimensions.
    pub fn as_slice(&self) -> &[usize] {
        match &self.0 {
            Dims::Inline { len, dims } => &dims[..usize::from(*len)],
            Dims::Heap(dims) => dims,
        }
    }
}

impl Deref for Shape {
    type Target = [usize];

    fn deref(&self) -> &[usize] {
        self.as_slice()
    }
}

impl AsRef<[usize]> for Shape {
    fn as_ref(&self) -> &[usize] {
        self.as_slice()
    }
}

impl From<&[usize]> for Shape {
    fn from(dims: &[usize]) -> Shape {
        if dims.len() <= Shape::INLINE {
            let mut inline = [0; Shape::INLINE];
            inline[..dims.len()].copy_from_slice(dims);
            Shape(Dims::Inline {
                len: dims.len() as u8,
                dims: inline,
            })
        } else {
            Shape(Dims::Heap(dims.into()))
        }
    }
}

impl From<Vec<usize>> for Shape {
    fn from(dims: Vec<usize>) -> Shape {
        Shape::from(dims.as_slice())
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_slice().fmt(f)
    }
}

impl<const N: usize> PartialEq<[usize; N]> for Shape {
    fn eq(&self, other: &[usize; N]) -> bool {
        self.as_slice() == other
    }
}

impl PartialEq<[usize]> for Shape {
    fn eq(&self, other: &[usize]) -> bool {
        self.as_slice() == other
    }
}

impl PartialEq<Vec<usize>> for Shape {
    fn eq(&self, other: &Vec<usize>) -> bool {
        self.as_slice() == other.as_slice()
    }
}
