//! Nothing lost, the second round: what a hostile user tried after the first fault-injection
//! suite (`process.rs`) held — a file put at the output while dtcast works, outputs that reach
//! an input through links or stdin, model directories of links and special files, names that
//! drive the terminal, signals at any instant, ten thousand shards, sizes that wrap — each kept
//! as a test, the child-process ones as child processes.

use std::io::{Read, Write};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dtcast_tests::child::{
    contents, names, small_checkpoint, temp_names, three_shards, zeros_checkpoint, Child, Dtcast,
};
use dtcast_tests::{file_with, snapshot, write_f32_checkpoint};

const DTCAST: Dtcast = Dtcast(env!("CARGO_BIN_EXE_dtcast-child"));

/// 80 MiB of input: the writer pauses mid-file with most of it still to come.
const BIG: u64 = 20 << 20;

/// Waits for a child that must end, and fails the test if it does not within a minute.
fn end(c: Child) -> (Option<i32>, String) {
    c.finish_within(Duration::from_secs(60))
}

fn convert_args<'a>(input: &'a str, output: &'a str, force: bool) -> Vec<&'a str> {
    let mut args = vec!["convert", input, "-o", output, "--dtype", "bf16"];
    if force {
        args.push("--force");
    }
    args
}

#[test]
fn a_file_that_appears_at_the_output_while_dtcast_works_is_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    zeros_checkpoint(&d.join("in.safetensors"), BIG);
    for fault in ["pause-after=1000000", "pause-after=1000000,named-temps"] {
        for force in [false, true] {
            let mut c = DTCAST.spawn(&convert_args("in.safetensors", "x.st", force), fault, d);
            c.wait_paused();
            std::fs::write(d.join("x.st"), "PRECIOUS").unwrap();
            c.resume();
            let (code, stderr) = end(c);
            assert_eq!(code, Some(1), "{fault} force={force}: {stderr}");
            assert_eq!(
                stderr,
                "error: `x.st` appeared while dtcast was working (another program wrote it); it \
                 was left as it is, and nothing was written\n",
                "{fault} force={force}"
            );
            assert_eq!(std::fs::read(d.join("x.st")).unwrap(), b"PRECIOUS");
            assert_eq!(temp_names(d), Vec::<String>::new());
            std::fs::remove_file(d.join("x.st")).unwrap();
        }
    }
}

/// Something done to a path while dtcast works.
type PathChange = dyn Fn(&Path);

#[test]
fn with_force_only_the_file_that_was_checked_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    zeros_checkpoint(&d.join("in.safetensors"), BIG);
    let args = convert_args("in.safetensors", "x.st", true);
    // Rewritten in place, or replaced by another file, while dtcast works: left as it is.
    let rewrite = |p: &Path| std::fs::write(p, "REWRITTEN").unwrap();
    let replace = |p: &Path| {
        std::fs::remove_file(p).unwrap();
        std::fs::write(p, "REPLACED").unwrap();
    };
    let changes: [(&PathChange, &[u8]); 2] = [(&rewrite, b"REWRITTEN"), (&replace, b"REPLACED")];
    for fault in ["pause-after=1000000", "pause-after=1000000,named-temps"] {
        for (change, left) in changes {
            std::fs::write(d.join("x.st"), "old output").unwrap();
            let mut c = DTCAST.spawn(&args, fault, d);
            c.wait_paused();
            change(&d.join("x.st"));
            c.resume();
            let (code, stderr) = end(c);
            assert_eq!(code, Some(1), "{fault}: {stderr}");
            assert!(
                stderr.starts_with("error: `x.st` changed while dtcast was working"),
                "{stderr}"
            );
            assert_eq!(std::fs::read(d.join("x.st")).unwrap(), left);
            assert_eq!(temp_names(d), Vec::<String>::new());
        }
    }
    // Untouched, it is replaced.
    std::fs::write(d.join("x.st"), "old output").unwrap();
    let (code, stderr) = DTCAST.run(&args, "", d);
    assert_eq!(code, Some(0), "{stderr}");
    assert_ne!(std::fs::read(d.join("x.st")).unwrap(), b"old output");
}

