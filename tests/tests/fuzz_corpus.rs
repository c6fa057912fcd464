//! Replays the committed `cargo fuzz` corpus (`fuzz/corpus/<target>/`, every finding included)
//! through the fuzz targets' bodies on stable, so that CI guards what the fuzzer found.

use std::path::PathBuf;

use dtcast_tests::fuzz::TARGETS;

#[test]
fn every_corpus_file_passes_its_target() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    for (target, body) in TARGETS {
        let dir = root.join(target);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{target}: empty corpus");
        for file in &files {
            let data = std::fs::read(file).unwrap();
            let outcome = std::panic::catch_unwind(|| body(&data));
            assert!(outcome.is_ok(), "{target}: {} fails", file.display());
        }
        println!("{target}: {} inputs replayed", files.len());
    }
}
