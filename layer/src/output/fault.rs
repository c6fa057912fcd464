//! Fault injection for tests that run dtcast as a child process: a full disk after N bytes, a
//! writer that pauses after N bytes (so that a test can signal the process, or change its input,
//! mid-write) or right after its output is in place, or named temporary files where the system
//! has anonymous ones (to exercise the portable path).
//!
//! The `dtcast` binary reads `DTCAST_FAULT` — a comma-separated list of `nospace-after=N`,
//! `pause-after=N`, `pause-after-commit`, `pause-at-exit` and `named-temps`, N counting bytes of
//! output over the whole run — and calls [`inject`]. Nothing else sets a fault.

use std::io::{self, BufRead};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

/// Faults to inject into every output written afterwards.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fault {
    /// Writes fail with "No space left on device" once the run has written this many bytes.
    pub no_space_after: Option<u64>,
    /// Once the run has written this many bytes, print `dtcast-fault: paused` on stderr and wait
    /// for a line on stdin (or a signal) before going on.
    pub pause_after: Option<u64>,
    /// Print `dtcast-fault: paused` and wait likewise right after the rename that puts an output
    /// in place (before a previous output moved aside is removed).
    pub pause_after_commit: bool,
    /// Use named temporary files even where anonymous ones exist.
    pub named_temps: bool,
    /// Print `dtcast-fault: paused` and wait likewise once the command has returned, at the
    /// process's last step ([`exiting`]).
    pub pause_at_exit: bool,
}

impl std::str::FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Fault, String> {
        let bad = |part: &str| {
            format!(
                "DTCAST_FAULT `{part}`: expected nospace-after=N, pause-after=N, pause-after-commit, pause-at-exit or named-temps, separated by commas"
            )
        };
        let mut fault = Fault::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part {
                "named-temps" => {
                    fault.named_temps = true;
                    continue;
                }
                "pause-after-commit" => {
                    fault.pause_after_commit = true;
                    continue;
                }
                "pause-at-exit" => {
                    fault.pause_at_exit = true;
                    continue;
                }
                _ => {}
            }
            let (kind, n) = part.split_once('=').ok_or_else(|| bad(part))?;
            let n: u64 = n.parse().map_err(|_| bad(part))?;
            match kind {
                "nospace-after" => fault.no_space_after = Some(n),
                "pause-after" => fault.pause_after = Some(n),
                _ => return Err(bad(part)),
            }
        }
        Ok(fault)
    }
}

static FAULT: OnceLock<Fault> = OnceLock::new();
static WRITTEN: AtomicU64 = AtomicU64::new(0);
static PAUSED: AtomicBool = AtomicBool::new(false);

/// Injects `fault` for the rest of the process (the first call wins).
#[doc(hidden)]
pub fn inject(fault: Fault) {
    let _ = FAULT.set(fault);
}

/// Whether named temporary files are forced.
pub(crate) fn named_temps() -> bool {
    FAULT.get().is_some_and(|f| f.named_temps)
}

/// Accounts for `len` bytes about to be written; returns how many of them may be written (all of
/// them unless a fault says otherwise), or the injected error.
pub(crate) fn admit(len: usize) -> io::Result<usize> {
    let Some(fault) = FAULT.get() else {
        return Ok(len);
    };
    let before = WRITTEN.fetch_add(len as u64, Ordering::Relaxed);
    if let Some(limit) = fault.pause_after {
        if before + len as u64 >= limit && !PAUSED.swap(true, Ordering::Relaxed) {
            pause();
        }
    }
    match fault.no_space_after {
        Some(limit) if before >= limit => Err(no_space()),
        Some(limit) => Ok(len.min((limit - before) as usize)),
        None => Ok(len),
    }
}

/// Called right after an output is put in place: pauses there if the fault says so. The caller
/// holds no lock a signal handler needs.
pub(crate) fn committed() {
    if FAULT.get().is_some_and(|f| f.pause_after_commit) {
        pause();
    }
}

/// Called by the `dtcast` binary as its last step, after [`finish`](super::finish): pauses
/// there if the fault says so.
#[doc(hidden)]
pub fn exiting() {
    if FAULT.get().is_some_and(|f| f.pause_at_exit) {
        pause();
    }
}

/// Says so on stderr and waits for a line on stdin (a test's cue), or for a signal.
fn pause() {
    eprintln!("dtcast-fault: paused");
    let mut line = String::new();
    let _ = io::stdin().lock().read_line(&mut line);
}

#[cfg(unix)]
fn no_space() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOSPC)
}

#[cfg(not(unix))]
fn no_space() -> io::Error {
    io::Error::new(io::ErrorKind::StorageFull, "No space left on device")
}