#[test]
fn two_runs_writing_one_output_one_wins_and_the_other_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    zeros_checkpoint(&d.join("in.safetensors"), 1 << 20);
    for force in [false, true] {
        if force {
            std::fs::write(d.join("x.st"), "old").unwrap();
        }
        let args = convert_args("in.safetensors", "x.st", force);
        let mut first = DTCAST.spawn(&args, "pause-after=100000", d);
        let mut second = DTCAST.spawn(&args, "pause-after=100000", d);
        first.wait_paused();
        second.wait_paused();
        first.resume();
        let (code, stderr) = end(first);
        assert_eq!(code, Some(0), "{stderr}");
        let won = std::fs::read(d.join("x.st")).unwrap();
        second.resume();
        let (code, stderr) = end(second);
        assert_eq!(code, Some(1), "{stderr}");
        let said = if force { "changed" } else { "appeared" };
        assert!(
            stderr.starts_with(&format!("error: `x.st` {said} while dtcast was working")),
            "{stderr}"
        );
        assert_eq!(std::fs::read(d.join("x.st")).unwrap(), won);
        std::fs::remove_file(d.join("x.st")).unwrap();
    }
}

/// A sharded conversion `src/` → `out`, paused mid-write, while `during` changes `out`; then
/// the run must fail and leave `out` as `during` left it.
fn sharded_with_change(d: &Path, force: bool, during: impl Fn(&Path)) -> (Option<i32>, String) {
    let mut args = vec![
        "convert",
        "src/model.safetensors.index.json",
        "-o",
        "out",
        "--dtype",
        "bf16",
    ];
    if force {
        args.push("--force");
    }
    let mut c = DTCAST.spawn(&args, "pause-after=1000000", d);
    c.wait_paused();
    during(&d.join("out"));
    // (The staging directory of the shards written so far is dtcast's, and goes.)
    let mut left = snapshot(d);
    left.retain(|p, _| !p.to_string_lossy().contains("/.dtcast-"));
    c.resume();
    let (code, stderr) = end(c);
    assert_same_tree(&left, &snapshot(d), &stderr);
    (code, stderr)
}

/// Fails naming the paths where two [`snapshot`]s differ (not their bytes: shards are large).
fn assert_same_tree(
    before: &std::collections::BTreeMap<PathBuf, Vec<u8>>,
    after: &std::collections::BTreeMap<PathBuf, Vec<u8>>,
    context: &str,
) {
    let differ: Vec<&PathBuf> = (before.keys().chain(after.keys()))
        .filter(|p| before.get(*p) != after.get(*p))
        .collect();
    assert!(differ.is_empty(), "{differ:?} differ; {context}");
}

#[test]
fn a_sharded_conversion_never_deletes_what_appears_in_its_output_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("src")).unwrap();
    three_shards(&d.join("src"));
    let user_file = |out: &Path| std::fs::write(out.join("notes.txt"), "mine").unwrap();

    // Absent at the start: a directory made meanwhile, with a file in it.
    let (code, stderr) = sharded_with_change(d, false, |out| {
        std::fs::create_dir(out).unwrap();
        user_file(out);
    });
    assert_eq!(code, Some(1));
    assert!(
        stderr.starts_with("error: `out` appeared while dtcast was working"),
        "{stderr}"
    );
    // Even an empty directory made meanwhile stays what it is.
    std::fs::remove_dir_all(d.join("out")).unwrap();
    let (code, stderr) = sharded_with_change(d, false, |out| std::fs::create_dir(out).unwrap());
    assert_eq!(code, Some(1), "{stderr}");

    // Empty at the start: a file put in it meanwhile.
    let (code, stderr) = sharded_with_change(d, false, user_file);
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr,
        "error: `out` changed while dtcast was working (`notes.txt` appeared in it); it was left \
         as it is, and nothing was written\n"
    );
    std::fs::remove_file(d.join("out/notes.txt")).unwrap();

    // A previous conversion, replaced with --force: a file added, a shard rewritten or removed.
    let (code, stderr) = DTCAST.run(
        &[
            "convert",
            "src/model.safetensors.index.json",
            "-o",
            "out",
            "--dtype",
            "f16",
        ],
        "",
        d,
    );
    assert_eq!(code, Some(0), "{stderr}");
    let shard = "model-00001-of-00003.safetensors";
    let (code, stderr) = sharded_with_change(d, true, user_file);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("(`notes.txt` appeared in it)"), "{stderr}");
    std::fs::remove_file(d.join("out/notes.txt")).unwrap();
    let (code, stderr) = sharded_with_change(d, true, |out| {
        std::fs::write(out.join(shard), "edited").unwrap();
    });
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains(&format!("(`{shard}` in it was rewritten)")),
        "{stderr}"
    );
    let (code, stderr) = sharded_with_change(d, true, |out| {
        std::fs::remove_file(out.join(shard)).unwrap();
    });
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains(&format!("(`{shard}` was removed from it)")),
        "{stderr}"
    );
    assert_eq!(temp_names(d), Vec::<String>::new());
    // Untouched, it is replaced whole.
    let (code, stderr) = DTCAST.run(
        &[
            "convert",
            "src/model.safetensors.index.json",
            "-o",
            "out",
            "--dtype",
            "bf16",
            "--force",
        ],
        "",
        d,
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(names(&d.join("out")).len(), 4);
}

