//! dtcast as a real child process, attacked the way a user's machine attacks it: signals
//! mid-write (SIGINT, SIGTERM, SIGKILL), a full disk, an input truncated or rewritten while it is
//! read, and failing sharded conversions. After each, the output path must be exactly as it was
//! and no temporary file may be left in sight.
//!
//! The child is `dtcast-child` (this package's copy of the `dtcast` binary: the same
//! `dtcast::cli::main`); `DTCAST_FAULT` makes it pause mid-write (until a line on its stdin) or
//! run out of space after N bytes.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use dtcast_tests::child::{
    contents, names, temp_names, three_shards, zeros_checkpoint, Child, Dtcast,
};
use dtcast_tests::{snapshot, write_f32_checkpoint};

const BIN: &str = env!("CARGO_BIN_EXE_dtcast-child");
const DTCAST: Dtcast = Dtcast(BIN);

/// 80 MiB of input: more than the pipeline ever reads ahead of the writer (about 48 MiB).
const BIG: u64 = 20 << 20;

fn spawn(args: &[&str], fault: &str, cwd: &Path) -> Child {
    DTCAST.spawn(args, fault, cwd)
}

fn run(args: &[&str], fault: &str, cwd: &Path) -> (Option<i32>, String) {
    DTCAST.run(args, fault, cwd)
}

#[test]
fn sigint_and_sigterm_mid_write_remove_everything_and_exit_128_plus_the_signal() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    zeros_checkpoint(&d.join("in.safetensors"), BIG);
    for (signal, code, name) in [
        (libc::SIGINT, 130, "SIGINT"),
        (libc::SIGTERM, 143, "SIGTERM"),
    ] {
        for named in [false, true] {
            let fault = if named {
                "pause-after=1000000,named-temps"
            } else {
                "pause-after=1000000"
            };
            let mut c = spawn(
                &[
                    "convert",
                    "in.safetensors",
                    "-o",
                    "out.safetensors",
                    "--dtype",
                    "bf16",
                ],
                fault,
                d,
            );
            c.wait_paused();
            // The portable path has a named temporary file to remove; on Linux the default
            // path has none at all (O_TMPFILE).
            assert_eq!(temp_names(d).len(), usize::from(named), "{name} {fault}");
            c.signal(signal);
            let (got, _, stderr) = c.finish();
            assert_eq!(got, Some(code), "{name} {fault}: {stderr}");
            assert!(
                stderr.starts_with(&format!(
                    "error: interrupted by {name}; no output was written"
                )),
                "{stderr}"
            );
            assert_eq!(
                stderr.contains("temporary files were removed"),
                named,
                "{stderr}"
            );
            assert_eq!(names(d), ["in.safetensors"], "{name} {fault}");
        }
    }
}

/// The files directly in `dir`, by name, with their bytes.
#[test]
fn a_signal_after_the_output_is_in_place_says_it_is_complete_and_leaves_it_so() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_f32_checkpoint(
        &d.join("in.safetensors"),
        &[("a", vec![1.5; 1000]), ("b", vec![-2.25; 10])],
    );
    let convert = |out: &'static str| {
        [
            "convert",
            "in.safetensors",
            "-o",
            out,
            "--dtype",
            "bf16",
            "--force",
        ]
    };
    let (code, stderr) = run(&convert("expected.safetensors"), "", d);
    assert_eq!(code, Some(0), "{stderr}");
    let expected = std::fs::read(d.join("expected.safetensors")).unwrap();
    for fault in ["pause-after-commit", "pause-after-commit,named-temps"] {
        let mut c = spawn(&convert("out.safetensors"), fault, d);
        c.wait_paused();
        // Paused after the rename: the output is complete, and no temporary name is left.
        assert_eq!(std::fs::read(d.join("out.safetensors")).unwrap(), expected);
        c.signal(libc::SIGTERM);
        let (code, _, stderr) = c.finish();
        assert_eq!(code, Some(143), "{fault}: {stderr}");
        assert_eq!(
            stderr,
            "error: interrupted by SIGTERM; the output was already complete: out.safetensors\n",
            "{fault}"
        );
        assert_eq!(std::fs::read(d.join("out.safetensors")).unwrap(), expected);
        assert_eq!(temp_names(d), Vec::<String>::new(), "{fault}");
    }

    // A sharded conversion replacing a previous one: paused after the directories were
    // exchanged, the previous output waits under a temporary name; the signal removes it.
    let src = d.join("src");
    std::fs::create_dir(&src).unwrap();
    three_shards(&src);
    let index = "src/model.safetensors.index.json";
    let to = |out: &'static str, dtype: &'static str| {
        ["convert", index, "-o", out, "--dtype", dtype, "--force"]
    };
    for (out, dtype) in [("reference", "f16"), ("out", "bf16")] {
        let (code, stderr) = run(&to(out, dtype), "", d);
        assert_eq!(code, Some(0), "{stderr}");
    }
    let mut c = spawn(&to("out", "f16"), "pause-after-commit", d);
    c.wait_paused();
    assert_eq!(temp_names(d).len(), 1, "the previous output, moved aside");
    c.signal(libc::SIGINT);
    let (code, _, stderr) = c.finish();
    assert_eq!(code, Some(130), "{stderr}");
    assert!(
        stderr.starts_with("error: interrupted by SIGINT; the output was already complete: out; its temporary files were removed"),
        "{stderr}"
    );
    assert_eq!(temp_names(d), Vec::<String>::new());
    assert_eq!(contents(&d.join("out")), contents(&d.join("reference")));
}

