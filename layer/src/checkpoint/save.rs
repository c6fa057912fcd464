//! Writing a checkpoint from tensors in memory.

use std::io::Write;
use std::path::Path;

use dtcast_device::Tensor;

use super::header;
use crate::error::LayerError;
use crate::output::{write_file, FileMode};

/// Saves `tensors` (in this order) with `metadata` to `path`, atomically. Like torch's
/// `save_file`, an existing regular file at `path` is replaced; anything else there (a device,
/// FIFO, directory) is refused, and a symbolic link is followed (see [`crate::output`]).
///
/// ```
/// use dtcast::layer::checkpoint::{load_map, save};
/// use dtcast::Tensor;
/// let path = std::env::temp_dir().join(format!("dtcast-doc-save-{}.safetensors", std::process::id()));
/// let t = Tensor::from_vec(vec![1i64, 2, 3], &[3])?;
/// save(&path, &[("ids".to_owned(), t)], &[("format".to_owned(), "pt".to_owned())])?;
/// assert_eq!(load_map(&path)?["ids"].to_vec::<i64>()?, [1, 2, 3]);
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn save(
    path: impl AsRef<Path>,
    tensors: &[(String, Tensor)],
    metadata: &[(String, String)],
) -> Result<(), LayerError> {
    let path = path.as_ref();
    let specs: Vec<_> = tensors
        .iter()
        .map(|(n, t)| (n.clone(), t.dtype(), t.shape().to_vec()))
        .collect();
    let head = header::build(&specs, metadata)?;
    write_file(path, true, FileMode::UmaskDefault, |w| {
        let io = |source| LayerError::Io {
            path: path.to_owned(),
            source,
        };
        w.write_all(&(head.len() as u64).to_le_bytes())
            .map_err(io)?;
        w.write_all(&head).map_err(io)?;
        for (name, t) in tensors {
            let bytes = t.to_bytes().map_err(|source| LayerError::Tensor {
                name: name.clone(),
                source,
            })?;
            w.write_all(&bytes).map_err(io)?;
        }
        Ok(())
    })
}
