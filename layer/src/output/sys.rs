//! The few system calls the writer needs beyond `std`, each with a portable fallback.
//!
//! Linux gives the strongest guarantees (anonymous `O_TMPFILE` files, `renameat2` exchange,
//! early writeback); other Unix systems get named temporary files guarded by `flock`; elsewhere
//! only what `std` offers.

use std::fs::File;
use std::io;
use std::path::Path;

/// Permission bits given to a new file before the umask (`0666`, as `open(2)` callers use).
pub(crate) const DEFAULT_CREATE_MODE: u32 = 0o666;

/// An anonymous file in `dir` that has no name until [`link_anonymous`] gives it one: nothing
/// is left behind when the process dies before that. `Ok(None)` where the system or the file
/// system has no such files (the caller falls back to a named temporary file).
#[cfg(target_os = "linux")]
pub(crate) fn open_anonymous(dir: &Path) -> io::Result<Option<File>> {
    use std::os::unix::fs::OpenOptionsExt;
    // Linking the file in later goes through /proc (see `link_anonymous`); without /proc, named
    // temporary files are the safe choice.
    static PROC: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if !*PROC.get_or_init(|| Path::new("/proc/self/fd").is_dir()) {
        return Ok(None);
    }
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .mode(DEFAULT_CREATE_MODE)
        .custom_flags(libc::O_TMPFILE | libc::O_CLOEXEC)
        .open(dir);
    match opened {
        Ok(f) => Ok(Some(f)),
        // The file system (or an old kernel) does not support O_TMPFILE.
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL | libc::ENOENT)
            ) && dir.is_dir() =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn open_anonymous(_dir: &Path) -> io::Result<Option<File>> {
    Ok(None)
}

/// Gives the anonymous `file` the name `dir/name` (which must not exist).
#[cfg(target_os = "linux")]
pub(crate) fn link_anonymous(file: &File, dir: &Path, name: &std::ffi::OsStr) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::AsRawFd;
    let target = CString::new(dir.join(name).as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    let fd = file.as_raw_fd();
    // Through /proc (works for every user), else AT_EMPTY_PATH (needs CAP_DAC_READ_SEARCH).
    let proc_path = CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL in a number");
    // SAFETY: both paths are NUL-terminated C strings that outlive the call.
    let rc = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            proc_path.as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let first = io::Error::last_os_error();
    if first.kind() == io::ErrorKind::AlreadyExists {
        return Err(first);
    }
    let empty = CString::default();
    // SAFETY: as above; `fd` is open for the duration of the call.
    let rc = unsafe {
        libc::linkat(
            fd,
            empty.as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(first)
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn link_anonymous(_file: &File, _dir: &Path, _name: &std::ffi::OsStr) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "anonymous files are not supported here",
    ))
}

/// Swaps two paths atomically (both must exist). `Ok(false)` where the system cannot.
pub(crate) fn exchange(a: &Path, b: &Path) -> io::Result<bool> {
    renameat2(a, b, Rename::Exchange)
}

/// Renames `from` to `to` in one step if nothing is at `to`, and fails with `AlreadyExists`
/// if something is. `Ok(false)` where the system or the file system cannot: the caller falls
/// back to [`rename_new_file`] or, for a directory, to a plain rename (which never replaces a
/// directory that holds anything).
pub(crate) fn rename_noreplace(from: &Path, to: &Path) -> io::Result<bool> {
    renameat2(from, to, Rename::NoReplace)
}

/// The two ways of `renameat2` dtcast uses.
#[derive(Clone, Copy)]
enum Rename {
    Exchange,
    NoReplace,
}

