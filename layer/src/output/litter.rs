//! Temporary names: how they are made, the registry a signal handler empties, and the removal of
//! stale ones a dead run left behind.
//!
//! Every temporary name dtcast makes is `.dtcast-<pid>-<n>.tmp` (a file) or
//! `.dtcast-<pid>-<n>.staging` (a directory), and its owner holds an exclusive `flock` on it for
//! as long as it lives. A later run that can take that lock knows the owner is dead (the kernel
//! drops a process's locks when it dies, however it dies), so the name is provably stale.

use std::collections::BTreeSet;
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

/// Whether `name` is one of ours, and of which kind.
fn parse_name(name: &str) -> Option<TempKind> {
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
    (digits(pid) && digits(n)).then_some(kind)
}

/// What a signal handler needs to know: the temporary names this process has open, and the
/// outputs it has already published.
struct Registry {
    /// Paths that exist only while this process works on them: removed by [`remove_pending`].
    pending: BTreeSet<PathBuf>,
    /// Outputs (as the caller named them) that a rename has made complete, the latest
    /// [`PUBLISHED_KEPT`]: an interruption after that must not claim that nothing was written.
    published: Vec<PathBuf>,
}

/// How many of the latest published outputs the registry keeps (a command writes one; a
/// long-lived program that saves many must not grow the list without end).
const PUBLISHED_KEPT: usize = 16;

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    pending: BTreeSet::new(),
    published: Vec::new(),
});

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    // A panic while holding the lock leaves a registry that is still valid.
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn register(path: &Path) {
    registry().pending.insert(path.to_owned());
}

pub(crate) fn deregister(path: &Path) {
    registry().pending.remove(path);
}

/// Runs `f` — a rename that ends the life of the temporary name `temp` — so that
/// [`remove_pending`] cannot run in the middle of it, and forgets `temp` if it succeeds.
pub(crate) fn publish<T>(
    temp: &Path,
    f: impl FnOnce() -> std::io::Result<T>,
) -> std::io::Result<T> {
    let mut registry = registry();
    let result = f();
    if result.is_ok() {
        registry.pending.remove(temp);
    }
    result
}

/// [`publish`] for the rename that puts a finished output in place: on success `output` (the
/// path as the caller named it) is recorded as complete, and the temporary name that `f` may
/// return — where a previous output was moved aside, to be removed next — is registered in the
/// same step, so that a signal between the two still removes it.
pub(crate) fn publish_output(
    temp: &Path,
    output: &Path,
    f: impl FnOnce() -> std::io::Result<Option<PathBuf>>,
) -> std::io::Result<Option<PathBuf>> {
    let mut registry = registry();
    let result = f();
    if let Ok(aside) = &result {
        registry.pending.remove(temp);
        registry.pending.extend(aside.iter().cloned());
        if registry.published.len() == PUBLISHED_KEPT {
            registry.published.remove(0);
        }
        registry.published.push(output.to_owned());
    }
    result
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
}

/// Removes every temporary file and staging directory this process has open, and says what it
/// removed and which outputs were already complete. For a signal handler about to end the
/// process: the registry stays locked afterwards, so no rename can publish anything after this
/// returns (and the answer stays true).
///
/// On Linux most temporary files have no name at all (`O_TMPFILE`) and vanish with the process
/// without help; this removes the rest.
pub fn remove_pending() -> Interrupted {
    let registry = registry();
    for path in registry.pending.iter() {
        remove_any(path);
    }
    let done = Interrupted {
        removed: registry.pending.len(),
        published: registry.published.clone(),
    };
    // Keep the lock until the process exits.
    std::mem::forget(registry);
    done
}

fn remove_any(path: &Path) {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => {
            let _ = std::fs::remove_dir_all(path);
        }
        Ok(_) => {
            let _ = std::fs::remove_file(path);
        }
        Err(_) => {}
    }
}

/// How old an unlocked temporary name must be before it counts as stale: between creating a
/// name and locking it there is a moment when a live owner holds no lock yet.
const GRACE: Duration = Duration::from_secs(2);

/// Removes the temporary files and staging directories in `dir` whose owners are dead (see the
/// module docs). Returns how many were removed. Errors are ignored: this is housekeeping.
pub fn remove_stale(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(kind) = name.to_str().and_then(parse_name) else {
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
        if !right_type || !old || registry().pending.contains(&path) {
            continue;
        }
        let Ok(handle) = std::fs::File::open(&path) else {
            continue;
        };
        if sys::lock(&handle, true).unwrap_or(false) {
            remove_any(&path);
            removed += 1;
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
        assert_eq!(parse_name(f.to_str().unwrap()), Some(TempKind::File));
        assert_eq!(parse_name(s.to_str().unwrap()), Some(TempKind::Staging));
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
