//! Layer and checkpoint errors.

use core::fmt;
use std::path::PathBuf;

use dtcast_device::TensorError;
use dtcast_dtype::DType;

/// Why a layer operation or a checkpoint read/write failed.
#[non_exhaustive]
#[derive(Debug)]
pub enum LayerError {
    /// `astype` / `to` got a dtype that is neither floating nor complex.
    NotFloating(DType),
    /// A tensor could not be converted; the layer is unchanged.
    Tensor {
        /// The tensor's dotted name.
        name: String,
        /// What went wrong.
        source: TensorError,
    },
    /// A `to` argument or a device was bad.
    Target(TensorError),
    /// Loading tensors by name: names the layer has that the source lacks, and the reverse.
    Names {
        /// In the layer, not in the source.
        missing: Vec<String>,
        /// In the source, not in the layer.
        unexpected: Vec<String>,
    },
    /// A loaded tensor's shape differs from the layer's.
    ShapeMismatch {
        /// The tensor's name.
        name: String,
        /// The layer's shape.
        expected: Vec<usize>,
        /// The source's shape.
        found: Vec<usize>,
    },
    /// A checkpoint is malformed (bad header, offsets, dtype, ...).
    Checkpoint {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A GGUF file is malformed.
    Gguf {
        /// The file.
        path: PathBuf,
        /// What is wrong with it, and at which byte.
        reason: String,
    },
    /// A dtype safetensors cannot store (complex, the fnuz float8 formats).
    Unstorable {
        /// The tensor.
        name: String,
        /// Its dtype.
        dtype: DType,
    },
    /// A sharded checkpoint's index is malformed or disagrees with its shards.
    Index {
        /// The index file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// An input file is not one dtcast reads: not a regular file (a FIFO, a device, a
    /// directory), or larger than its kind may be.
    Input {
        /// The file.
        path: PathBuf,
        /// What it is.
        reason: String,
    },
    /// An input file was truncated, extended or rewritten while it was being read.
    Changed {
        /// The file.
        path: PathBuf,
    },
    /// A quantized checkpoint is inconsistent, ambiguous, or asked for something that would read
    /// a quantized weight without its scales.
    Quantized(String),
    /// The output cannot be written as asked: it exists and `--force` was not given, it is not a
    /// regular file, its directory is missing, or it would overwrite the input.
    Output(String),
    /// Reading or writing a file.
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl fmt::Display for LayerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayerError::NotFloating(dt) => write!(
                f,
                "astype / to only accept floating point or complex dtypes, but got {dt} (use astype_all to convert every tensor)"
            ),
            LayerError::Tensor { name, source } => write!(f, "tensor `{name}`: {source}"),
            LayerError::Target(e) => e.fmt(f),
            LayerError::Names { missing, unexpected } => {
                write!(f, "tensor names do not match")?;
                if !missing.is_empty() {
                    write!(f, "; missing: {}", missing.join(", "))?;
                }
                if !unexpected.is_empty() {
                    write!(f, "; unexpected: {}", unexpected.join(", "))?;
                }
                Ok(())
            }
            LayerError::ShapeMismatch { name, expected, found } => {
                write!(f, "tensor `{name}` has shape {found:?}, but the layer expects {expected:?}")
            }
            LayerError::Checkpoint { path, reason } => write!(f, "{}: not a valid safetensors file: {reason}", path.display()),
            LayerError::Gguf { path, reason } => write!(f, "{}: not a valid GGUF file: {reason}", path.display()),
            LayerError::Unstorable { name, dtype } => {
                // What it stores, from the dtype table (a dtype safetensors gains is listed).
                let stored: Vec<&str> = DType::ALL
                    .into_iter()
                    .filter(|d| d.safetensors_name().is_some() && *d != DType::Float4E2M1FnX2)
                    .map(DType::name)
                    .collect();
                write!(
                    f,
                    "tensor `{name}` would be {dtype}, which safetensors cannot store (it stores {})",
                    stored.join(", ")
                )
            }
            LayerError::Index { path, reason } | LayerError::Input { path, reason } => write!(f, "{}: {reason}", path.display()),
            LayerError::Changed { path } => write!(f, "{} changed while it was being read", path.display()),
            LayerError::Output(msg) => f.write_str(msg),
            LayerError::Quantized(msg) => write!(f, "quantized checkpoint: {msg}"),
            LayerError::Io { path, source } if path.as_os_str().is_empty() => source.fmt(f),
            LayerError::Io { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for LayerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LayerError::Tensor { source, .. } => Some(source),
            LayerError::Target(e) => Some(e),
            LayerError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl LayerError {
    /// Names `path` in an I/O error that has no path yet (one made by `?` from an
    /// [`std::io::Error`]).
    pub fn at(self, path: &std::path::Path) -> LayerError {
        match self {
            LayerError::Io { path: p, source } if p.as_os_str().is_empty() => LayerError::Io {
                path: path.to_owned(),
                source,
            },
            other => other,
        }
    }
}

/// An I/O error without a path; [`LayerError::at`] adds one.
impl From<std::io::Error> for LayerError {
    fn from(source: std::io::Error) -> Self {
        LayerError::Io {
            path: PathBuf::new(),
            source,
        }
    }
}

impl From<TensorError> for LayerError {
    fn from(e: TensorError) -> Self {
        LayerError::Target(e)
    }
}