/// `renameat2(a, b, flag)`: `Ok(false)` where the system or the file system has no such rename.
#[cfg(target_os = "linux")]
fn renameat2(a: &Path, b: &Path, how: Rename) -> io::Result<bool> {
    let flag = match how {
        Rename::Exchange => libc::RENAME_EXCHANGE,
        Rename::NoReplace => libc::RENAME_NOREPLACE,
    };
    let (ca, cb) = (c_path(a)?, c_path(b)?);
    // SAFETY: both paths are NUL-terminated C strings that outlive the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            flag,
        )
    };
    if rc == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENOSYS | libc::EINVAL | libc::EOPNOTSUPP) => Ok(false),
        _ => Err(e),
    }
}

#[cfg(not(target_os = "linux"))]
fn renameat2(_a: &Path, _b: &Path, _how: Rename) -> io::Result<bool> {
    Ok(false)
}

/// Moves the file `from` to `to` only if nothing is at `to` (`AlreadyExists` otherwise), where
/// [`rename_noreplace`] cannot: a hard link never replaces anything; then the old name goes.
pub(crate) fn rename_new_file(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::hard_link(from, to)?;
    std::fs::remove_file(from)
}

#[cfg(target_os = "linux")]
fn c_path(p: &Path) -> io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// Takes an exclusive advisory lock on `file` (held until every descriptor of it is closed, so
/// also until its process dies). `try_only`: return `Ok(false)` instead of waiting.
#[cfg(unix)]
pub(crate) fn lock(file: &File, try_only: bool) -> io::Result<bool> {
    use std::os::unix::io::AsRawFd;
    let op = if try_only {
        libc::LOCK_EX | libc::LOCK_NB
    } else {
        libc::LOCK_EX
    };
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.kind() == io::ErrorKind::WouldBlock {
        Ok(false)
    } else {
        Err(e)
    }
}

#[cfg(not(unix))]
pub(crate) fn lock(_file: &File, _try_only: bool) -> io::Result<bool> {
    // No advisory locks: nobody can prove a temporary file dead, so none is ever removed.
    Ok(false)
}

/// Sets the permission bits of `file`.
#[cfg(unix)]
pub(crate) fn set_mode(file: &File, bits: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(std::fs::Permissions::from_mode(bits))
}

#[cfg(not(unix))]
pub(crate) fn set_mode(_file: &File, _bits: u32) -> io::Result<()> {
    Ok(())
}

/// The permission bits of an existing file.
#[cfg(unix)]
pub(crate) fn mode_of(meta: &std::fs::Metadata) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    Some(meta.permissions().mode() & 0o777)
}

#[cfg(not(unix))]
pub(crate) fn mode_of(_meta: &std::fs::Metadata) -> Option<u32> {
    None
}

/// Flushes a directory's entries (a rename or link in it) to disk.
#[cfg(unix)]
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
pub(crate) fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

/// Starts writing `len` bytes at `offset` of `file` back to disk without waiting, so that the
/// final fsync has little left to do (the write-back overlaps the rest of the work).
#[cfg(target_os = "linux")]
pub(crate) fn start_writeback(file: &File, offset: u64, len: u64) {
    use std::os::unix::io::AsRawFd;
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return;
    };
    // SAFETY: a hint on a descriptor we own; failure only loses the overlap.
    unsafe {
        libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE);
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn start_writeback(_file: &File, _offset: u64, _len: u64) {}

/// Whether the process `pid` is alive: `Some(false)` only where the system says no such process
/// exists (a process of another user is alive too); `None` where it cannot tell.
#[cfg(unix)]
pub(crate) fn process_alive(pid: u32) -> Option<bool> {
    let pid = libc::pid_t::try_from(pid).ok()?;
    // SAFETY: signal 0 sends nothing; it only asks whether the process exists.
    if unsafe { libc::kill(pid, 0) } == 0 {
        return Some(true);
    }
    match io::Error::last_os_error().raw_os_error() {
        Some(libc::ESRCH) => Some(false),
        Some(libc::EPERM) => Some(true),
        _ => None,
    }
}

#[cfg(not(unix))]
pub(crate) fn process_alive(_pid: u32) -> Option<bool> {
    None
}
