//! [`Checkpoint`]: a safetensors file read with positioned reads, never memory-mapped, so that a
//! file truncated or rewritten underneath gives an error, not a `SIGBUS`.

use std::fs::File;
use std::path::{Path, PathBuf};

use dtcast_device::Tensor;

use super::header::{header_len, Entry, Header};
use crate::error::LayerError;

/// What identifies one version of the file: if any of it changes, the file changed.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Version {
    len: u64,
    modified: Option<std::time::SystemTime>,
    #[cfg(unix)]
    ctime: (i64, i64),
}

impl Version {
    fn of(meta: &std::fs::Metadata) -> Version {
        Version {
            len: meta.len(),
            modified: meta.modified().ok(),
            #[cfg(unix)]
            ctime: {
                use std::os::unix::fs::MetadataExt;
                (meta.ctime(), meta.ctime_nsec())
            },
        }
    }
}

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
#[derive(Debug)]
pub struct Checkpoint {
    path: PathBuf,
    file: File,
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
        // Checked before opening: opening a FIFO would wait for a writer.
        let meta = std::fs::metadata(path).map_err(io)?;
        if meta.is_dir() {
            return Err(bad(
                "it is a directory (for a sharded checkpoint, give its *.safetensors.index.json)"
                    .to_owned(),
            ));
        }
        if !meta.is_file() {
            return Err(bad(format!(
                "it is {}, not a regular file",
                crate::output::describe(meta.file_type())
            )));
        }
        let file = File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
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
        let n = header_len(first8, file_len).map_err(bad)?;
        // `n` is at most MAX_HEADER_LEN and within the file: safe to allocate.
        let mut json = vec![0u8; n as usize];
        read_exact_at(&file, &mut json, 8).map_err(short_read)?;
        let header = Header::parse(&json, file_len).map_err(bad)?;
        Ok(Checkpoint {
            path: path.to_owned(),
            file,
            version,
            header,
        })
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
        read_exact_at(&self.file, buf, start as u64).map_err(|e| {
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

    /// The bytes of one tensor.
    pub fn read(&self, entry: &Entry) -> Result<Vec<u8>, LayerError> {
        let mut buf = vec![0u8; entry.range.len()];
        self.read_into(entry, 0, &mut buf)?;
        Ok(buf)
    }

    /// Errors with [`LayerError::Changed`] if the file was truncated, extended or rewritten since
    /// it was opened (its size, modification or change time differ).
    pub fn check_unchanged(&self) -> Result<(), LayerError> {
        let now = self.file.metadata().map_err(|source| LayerError::Io {
            path: self.path.clone(),
            source,
        })?;
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
