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

/// Paths that exist only while this process works on them: removed by [`remove_pending`] when
/// a signal ends the process.
static PENDING: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

fn pending() -> std::sync::MutexGuard<'static, BTreeSet<PathBuf>> {
    // A panic while holding the lock leaves a set that is still valid.
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn register(path: &Path) {
    pending().insert(path.to_owned());
}

pub(crate) fn deregister(path: &Path) {
    pending().remove(path);
}

/// Runs `f` — a rename that ends the life of the temporary name `temp` — so that
/// [`remove_pending`] cannot run in the middle of it, and forgets `temp` if it succeeds.
pub(crate) fn publish<T>(
    temp: &Path,
    f: impl FnOnce() -> std::io::Result<T>,
) -> std::io::Result<T> {
    let mut set = pending();
    let result = f();
    if result.is_ok() {
        set.remove(temp);
    }
    result
}

/// Removes every temporary file and staging directory this process has open, and returns how
/// many there were. For a signal handler about to end the process: the registry stays locked
/// afterwards, so no rename can publish anything after this returns.
///
/// On Linux most temporary files have no name at all (`O_TMPFILE`) and vanish with the process
/// without help; this removes the rest.
pub fn remove_pending() -> usize {
    let set = pending();
    for path in set.iter() {
        remove_any(path);
    }
    let n = set.len();
    // Keep the lock until the process exits.
    std::mem::forget(set);
    n
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
        if !right_type || !old || pending().contains(&path) {
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