#[test]
fn sigkill_leaves_nothing_visible_and_a_later_run_removes_what_is_provably_stale() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    zeros_checkpoint(&d.join("in.safetensors"), BIG);
    let args = [
        "convert",
        "in.safetensors",
        "-o",
        "out.safetensors",
        "--dtype",
        "bf16",
    ];
    // Linux: the output is an anonymous O_TMPFILE file until complete; kill -9 leaves nothing.
    let mut c = spawn(&args, "pause-after=1000000", d);
    c.wait_paused();
    c.signal(libc::SIGKILL);
    assert_eq!(c.finish().1, Some(libc::SIGKILL));
    assert_eq!(names(d), ["in.safetensors"]);

    // The portable path (named temporary files): kill -9 leaves one behind...
    let mut c = spawn(&args, "pause-after=1000000,named-temps", d);
    c.wait_paused();
    c.signal(libc::SIGKILL);
    assert_eq!(c.finish().1, Some(libc::SIGKILL));
    let stale = temp_names(d);
    assert_eq!(stale.len(), 1, "{stale:?}");
    let stale = d.join(&stale[0]);
    // ...and a live one's name, locked by its owner (this process) as dtcast's owners do.
    let live = d.join(".dtcast-1-99.tmp");
    std::fs::write(&live, b"in use").unwrap();
    let live_file = std::fs::File::open(&live).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&live_file);
    // SAFETY: flock on a descriptor this test owns.
    let locked = unsafe { libc::flock(fd, libc::LOCK_EX) };
    assert_eq!(locked, 0);
    // Names younger than the grace period are left alone (their owner may not have locked them
    // yet); age both.
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    for p in [&stale, &live] {
        std::fs::File::options()
            .write(true)
            .open(p)
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    // A file with a name like ours but not provably ours (older versions' random names) stays.
    std::fs::write(d.join(".dtcast-abc123.tmp"), b"not ours").unwrap();
    let (code, stderr) = run(&args, "", d);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stale.exists(), "the dead run's temporary file was removed");
    assert!(
        live.exists(),
        "a live (locked) temporary file is never removed"
    );
    assert!(d.join(".dtcast-abc123.tmp").exists());
    drop(live_file);
}

#[test]
fn a_full_disk_leaves_the_previous_output_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_f32_checkpoint(
        &d.join("in.safetensors"),
        &[("a", vec![1.5; 100_000]), ("b", vec![2.5; 100_000])],
    );
    let (code, stderr) = run(
        &[
            "convert",
            "in.safetensors",
            "-o",
            "out.safetensors",
            "--dtype",
            "bf16",
        ],
        "",
        d,
    );
    assert_eq!(code, Some(0), "{stderr}");
    let before = snapshot(d);
    for fault in [
        "nospace-after=150000",
        "nospace-after=150000,named-temps",
        "nospace-after=0",
    ] {
        let (code, stderr) = run(
            &[
                "convert",
                "in.safetensors",
                "-o",
                "out.safetensors",
                "--dtype",
                "f16",
                "--force",
            ],
            fault,
            d,
        );
        assert_eq!(code, Some(1), "{fault}: {stderr}");
        assert_eq!(
            stderr, "error: out.safetensors: No space left on device (os error 28)\n",
            "{fault}"
        );
        assert_eq!(snapshot(d), before, "{fault}");
    }
    // `cast -o` goes through the same writer.
    std::fs::write(d.join("raw.f32"), vec![0u8; 400_000]).unwrap();
    let before = snapshot(d);
    let (code, stderr) = run(
        &[
            "cast", "--from", "f32", "--to", "bf16", "raw.f32", "-o", "raw.bf16",
        ],
        "nospace-after=1000",
        d,
    );
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("No space left on device") && !stderr.contains(".dtcast-"),
        "{stderr}"
    );
    assert_eq!(snapshot(d), before);
}

