//! Temporary names: how they are made, the registry a signal handler empties, and the removal of
//! stale ones a dead run left behind.
//!
//! Every temporary name dtcast makes is `.dtcast-<pid>-<n>.tmp` (a file) or
//! `.dtcast-<pid>-<n>.staging` (a directory), and its owner holds an exclusive `flock` on it for
//! as long as it lives. A later run that can take that lock, and finds no process `<pid>`, knows
//! the owner is dead (the kernel drops a process's locks when it dies, however it dies), so the
//! name is provably stale and goes at once; an unlocked name of a live pid (another process may
//! have its number now, or the owner may not have locked it yet) goes once it is a few seconds
//! old.
//!
//! Every step that makes, publishes or removes a name holds the registry ([`locked`]), which a
//! signal handler's [`remove_pending`] takes too: whatever instant a signal lands at, each name
//! either does not exist yet or is registered, and is removed.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use super::sys;

const PREFIX: &str = ".dtcast-";

/// What a temporary name holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TempKind {
    /// A file being written.
    File,
    /// A directory of finished files waiting to be moved into place.
    Staging,
}

impl TempKind {
    fn suffix(self) -> &'static str {
        match self {
            TempKind::File => ".tmp",
            TempKind::Staging => ".staging",
        }
    }
}

/// A fresh temporary name (unique within this process; the pid makes it unique across live ones).
pub(crate) fn temp_name(kind: TempKind) -> OsString {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{PREFIX}{}-{n}{}", std::process::id(), kind.suffix()).into()
}

/// Whether `name` is one of ours: of which kind, and the process that made it.
fn parse_name(name: &str) -> Option<(TempKind, u32)> {
    let rest = name.strip_prefix(PREFIX)?;
    let (stem, kind) = if let Some(s) = rest.strip_suffix(TempKind::File.suffix()) {
        (s, TempKind::File)
    } else {
        (
            rest.strip_suffix(TempKind::Staging.suffix())?,
            TempKind::Staging,
        )
    };
    let (pid, n) = stem.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !(digits(pid) && digits(n)) {
        return None;
    }
    Some((kind, pid.parse().ok()?))
}

/// What a pending name is, and so how [`remove_pending`] removes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Pending {
    /// A temporary file (or the previous output, moved aside to be removed).
    File,
    /// A staging directory this process made: everything in it is this process's own.
    Staging,
    /// A previous output directory moved aside, to be removed: only the entries it held when it
    /// was checked (`names`) are removed, then the directory if that empties it. Anything that
    /// appeared in it since is kept, in the directory renamed to `kept` (a visible name).
    Replaced {
        /// The entries that were checked.
        names: Vec<OsString>,
        /// Where the directory goes if anything else is in it.
        kept: PathBuf,
    },
}

/// What a signal handler needs to know: the temporary names this process has made, and the
/// outputs it has already published.
pub(crate) struct Registry {
    /// Paths that exist only while this process works on them: removed by [`remove_pending`].
    pending: BTreeMap<PathBuf, Pending>,
    /// Outputs (as the caller named them) that a rename has made complete, the latest
    /// [`PUBLISHED_KEPT`]: an interruption after that must not claim that nothing was written.
    published: Vec<PathBuf>,
}

impl Registry {
    /// `path` exists now, and is this process's to remove on a signal.
    pub(crate) fn pend(&mut self, path: &Path, pending: Pending) {
        self.pending.insert(path.to_owned(), pending);
    }

    /// `path` is gone, or is no longer this process's to remove.
    pub(crate) fn forget(&mut self, path: &Path) {
        self.pending.remove(path);
    }

    /// `output` (as the caller named it) is in place, complete.
    pub(crate) fn published(&mut self, output: &Path) {
        if self.published.len() == PUBLISHED_KEPT {
            self.published.remove(0);
        }
        self.published.push(output.to_owned());
    }
}

