//! The one way dtcast writes a file: checked before the work starts, written beside its target,
//! and published complete with a rename — or not at all.
//!
//! Every command that writes (`dtcast convert`, `dtcast cast -o`, [`save`](crate::checkpoint::save))
//! goes through this module, so they share its rules:
//!
//! - **What may be replaced.** A [`Target`] is checked before any work: a symbolic link is
//!   followed and the file it names is replaced (the link stays a link); a device, FIFO, socket or
//!   directory is refused whatever `force` says; an existing regular file is replaced only with
//!   `force`; a missing directory is named plainly; an output that would replace one of the
//!   command's inputs ([`Inputs`](crate::input::Inputs)) is refused.
//! - **Only what was checked.** The commit replaces what the check saw and nothing else: where
//!   nothing was, the output is put in place by a step that replaces nothing (so a file that
//!   appears meanwhile stays, and the commit is an error); where a file or directory was, the
//!   two are exchanged in one step and, if what came back is not what was checked, exchanged
//!   back. A previous output directory loses only the entries the check saw.
//! - **All or nothing.** An [`AtomicFile`] is written in the target's directory — on Linux as an
//!   anonymous `O_TMPFILE` file with no name at all — fsynced, and published in one step. A
//!   sharded checkpoint is a [`StagedDir`] that replaces its target directory in one step.
//! - **No litter.** Temporary names that exist at all (`.dtcast-<pid>-<n>.tmp` / `.staging`) are
//!   locked by their owner and registered in the same step as they are made; [`remove_pending`]
//!   removes them when a signal ends the process, and any later run in the same directory
//!   removes those whose owner died ([`remove_stale`]).
//! - **Permissions.** The output gets the input's permission bits ([`FileMode::like`]), or the
//!   umask default when there is no input file.
//!
//! ```
//! use std::io::Write;
//! use dtcast::layer::output::{write_file, FileMode};
//! let dir = std::env::temp_dir().join(format!("dtcast-doc-mod-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let out = dir.join("hello.txt");
//! write_file(&out, false, FileMode::UmaskDefault, |w| Ok(w.write_all(b"hello")?))?;
//! // A second write needs `force`.
//! let e = write_file(&out, false, FileMode::UmaskDefault, |_| Ok(())).unwrap_err();
//! assert!(e.to_string().ends_with("exists; pass --force to replace it"));
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod fault;
mod file;
mod litter;
mod staged;
mod sys;
mod target;

pub use fault::{exiting, inject, Fault};
pub use file::{AtomicFile, FileMode};
pub use litter::{finish, remove_pending, remove_stale, Interrupted};
pub use staged::StagedDir;
pub use target::{check_not_input, Target};
pub(crate) use target::{parent_dir, Want};

use std::path::Path;

use crate::error::LayerError;

/// Writes the file `path` atomically: checks the target ([`Target::file`]), lets `fill` write
/// the contents, then commits. On any error `path` is as it was and nothing is left behind.
pub fn write_file(
    path: impl AsRef<Path>,
    force: bool,
    mode: FileMode,
    fill: impl FnOnce(&mut AtomicFile) -> Result<(), LayerError>,
) -> Result<(), LayerError> {
    let target = Target::file(path, force)?;
    let mut file = AtomicFile::create(target.dir(), mode)?;
    fill(&mut file)?;
    file.commit(&target)
}