/// Unmounts a tmpfs when dropped.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_real_full_disk_too_where_a_small_tmpfs_can_be_mounted() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let small = d.join("small");
    std::fs::create_dir(&small).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&small)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        println!(
            "SKIPPED: a real full disk needs a tmpfs mount (root); the simulated one is tested"
        );
        return;
    }
    let _mount = Mount(small.clone());
    zeros_checkpoint(&d.join("in.safetensors"), 1 << 20); // 4 MiB in, 2 MiB out: does not fit
    let (code, stderr) = run(
        &[
            "convert",
            "in.safetensors",
            "-o",
            "small/out.safetensors",
            "--dtype",
            "bf16",
        ],
        "",
        d,
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(
        stderr,
        "error: small/out.safetensors: No space left on device (os error 28)\n"
    );
    assert!(names(&small).is_empty(), "{:?}", names(&small));
}

#[test]
fn an_input_truncated_or_rewritten_during_conversion_is_an_error_not_a_signal() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = d.join("in.safetensors");
    type Change = fn(&Path);
    let changes: [(&str, Change); 2] = [
        ("truncated", |p| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(p)
                .unwrap()
                .set_len(1000)
                .unwrap();
        }),
        ("rewritten", |p| {
            use std::os::unix::fs::FileExt;
            let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            f.write_all_at(&[0x7f; 4096], 1 << 20).unwrap();
        }),
    ];
    for (what, change) in changes {
        zeros_checkpoint(&input, BIG);
        let mut c = spawn(
            &[
                "convert",
                "in.safetensors",
                "-o",
                "out.safetensors",
                "--dtype",
                "bf16",
            ],
            "pause-after=1000000",
            d,
        );
        c.wait_paused();
        change(&input);
        c.resume();
        let (code, signal, stderr) = c.finish();
        assert_eq!((code, signal), (Some(1), None), "{what}: {stderr}");
        assert_eq!(
            stderr, "error: in.safetensors changed while it was being read\n",
            "{what}"
        );
        assert_eq!(names(d), ["in.safetensors"], "{what}");
    }
}

