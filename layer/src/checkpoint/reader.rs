//! [`Checkpoint`]: a safetensors file read with positioned reads, never memory-mapped, so that a
//! file truncated or rewritten underneath gives an error, not a `SIGBUS`.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use dtcast_device::Tensor;

use super::header::{header_len, other_format, Entry, Header};
use crate::error::LayerError;
use crate::input::{open_regular, Inputs, OpenError, Version};

/// A safetensors file, validated ([`Header`]'s rules) and read tensor by tensor.
///
/// ```
/// use dtcast::layer::checkpoint::{save, Checkpoint};
/// use dtcast::Tensor;
/// let path = std::env::temp_dir().join(format!("dtcast-doc-reader-{}.safetensors", std::process::id()));
/// let t = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?;
/// save(&path, &[("w".to_owned(), t)], &[])?;
/// let ck = Checkpoint::open(&path)?;
/// assert_eq!(ck.entries()[0].shape, [2]);
/// assert_eq!(ck.read(&ck.entries()[0])?, [0, 0, 0x80, 0x3f, 0, 0, 0, 0x40]);
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A checkpoint holds one descriptor, and none after [`close`](Checkpoint::close): a sharded
/// checkpoint of any number of shards holds only those it is reading. A read after `close`
/// opens the file again, and is [`LayerError::Changed`] unless it is the same file, unchanged.
#[derive(Debug)]
pub struct Checkpoint {
    path: PathBuf,
    /// The open file; `None` once closed (reopened by path on the next read).
    file: Mutex<Option<Arc<File>>>,
    version: Version,
    header: Header,
}

