//! [`StagedDir`]: a directory of outputs that replaces its target as a whole, or not at all.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use super::fault;
use super::file::AtomicFile;
use super::litter::{self, TempKind};
use super::sys;
use super::target::{Target, Want};
use crate::error::LayerError;

/// A hidden staging directory beside a target directory. Files are added to it complete; then
/// [`commit`](StagedDir::commit) moves it into place in one step (on Linux an atomic exchange with
/// the previous directory), so the target is always either as it was or the new whole.
/// Dropped before that, it is removed.
#[derive(Debug)]
pub struct StagedDir {
    path: PathBuf,
    // Held so that another run can tell this directory is alive (see `litter`).
    _lock: File,
    committed: bool,
}

impl StagedDir {
    /// A new staging directory beside `target`.
    pub fn create(target: &Target) -> Result<StagedDir, LayerError> {
        let dir = target.dir();
        let io = |source| LayerError::Io {
            path: target.requested().to_owned(),
            source,
        };
        litter::remove_stale(dir);
        loop {
            let path = dir.join(litter::temp_name(TempKind::Staging));
            litter::register(&path);
            match std::fs::create_dir(&path) {
                Ok(()) => {
                    let lock = File::open(&path).map_err(io)?;
                    sys::lock(&lock, false).map_err(io)?;
                    return Ok(StagedDir {
                        path,
                        _lock: lock,
                        committed: false,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    litter::deregister(&path);
                }
                Err(e) => {
                    litter::deregister(&path);
                    return Err(io(e));
                }
            }
        }
    }

    /// The staging directory (where [`AtomicFile::create`] should make the files, so that they are
    /// on the same file system).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Adds a finished file under `name`.
    pub fn add(&self, file: AtomicFile, name: &OsStr) -> Result<(), LayerError> {
        file.persist_in(&self.path, name)
            .map_err(|source| LayerError::Io {
                path: PathBuf::from(name),
                source,
            })
    }

    /// Moves the staging directory to `target`, replacing what is there (an empty directory, or
    /// with the caller's consent a previous output) in one step, then removes the previous one.
    pub fn commit(mut self, target: &Target) -> Result<(), LayerError> {
        let io = |source| LayerError::Io {
            path: target.requested().to_owned(),
            source,
        };
        sys::sync_dir(&self.path).map_err(io)?;
        target.recheck(Want::Dir)?;
        let dest = target.resolved();
        let staging = self.path.clone();
        // The registry stays held across the renames, so a signal cannot remove anything
        // between them.
        // The previous output's temporary name is registered in the same step.
        let previous = litter::publish_output(&staging, target.requested(), || {
            if std::fs::symlink_metadata(dest).is_err() {
                std::fs::rename(&staging, dest)?;
                return Ok(None);
            }
            if sys::exchange(&staging, dest)? {
                // `staging` now holds the previous output.
                return Ok(Some(staging.clone()));
            }
            // No atomic exchange here: the old one aside, the new one in (the old one back on
            // failure).
            let old = target.dir().join(litter::temp_name(TempKind::Staging));
            std::fs::rename(dest, &old)?;
            if let Err(e) = std::fs::rename(&staging, dest) {
                let _ = std::fs::rename(&old, dest);
                return Err(e);
            }
            Ok(Some(old))
        })
        .map_err(io)?;
        self.committed = true;
        fault::committed();
        if let Some(old) = previous {
            let _ = std::fs::remove_dir_all(&old);
            litter::deregister(&old);
        }
        sys::sync_dir(target.dir()).map_err(io)
    }
}

impl Drop for StagedDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.path);
            litter::deregister(&self.path);
        }
    }
}
