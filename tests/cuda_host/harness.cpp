// Runs dtcast's CUDA cast kernels (device/src/cuda/kernels.cu) on the host, so the test suite can
// compare them byte for byte with the Rust CPU kernels on machines without a GPU.
//
// Protocol on stdin, repeated until EOF: from (u8), to (u8), saturate (u8), the pair's quirks
// (u8: dtcast_cast::Quirks's fields as bits 0..4, in order), n (u32 LE), then the n source
// elements' bytes in storage (packed for the sub-byte dtypes; n is a multiple of 8 for those).
// For each job, stdout gets the n destination elements' bytes.
#include "kernels.cu"

#include <cstdio>
#include <vector>

template <class S, class D>
static void run(const std::vector<u8>& src, std::vector<u8>& dst, u64 n, bool saturate, Quirks q) {
    // Two tiles at a time, as the GPU threads take them (the last, partial tile included).
    dst.assign(n * D::BITS / 8, 0);
    for (u64 t = 0; t < tiles<S, D>(n); t += 2) {
        if (saturate) convert_tile_pair<S, D, 1>(src.data(), dst.data(), t, t + 1, n, q);
        else convert_tile_pair<S, D, 0>(src.data(), dst.data(), t, t + 1, n, q);
    }
}

// Bits per element of a dtype (by its index in dtcast_dtype::DType::ALL), -1 without a lane.
static int bits_of(int dt) {
#define BITS_CASE(I, L) if (dt == I) return L::BITS;
    DTCAST_LANES(BITS_CASE)
    return -1;
}

template <class S>
static void run_to(int to, const std::vector<u8>& src, std::vector<u8>& dst, u64 n, bool sat, Quirks q) {
#define TO_CASE(I, L) if (to == I) { run<S, L>(src, dst, n, sat, q); return; }
    DTCAST_LANES(TO_CASE)
}

static void dispatch(int from, int to, const std::vector<u8>& src, std::vector<u8>& dst, u64 n, bool sat, int quirks) {
    Quirks q = {(quirks & 1) != 0, (quirks & 2) != 0, (quirks & 4) != 0, (quirks & 8) != 0, (quirks & 16) != 0};
#define FROM_CASE(I, L) if (from == I) { run_to<L>(to, src, dst, n, sat, q); return; }
    DTCAST_LANES(FROM_CASE)
}

int main() {
    std::vector<u8> src, dst;
    for (;;) {
        unsigned char head[8];
        if (fread(head, 1, 8, stdin) != 8) return 0;
        int from = head[0], to = head[1], quirks = head[3];
        bool sat = head[2] != 0;
        u64 n = (u64)head[4] | ((u64)head[5] << 8) | ((u64)head[6] << 16) | ((u64)head[7] << 24);
        int s = bits_of(from), d = bits_of(to);
        if (s < 0 || d < 0) return 2;
        u64 bytes = n * s / 8;
        src.assign(bytes, 0);
        if (bytes && fread(src.data(), 1, bytes, stdin) != bytes) return 3;
        dispatch(from, to, src, dst, n, sat, quirks);
        fwrite(dst.data(), 1, dst.size(), stdout);
    }
}
