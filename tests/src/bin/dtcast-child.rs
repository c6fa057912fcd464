//! The `dtcast` process once more, under a name the integration tests of this package can find
//! (`CARGO_BIN_EXE_dtcast-child`): the same `dtcast::cli::main` as the real binary, signal
//! handling and `DTCAST_FAULT` included.

fn main() -> std::process::ExitCode {
    dtcast::cli::main()
}