/// How many of the latest published outputs the registry keeps (a command writes one; a
/// long-lived program that saves many must not grow the list without end).
const PUBLISHED_KEPT: usize = 16;

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    pending: BTreeMap::new(),
    published: Vec::new(),
});

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    // A panic while holding the lock leaves a registry that is still valid.
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` with the registry held: every step that makes, renames or removes a temporary
/// name goes through here, so that a signal's [`remove_pending`] runs wholly before or wholly
/// after it — a name is never made after the handler looked, nor removed half-way.
pub(crate) fn locked<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    f(&mut registry())
}

/// Makes a temporary name by `make` and registers it as `pending` in one step (see [`locked`]).
pub(crate) fn create<T>(
    path: &Path,
    pending: Pending,
    make: impl FnOnce() -> std::io::Result<T>,
) -> std::io::Result<T> {
    locked(|r| {
        let made = make()?;
        r.pend(path, pending);
        Ok(made)
    })
}

/// Runs `f` — a rename or link that ends the life of the temporary name `temp` — so that
/// [`remove_pending`] cannot run in the middle of it, and forgets `temp` if it succeeds.
pub(crate) fn publish<T>(
    temp: &Path,
    f: impl FnOnce() -> std::io::Result<T>,
) -> std::io::Result<T> {
    locked(|r| {
        let result = f();
        if result.is_ok() {
            r.forget(temp);
        }
        result
    })
}

/// What [`remove_pending`] did, for the message of a process that a signal ends.
#[derive(Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Interrupted {
    /// How many temporary files and staging directories were removed.
    pub removed: usize,
    /// The outputs this process had already put in place, complete, before the signal (as the
    /// caller named them; the latest 16): they hold the new contents, and stay.
    pub published: Vec<PathBuf>,
    /// Previous output directories that held files dtcast did not write, which appeared while it
    /// replaced them: kept under these names.
    pub kept: Vec<PathBuf>,
}

/// Removes every temporary file and staging directory this process has made, and says what it
/// removed and which outputs were already complete. For a signal handler about to end the
/// process: the registry stays locked afterwards, so no name can be made or published after
/// this returns (and the answer stays true).
///
/// On Linux most temporary files have no name at all (`O_TMPFILE`) and vanish with the process
/// without help; this removes the rest.
pub fn remove_pending() -> Interrupted {
    let registry = registry();
    let mut done = Interrupted {
        removed: 0,
        published: registry.published.clone(),
        kept: Vec::new(),
    };
    for (path, pending) in registry.pending.iter() {
        match remove(path, pending) {
            Removed::Yes => done.removed += 1,
            Removed::Kept(at) => done.kept.push(at),
            Removed::Absent => {}
        }
    }
    // Keep the lock until the process exits.
    std::mem::forget(registry);
    done
}

/// Ends this process's writing: afterwards no temporary name is made or removed, and a signal
/// that arrives finds the registry taken and waits for the process to exit. For a program's
/// last step (the `dtcast` binary calls it when its command has returned), so that a signal is
/// either handled wholly before the end (its message and exit status) or not at all — never a
/// message that says "interrupted" from a process that then exits 0.
pub fn finish() {
    std::mem::forget(registry());
}

/// What [`remove`] did.
enum Removed {
    Yes,
    Absent,
    Kept(PathBuf),
}

fn remove(path: &Path, pending: &Pending) -> Removed {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Removed::Absent;
    };
    match pending {
        Pending::File => {
            let _ = std::fs::remove_file(path);
        }
        Pending::Staging if meta.is_dir() => {
            let _ = std::fs::remove_dir_all(path);
        }
        Pending::Staging => {
            let _ = std::fs::remove_file(path);
        }
        Pending::Replaced { names, kept } => return remove_replaced(path, names, kept),
    }
    Removed::Yes
}

/// Removes the entries `names` of the directory `path`, then the directory if that empties it;
/// otherwise it is renamed to `kept` (what appeared in it is not dtcast's to remove).
fn remove_replaced(path: &Path, names: &[OsString], kept: &Path) -> Removed {
    for name in names {
        let _ = std::fs::remove_file(path.join(name));
    }
    if std::fs::remove_dir(path).is_ok() {
        return Removed::Yes;
    }
    match std::fs::rename(path, kept) {
        Ok(()) => Removed::Kept(kept.to_owned()),
        Err(_) => Removed::Kept(path.to_owned()),
    }
}

/// Removes a previous output directory moved aside after a commit (as [`remove_pending`] would):
/// `Ok(None)` when it is gone, `Ok(Some(kept))` where something appeared in it meanwhile and it
/// was kept under that name.
pub(crate) fn remove_now(path: &Path) -> Option<PathBuf> {
    locked(|r| {
        let pending = r.pending.get(path).cloned()?;
        let outcome = remove(path, &pending);
        r.forget(path);
        match outcome {
            Removed::Kept(at) => Some(at),
            Removed::Yes | Removed::Absent => None,
        }
    })
}

/// How old an unlocked temporary name of a live process must be before it counts as stale:
/// between creating a name and locking it there is a moment when its owner holds no lock yet.
/// A name whose process is gone is stale at once.
const GRACE: Duration = Duration::from_secs(2);

/// The directories this process has already swept: one sweep per directory is enough (a
/// conversion of 10,000 shards must not read its directory 10,000 times).
static SWEPT: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

/// Removes the temporary files and staging directories in `dir` whose owners are dead (see the
/// module docs), once per directory and process. Returns how many were removed. Errors are
/// ignored: this is housekeeping.
pub fn remove_stale(dir: &Path) -> usize {
    let first = SWEPT
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(dir.to_owned());
    if first {
        sweep(dir)
    } else {
        0
    }
}

fn sweep(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((kind, pid)) = name.to_str().and_then(parse_name) else {
            continue;
        };
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let right_type = match kind {
            TempKind::File => meta.is_file(),
            TempKind::Staging => meta.is_dir(),
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_some_and(|age| age >= GRACE);
        let owner_gone = pid != std::process::id() && sys::process_alive(pid) == Some(false);
        if !right_type || !(old || owner_gone) || registry().pending.contains_key(&path) {
            continue;
        }
        let Ok(handle) = std::fs::File::open(&path) else {
            continue;
        };
        if sys::lock(&handle, true).unwrap_or(false) {
            let pending = match kind {
                TempKind::File => Pending::File,
                TempKind::Staging => Pending::Staging,
            };
            if matches!(remove(&path, &pending), Removed::Yes) {
                removed += 1;
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_recognised_exactly() {
        let f = temp_name(TempKind::File);
        let s = temp_name(TempKind::Staging);
        assert_ne!(f, temp_name(TempKind::File));
        let pid = std::process::id();
        assert_eq!(parse_name(f.to_str().unwrap()), Some((TempKind::File, pid)));
        assert_eq!(
            parse_name(s.to_str().unwrap()),
            Some((TempKind::Staging, pid))
        );
        for other in [
            ".dtcast-abc123.tmp", // the random names of older versions: not provably ours
            ".dtcast-12-.tmp",
            ".dtcast--3.tmp",
            "dtcast-1-2.tmp",
            ".dtcast-1-2.tmpx",
            ".dtcast-1-2",
        ] {
            assert_eq!(parse_name(other), None, "{other}");
        }
    }
}
