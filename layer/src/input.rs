//! What dtcast reads, by one rule for every file: the checkpoint and its shards, the index, the
//! configuration beside them (`config.json`, `hf_quant_config.json`) and the files a model
//! directory copies.
//!
//! - **Only regular files.** A path is checked before it is opened (a device is never opened)
//!   and the open file again (a FIFO swapped in between is opened without blocking, and
//!   refused): a FIFO, a device, a socket or a directory is an error naming what it is, never a
//!   hang or a read without end.
//! - **Sizes capped before reading.** A file parsed whole (JSON) is refused when it is larger
//!   than [`MAX_JSON_LEN`], before a byte is allocated; a file copied is streamed, and exactly as
//!   many bytes as it had when opened.
//! - **The same file throughout.** A file's version (identity, size, modification and change
//!   times) is taken when it is opened; a file that differs when its reading ends is an error.
//! - **Inputs are never outputs.** [`Inputs`] holds the identity (device and inode) of every
//!   file a command reads — stdin too, where it is a file — so that an output that would replace
//!   one of them, through any number of links, is refused ([`Target::refuse_inputs`]).
//!
//! [`Target::refuse_inputs`]: crate::output::Target::refuse_inputs

use std::fs::{File, Metadata};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::error::LayerError;

/// The largest JSON file read whole (an index, `config.json`, `hf_quant_config.json`): larger is
/// refused before reading. The same bound as a safetensors header, which holds more per tensor
/// than an index does.
pub const MAX_JSON_LEN: u64 = 100_000_000;

/// What identifies a file whatever path reaches it: its device and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    /// The identity of the file `meta` describes (`None` where the system has no inodes).
    pub fn of(meta: &Metadata) -> Option<FileId> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Some(FileId {
                dev: meta.dev(),
                ino: meta.ino(),
            })
        }
        #[cfg(not(unix))]
        {
            let _ = meta;
            None
        }
    }
}

/// One version of a file: if any part of it changes, the file was replaced or rewritten.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Version {
    id: Option<FileId>,
    len: u64,
    modified: Option<SystemTime>,
    /// Changed by every write and by a rename (so left out of [`Version::same_contents`]).
    ctime: Option<(i64, i64)>,
}

impl Version {
    pub(crate) fn of(meta: &Metadata) -> Version {
        #[cfg(unix)]
        let ctime = {
            use std::os::unix::fs::MetadataExt;
            Some((meta.ctime(), meta.ctime_nsec()))
        };
        #[cfg(not(unix))]
        let ctime = None;
        Version {
            id: FileId::of(meta),
            len: meta.len(),
            modified: meta.modified().ok(),
            ctime,
        }
    }

    /// The same file, its contents as they were, as far as a rename of it keeps: identity, size
    /// and modification time (a rename changes the change time).
    pub(crate) fn same_contents(&self, other: &Version) -> bool {
        self.id == other.id && self.len == other.len && self.modified == other.modified
    }

    pub(crate) fn id(&self) -> Option<FileId> {
        self.id
    }
}

/// Why a path cannot be read as a regular file.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// It is something else: what, in words ("a FIFO (named pipe)").
    NotRegular(&'static str),
    /// It could not be opened or examined.
    Io(io::Error),
}

impl OpenError {
    /// As a [`LayerError`] naming `path`.
    pub(crate) fn at(self, path: &Path) -> LayerError {
        match self {
            OpenError::NotRegular(what) => LayerError::Input {
                path: path.to_owned(),
                reason: format!(
                    "it is {what}, not a regular file; dtcast reads only regular files"
                ),
            },
            OpenError::Io(source) => LayerError::Io {
                path: path.to_owned(),
                source,
            },
        }
    }
}