#[test]
fn force_never_replaces_an_input_through_links() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let real = d.join("real");
    std::fs::create_dir(&real).unwrap();
    three_shards(&real);
    // A directory of links to the real shards, beside a copy of the index.
    let links = d.join("links");
    std::fs::create_dir(&links).unwrap();
    for name in names(&real) {
        if name.ends_with(".index.json") {
            std::fs::copy(real.join(&name), links.join(&name)).unwrap();
        } else {
            symlink(real.join(&name), links.join(&name)).unwrap();
        }
    }
    let before = snapshot(&real);
    let index = "links/model.safetensors.index.json";
    for (out, refused) in [
        (
            "real",
            "refusing to replace `real`: it holds the input links/model-00001",
        ),
        ("links", "refusing to replace `links`: it holds the input"),
    ] {
        let (code, stderr) = DTCAST.run(
            &["convert", index, "-o", out, "--dtype", "bf16", "--force"],
            "",
            d,
        );
        assert_eq!(code, Some(1), "{out}: {stderr}");
        assert!(
            stderr.starts_with(&format!("error: {refused}")),
            "{out}: {stderr}"
        );
    }
    // A hard link of a shard inside the output directory.
    let out = d.join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::hard_link(
        real.join("model-00002-of-00003.safetensors"),
        out.join("copy.safetensors"),
    )
    .unwrap();
    let (code, stderr) = DTCAST.run(
        &["convert", index, "-o", "out", "--dtype", "bf16", "--force"],
        "",
        d,
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("its `copy.safetensors` is the input"),
        "{stderr}"
    );
    // A single file's config.json is an input too.
    small_checkpoint(&d.join("model.safetensors"));
    std::fs::write(d.join("config.json"), "{}").unwrap();
    let (code, stderr) = DTCAST.run(
        &convert_args("model.safetensors", "config.json", true),
        "",
        d,
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("refusing to overwrite the input config.json"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(d.join("config.json")).unwrap(), b"{}");
    assert_eq!(snapshot(&real), before);
}

#[test]
fn cast_never_overwrites_its_own_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("in.f32"), 1.0f32.to_le_bytes()).unwrap();
    let out = Command::new(DTCAST.0)
        .args([
            "cast", "--from", "f32", "--to", "f32", "-o", "in.f32", "--force",
        ])
        .current_dir(d)
        .stdin(std::fs::File::open(d.join("in.f32")).unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: refusing to overwrite the input (standard input); choose another output\n"
    );
    assert_eq!(
        std::fs::read(d.join("in.f32")).unwrap(),
        1.0f32.to_le_bytes()
    );
}

/// A model directory laid out as the Hugging Face cache lays out a snapshot: every file a
/// symbolic link into `blobs/`.
fn cache_snapshot(d: &Path, files: &[(&str, &[u8])]) -> PathBuf {
    let blobs = d.join("blobs");
    let snap = d.join("snapshots/0123abc");
    std::fs::create_dir_all(&blobs).unwrap();
    std::fs::create_dir_all(&snap).unwrap();
    for (k, (name, bytes)) in files.iter().enumerate() {
        let blob = blobs.join(format!("blob{k}"));
        std::fs::write(&blob, bytes).unwrap();
        symlink(format!("../../blobs/blob{k}"), snap.join(name)).unwrap();
    }
    snap
}

#[test]
fn a_hugging_face_cache_snapshot_keeps_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ckpt = d.join("ckpt.safetensors");
    small_checkpoint(&ckpt);
    let weights = std::fs::read(&ckpt).unwrap();
    let snap = cache_snapshot(
        d,
        &[
            ("model.safetensors", &weights),
            ("config.json", br#"{"model_type": "llama"}"#),
            ("tokenizer.json", b"{\"vocab\": [1, 2, 3]}"),
            ("generation_config.json", b"{}"),
        ],
    );
    let (code, stderr) = DTCAST.run(
        &[
            "convert",
            snap.to_str().unwrap(),
            "-o",
            "out",
            "--dtype",
            "bf16",
        ],
        "",
        d,
    );
    assert_eq!(code, Some(0), "{stderr}");
    let out = d.join("out");
    assert_eq!(
        names(&out),
        [
            "config.json",
            "generation_config.json",
            "model.safetensors",
            "tokenizer.json"
        ]
    );
    for name in names(&out) {
        let meta = std::fs::symlink_metadata(out.join(&name)).unwrap();
        assert!(meta.is_file(), "{name} is a regular file, not a link");
    }
    assert_eq!(
        std::fs::read(out.join("tokenizer.json")).unwrap(),
        b"{\"vocab\": [1, 2, 3]}"
    );
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["model_type"], "llama");
    assert_eq!(config["torch_dtype"], "bfloat16");
}

