//! Where an output goes: every check that can be made before any work starts, and what was
//! there then — the commit replaces that, and only that.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::LayerError;
use crate::input::{describe, Inputs, Version};

/// How many symbolic links are followed before giving up (Linux's own limit).
const MAX_LINKS: usize = 40;

/// What an output path names once its symbolic links are followed, and what was there when it
/// was checked.
#[derive(Clone, Debug)]
pub struct Target {
    /// The path as the user gave it (used in every message).
    requested: PathBuf,
    /// The path that is written: `requested` with its symbolic links followed.
    resolved: PathBuf,
    /// What was there when the target was checked, if anything.
    seen: Option<Seen>,
}

/// What kind of output a target must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Want {
    File,
    Dir,
}

/// What was at a target when it was checked: the commit replaces exactly this, or nothing.
#[derive(Clone, Debug)]
pub(crate) enum Seen {
    /// A regular file.
    File(Version),
    /// A directory and its entries (not followed: a link in it is a link).
    Dir {
        version: Version,
        entries: Vec<Listed>,
    },
}

/// One entry of a directory as it was checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Listed {
    /// Its name in the directory.
    pub(crate) name: OsString,
    /// Whether it is a regular file (anything else is never dtcast's).
    pub(crate) is_file: bool,
    pub(crate) version: Version,
}

impl Target {
    /// Checks an output path before anything is written:
    ///
    /// - a symbolic link is followed: the file it names is replaced, the link stays a link;
    /// - anything there that is not a regular file (a device, FIFO, socket or directory) is
    ///   refused, `force` or not;
    /// - an existing regular file is replaced only with `force` — and only that file: one that
    ///   appears, or is rewritten, while dtcast works is never replaced;
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
                    // A link the system resolves but whose text names no path (`/dev/stdout`
                    // on a pipe reads `pipe:[1234]`): what the system reaches is what counts.
                    match std::fs::metadata(requested) {
                        Ok(m) if links > 0 => break Some(m),
                        _ => break None,
                    }
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
        let mut seen = None;
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
                    describe(ft)
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
            seen = Some(match want {
                Want::File => Seen::File(Version::of(m)),
                Want::Dir => Seen::Dir {
                    version: Version::of(m),
                    entries: list(&resolved).map_err(|source| LayerError::Io {
                        path: requested.to_owned(),
                        source,
                    })?,
                },
            });
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
        // What dead runs left here goes before this run adds anything.
        super::litter::remove_stale(dir);
        Ok(Target {
            requested: requested.to_owned(),
            resolved,
            seen,
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

    /// Whether something existed at the target when it was checked.
    pub fn exists(&self) -> bool {
        self.seen.is_some()
    }

    /// What was there when it was checked.
    pub(crate) fn seen(&self) -> Option<&Seen> {
        self.seen.as_ref()
    }

    /// The entries of the directory that was there when it was checked (none for a file target,
    /// or where nothing was).
    pub(crate) fn listing(&self) -> &[Listed] {
        match &self.seen {
            Some(Seen::Dir { entries, .. }) => entries,
            _ => &[],
        }
    }

    /// Refuses a target whose commit would replace a file that `inputs` holds, through any
    /// links: the file there, or for a directory any file in it, or a directory that holds an
    /// input.
    pub fn refuse_inputs(&self, inputs: &Inputs) -> Result<(), LayerError> {
        let shown = self.requested.display();
        match &self.seen {
            None => Ok(()),
            Some(Seen::File(version)) => match inputs.find(version.id()) {
                Some(input) => Err(LayerError::Output(format!(
                    "refusing to overwrite the input {}; choose another output",
                    input.display()
                ))),
                None => Ok(()),
            },
            Some(Seen::Dir { entries, .. }) => {
                if let Ok(out) = self.resolved.canonicalize() {
                    // Where the input is, and where the path it was read by is (a link in the
                    // output directory is in it, wherever it points).
                    let within = |p: &Path| {
                        let by_path = parent_dir(p)
                            .canonicalize()
                            .map(|d| d.join(p.file_name().unwrap_or_default()));
                        [p.canonicalize(), by_path]
                            .into_iter()
                            .any(|c| c.is_ok_and(|c| c.starts_with(&out)))
                    };
                    if let Some(input) = inputs.paths().find(|p| within(p)) {
                        return Err(LayerError::Output(format!(
                            "refusing to replace `{shown}`: it holds the input {}; choose another output",
                            input.display()
                        )));
                    }
                }
                // (By a map: a directory of 10,000 shards against as many inputs.)
                let by_id = inputs.by_id();
                for e in entries {
                    if let Some(input) = e.version.id().and_then(|id| by_id.get(&id)) {
                        return Err(LayerError::Output(format!(
                            "refusing to replace `{shown}`: its `{}` is the input {}; choose another output",
                            e.name.to_string_lossy(),
                            input.display()
                        )));
                    }
                }
                Ok(())
            }
        }
    }
}

/// The entries of the directory `dir`, sorted by name.
pub(crate) fn list(dir: &Path) -> std::io::Result<Vec<Listed>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = std::fs::symlink_metadata(entry.path())?;
        entries.push(Listed {
            name: entry.file_name(),
            is_file: meta.is_file(),
            version: Version::of(&meta),
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

/// What differs between a directory's entries as checked (`seen`) and now (`now`), in words:
/// `None` where nothing does (each entry the same file with the same contents).
pub(crate) fn difference(seen: &[Listed], now: &[Listed]) -> Option<String> {
    let same = |a: &Listed, b: &Listed| {
        a.name == b.name && a.is_file == b.is_file && a.version.same_contents(&b.version)
    };
    if seen.len() == now.len() && seen.iter().zip(now).all(|(a, b)| same(a, b)) {
        return None;
    }
    let name = |l: &Listed| format!("`{}`", l.name.to_string_lossy());
    if let Some(new) = now.iter().find(|n| !seen.iter().any(|s| s.name == n.name)) {
        return Some(format!("{} appeared in it", name(new)));
    }
    if let Some(gone) = seen.iter().find(|s| !now.iter().any(|n| n.name == s.name)) {
        return Some(format!("{} was removed from it", name(gone)));
    }
    let changed = (seen.iter())
        .find(|s| !now.iter().any(|n| same(s, n)))
        .map_or_else(|| "an entry".to_owned(), name);
    Some(format!("{changed} in it was rewritten"))
}

/// Refuses an output that names the input file itself (through any link): the input must never
/// be replaced by its own conversion.
pub fn check_not_input(input: &Path, output: &Path) -> Result<(), LayerError> {
    let mut inputs = Inputs::new();
    inputs.add_path(input).map_err(|source| LayerError::Io {
        path: input.to_owned(),
        source,
    })?;
    match Target::file(output, true) {
        Ok(target) => target.refuse_inputs(&inputs),
        // Whatever else is wrong with the output is said where it is checked for writing.
        Err(_) => Ok(()),
    }
}

/// The directory a path is in (`.` for a bare file name).
pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}
