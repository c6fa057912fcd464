//! Where an output goes: every check that can be made before any work starts.

use std::path::{Path, PathBuf};

use super::sys;
use crate::error::LayerError;

/// How many symbolic links are followed before giving up (Linux's own limit).
const MAX_LINKS: usize = 40;

/// What an output path names once its symbolic links are followed.
#[derive(Clone, Debug)]
pub struct Target {
    /// The path as the user gave it (used in every message).
    requested: PathBuf,
    /// The path that is written: `requested` with its symbolic links followed.
    resolved: PathBuf,
    /// Identity of the regular file or directory there now, if there is one.
    existing: Option<std::fs::Metadata>,
}

/// What kind of output a target must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Want {
    File,
    Dir,
}

impl Target {
    /// Checks an output path before anything is written:
    ///
    /// - a symbolic link is followed: the file it names is replaced, the link stays a link;
    /// - anything there that is not a regular file (a device, FIFO, socket or directory) is
    ///   refused, `force` or not;
    /// - an existing regular file is replaced only with `force`;
    /// - the directory that will hold the file must exist.
    ///
    /// ```
    /// use dtcast::layer::output::Target;
    /// let err = Target::file("/no/such/dir/out.safetensors", false).unwrap_err();
    /// assert_eq!(err.to_string(), "cannot write `/no/such/dir/out.safetensors`: directory `/no/such/dir/` does not exist");
    /// ```
    pub fn file(path: impl AsRef<Path>, force: bool) -> Result<Target, LayerError> {
        Target::resolve(path.as_ref(), force, Want::File)
    }

    pub(crate) fn resolve(requested: &Path, force: bool, want: Want) -> Result<Target, LayerError> {
        let refuse = |msg: String| LayerError::Output(msg);
        if requested.as_os_str().is_empty() {
            return Err(refuse("the output path is empty".to_owned()));
        }
        let mut resolved = requested.to_owned();
        let mut links = 0;
        let existing = loop {
            match std::fs::symlink_metadata(&resolved) {
                Ok(m) if m.file_type().is_symlink() => {
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(refuse(format!(
                            "cannot write `{}`: too many levels of symbolic links",
                            requested.display()
                        )));
                    }
                    let link = std::fs::read_link(&resolved).map_err(|source| LayerError::Io {
                        path: requested.to_owned(),
                        source,
                    })?;
                    resolved = parent_dir(&resolved).join(link);
                }
                Ok(m) => break Some(m),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                    ) =>
                {
                    break None
                }
                Err(source) => {
                    return Err(LayerError::Io {
                        path: requested.to_owned(),
                        source,
                    })
                }
            }
        };
        let named = if links == 0 {
            format!("`{}`", requested.display())
        } else {
            format!(
                "`{}` (a symbolic link to `{}`)",
                requested.display(),
                resolved.display()
            )
        };
        if let Some(m) = &existing {
            let ft = m.file_type();
            let acceptable = match want {
                Want::File => ft.is_file(),
                Want::Dir => ft.is_dir(),
            };
            if !acceptable {
                let what = if ft.is_file() {
                    "a regular file"
                } else {
                    sys::describe_special(ft)
                };
                let wanted = match want {
                    Want::File => "dtcast only writes regular files",
                    Want::Dir => "a sharded checkpoint is written as a directory",
                };
                return Err(refuse(format!(
                    "refusing to write {named}: it is {what}; {wanted}"
                )));
            }
            if want == Want::File && !force {
                return Err(refuse(format!(
                    "{named} exists; pass --force to replace it"
                )));
            }
        }
        let dir = parent_dir(&resolved);
        match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(refuse(format!(
                    "cannot write {named}: `{}` is not a directory",
                    dir.display()
                )))
            }
            Err(_) => {
                return Err(refuse(format!(
                    "cannot write {named}: directory `{}/` does not exist",
                    dir.display().to_string().trim_end_matches('/')
                )))
            }
        }
        Ok(Target {
            requested: requested.to_owned(),
            resolved,
            existing,
        })
    }

    /// The path as given.
    pub fn requested(&self) -> &Path {
        &self.requested
    }

    /// The path written: symbolic links followed.
    pub fn resolved(&self) -> &Path {
        &self.resolved
    }

    /// The directory that holds the output (temporary files go there too).
    pub fn dir(&self) -> &Path {
        parent_dir(&self.resolved)
    }

    /// Whether something exists at the target now.
    pub fn exists(&self) -> bool {
        self.existing.is_some()
    }

    /// Refuses a target that was replaced by something else than a regular file (or directory)
    /// since it was checked: the last check before the rename.
    pub(crate) fn recheck(&self, want: Want) -> Result<(), LayerError> {
        match std::fs::symlink_metadata(&self.resolved) {
            Ok(m) => {
                let ok = match want {
                    Want::File => m.is_file(),
                    Want::Dir => m.is_dir(),
                };
                if ok {
                    Ok(())
                } else {
                    Err(LayerError::Output(format!(
                        "refusing to write `{}`: it became {} while dtcast was working",
                        self.requested.display(),
                        sys::describe_special(m.file_type())
                    )))
                }
            }
            Err(_) => Ok(()),
        }
    }
}

/// Refuses an output that names the input file itself (through any link): the input must never
/// be replaced by its own conversion.
pub fn check_not_input(input: &Path, output: &Path) -> Result<(), LayerError> {
    let (Ok(a), Ok(b)) = (std::fs::metadata(input), std::fs::metadata(output)) else {
        return Ok(());
    };
    let same = match (sys::file_id(&a), sys::file_id(&b)) {
        (Some(x), Some(y)) => x == y,
        _ => matches!((input.canonicalize(), output.canonicalize()), (Ok(x), Ok(y)) if x == y),
    };
    if same {
        Err(LayerError::Output(format!(
            "refusing to overwrite the input {}; choose another output",
            input.display()
        )))
    } else {
        Ok(())
    }
}

/// The directory a path is in (`.` for a bare file name).
pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}
