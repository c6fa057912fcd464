//! Fault injection for tests that run dtcast as a child process: a full disk after N bytes, or a
//! writer that stops after N bytes so that a test can signal the process mid-write.
//!
//! The `dtcast` binary reads `DTCAST_FAULT` (`nospace-after=N` or `stall-after=N`, N bytes of
//! output in the whole run) and calls [`inject`]. Nothing else sets a fault.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// A fault to inject into every output written afterwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Writes fail with "No space left on device" once the run has written this many bytes.
    NoSpaceAfter(u64),
    /// Once the run has written this many bytes, print `dtcast-fault: stalled` on stderr and
    /// wait forever (for a signal).
    StallAfter(u64),
}

impl std::str::FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Fault, String> {
        let (kind, n) = s.split_once('=').ok_or_else(|| {
            format!("DTCAST_FAULT `{s}`: expected nospace-after=N or stall-after=N")
        })?;
        let n: u64 = n
            .parse()
            .map_err(|_| format!("DTCAST_FAULT `{s}`: `{n}` is not a byte count"))?;
        match kind {
            "nospace-after" => Ok(Fault::NoSpaceAfter(n)),
            "stall-after" => Ok(Fault::StallAfter(n)),
            _ => Err(format!(
                "DTCAST_FAULT `{s}`: expected nospace-after=N or stall-after=N"
            )),
        }
    }
}

static FAULT: OnceLock<Fault> = OnceLock::new();
static WRITTEN: AtomicU64 = AtomicU64::new(0);

/// Injects `fault` for the rest of the process (the first call wins).
#[doc(hidden)]
pub fn inject(fault: Fault) {
    let _ = FAULT.set(fault);
}

/// Accounts for `len` bytes about to be written; returns how many of them may be written (all of
/// them unless a fault says otherwise), or the injected error.
pub(crate) fn admit(len: usize) -> io::Result<usize> {
    let Some(fault) = FAULT.get() else {
        return Ok(len);
    };
    let before = WRITTEN.fetch_add(len as u64, Ordering::Relaxed);
    match *fault {
        Fault::NoSpaceAfter(limit) => {
            if before >= limit {
                Err(no_space())
            } else {
                Ok(len.min((limit - before) as usize))
            }
        }
        Fault::StallAfter(limit) => {
            if before + len as u64 >= limit {
                eprintln!("dtcast-fault: stalled");
                loop {
                    std::thread::park();
                }
            }
            Ok(len)
        }
    }
}

#[cfg(unix)]
fn no_space() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOSPC)
}

#[cfg(not(unix))]
fn no_space() -> io::Error {
    io::Error::new(io::ErrorKind::StorageFull, "No space left on device")
}