/// Opens `path` for reading if it is a regular file (through any links), without ever blocking
/// on a FIFO or opening a device; returns the file and its metadata as open.
pub(crate) fn open_regular(path: &Path) -> Result<(File, Metadata), OpenError> {
    let meta = std::fs::metadata(path).map_err(OpenError::Io)?;
    if !meta.is_file() {
        return Err(OpenError::NotRegular(describe(meta.file_type())));
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Something swapped in for the file since the check: a FIFO opens at once, and is
        // refused below.
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = options.open(path).map_err(OpenError::Io)?;
    let meta = file.metadata().map_err(OpenError::Io)?;
    if !meta.is_file() {
        return Err(OpenError::NotRegular(describe(meta.file_type())));
    }
    #[cfg(unix)]
    blocking(&file).map_err(OpenError::Io)?;
    Ok((file, meta))
}

/// Clears `O_NONBLOCK` (a regular file reads the same either way; this keeps the descriptor
/// ordinary for whoever reads it next).
#[cfg(unix)]
fn blocking(file: &File) -> io::Result<()> {
    use std::os::unix::io::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor this function's caller owns.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The file at `path`, read whole, if there is one (`Ok(None)` where nothing is there): a
/// regular file of at most [`MAX_JSON_LEN`] bytes, or an error naming what it is. Its version is
/// added to `inputs`.
pub(crate) fn read_small(path: &Path, inputs: &mut Inputs) -> Result<Option<Vec<u8>>, LayerError> {
    let (file, meta) = match open_regular(path) {
        Ok(opened) => opened,
        Err(OpenError::Io(e)) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.at(path)),
    };
    if meta.len() > MAX_JSON_LEN {
        return Err(LayerError::Input {
            path: path.to_owned(),
            reason: format!(
                "it is {} bytes, more than the {MAX_JSON_LEN} bytes dtcast reads of a JSON file",
                meta.len()
            ),
        });
    }
    let io = |source| LayerError::Io {
        path: path.to_owned(),
        source,
    };
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // One byte more than the cap: a file that grew past it is refused, not read on.
    (&file)
        .take(MAX_JSON_LEN + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 != meta.len()
        || Version::of(&file.metadata().map_err(io)?) != Version::of(&meta)
    {
        return Err(LayerError::Changed {
            path: path.to_owned(),
        });
    }
    inputs.add(path, &meta);
    Ok(Some(bytes))
}

/// Copies the regular file at `path` into `out`, streamed: exactly the bytes it had when it
/// was opened, and an error if it changed meanwhile. Returns the file's metadata (as opened).
pub(crate) fn copy_regular(path: &Path, out: &mut dyn Write) -> Result<Metadata, LayerError> {
    let (file, meta) = open_regular(path).map_err(|e| e.at(path))?;
    let io = |source| LayerError::Io {
        path: path.to_owned(),
        source,
    };
    let copied = io::copy(&mut (&file).take(meta.len()), out).map_err(io)?;
    if copied != meta.len() || Version::of(&file.metadata().map_err(io)?) != Version::of(&meta) {
        return Err(LayerError::Changed {
            path: path.to_owned(),
        });
    }
    Ok(meta)
}

/// The files a command reads, by identity: an output that would replace any of them is refused
/// ([`Target::refuse_inputs`](crate::output::Target::refuse_inputs)), whatever links lead there.
///
/// ```
/// use dtcast::layer::input::Inputs;
/// use dtcast::layer::output::Target;
/// let dir = std::env::temp_dir().join(format!("dtcast-doc-inputs-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// std::fs::write(dir.join("in.bin"), b"data")?;
/// # let _ = std::fs::remove_file(dir.join("link.bin"));
/// std::os::unix::fs::symlink(dir.join("in.bin"), dir.join("link.bin"))?;
/// let mut inputs = Inputs::new();
/// inputs.add_path(dir.join("in.bin"))?;
/// let target = Target::file(dir.join("link.bin"), true)?;
/// let e = target.refuse_inputs(&inputs).unwrap_err();
/// assert!(e.to_string().starts_with("refusing to overwrite the input"), "{e}");
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    files: Vec<(FileId, PathBuf)>,
}

impl Inputs {
    /// No inputs yet.
    pub fn new() -> Inputs {
        Inputs::default()
    }

    /// Adds the file `meta` describes, read from `path`.
    pub(crate) fn add(&mut self, path: &Path, meta: &Metadata) {
        if let Some(id) = FileId::of(meta) {
            self.files.push((id, path.to_owned()));
        }
    }

    /// Adds the file whose version (as opened) is `version`, read from `path`.
    pub(crate) fn add_version(&mut self, path: &Path, version: &Version) {
        if let Some(id) = version.id {
            self.files.push((id, path.to_owned()));
        }
    }

    /// Adds the file at `path` (links followed). A path where nothing is is no input: nothing
    /// to add.
    pub fn add_path(&mut self, path: impl AsRef<Path>) -> io::Result<()> {
        let path = path.as_ref();
        match std::fs::metadata(path) {
            Ok(meta) => {
                self.add(path, &meta);
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Adds this process's standard input where it is a file (`dtcast cast < in.f32`).
    pub fn add_stdin(&mut self) {
        #[cfg(unix)]
        {
            // SAFETY: fstat into a zeroed struct the call fills; descriptor 0 is not consumed.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            if unsafe { libc::fstat(0, &mut st) } == 0 {
                self.files.push((
                    FileId {
                        dev: st.st_dev as u64,
                        ino: st.st_ino as u64,
                    },
                    PathBuf::from("(standard input)"),
                ));
            }
        }
    }

    /// The path an input with identity `id` was read from, if one has it.
    pub(crate) fn find(&self, id: Option<FileId>) -> Option<&Path> {
        let id = id?;
        (self.files.iter())
            .find(|(f, _)| *f == id)
            .map(|(_, p)| p.as_path())
    }

    /// Every input's path by its identity.
    pub(crate) fn by_id(&self) -> std::collections::HashMap<FileId, &Path> {
        (self.files.iter())
            .map(|(id, p)| (*id, p.as_path()))
            .collect()
    }

    /// The paths read.
    pub(crate) fn paths(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|(_, p)| p.as_path())
    }
}

/// What a file type is, in words, for anything but a regular file.
#[cfg(unix)]
pub(crate) fn describe(ft: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO (named pipe)"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

#[cfg(not(unix))]
pub(crate) fn describe(ft: std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}
