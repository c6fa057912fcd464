//! safetensors checkpoints: strict reading, streaming conversion, sharded checkpoints.
//!
//! - [`Checkpoint`] reads one file with positioned reads (never a memory map: a file truncated
//!   underneath is an error, not a crash), after validating its [`Header`] by the strictest
//!   rules.
//! - [`convert_file`] streams a file through a read → cast → write pipeline into an output that
//!   appears complete or not at all ([`crate::output`]).
//! - [`ShardedCheckpoint`] opens a `*.safetensors.index.json` and cross-checks it with its
//!   shards; [`convert_index`] converts them all or nothing.
//!
//! ```
//! use dtcast::layer::checkpoint::{convert_file, save, Checkpoint, ConvertOptions};
//! use dtcast::Tensor;
//! use dtcast::DType;
//! let dir = std::env::temp_dir().join(format!("dtcast-doc-ckpt-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let w = Tensor::from_vec(vec![1.0f32, 0.5], &[2])?;
//! save(dir.join("in.safetensors"), &[("w".to_owned(), w)], &[])?;
//! let s = convert_file(&dir.join("in.safetensors"), &dir.join("out.safetensors"),
//!                      &ConvertOptions::new(DType::BFloat16), &|_, _| {})?;
//! assert_eq!(s.converted, 1);
//! assert_eq!(Checkpoint::open(dir.join("out.safetensors"))?.entries()[0].dtype, DType::BFloat16);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;
use std::path::Path;

use dtcast_device::Tensor;

use crate::error::LayerError;

mod convert;
mod directory;
mod header;
mod json;
mod layout;
mod pipeline;
mod quantize;
mod quantized;
mod reader;
mod save;
mod shape;
mod sharded;

pub use convert::{convert_file, read_config, ConvertOptions, Quantize, Summary};
pub use directory::{convert_dir, model_weights};
pub use header::{Entry, Header, MAX_HEADER_LEN};
pub use layout::compressed_tensors::{
    scheme_name as quantize_scheme_name, SCHEMES as QUANTIZE_SCHEMES,
};
pub use layout::WeightScheme;
pub use layout::{QuantizedFormat, ACTIVATION_PARAMETERS, ATTENTION_PARAMETERS};
pub use pipeline::CHUNK_BYTES;
pub use quantized::{detect as detect_quantized, unread_quantized, QuantizedWeight};
pub use reader::Checkpoint;
pub use save::save;
pub use shape::Shape;
pub use sharded::{convert_index, Index, ShardWeights, ShardedCheckpoint};

/// Loads a safetensors file into a name → tensor map (for [`Layer::load_tensors`](crate::Layer::load_tensors)).
pub fn load_map(path: impl AsRef<Path>) -> Result<HashMap<String, Tensor>, LayerError> {
    Ok(Checkpoint::open(path)?.load()?.into_iter().collect())
}
