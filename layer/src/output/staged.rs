//! [`StagedDir`]: a directory of outputs that replaces its target as a whole, or not at all.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use super::fault;
use super::file::AtomicFile;
use super::litter::{self, Pending, TempKind};
use super::sys;
use super::target::{difference, list, Listed, Seen, Target};
use crate::error::LayerError;
use crate::input::Version;

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
            // Made, locked and registered in one step: a signal at any instant removes it.
            let made = litter::create(&path, Pending::Staging, || {
                std::fs::create_dir(&path)?;
                let locked = File::open(&path).and_then(|lock| {
                    sys::lock(&lock, false)?;
                    Ok(lock)
                });
                if locked.is_err() {
                    let _ = std::fs::remove_dir(&path);
                }
                locked
            });
            match made {
                Ok(lock) => {
                    return Ok(StagedDir {
                        path,
                        _lock: lock,
                        committed: false,
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io(e)),
            }
        }
    }

    /// The staging directory (where [`AtomicFile::create`] should make the files, so that they are
    /// on the same file system).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Adds a finished file under `name` (its descriptor is closed: a directory of any number
    /// of files holds one descriptor).
    pub fn add(&self, file: AtomicFile, name: &OsStr) -> Result<(), LayerError> {
        file.persist_in(&self.path, name)
            .map_err(|source| LayerError::Io {
                path: PathBuf::from(name),
                source,
            })
    }

    /// Moves the staging directory to `target`, replacing what its check saw there and nothing
    /// else: where nothing was, the directory is renamed in without replacing anything
    /// (`renameat2(RENAME_NOREPLACE)`; a plain rename elsewhere, which never replaces a directory
    /// that holds anything); where a directory was (empty, or a previous output with `--force`),
    /// the two are exchanged in one step (`renameat2(RENAME_EXCHANGE)`) and the previous one is
    /// checked: if anything in it is not as it was checked — a file added, removed or rewritten
    /// meanwhile — they are exchanged back and the commit is an error. The previous directory's
    /// checked entries are then removed, and it too if that empties it; anything that appeared in
    /// it in that last moment is kept (the directory renamed `<target>.kept-by-dtcast-<pid>`, and
    /// the commit says so).
    pub fn commit(mut self, target: &Target) -> Result<(), LayerError> {
        let io = |source| LayerError::Io {
            path: target.requested().to_owned(),
            source,
        };
        sys::sync_dir(&self.path).map_err(io)?;
        let previous = match target.seen() {
            None => self.publish_new(target)?,
            Some(Seen::Dir { version, entries }) => self.replace(target, version, entries)?,
            Some(Seen::File(_)) => {
                return Err(LayerError::Output(format!(
                    "refusing to write `{}`: it is a regular file; a sharded checkpoint is written as a directory",
                    target.requested().display()
                )))
            }
        };
        self.committed = true;
        fault::committed();
        if let Some(old) = previous {
            if let Some(kept) = litter::remove_now(&old) {
                return Err(LayerError::Output(format!(
                    "wrote `{}`, but files appeared in the directory it replaced while that was being removed; they are kept in `{}`",
                    target.requested().display(),
                    kept.display()
                )));
            }
        }
        sys::sync_dir(target.dir()).map_err(io)
    }

    /// The commit where nothing was at the target when it was checked.
    fn publish_new(&self, target: &Target) -> Result<Option<PathBuf>, LayerError> {
        let dest = target.resolved();
        let staging = &self.path;
        litter::locked(|r| {
            let moved = match sys::rename_noreplace(staging, dest) {
                Ok(true) => Ok(()),
                Ok(false) => std::fs::rename(staging, dest),
                Err(e) => Err(e),
            };
            match moved {
                Ok(()) => {
                    r.forget(staging);
                    r.published(target.requested());
                    Ok(None)
                }
                Err(e) if std::fs::symlink_metadata(dest).is_ok() => Err(LayerError::Output(format!(
                    "`{}` appeared while dtcast was working (another program made it); it was left as it is, and nothing was written ({e})",
                    target.requested().display()
                ))),
                Err(source) => Err(LayerError::Io {
                    path: target.requested().to_owned(),
                    source,
                }),
            }
        })
    }

    /// The commit over the directory the check saw (`version`, `entries`): the previous
    /// directory's new temporary name, to remove.
    fn replace(
        &self,
        target: &Target,
        version: &Version,
        entries: &[Listed],
    ) -> Result<Option<PathBuf>, LayerError> {
        let dest = target.resolved();
        let staging = &self.path;
        let io = |source| LayerError::Io {
            path: target.requested().to_owned(),
            source,
        };
        let shown = target.requested().display();
        let replaced = |kept: PathBuf| Pending::Replaced {
            names: entries.iter().map(|e| e.name.clone()).collect(),
            kept,
        };
        let kept = {
            let mut name = dest.file_name().unwrap_or_default().to_owned();
            name.push(format!(".kept-by-dtcast-{}", std::process::id()));
            target.dir().join(name)
        };
        // What differs in the directory at `path` from what the check saw.
        let changed = |path: &Path| -> Option<String> {
            let same_dir = std::fs::symlink_metadata(path)
                .is_ok_and(|m| m.is_dir() && Version::of(&m).id() == version.id());
            if !same_dir {
                return Some("it was replaced".to_owned());
            }
            match list(path) {
                Ok(now) => difference(entries, &now),
                Err(e) => Some(format!("it could not be read: {e}")),
            }
        };
        let refused = |why: String| {
            LayerError::Output(format!(
                "`{shown}` changed while dtcast was working ({why}); it was left as it is, and nothing was written"
            ))
        };
        litter::locked(|r| {
            if sys::exchange(staging, dest).map_err(io)? {
                // `staging` holds the previous directory now: only its checked entries are ours.
                r.pend(staging, replaced(kept.clone()));
                let Some(why) = changed(staging) else {
                    r.published(target.requested());
                    return Ok(Some(staging.clone()));
                };
                if let Err(e) = sys::exchange(staging, dest) {
                    r.forget(staging);
                    return Err(LayerError::Output(format!(
                        "`{shown}` changed while dtcast was working ({why}), and could not be put back ({e}); it is at `{}`",
                        staging.display()
                    )));
                }
                r.pend(staging, Pending::Staging);
                return Err(refused(why));
            }
            // No atomic exchange here: the previous one aside (and checked), the new one in,
            // the previous one back on failure.
            let old = target.dir().join(litter::temp_name(TempKind::Staging));
            std::fs::rename(dest, &old).map_err(io)?;
            r.pend(&old, replaced(kept.clone()));
            if let Some(why) = changed(&old) {
                let back = std::fs::rename(&old, dest);
                r.forget(&old);
                back.map_err(io)?;
                return Err(refused(why));
            }
            if let Err(e) = std::fs::rename(staging, dest) {
                let back = std::fs::rename(&old, dest);
                r.forget(&old);
                back.map_err(io)?;
                return Err(io(e));
            }
            r.forget(staging);
            r.published(target.requested());
            Ok(Some(old))
        })
    }
}

impl Drop for StagedDir {
    fn drop(&mut self) {
        if !self.committed {
            litter::locked(|r| {
                let _ = std::fs::remove_dir_all(&self.path);
                r.forget(&self.path);
            });
        }
    }
}
