//! dtcast-cast's tests of its own internals (`dtcast_cast::self_test`, compiled in by the
//! `self-test` feature: its kernels against the scalar rules on every bit pattern, its screens
//! and tables), run under a harness that looks and filters like `cargo test`'s.

use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Failed, Trial};

fn main() {
    let args = Arguments::from_args();
    let mut trials: Vec<Trial> = dtcast_cast::self_test::all()
        .into_iter()
        .map(|test| {
            let name = test.name.trim_start_matches("dtcast_cast::");
            Trial::test(name, move || {
                (test.run)();
                Ok(())
            })
        })
        .collect();
    trials.push(Trial::test(
        "the_cast_crate_has_no_test_attributes",
        no_test_attributes,
    ));
    libtest_mimic::run(&args, trials).exit();
}

/// dtcast-cast builds no unit-test target (`[lib] test = false`), so a `#[test]` function in its
/// sources would never run: its tests are listed with `self_test::list!` instead.
fn no_test_attributes() -> Result<(), Failed> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cast/src");
    let mut files = vec![];
    rust_files(&src, &mut files);
    assert!(files.len() > 10, "cast/src: {} files", files.len());
    let found: Vec<String> = files
        .iter()
        .flat_map(|file| {
            let text = std::fs::read_to_string(file).unwrap();
            let lines: Vec<String> = (text.lines().enumerate())
                .filter(|(_, line)| line.trim_start().starts_with("#[test]"))
                .map(|(i, _)| format!("{}:{}", file.display(), i + 1))
                .collect();
            lines
        })
        .collect();
    if found.is_empty() {
        Ok(())
    } else {
        Err(format!("#[test] in dtcast-cast, which never runs there: {found:?}").into())
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
