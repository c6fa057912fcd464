//! The one writer every command uses (`dtcast_layer::output`), through `dtcast convert` and
//! `dtcast cast -o` run in-process: what it refuses, what it follows, what it replaces.

use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use dtcast_tests::{dtcast_cli, snapshot, write_f32_checkpoint, CliOutput};

fn dtcast(args: &[&str]) -> CliOutput {
    dtcast_cli(args, "")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `convert IN -o OUT` and `cast IN -o OUT` with extra flags: both must answer alike.
fn both(input_ckpt: &Path, input_raw: &Path, out: &Path, extra: &[&str]) -> [CliOutput; 2] {
    let mut convert = vec!["convert", s(input_ckpt), "-o", s(out), "--dtype", "bf16"];
    convert.extend(extra);
    let mut cast = vec![
        "cast",
        "--from",
        "f32",
        "--to",
        "bf16",
        s(input_raw),
        "-o",
        s(out),
    ];
    cast.extend(extra);
    [dtcast(&convert), dtcast(&cast)]
}

fn inputs(d: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let ckpt = d.join("in.safetensors");
    write_f32_checkpoint(&ckpt, &[("w", vec![1.0, 2.0])]);
    let raw = d.join("in.f32");
    std::fs::write(&raw, [0, 0, 0x80, 0x3f]).unwrap();
    (ckpt, raw)
}

#[test]
fn special_files_are_refused_even_with_force() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ckpt, raw) = inputs(d);
    let fifo = d.join("fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let socket = d.join("socket");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let subdir = d.join("subdir");
    std::fs::create_dir(&subdir).unwrap();
    let cases: [(&Path, &str); 4] = [
        (Path::new("/dev/null"), "a character device"),
        (&fifo, "a FIFO (named pipe)"),
        (&socket, "a socket"),
        (&subdir, "a directory"),
    ];
    for (target, what) in cases {
        for force in [false, true] {
            let extra: &[&str] = if force { &["--force"] } else { &[] };
            for o in both(&ckpt, &raw, target, extra) {
                assert_eq!(o.code, 1, "{}", o.stderr);
                assert_eq!(
                    o.stderr,
                    format!(
                        "error: refusing to write `{}`: it is {what}; dtcast only writes regular files\n",
                        target.display()
                    )
                );
            }
        }
    }
    let meta = std::fs::metadata("/dev/null").unwrap();
    assert!(
        meta.file_type().is_char_device(),
        "/dev/null is still a device"
    );
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    assert!(std::fs::symlink_metadata(&socket)
        .unwrap()
        .file_type()
        .is_socket());
    assert!(subdir.is_dir());
}

#[test]
fn a_symlink_is_followed_and_stays_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ckpt, raw) = inputs(d);
    let real = d.join("real.out");
    let link = d.join("link.out");
    std::os::unix::fs::symlink("real.out", &link).unwrap();
    // A dangling link: the file it names is created.
    let [c, _] = both(&ckpt, &raw, &link, &[]);
    assert_eq!(c.code, 0, "{}", c.stderr);
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(dtcast::layer::checkpoint::Checkpoint::open(&real).is_ok());
    // It exists now: replaced only with --force, through the link.
    for o in both(&ckpt, &raw, &link, &[]) {
        assert_eq!(o.code, 1);
        assert_eq!(
            o.stderr,
            format!(
                "error: `{}` (a symbolic link to `{}`) exists; pass --force to replace it\n",
                link.display(),
                real.display()
            )
        );
    }
    let [_, c] = both(&ckpt, &raw, &link, &["--force"]);
    assert_eq!(c.code, 0, "{}", c.stderr);
    assert_eq!(std::fs::read(&real).unwrap(), [0x80, 0x3f]);
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    // A link to a device is refused like the device.
    let to_null = d.join("to-null");
    std::os::unix::fs::symlink("/dev/null", &to_null).unwrap();
    for o in both(&ckpt, &raw, &to_null, &["--force"]) {
        assert_eq!(o.code, 1);
        assert!(
            o.stderr
                .contains("(a symbolic link to `/dev/null`): it is a character device"),
            "{}",
            o.stderr
        );
    }
    // A loop of links is an error, not a hang.
    std::os::unix::fs::symlink("loop-b", d.join("loop-a")).unwrap();
    std::os::unix::fs::symlink("loop-a", d.join("loop-b")).unwrap();
    for o in both(&ckpt, &raw, &d.join("loop-a"), &[]) {
        assert!(
            o.stderr.contains("too many levels of symbolic links"),
            "{}",
            o.stderr
        );
    }
}