#[test]
fn what_a_model_directory_conversion_does_not_copy_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = d.join("model");
    std::fs::create_dir(&model).unwrap();
    three_shards(&model);
    std::fs::write(model.join("config.json"), "{}").unwrap();
    small_checkpoint(&model.join("adapter_model.safetensors"));
    std::fs::create_dir(model.join("original")).unwrap();
    std::fs::write(model.join("original/consolidated.00.pth"), b"PK\x03\x04").unwrap();
    symlink("nowhere", model.join("dangling.json")).unwrap();
    let out = dtcast_tests::dtcast_cli(
        &[
            "convert",
            model.to_str().unwrap(),
            "-o",
            d.join("out").to_str().unwrap(),
            "--dtype",
            "bf16",
        ],
        "",
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.ends_with(
            "not copied: adapter_model.safetensors (a safetensors file \
             `model.safetensors.index.json` does not list), dangling.json (a symbolic link to \
             nothing), original (a directory)\n"
        ),
        "{}",
        out.stdout
    );
    assert_eq!(
        names(&d.join("out")),
        [
            "config.json",
            "model-00001-of-00003.safetensors",
            "model-00002-of-00003.safetensors",
            "model-00003-of-00003.safetensors",
            "model.safetensors.index.json"
        ]
    );
}

/// A FIFO at `path` (nothing ever opens its other end).
fn fifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

#[test]
fn side_files_that_are_not_regular_files_are_refused_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    small_checkpoint(&d.join("model.safetensors"));
    let sharded = d.join("sharded");
    std::fs::create_dir(&sharded).unwrap();
    three_shards(&sharded);
    let cases: [(&str, &PathChange); 3] = [
        ("a FIFO (named pipe)", &fifo),
        ("a character device", &|p| symlink("/dev/zero", p).unwrap()),
        ("a directory", &|p| std::fs::create_dir(p).unwrap()),
    ];
    for side in ["config.json", "hf_quant_config.json"] {
        for (what, make) in cases {
            make(&d.join(side));
            let refused = format!(
                "{side}: it is {what}, not a regular file; dtcast reads only regular files"
            );
            for args in [
                convert_args("model.safetensors", "out.safetensors", false),
                convert_args(".", "../out-dir", false),
            ] {
                let (code, stderr) = end(DTCAST.spawn(&args, "", d));
                assert_eq!(code, Some(1), "{side} {what} {args:?}: {stderr}");
                // (`./config.json` where the model directory is `.`.)
                assert!(
                    stderr.starts_with("error: ") && stderr.ends_with(&format!("{refused}\n")),
                    "{args:?}: {stderr}"
                );
            }
            // inspect lists the tensors, and says why it cannot tell the quantization.
            let (code, stdout, stderr) = output_within(&["inspect", "model.safetensors"], d);
            assert_eq!(code, Some(0), "{stderr}");
            assert!(
                stdout.contains(&format!("quantized: cannot be read: {refused}")),
                "{stdout}"
            );
            let _ = std::fs::remove_file(d.join(side));
            let _ = std::fs::remove_dir(d.join(side));
        }
    }
    // The index itself.
    let index = sharded.join("model.safetensors.index.json");
    std::fs::remove_file(&index).unwrap();
    fifo(&index);
    let (code, stderr) = end(DTCAST.spawn(
        &convert_args("sharded/model.safetensors.index.json", "out", false),
        "",
        d,
    ));
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("it is a FIFO (named pipe), not a regular file"),
        "{stderr}"
    );
    // A config.json larger than any is refused before it is read (sparse: no disk used).
    let big = std::fs::File::create(d.join("config.json")).unwrap();
    big.set_len(100_000_001).unwrap();
    let (code, stderr) = end(DTCAST.spawn(
        &convert_args("model.safetensors", "out.safetensors", false),
        "",
        d,
    ));
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr,
        "error: config.json: it is 100000001 bytes, more than the 100000000 bytes dtcast reads of \
         a JSON file\n"
    );
    std::fs::remove_file(d.join("config.json")).unwrap();
    // In a model directory, a special file beside the weights is named, not read.
    fifo(&d.join("tokenizer.json"));
    let (code, stderr) = end(DTCAST.spawn(&convert_args(".", "../out-dir2", false), "", d));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(d.parent().unwrap().join("out-dir2").is_dir());
    std::fs::remove_dir_all(d.parent().unwrap().join("out-dir2")).unwrap();
}