impl Checkpoint {
    /// Opens and validates `path`. Corrupt or truncated files are errors naming the problem.
    pub fn open(path: impl AsRef<Path>) -> Result<Checkpoint, LayerError> {
        let path = path.as_ref();
        let io = |source| LayerError::Io {
            path: path.to_owned(),
            source,
        };
        let bad = |reason: String| LayerError::Checkpoint {
            path: path.to_owned(),
            reason,
        };
        // Checked before opening, and once open: a FIFO never blocks, a device is never read.
        let (file, meta) = open_regular(path).map_err(|e| match e {
            OpenError::NotRegular("a directory") => bad(
                "it is a directory (for a sharded checkpoint, give its *.safetensors.index.json)"
                    .to_owned(),
            ),
            OpenError::NotRegular(what) => bad(format!("it is {what}, not a regular file")),
            OpenError::Io(source) => io(source),
        })?;
        let version = Version::of(&meta);
        let file_len = meta.len();
        let short_read = |e: std::io::Error| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                changed(path)
            } else {
                io(e)
            }
        };
        // A file shorter than 8 bytes gives `header_len` fewer bytes, and its error.
        let mut first8 = [0u8; 8];
        let first8 = &mut first8[..file_len.min(8) as usize];
        read_exact_at(&file, first8, 0).map_err(short_read)?;
        // A file of another format fails the first checks: named, rather than its bytes read
        // as a header length.
        let other = |reason: String| match other_format(first8) {
            Some(format) => bad(format!(
                "it is {format}, not safetensors (dtcast reads and writes safetensors)"
            )),
            None => bad(reason),
        };
        let n = header_len(first8, file_len).map_err(other)?;
        // `n` is at most MAX_HEADER_LEN and within the file: safe to allocate.
        let mut json = vec![0u8; n as usize];
        read_exact_at(&file, &mut json, 8).map_err(short_read)?;
        let header = Header::parse(&json, file_len).map_err(other)?;
        Ok(Checkpoint {
            path: path.to_owned(),
            file: Mutex::new(Some(Arc::new(file))),
            version,
            header,
        })
    }

    /// Closes the file's descriptor (the header stays); the next read opens it again.
    pub fn close(&self) {
        *self.file.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The open file: the one opened before, or the same file opened again.
    fn file(&self) -> Result<Arc<File>, LayerError> {
        let mut slot = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(file) = &*slot {
            return Ok(Arc::clone(file));
        }
        let (file, meta) = open_regular(&self.path).map_err(|e| match e {
            OpenError::Io(e) if e.kind() != std::io::ErrorKind::NotFound => LayerError::Io {
                path: self.path.clone(),
                source: e,
            },
            _ => changed(&self.path),
        })?;
        if Version::of(&meta) != self.version {
            return Err(changed(&self.path));
        }
        let file = Arc::new(file);
        *slot = Some(Arc::clone(&file));
        Ok(file)
    }

    /// Adds this file to `inputs` (its identity as opened).
    pub(crate) fn add_to(&self, inputs: &mut Inputs) {
        inputs.add_version(&self.path, &self.version);
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The tensors, in file order.
    pub fn entries(&self) -> &[Entry] {
        &self.header.entries
    }

    /// The `__metadata__` strings, in header order.
    pub fn metadata(&self) -> &[(String, String)] {
        &self.header.metadata
    }

    /// The validated header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Reads `buf.len()` bytes of `entry` starting `offset` bytes into it. A file that became
    /// shorter is [`LayerError::Changed`].
    pub fn read_into(
        &self,
        entry: &Entry,
        offset: usize,
        buf: &mut [u8],
    ) -> Result<(), LayerError> {
        let start = entry.range.start.saturating_add(offset);
        if start.saturating_add(buf.len()) > entry.range.end {
            return Err(LayerError::Output(format!(
                "a read of {} bytes at offset {offset} runs past the end of tensor `{}`",
                buf.len(),
                entry.name
            )));
        }
        self.read_at(start, buf)
    }

    /// Reads `buf.len()` bytes at `offset` of the file. A file that became shorter is
    /// [`LayerError::Changed`].
    fn read_at(&self, offset: usize, buf: &mut [u8]) -> Result<(), LayerError> {
        let file = self.file()?;
        read_exact_at(&file, buf, offset as u64).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                changed(&self.path)
            } else {
                LayerError::Io {
                    path: self.path.clone(),
                    source: e,
                }
            }
        })
    }

    /// Reads the bytes `range` of the file into `buf` (of its length), where they are within
    /// the tensors' data and end by `end` (the end of the last tensor they are in): tensors stored
    /// one after the other in one read. A file that became shorter is [`LayerError::Changed`].
    pub(crate) fn read_span(
        &self,
        range: std::ops::Range<usize>,
        end: usize,
        buf: &mut [u8],
    ) -> Result<(), LayerError> {
        if range.start < self.header.data_start || range.end > end || range.len() != buf.len() {
            return Err(LayerError::Output(format!(
                "a read of bytes {range:?} runs past the tensors that hold them in {}",
                self.path.display()
            )));
        }
        self.read_at(range.start, buf)
    }

    /// The bytes of one tensor.
    pub fn read(&self, entry: &Entry) -> Result<Vec<u8>, LayerError> {
        let mut buf = vec![0u8; entry.range.len()];
        self.read_into(entry, 0, &mut buf)?;
        Ok(buf)
    }

    /// Errors with [`LayerError::Changed`] if the file was truncated, extended or rewritten since
    /// it was opened (its size, modification or change time differ).
    pub fn check_unchanged(&self) -> Result<(), LayerError> {
        let open = self.file.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let now = match open {
            Some(file) => file.metadata(),
            // Closed: the file its path names now (a file removed or replaced has changed).
            None => std::fs::metadata(&self.path),
        };
        let Ok(now) = now else {
            return Err(changed(&self.path));
        };
        if Version::of(&now) == self.version {
            Ok(())
        } else {
            Err(changed(&self.path))
        }
    }

    /// Every tensor as a CPU `Tensor`, in file order.
    pub fn load(&self) -> Result<Vec<(String, Tensor)>, LayerError> {
        let out =
            self.entries()
                .iter()
                .map(|e| {
                    let t = Tensor::from_bytes(&self.read(e)?, e.dtype, &e.shape).map_err(
                        |source| LayerError::Tensor {
                            name: e.name.clone(),
                            source,
                        },
                    )?;
                    Ok((e.name.clone(), t))
                })
                .collect::<Result<_, LayerError>>()?;
        self.check_unchanged()?;
        Ok(out)
    }
}

fn changed(path: &Path) -> LayerError {
    LayerError::Changed {
        path: path.to_owned(),
    }
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match file.seek_read(buf, offset) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
