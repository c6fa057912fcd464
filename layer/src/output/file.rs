//! [`AtomicFile`]: a file that appears under its name complete, or not at all.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::fault;
use super::litter::{self, TempKind};
use super::sys;
use super::target::{Target, Want};
use crate::error::LayerError;

/// The permission bits an output gets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FileMode {
    /// `0666` less the umask, as for any new file (`dtcast cast` from stdin).
    #[default]
    UmaskDefault,
    /// Exactly these bits (those of the input, so a private `0600` checkpoint stays private).
    Bits(u32),
}

impl FileMode {
    /// The permission bits of the file at `path` (the default where the system has none).
    pub fn like(path: &Path) -> FileMode {
        std::fs::metadata(path)
            .ok()
            .and_then(|m| sys::mode_of(&m))
            .map_or(FileMode::UmaskDefault, FileMode::Bits)
    }
}

/// How the bytes are held until they are complete.
#[derive(Debug)]
enum Temp {
    /// An `O_TMPFILE` file: no name, gone with the process if never linked.
    Anonymous,
    /// A named temporary file (registered for removal on a signal, locked against stale-removal).
    Named(PathBuf),
    /// Published under its final name: nothing to remove.
    Published,
}

/// Start write-back every this many bytes (Linux), so the closing fsync has little left to do.
const WRITEBACK_STEP: u64 = 16 << 20;

/// A file being written in a directory, invisible (or under a hidden temporary name) until
/// [`commit`](AtomicFile::commit) (or [`StagedDir::add`](super::StagedDir::add)) gives it its name.
/// Dropped before that, it leaves nothing behind.
///
/// ```
/// use std::io::Write;
/// use dtcast::layer::output::{AtomicFile, FileMode, Target};
/// let dir = std::env::temp_dir().join(format!("dtcast-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let target = Target::file(dir.join("out.bin"), true)?;
/// let mut f = AtomicFile::create(target.dir(), FileMode::UmaskDefault)?;
/// f.write_all(b"complete")?;
/// f.commit(&target)?;
/// assert_eq!(std::fs::read(dir.join("out.bin"))?, b"complete");
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct AtomicFile {
    file: File,
    dir: PathBuf,
    temp: Temp,
    written: u64,
    written_back: u64,
}

impl AtomicFile {
    /// A new empty file in `dir` with permission bits `mode`. Also removes stale temporary files
    /// that dead runs left in `dir`.
    pub fn create(dir: &Path, mode: FileMode) -> Result<AtomicFile, LayerError> {
        let io = |source| LayerError::Io {
            path: dir.to_owned(),
            source,
        };
        litter::remove_stale(dir);
        let anonymous = if fault::named_temps() {
            None
        } else {
            sys::open_anonymous(dir).map_err(io)?
        };
        let (file, temp) = match anonymous {
            Some(file) => {
                sys::lock(&file, false).map_err(io)?;
                (file, Temp::Anonymous)
            }
            None => {
                let (file, path) = create_named(dir).map_err(io)?;
                (file, Temp::Named(path))
            }
        };
        if let FileMode::Bits(bits) = mode {
            sys::set_mode(&file, bits).map_err(io)?;
        }
        Ok(AtomicFile {
            file,
            dir: dir.to_owned(),
            temp,
            written: 0,
            written_back: 0,
        })
    }

    /// Flushes the contents to disk.
    fn sync(&mut self) -> io::Result<()> {
        self.file.flush()?;
        self.file.sync_all()
    }

    /// Replaces `target` with this file: fsync, then one rename (the target holds either its old
    /// contents or the new, never a mix), then fsync of the directory. Errors name the target,
    /// never a temporary path.
    pub fn commit(mut self, target: &Target) -> Result<(), LayerError> {
        let io = |source| LayerError::Io {
            path: target.requested().to_owned(),
            source,
        };
        debug_assert_eq!(self.dir, target.dir());
        self.sync().map_err(io)?;
        target.recheck(Want::File)?;
        let name = self.name_in_dir().map_err(io)?;
        let temp = self.dir.join(&name);
        // On failure the temporary name is still registered; dropping `self` removes it.
        litter::publish_output(&temp, target.requested(), || {
            std::fs::rename(&temp, target.resolved()).map(|()| None)
        })
        .map_err(io)?;
        self.temp = Temp::Published;
        fault::committed();
        sys::sync_dir(&self.dir).map_err(io)
    }

    /// Gives this file the name `name` in `dir` (a staging directory on the same file system, in
    /// which `name` does not exist yet), after an fsync.
    pub(crate) fn persist_in(mut self, dir: &Path, name: &OsStr) -> io::Result<()> {
        self.sync()?;
        match &self.temp {
            Temp::Anonymous => sys::link_anonymous(&self.file, dir, name)?,
            Temp::Named(path) => litter::publish(path, || std::fs::rename(path, dir.join(name)))?,
            Temp::Published => {}
        }
        self.temp = Temp::Published;
        Ok(())
    }

    /// Links an anonymous file under a temporary name (a rename needs a name); a named temporary
    /// file already has one. The name is registered and locked like any temporary file.
    fn name_in_dir(&mut self) -> io::Result<std::ffi::OsString> {
        match &self.temp {
            Temp::Named(path) => Ok(path.file_name().unwrap_or_default().to_owned()),
            Temp::Published => Err(io::Error::other("the file was already published")),
            Temp::Anonymous => loop {
                let name = litter::temp_name(TempKind::File);
                let path = self.dir.join(&name);
                litter::register(&path);
                match sys::link_anonymous(&self.file, &self.dir, &name) {
                    Ok(()) => {
                        self.temp = Temp::Named(path);
                        return Ok(name);
                    }
                    Err(e) => {
                        litter::deregister(&path);
                        if e.kind() != io::ErrorKind::AlreadyExists {
                            return Err(e);
                        }
                    }
                }
            },
        }
    }
}

/// A new `.dtcast-<pid>-<n>.tmp` in `dir`, locked and registered.
fn create_named(dir: &Path) -> io::Result<(File, PathBuf)> {
    loop {
        let path = dir.join(litter::temp_name(TempKind::File));
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(sys::DEFAULT_CREATE_MODE);
        }
        litter::register(&path);
        match options.open(&path) {
            Ok(file) => {
                sys::lock(&file, false)?;
                return Ok((file, path));
            }
            Err(e) => {
                litter::deregister(&path);
                if e.kind() != io::ErrorKind::AlreadyExists {
                    return Err(e);
                }
            }
        }
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let allowed = fault::admit(buf.len())?;
        let n = self.file.write(&buf[..allowed])?;
        self.written += n as u64;
        if self.written - self.written_back >= WRITEBACK_STEP {
            sys::start_writeback(
                &self.file,
                self.written_back,
                self.written - self.written_back,
            );
            self.written_back = self.written;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if let Temp::Named(path) = &self.temp {
            let _ = std::fs::remove_file(path);
            litter::deregister(path);
        }
    }
}
