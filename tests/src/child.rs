//! dtcast run as a real child process, for the tests that attack it the way a user's machine
//! does (signals, full disks, files changed underneath): the child, its faults (`DTCAST_FAULT`),
//! and what to look at afterwards.
//!
//! The binary is `dtcast-child`, this package's copy of `dtcast` (the same `dtcast::cli::main`);
//! an integration test names it with `Dtcast(env!("CARGO_BIN_EXE_dtcast-child"))`.

#![allow(clippy::missing_panics_doc)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{write_f32_checkpoint, write_sharded};

/// The dtcast binary the children run.
#[derive(Clone, Copy, Debug)]
pub struct Dtcast(pub &'static str);

/// A running child: its process and what it has printed on stderr so far.
#[derive(Debug)]
pub struct Child {
    child: std::process::Child,
    stderr: BufReader<std::process::ChildStderr>,
    seen: String,
    /// Whether [`Child::signal`] was called.
    signaled: bool,
}

impl Dtcast {
    /// The command, in `cwd`, with `DTCAST_FAULT=fault`; stdin piped (the pause's cue), stdout
    /// discarded, stderr read by [`Child`].
    pub fn command(self, args: &[&str], fault: &str, cwd: &Path) -> Command {
        let mut c = Command::new(self.0);
        c.args(args)
            .current_dir(cwd)
            .env("DTCAST_FAULT", fault)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    }

    /// Starts `dtcast args` in `cwd` with `DTCAST_FAULT=fault`.
    pub fn spawn(self, args: &[&str], fault: &str, cwd: &Path) -> Child {
        Child::of(&mut self.command(args, fault, cwd))
    }

    /// Runs `dtcast args` to the end: (exit code, stderr).
    pub fn run(self, args: &[&str], fault: &str, cwd: &Path) -> (Option<i32>, String) {
        let (code, _, stderr) = self.spawn(args, fault, cwd).finish();
        (code, stderr)
    }
}

impl Child {
    /// Starts `command`, whose stderr must be piped.
    pub fn of(command: &mut Command) -> Child {
        let mut child = command.spawn().expect("the child starts");
        let stderr = BufReader::new(child.stderr.take().expect("stderr is piped"));
        Child {
            child,
            stderr,
            seen: String::new(),
            signaled: false,
        }
    }

    /// The child's pid.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Waits until the child reports that it paused mid-write.
    pub fn wait_paused(&mut self) {
        loop {
            let mut line = String::new();
            let n = self.stderr.read_line(&mut line).unwrap();
            assert!(n > 0, "the child ended before pausing: {}", self.seen);
            if line.starts_with("dtcast-fault: paused") {
                return;
            }
            self.seen.push_str(&line);
        }
    }

    /// Lets a paused child go on (a child that has ended already is left to [`finish`]'s
    /// answer).
    ///
    /// [`finish`]: Child::finish
    pub fn resume(&mut self) {
        let stdin = self.child.stdin.as_mut().unwrap();
        let _ = stdin.write_all(b"\n").and_then(|()| stdin.flush());
    }

    /// Sends `signal` to the child.
    pub fn signal(&mut self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
        assert_eq!(rc, 0);
        self.signaled = true;
    }

    /// (exit code, killing signal, stderr). A signaled child is waited for before its stdin
    /// closes: the end of stdin resumes a paused writer, which on a loaded machine could finish
    /// the run before the signal's handler thread is scheduled.
    pub fn finish(mut self) -> (Option<i32>, Option<i32>, String) {
        use std::os::unix::process::ExitStatusExt;
        let stdin = self.child.stdin.take();
        if !self.signaled {
            drop(stdin);
        }
        let status = self.child.wait().unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.stderr, &mut rest).unwrap();
        self.seen.push_str(&rest);
        (status.code(), status.signal(), self.seen)
    }

    /// [`finish`](Self::finish), but a child still running after `limit` is killed and the test
    /// fails: for what must never hang.
    pub fn finish_within(mut self, limit: Duration) -> (Option<i32>, String) {
        drop(self.child.stdin.take());
        let start = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            if start.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("the child still ran after {limit:?}: it hangs");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let (code, _, stderr) = self.finish();
        (code, stderr)
    }
}

/// A float32 checkpoint of `n` zeros in one tensor `w`, written sparse (fast however large).
pub fn zeros_checkpoint(path: &Path, n: u64) {
    let json = format!(
        r#"{{"w":{{"dtype":"F32","shape":[{n}],"data_offsets":[0,{}]}}}}"#,
        4 * n
    );
    let mut bytes = (json.len() as u64).to_le_bytes().to_vec();
    bytes.extend(json.as_bytes());
    std::fs::write(path, &bytes).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_len(bytes.len() as u64 + 4 * n).unwrap();
}

/// Three shards in `d` (about 2.4 MB); shard 3 holds 1e6, which overflows float16. Returns the
/// index.
pub fn three_shards(d: &Path) -> PathBuf {
    write_sharded(
        d,
        &[
            vec![("a", vec![1.0; 300_000]), ("b", vec![2.0; 1000])],
            vec![("c", vec![3.0; 300_000])],
            vec![("d", vec![4.0; 1000]), ("e", vec![1e6; 10])],
        ],
    )
}

/// A small float32 checkpoint at `path`.
pub fn small_checkpoint(path: &Path) {
    write_f32_checkpoint(path, &[("a", vec![1.5; 1000]), ("b", vec![-2.25; 10])]);
}

/// The names in `dir`, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The names in `dir` that are dtcast's temporary names (`.dtcast-…`).
pub fn temp_names(dir: &Path) -> Vec<String> {
    names(dir)
        .into_iter()
        .filter(|n| n.starts_with(".dtcast-"))
        .collect()
}

/// Each file in `dir` (not recursive) with its bytes, by name.
pub fn contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    names(dir)
        .into_iter()
        .map(|n| {
            let bytes = std::fs::read(dir.join(&n)).unwrap();
            (n, bytes)
        })
        .collect()
}