/// `dtcast args` in `cwd`, to the end: (exit code, stdout, stderr); killed, and the test
/// failed, if it runs for a minute.
fn output_within(args: &[&str], cwd: &Path) -> (Option<i32>, String, String) {
    let child = Command::new(DTCAST.0)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watchdog = {
        let done = std::sync::Arc::clone(&done);
        std::thread::spawn(move || {
            let start = Instant::now();
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                if start.elapsed() > Duration::from_secs(60) {
                    // SAFETY: kill(2) on the child's pid, not reaped while `done` is false.
                    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
                    return true;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            false
        })
    };
    let out = child.wait_with_output().unwrap();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(!watchdog.join().unwrap(), "{args:?} hangs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every byte an output holds that a terminal would act on: C0 controls but the newline, DEL,
/// and C1 controls (as UTF-8).
fn terminal_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| c != '\n' && c.is_control())
        .collect()
}

#[test]
fn inspect_escapes_everything_that_comes_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let hostile = [
        "title\u{1b}]0;pwned\u{7}",
        "clip\u{1b}]52;c;ZWNobyBoaQ==\u{7}",
        "clear\u{1b}[2J",
        "row\rfake\nrow",
        "c1\u{9b}31m",
        "bidi\u{202e}gpj.exe",
    ];
    // One tensor per name, each at its own offset.
    let mut header = String::from("{");
    for (k, h) in hostile.iter().enumerate() {
        header += &format!(
            r#""{}":{{"dtype":"F32","shape":[1],"data_offsets":[{},{}]}},"#,
            json_escape(h),
            4 * k,
            4 * k + 4
        );
    }
    header += &format!(
        r#""__metadata__":{{"{}":"{}"}}}}"#,
        json_escape(hostile[0]),
        json_escape(hostile[3])
    );
    file_with(d, "hostile.safetensors", &header, &[0; 24]);
    let out = dtcast_tests::dtcast_cli(
        &["inspect", d.join("hostile.safetensors").to_str().unwrap()],
        "",
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        terminal_controls(&out.stdout),
        Vec::<char>::new(),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains('\u{202e}'));
    assert!(
        out.stdout.contains(r"title\u{1b}]0;pwned\u{7}"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains(r"row\rfake\nrow"), "{}", out.stdout);
    // The table has its rows and no forged ones: header, six tensors, blank, totals, metadata.
    assert_eq!(
        out.stdout.lines().count(),
        1 + 6 + 1 + 2 + 1,
        "{}",
        out.stdout
    );

    // Shard names, from the index, in a sharded checkpoint's headings and in errors.
    let sh = d.join("sh");
    std::fs::create_dir(&sh).unwrap();
    let shard = "s\u{1b}[2Jhard.safetensors";
    write_f32_checkpoint(&sh.join(shard), &[("w", vec![1.0])]);
    std::fs::write(
        sh.join("model.safetensors.index.json"),
        format!(r#"{{"weight_map":{{"w":"{}"}}}}"#, json_escape(shard)),
    )
    .unwrap();
    let index = sh.join("model.safetensors.index.json");
    let out = dtcast_tests::dtcast_cli(&["inspect", index.to_str().unwrap()], "");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_escaped(&out.stdout, r"shard s\u{1b}[2Jhard.safetensors");
    std::fs::remove_file(sh.join(shard)).unwrap();
    let out = dtcast_tests::dtcast_cli(&["inspect", index.to_str().unwrap()], "");
    assert_eq!(out.code, 1);
    assert_escaped(&out.stderr, r"s\u{1b}[2Jhard.safetensors");
}

/// `printed` holds no terminal control, and shows `escaped` (a name, escaped).
fn assert_escaped(printed: &str, escaped: &str) {
    assert_eq!(terminal_controls(printed), Vec::<char>::new(), "{printed}");
    assert!(printed.contains(escaped), "{printed}");
}

/// `text` as the inside of a JSON string.
fn json_escape(text: &str) -> String {
    let quoted = serde_json::to_string(text).unwrap();
    quoted[1..quoted.len() - 1].to_owned()
}

#[test]
fn a_closed_pipe_ends_inspect_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Far more than a pipe holds: the writer meets the closed pipe.
    let tensors: Vec<(String, Vec<f32>)> = (0..20_000)
        .map(|k| (format!("layer.{k}.weight"), vec![0.5]))
        .collect();
    let named: Vec<(&str, Vec<f32>)> = tensors
        .iter()
        .map(|(n, v)| (n.as_str(), v.clone()))
        .collect();
    write_f32_checkpoint(&d.join("many.safetensors"), &named);
    let mut child = Command::new(DTCAST.0)
        .args(["inspect", "many.safetensors"])
        .current_dir(d)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 100];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut first)
        .unwrap();
    drop(child.stdout.take()); // `| head -c 100`
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn dev_stdout_on_a_pipe_is_refused_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("in.u8"), [1, 2, 3]).unwrap();
    let out = Command::new(DTCAST.0)
        .args([
            "cast",
            "--from",
            "u8",
            "--to",
            "u8",
            "in.u8",
            "-o",
            "/dev/stdout",
        ])
        .current_dir(d)
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: refusing to write `/dev/stdout` (a symbolic link to")
            && stderr.ends_with("it is a FIFO (named pipe); dtcast only writes regular files\n"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn a_line_of_invalid_utf8_is_one_failed_promote_case() {
    let mut child = Command::new(DTCAST.0)
        .args(["promote"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"int8[2] int16[2]\n\xff\xfe float32[2]\nint32[2] float32[2]\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "int16\nerror: line 2 is not valid UTF-8 (byte 0)\nfloat32\n"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: 1 of 3 cases failed\n"
    );
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn files_of_other_formats_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (name, bytes, what) in [
        (
            "model.gguf",
            &b"GGUF\x03\0\0\0\0\0\0\0\0\0\0\0"[..],
            "a GGUF file (llama.cpp's format; `dtcast inspect` reads it)",
        ),
        (
            "pytorch_model.bin",
            &b"PK\x03\x04\x14\0\0\0\0\0"[..],
            "a zip archive (what torch.save writes",
        ),
        (
            "old.bin",
            &b"\x80\x02\x8a\x0alz\xfc\x9cF\xf9 j\xa8"[..],
            "a Python pickle",
        ),
        (
            "w.npy",
            &b"\x93NUMPY\x01\0v\0{'descr'"[..],
            "a NumPy .npy file",
        ),
    ] {
        std::fs::write(d.join(name), bytes).unwrap();
        let out = dtcast_tests::dtcast_cli(
            &[
                "convert",
                d.join(name).to_str().unwrap(),
                "-o",
                d.join("o.st").to_str().unwrap(),
                "--dtype",
                "bf16",
            ],
            "",
        );
        assert_eq!(out.code, 1);
        assert!(
            out.stderr
                .contains(&format!("not a valid safetensors file: it is {what}")),
            "{}",
            out.stderr
        );
        assert!(
            out.stderr
                .contains("not safetensors (dtcast reads and writes safetensors)"),
            "{}",
            out.stderr
        );
    }
}

#[test]
fn one_size_rule_for_every_shape() {
    // bitcast: whichever dimension makes it too large, the input's or the result's.
    for (rule, shape) in [
        ("view", "4611686018427387904,1"),
        ("view", "1,4611686018427387904"),
        ("xla", "4611686018427387904,1"),
        ("xla", "18446744073709551615"),
        ("view", "0,9223372036854775808"),
    ] {
        let out = dtcast_tests::dtcast_cli(
            &[
                "bitcast", "--rule", rule, "--shape", shape, "--from", "f32", "--to", "u8",
            ],
            "",
        );
        assert_eq!(out.code, 1, "{rule} {shape}: {}", out.stdout);
        assert!(
            out.stderr.contains("is too large: "),
            "{rule} {shape}: {}",
            out.stderr
        );
        assert!(out.stderr.contains("more than 2^63 - 1"), "{}", out.stderr);
    }
    // Within it, both rules answer.
    let out = dtcast_tests::dtcast_cli(
        &[
            "bitcast",
            "--rule",
            "view",
            "--shape",
            "1073741824,2",
            "--from",
            "f32",
            "--to",
            "u8",
        ],
        "",
    );
    assert_eq!((out.code, out.stdout.as_str()), (0, "[1073741824, 8]\n"));
}

#[test]
fn ten_thousand_shards_convert_under_a_limit_of_256_descriptors() {
    // On tmpfs where there is one: each shard's fsync is otherwise a disk flush.
    let dir = match tempfile::tempdir_in("/dev/shm") {
        Ok(dir) => dir,
        Err(_) => tempfile::tempdir().unwrap(),
    };
    let d = dir.path();
    let src = d.join("src");
    std::fs::create_dir(&src).unwrap();
    let n = 10_000;
    let mut map = serde_json::Map::new();
    for k in 0..n {
        let file = format!("model-{:05}-of-{n:05}.safetensors", k + 1);
        let name = format!("layers.{k}.weight");
        let header = format!(r#"{{"{name}":{{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}}}"#);
        file_with(&src, &file, &header, &[0, 0, 0x80, 0x3f, 0, 0, 0, 0x40]);
        map.insert(name, serde_json::Value::from(file));
    }
    std::fs::write(
        src.join("model.safetensors.index.json"),
        serde_json::json!({ "weight_map": map }).to_string(),
    )
    .unwrap();
    let mut command = DTCAST.command(
        &convert_args("src/model.safetensors.index.json", "out", false),
        "",
        d,
    );
    // SAFETY: setrlimit in the child before exec, with a limit struct that lives on its stack.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, || {
            let limit = libc::rlimit {
                rlim_cur: 256,
                rlim_max: 256,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let (code, stderr) = Child::of(&mut command).finish_within(Duration::from_secs(300));
    assert_eq!(code, Some(0), "{stderr}");
    let out = d.join("out");
    assert_eq!(names(&out).len(), n + 1);
    let last = dtcast::layer::checkpoint::Checkpoint::open(
        out.join(format!("model-{n:05}-of-{n:05}.safetensors")),
    )
    .unwrap();
    assert_eq!(last.entries()[0].dtype, dtcast::DType::BFloat16);
    assert_eq!(
        last.read(&last.entries()[0]).unwrap(),
        [0x80, 0x3f, 0, 0x40]
    );
}

/// A small deterministic generator (xorshift64*), so that a failing trial can be replayed from
/// its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

#[test]
fn sigint_at_200_random_instants_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    zeros_checkpoint(&d.join("in.safetensors"), 1 << 20);
    std::fs::create_dir(d.join("src")).unwrap();
    three_shards(&d.join("src"));
    let index = "src/model.safetensors.index.json";
    // The outputs a complete run writes, to compare with.
    let (code, stderr) = DTCAST.run(&convert_args("in.safetensors", "file.ref", false), "", d);
    assert_eq!(code, Some(0), "{stderr}");
    let (code, stderr) = DTCAST.run(&convert_args(index, "dir.ref", false), "", d);
    assert_eq!(code, Some(0), "{stderr}");
    let file_ref = std::fs::read(d.join("file.ref")).unwrap();
    let dir_ref = contents(&d.join("dir.ref"));
    let previous = b"a previous output".to_vec();
    // How long a run takes here: the instants spread over a little more than that.
    let timed = |args: &[&str]| {
        let start = Instant::now();
        let (code, stderr) = DTCAST.run(args, "", d);
        assert_eq!(code, Some(0), "{stderr}");
        start.elapsed()
    };
    let span = timed(&convert_args("in.safetensors", "t.st", true))
        .max(timed(&convert_args(index, "t.dir", true)))
        .mul_f64(1.3);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut rng = Rng(seed);
    let mut outcomes = [0usize; 3];
    for trial in 0..200 {
        let sharded = trial % 2 == 1;
        let with_previous = trial % 4 >= 2;
        let fault = if trial % 8 >= 4 { "named-temps" } else { "" };
        let out = if sharded { "o.dir" } else { "o.st" };
        let out_path = d.join(out);
        let _ = std::fs::remove_file(&out_path);
        let _ = std::fs::remove_dir_all(&out_path);
        if with_previous {
            if sharded {
                std::fs::create_dir(&out_path).unwrap();
                std::fs::write(out_path.join("x.safetensors"), &previous).unwrap();
            } else {
                std::fs::write(&out_path, &previous).unwrap();
            }
        }
        let input = if sharded { index } else { "in.safetensors" };
        let c = DTCAST.spawn(&convert_args(input, out, true), fault, d);
        let at = Duration::from_micros(rng.below(span.as_micros() as u64));
        std::thread::sleep(at);
        // The child may have finished already; a signal to a reaped pid would be an error.
        // SAFETY: kill(2) on our own child's pid, which is not reaped before `finish`.
        unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGINT) };
        let (code, signal, stderr) = c.finish();
        let why = format!("seed {seed} trial {trial} at {at:?} ({fault} sharded={sharded}): {code:?} {signal:?} {stderr}");
        assert_eq!(temp_names(d), Vec::<String>::new(), "{why}");
        let now_file = std::fs::read(&out_path).ok();
        let now_dir = out_path.is_dir().then(|| contents(&out_path));
        let complete = if sharded {
            now_dir.as_ref() == Some(&dir_ref)
        } else {
            now_file.as_ref() == Some(&file_ref)
        };
        let as_before = if sharded {
            match &now_dir {
                Some(c) => with_previous && *c == [("x.safetensors".to_owned(), previous.clone())],
                None => !with_previous,
            }
        } else {
            match &now_file {
                Some(b) => with_previous && *b == previous,
                None => !with_previous && !out_path.exists(),
            }
        };
        match code {
            Some(0) => {
                assert!(complete, "{why}");
                assert_eq!(stderr, "", "{why}");
                outcomes[0] += 1;
            }
            Some(130) if complete => {
                assert!(
                    stderr.starts_with(&format!(
                        "error: interrupted by SIGINT; the output was already complete: {out}"
                    )),
                    "{why}"
                );
                outcomes[1] += 1;
            }
            Some(130) => {
                assert!(as_before, "{why}");
                assert!(
                    stderr.starts_with("error: interrupted by SIGINT; no output was written"),
                    "{why}"
                );
                outcomes[2] += 1;
            }
            // Before the handler is installed the default action ends the process: nothing was
            // written then.
            None if signal == Some(libc::SIGINT) => {
                assert!(as_before, "{why}");
                outcomes[2] += 1;
            }
            _ => panic!("{why}"),
        }
    }
    // The instants cover the run: some trials end before, some after the commit.
    assert!(
        outcomes[2] > 0 && outcomes[0] + outcomes[1] > 0,
        "{outcomes:?} (seed {seed})"
    );
}

#[test]
fn a_signal_after_the_command_returned_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    small_checkpoint(&d.join("in.safetensors"));
    // Paused at the very end, after the command returned and its output is in place.
    let mut c = DTCAST.spawn(
        &convert_args("in.safetensors", "out.st", false),
        "pause-at-exit",
        d,
    );
    c.wait_paused();
    c.signal(libc::SIGINT);
    // Time for the handler thread to run; it must wait for the exit, not announce anything.
    std::thread::sleep(Duration::from_millis(300));
    c.resume();
    let (code, signal, stderr) = c.finish();
    assert_eq!((code, signal), (Some(0), None), "{stderr}");
    assert_eq!(stderr, "");
    assert!(d.join("out.st").is_file());
}

#[test]
fn many_small_tensors_convert_as_each_alone_would() {
    use dtcast::cast::{cast_to_vec, CastMode};
    use dtcast::layer::checkpoint::{convert_file, Checkpoint, ConvertOptions};
    use dtcast::DType;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // 20,000 tensors of 2 to 9 elements, float32 and int64 in runs, so that the pipeline reads,
    // casts and writes many of them as one chunk.
    let mut header = String::from("{");
    let mut data = Vec::new();
    let values = |k: usize, n: usize| (0..n).map(move |j| ((k * 7 + j) % 13) as f32 - 6.0);
    for k in 0..20_000 {
        let n = 2 + k % 8;
        let (dtype, bytes): (&str, Vec<u8>) = if (k / 100) % 3 == 2 {
            (
                "I64",
                values(k, n)
                    .flat_map(|v| (v as i64).to_le_bytes())
                    .collect(),
            )
        } else {
            ("F32", values(k, n).flat_map(f32::to_le_bytes).collect())
        };
        header += &format!(
            r#""t{k}":{{"dtype":"{dtype}","shape":[{n}],"data_offsets":[{},{}]}},"#,
            data.len(),
            data.len() + bytes.len()
        );
        data.extend(bytes);
    }
    header.pop();
    header.push('}');
    let input = file_with(d, "in.safetensors", &header, &data);
    let src = Checkpoint::open(&input).unwrap();
    for (to, all) in [(DType::BFloat16, false), (DType::Float8E4M3Fn, true)] {
        let mut options = ConvertOptions::new(to);
        options.all = all;
        options.force = true;
        let out = d.join("out.safetensors");
        convert_file(&input, &out, &options, &|_, _| {}).unwrap();
        let ck = Checkpoint::open(&out).unwrap();
        for (a, b) in src.entries().iter().zip(ck.entries()) {
            assert_eq!(a.name, b.name);
            let want = if a.dtype == b.dtype {
                src.read(a).unwrap()
            } else {
                cast_to_vec(&src.read(a).unwrap(), a.dtype, b.dtype, CastMode::Torch).unwrap()
            };
            assert_eq!(ck.read(b).unwrap(), want, "{} to {to}", a.name);
        }
    }
    // A value that overflows, in the middle of a run of small tensors: its own tensor and
    // element are named.
    let mut checked = ConvertOptions::new(DType::Float8E4M3Fn);
    checked.mode = CastMode::Checked;
    checked.force = true;
    let mut bad = data.clone();
    let at = src.entries().iter().find(|e| e.name == "t12345").unwrap();
    let start = at.range.start - src.header().data_start + 4 * 2;
    bad[start..start + 4].copy_from_slice(&1e6f32.to_le_bytes());
    let input = file_with(d, "bad.safetensors", &header, &bad);
    let e = convert_file(&input, &d.join("bad-out"), &checked, &|_, _| {}).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("tensor `t12345`: element 2 (1000000.0) overflows float8_e4m3fn"),
        "{e}"
    );
}
