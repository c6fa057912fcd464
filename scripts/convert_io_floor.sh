#!/usr/bin/env bash
# `dtcast convert` of a 1 GiB float32 checkpoint (16 tensors 4096×4096) to bfloat16, against the
# I/O floor measured in the same run on the same disk: reading the input once
# (`cat IN > /dev/null`) plus writing the output's bytes with an fsync (`dd ... conv=fsync`).
# Five interleaved rounds, `sync` before every timed command, the minimum of each; peak RSS of
# dtcast from /usr/bin/time.
#
# With DEQUANTIZE=SCHEME (fp8-block, mxfp4, nvfp4, ...): the same weights quantized first
# (`dtcast convert --quantize SCHEME`, untimed), then the timed command dequantizes them to
# float32 — a 1 GiB output — against cat of the quantized input plus dd of 1 GiB (copied from the
# dense file).
#
#   scripts/convert_io_floor.sh [WORKDIR]      (WORKDIR: where the files go; default ./target/io-floor)
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-target/io-floor}
rounds=${ROUNDS:-5}
mkdir -p "$work"
cargo build --release --quiet --bin dtcast --example big_checkpoint
bin=${CARGO_TARGET_DIR:-target}/release
in=$work/in.safetensors
out=$work/out.safetensors
floor=$work/floor.bin
[ -f "$in" ] || "$bin/examples/big_checkpoint" "$in"
out_mib=$(( ($(stat -c %s "$in") / 2 + (1 << 20) - 1) >> 20 ))
to=bfloat16
dd_src=$in
if [ -n "${DEQUANTIZE:-}" ]; then
  dense=$in
  dd_src=$dense  # the output is larger than the quantized input: dd copies it from the dense file
  in=$work/in-$DEQUANTIZE.safetensors
  [ -f "$in" ] || "$bin/dtcast" convert "$dense" -o "$in" --quantize "$DEQUANTIZE" >/dev/null
  out_mib=$(( ($(stat -c %s "$dense") + (1 << 20) - 1) >> 20 ))
  to=float32
fi

now() { date +%s.%N; }
timed() { sync; local t0; t0=$(now); "$@"; echo "$(now) - $t0" | bc -l; }
min() { printf '%s\n' "$@" | sort -g | head -1; }

cats=() dds=() convs=() rss=()
for r in $(seq "$rounds"); do
  cats+=("$(timed sh -c "cat '$in' > /dev/null")")
  dds+=("$(timed dd if="$dd_src" of="$floor" bs=1M count="$out_mib" conv=fsync status=none)")
  sync; t0=$(now)
  /usr/bin/time -f %M -o "$work/rss" "$bin/dtcast" convert "$in" -o "$out" --dtype "$to" --force >/dev/null
  convs+=("$(echo "$(now) - $t0" | bc -l)")
  rss+=("$(cat "$work/rss")")
  printf 'round %d: cat %.3f s, dd %.3f s, dtcast %.3f s (peak RSS %d MiB)\n' \
    "$r" "${cats[-1]}" "${dds[-1]}" "${convs[-1]}" "$(( ${rss[-1]} / 1024 ))"
done
c=$(min "${cats[@]}"); d=$(min "${dds[@]}"); v=$(min "${convs[@]}")
peak=$(printf '%s\n' "${rss[@]}" | sort -n | tail -1)
printf 'min: cat %.3f s + dd %.3f s = floor %.3f s; dtcast %.3f s = %.2f x the floor; peak RSS %d MiB\n' \
  "$c" "$d" "$(echo "$c + $d" | bc -l)" "$v" "$(echo "$v / ($c + $d)" | bc -l)" "$(( peak / 1024 ))"
rm -f "$floor"