#[test]
fn missing_directories_are_named_plainly_and_temp_paths_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ckpt, raw) = inputs(d);
    let before = snapshot(d);
    for o in both(&ckpt, &raw, &d.join("target/out.bin"), &[]) {
        assert_eq!(
            o.stderr,
            format!(
                "error: cannot write `{}`: directory `{}/` does not exist\n",
                d.join("target/out.bin").display(),
                d.join("target").display()
            )
        );
    }
    // A path through a regular file.
    let through = d.join("in.f32/out.bin");
    for o in both(&ckpt, &raw, &through, &[]) {
        assert_eq!(o.code, 1);
        assert!(o.stderr.contains("is not a directory"), "{}", o.stderr);
        assert!(!o.stderr.contains(".dtcast-"), "{}", o.stderr);
    }
    // The bare name of a missing directory, relative.
    let o = dtcast(&[
        "cast",
        "--from",
        "u8",
        "--to",
        "u8",
        s(&raw),
        "-o",
        "no-such-dir-xyz/out",
    ]);
    assert_eq!(
        o.stderr,
        "error: cannot write `no-such-dir-xyz/out`: directory `no-such-dir-xyz/` does not exist\n"
    );
    assert_eq!(snapshot(d), before, "nothing written, nothing left");
}

#[test]
fn force_is_the_same_rule_for_every_command_and_the_input_is_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ckpt, raw) = inputs(d);
    let out = d.join("out.bin");
    std::fs::write(&out, b"precious").unwrap();
    for o in both(&ckpt, &raw, &out, &[]) {
        assert_eq!(o.code, 1);
        assert!(
            o.stderr.ends_with("exists; pass --force to replace it\n"),
            "{}",
            o.stderr
        );
    }
    assert_eq!(std::fs::read(&out).unwrap(), b"precious");
    let [c, _] = both(&ckpt, &raw, &out, &["--force"]);
    assert_eq!(c.code, 0, "{}", c.stderr);
    assert!(
        c.stdout.ends_with(&format!("wrote {}\n", out.display())),
        "{}",
        c.stdout
    );
    // The input itself, directly or through a link, even with --force.
    let alias = d.join("alias.f32");
    std::os::unix::fs::symlink(&raw, &alias).unwrap();
    for target in [&raw, &alias] {
        let o = dtcast(&[
            "cast",
            "--from",
            "f32",
            "--to",
            "f32",
            s(&raw),
            "-o",
            s(target),
            "--force",
        ]);
        assert_eq!(o.code, 1);
        assert!(
            o.stderr.contains("refusing to overwrite the input"),
            "{}",
            o.stderr
        );
    }
    let o = dtcast(&[
        "convert",
        s(&ckpt),
        "-o",
        s(&ckpt),
        "--dtype",
        "f16",
        "--force",
    ]);
    assert!(
        o.stderr.contains("refusing to overwrite the input"),
        "{}",
        o.stderr
    );
    assert_eq!(std::fs::read(&raw).unwrap(), [0, 0, 0x80, 0x3f]);
    // --force without -o is a usage error for cast (there is nothing to replace).
    assert_eq!(
        dtcast(&["cast", "--from", "u8", "--to", "u8", "--force"]).code,
        2
    );
}

#[test]
fn the_library_writer_cleans_up_after_a_failing_fill() {
    use dtcast::layer::output::{write_file, FileMode};
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x");
    let e = write_file(&out, false, FileMode::UmaskDefault, |w| {
        w.write_all(&[1; 10_000])?;
        Err(dtcast::LayerError::Output("the fill failed".to_owned()))
    })
    .unwrap_err();
    assert_eq!(e.to_string(), "the fill failed");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    write_file(&out, false, FileMode::Bits(0o600), |w| {
        Ok(w.write_all(b"ok")?)
    })
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&out).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}
