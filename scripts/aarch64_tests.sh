#!/usr/bin/env bash
# Runs the test suite built for aarch64 (64-bit Arm: Apple silicon under Linux, Graviton, Ampere)
# on this x86-64 machine under qemu's user-mode emulation: the portable kernels on the CPU they
# are for, and the arithmetic whose NaN bits differ between CPUs (an invalid operation gives
# x86's 0xFFC00000 but Arm's 0x7FC00000; the references ran on x86). Correctness only: emulated
# timings say nothing about Arm's speed.
#
# Needs (Debian): qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross, the rustup target
# aarch64-unknown-linux-gnu, and, for the tests that start dtcast as a child process, qemu
# registered with binfmt_misc (root; done below when missing). 9–12 minutes on 2 cores.
#     scripts/aarch64_tests.sh [cargo test arguments...]   (default: --workspace)
set -euo pipefail
cd "$(dirname "$0")/.."
target=aarch64-unknown-linux-gnu
if ! command -v qemu-aarch64 >/dev/null || ! command -v aarch64-linux-gnu-gcc >/dev/null; then
  apt-get install -y qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross
fi
rustup target list --installed | grep -qx "$target" || rustup target add "$target"
# Child processes (dtcast, dtcast-child) are aarch64 executables too: the kernel hands them to
# qemu once it is registered.
binfmt=/proc/sys/fs/binfmt_misc
if [ ! -e "$binfmt/register" ]; then mount binfmt_misc -t binfmt_misc "$binfmt"; fi
if [ ! -e "$binfmt/qemu-aarch64" ]; then
  magic='\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
  mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'
  echo ":qemu-aarch64:M::$magic:$mask:$(command -v qemu-aarch64):" >"$binfmt/register"
fi
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER=qemu-aarch64
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
# Absolute: the derive's compile-fail test runs cargo from `layer/ui/` (trybuild), where a relative
# path would put a second target directory.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target/aarch64}
# Optimised: the exhaustive tests run ~10x slower emulated. Doctests run on the host (stable cargo
# does not cross-run them).
cargo test --release --locked --target "$target" --no-fail-fast "${@:---workspace}"