#[test]
fn outputs_keep_the_inputs_permission_bits() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = d.join("in.safetensors");
    write_f32_checkpoint(&input, &[("a", vec![1.0; 10])]);
    for mode in [0o600, 0o640, 0o644] {
        std::fs::set_permissions(&input, std::fs::Permissions::from_mode(mode)).unwrap();
        let (code, stderr) = run(
            &[
                "convert",
                "in.safetensors",
                "-o",
                "out.safetensors",
                "--dtype",
                "bf16",
                "--force",
            ],
            "",
            d,
        );
        assert_eq!(code, Some(0), "{stderr}");
        let got = std::fs::metadata(d.join("out.safetensors"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(got, mode);
        let (code, _) = run(
            &[
                "cast",
                "--from",
                "u8",
                "--to",
                "bool",
                "in.safetensors",
                "-o",
                "raw.bool",
                "--force",
            ],
            "",
            d,
        );
        assert_eq!(code, Some(0));
        let got = std::fs::metadata(d.join("raw.bool"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(got, mode);
    }
    // From stdin there is no input file: the umask default (0666 less the umask; here 022).
    let out = Command::new("sh")
        .current_dir(d)
        .arg("-c")
        .arg(format!(
            "umask 027; echo 01 | {BIN} cast --from u8 --to u8 --hex -o stdin.hex"
        ))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = std::fs::metadata(d.join("stdin.hex"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(got, 0o640);
}

#[test]
fn a_failed_sharded_conversion_leaves_the_output_exactly_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let src = d.join("src");
    std::fs::create_dir(&src).unwrap();
    three_shards(&src);
    let index = "src/model.safetensors.index.json";
    let to_f16 = [
        "convert", index, "-o", "out", "--dtype", "f16", "--mode", "checked", "--force",
    ];

    // No previous output: every failure leaves no `out` at all, and nothing else.
    let pristine = snapshot(d);
    let (code, stderr) = run(&to_f16, "", d);
    assert_eq!(code, Some(1));
    assert!(
        stderr.starts_with("error: tensor `e`: element 0 (1000000.0) overflows float16"),
        "{stderr}"
    );
    assert_eq!(snapshot(d), pristine);

    // A previous complete conversion to bf16...
    let (code, stderr) = run(&["convert", index, "-o", "out", "--dtype", "bf16"], "", d);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(names(&d.join("out")).len(), 4);
    let before = snapshot(d);

    // ...survives, byte for byte: a checked-mode error in the last shard,
    let (code, stderr) = run(&to_f16, "", d);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(snapshot(d), before);
    // a full disk (simulated) while writing shard 2, on both temporary-file paths,
    for fault in ["nospace-after=1000000", "nospace-after=1000000,named-temps"] {
        let (code, stderr) = run(
            &["convert", index, "-o", "out", "--dtype", "f16", "--force"],
            fault,
            d,
        );
        assert_eq!(code, Some(1), "{stderr}");
        assert!(stderr.contains("No space left on device"), "{stderr}");
        assert_eq!(snapshot(d), before, "{fault}");
    }
    // SIGTERM and SIGKILL mid-write,
    for (signal, named) in [
        (libc::SIGTERM, false),
        (libc::SIGTERM, true),
        (libc::SIGKILL, false),
    ] {
        let fault = if named {
            "pause-after=1000000,named-temps"
        } else {
            "pause-after=1000000"
        };
        let mut c = spawn(
            &["convert", index, "-o", "out", "--dtype", "f16", "--force"],
            fault,
            d,
        );
        c.wait_paused();
        c.signal(signal);
        c.finish();
        // kill -9 leaves the staging directory of the shards done so far (hidden, and locked
        // by nobody now): the next run that writes here removes it before anything else.
        let mut left = snapshot(d);
        if signal == libc::SIGKILL {
            let staged = temp_names(d);
            assert!(
                staged.len() == 1 && staged[0].ends_with(".staging"),
                "{staged:?}"
            );
            left.retain(|p, _| !p.starts_with(d.join(&staged[0])));
        }
        assert_eq!(left, before, "signal {signal} {fault}");
    }
    // a corrupt shard, and a missing one (refused before anything is written).
    let shard2 = src.join("model-00002-of-00003.safetensors");
    let good = std::fs::read(&shard2).unwrap();
    std::fs::write(&shard2, &good[..good.len() - 1]).unwrap();
    let (code, stderr) = run(
        &["convert", index, "-o", "out", "--dtype", "f16", "--force"],
        "",
        d,
    );
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("model-00002-of-00003.safetensors: not a valid safetensors file"),
        "{stderr}"
    );
    std::fs::remove_file(&shard2).unwrap();
    let after_corrupt = snapshot(d);
    let (code, stderr) = run(
        &["convert", index, "-o", "out", "--dtype", "f16", "--force"],
        "",
        d,
    );
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("model-00002-of-00003.safetensors: No such file"),
        "{stderr}"
    );
    assert_eq!(snapshot(d), after_corrupt);
    std::fs::write(&shard2, &good).unwrap();
    assert_eq!(snapshot(d), before);

    // And a successful run replaces it whole: every shard in float16, the new index beside them.
    let (code, stderr) = run(
        &[
            "convert", index, "-o", "out", "--dtype", "f16", "--force", "--keep", "e",
        ],
        "",
        d,
    );
    assert_eq!(code, Some(0), "{stderr}");
    let out = d.join("out");
    for shard in [
        "model-00001-of-00003.safetensors",
        "model-00002-of-00003.safetensors",
    ] {
        let ck = dtcast::layer::checkpoint::Checkpoint::open(out.join(shard)).unwrap();
        assert!(
            ck.entries()
                .iter()
                .all(|e| e.dtype == dtcast::DType::Float16),
            "{shard}"
        );
    }
    assert!(temp_names(d).is_empty() && temp_names(&out).is_empty());
}
