//! [`AtomicFile`]: a file that appears under its name complete, or not at all.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::fault;
use super::litter::{self, Pending, TempKind};
use super::sys;
use super::target::{Seen, Target};
use crate::error::LayerError;
use crate::input::Version;

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

    /// Puts this file in place at `target`: fsync, then one step that publishes it complete,
    /// then fsync of the directory. Errors name the target, never a temporary path.
    ///
    /// Only what the target's check saw is replaced: where nothing was there, the file is
    /// linked or renamed in without replacing anything (`linkat`, `renameat2(RENAME_NOREPLACE)`,
    /// or a hard link), so a file that appeared meanwhile stays and the commit is an error;
    /// where a file was there (`--force`), it is exchanged with this one in one step
    /// (`renameat2(RENAME_EXCHANGE)`) and, if what came back is not the file that was checked —
    /// rewritten or replaced meanwhile — exchanged back, and the commit is an error.
    pub fn commit(mut self, target: &Target) -> Result<(), LayerError> {
        let io = |source| LayerError::Io {
            path: target.requested().to_owned(),
            source,
        };
        debug_assert_eq!(self.dir, target.dir());
        self.sync().map_err(io)?;
        match target.seen() {
            None => self.publish_new(target)?,
            Some(Seen::File(seen)) => self.replace(target, seen)?,
            Some(Seen::Dir { .. }) => {
                return Err(LayerError::Output(format!(
                    "refusing to write `{}`: it is a directory",
                    target.requested().display()
                )))
            }
        }
        self.temp = Temp::Published;
        fault::committed();
        sys::sync_dir(&self.dir).map_err(io)
    }

    /// Publishes this file where nothing was when the target was checked, replacing nothing.
    fn publish_new(&mut self, target: &Target) -> Result<(), LayerError> {
        let dest = target.resolved();
        let name = dest.file_name().ok_or_else(|| {
            LayerError::Output(format!(
                "cannot write `{}`: it names no file",
                target.requested().display()
            ))
        })?;
        let done = litter::locked(|r| {
            let done = match &self.temp {
                Temp::Anonymous => sys::link_anonymous(&self.file, &self.dir, name),
                Temp::Named(path) => match sys::rename_noreplace(path, dest) {
                    Ok(true) => Ok(()),
                    Ok(false) => sys::rename_new_file(path, dest),
                    Err(e) => Err(e),
                },
                Temp::Published => Ok(()),
            };
            if done.is_ok() {
                if let Temp::Named(path) = &self.temp {
                    r.forget(path);
                }
                r.published(target.requested());
            }
            done
        });
        match done {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(LayerError::Output(format!(
                "`{}` appeared while dtcast was working (another program wrote it); it was left as it is, and nothing was written",
                target.requested().display()
            ))),
            Err(source) => Err(LayerError::Io {
                path: target.requested().to_owned(),
                source,
            }),
        }
    }

    /// Replaces the file the target's check saw (`seen`) with this one, and nothing else.
    fn replace(&mut self, target: &Target, seen: &Version) -> Result<(), LayerError> {
        let dest = target.resolved();
        let io = |source| LayerError::Io {
            path: target.requested().to_owned(),
            source,
        };
        let name = self.name_in_dir().map_err(io)?;
        let temp = self.dir.join(name);
        let changed = || {
            LayerError::Output(format!(
                "`{}` changed while dtcast was working (another program wrote it); it was left as it is, and nothing was written",
                target.requested().display()
            ))
        };
        let is_seen = |path: &Path| {
            std::fs::symlink_metadata(path)
                .is_ok_and(|m| m.is_file() && Version::of(&m).same_contents(seen))
        };
        litter::locked(|r| {
            match sys::exchange(&temp, dest) {
                Ok(true) => {
                    // `temp` holds what was at the target.
                    if is_seen(&temp) {
                        let _ = std::fs::remove_file(&temp);
                    } else {
                        // Not the file that was checked: it goes back where it was.
                        if let Err(e) = sys::exchange(&temp, dest) {
                            r.forget(&temp);
                            return Err(LayerError::Output(format!(
                                "`{}` changed while dtcast was working, and could not be put back ({e}); the file that was there is at `{}`",
                                target.requested().display(),
                                temp.display()
                            )));
                        }
                        return Err(changed());
                    }
                }
                // No atomic exchange here: the check, then the rename (a moment apart).
                Ok(false) if is_seen(dest) => std::fs::rename(&temp, dest).map_err(io)?,
                Ok(false) => return Err(changed()),
                // The target was removed meanwhile: nothing there to replace.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    match sys::rename_noreplace(&temp, dest) {
                        Ok(true) => {}
                        Ok(false) => sys::rename_new_file(&temp, dest).map_err(io)?,
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Err(changed()),
                        Err(e) => return Err(io(e)),
                    }
                }
                Err(e) => return Err(io(e)),
            }
            r.forget(&temp);
            r.published(target.requested());
            Ok(())
        })
    }

    /// Gives this file the name `name` in `dir` (a staging directory on the same file system, in
    /// which `name` does not exist yet), after an fsync; the descriptor is closed.
    pub(crate) fn persist_in(mut self, dir: &Path, name: &OsStr) -> io::Result<()> {
        self.sync()?;
        match &self.temp {
            // Held while linking: a signal's removal of the staging directory is never half-way.
            Temp::Anonymous => litter::locked(|_| sys::link_anonymous(&self.file, dir, name))?,
            Temp::Named(path) => litter::publish(path, || std::fs::rename(path, dir.join(name)))?,
            Temp::Published => {}
        }
        self.temp = Temp::Published;
        Ok(())
    }

    /// Links an anonymous file under a temporary name (an exchange needs a name); a named
    /// temporary file already has one. The name is registered in the same step as it is made.
    fn name_in_dir(&mut self) -> io::Result<std::ffi::OsString> {
        match &self.temp {
            Temp::Named(path) => Ok(path.file_name().unwrap_or_default().to_owned()),
            Temp::Published => Err(io::Error::other("the file was already published")),
            Temp::Anonymous => loop {
                let name = litter::temp_name(TempKind::File);
                let path = self.dir.join(&name);
                let linked = litter::create(&path, Pending::File, || {
                    sys::link_anonymous(&self.file, &self.dir, &name)
                });
                match linked {
                    Ok(()) => {
                        self.temp = Temp::Named(path);
                        return Ok(name);
                    }
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(e),
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
        match litter::create(&path, Pending::File, || options.open(&path)) {
            Ok(file) => {
                sys::lock(&file, false)?;
                return Ok((file, path));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
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
            litter::locked(|r| {
                let _ = std::fs::remove_file(path);
                r.forget(path);
            });
        }
    }
}
