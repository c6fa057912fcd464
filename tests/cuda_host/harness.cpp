// Runs dtcast's CUDA cast kernels (device/src/cuda/kernels.cu) on the host, so the test suite can
// compare them byte for byte with the Rust CPU kernels on machines without a GPU.
//
// Protocol on stdin, repeated until EOF: from (u8), to (u8), saturate (u8), the pair's quirks
// (u8: dtcast_cast::Quirks's fields as bits 0..3, in order), n (u32 LE), then n * itemsize(from)
// bytes. For each job, stdout gets n * itemsize(to) bytes.
#include "kernels.cu"

#include <cstdio>
#include <vector>

template <class S, class D>
static void run(const std::vector<u8>& src, std::vector<u8>& dst, u64 n, bool saturate, Quirks q) {
    // Two tiles at a time, as the GPU threads take them (the last, partial tile included).
    dst.assign(n * D::SIZE, 0);
    for (u64 t = 0; t < tiles<S, D>(n); t += 2) {
        if (saturate) convert_tile_pair<S, D, 1>(src.data(), dst.data(), t, t + 1, n, q);
        else convert_tile_pair<S, D, 0>(src.data(), dst.data(), t, t + 1, n, q);
    }
}

// Lanes in dtcast_dtype::DType order.
#define LANES(X) X(0, BoolLane) X(1, U8Lane) X(2, I8Lane) X(3, I16Lane) X(4, I32Lane) X(5, I64Lane) \
    X(6, U16Lane) X(7, U32Lane) X(8, U64Lane) X(9, F16Lane) X(10, BF16Lane) X(11, F32Lane) X(12, F64Lane) \
    X(13, C32Lane) X(14, C64Lane) X(15, C128Lane) X(16, BC32Lane) X(17, E4M3FnLane) X(18, E5M2Lane) \
    X(19, E4M3FnuzLane) X(20, E5M2FnuzLane) X(21, E8M0Lane)

static int size_of(int dt) {
#define SIZE_CASE(I, L) if (dt == I) return L::SIZE;
    LANES(SIZE_CASE)
    return -1;
}

template <class S>
static void run_to(int to, const std::vector<u8>& src, std::vector<u8>& dst, u64 n, bool sat, Quirks q) {
#define TO_CASE(I, L) if (to == I) { run<S, L>(src, dst, n, sat, q); return; }
    LANES(TO_CASE)
}

static void dispatch(int from, int to, const std::vector<u8>& src, std::vector<u8>& dst, u64 n, bool sat, int quirks) {
    Quirks q = {(quirks & 1) != 0, (quirks & 2) != 0, (quirks & 4) != 0, (quirks & 8) != 0};
#define FROM_CASE(I, L) if (from == I) { run_to<L>(to, src, dst, n, sat, q); return; }
    LANES(FROM_CASE)
}

int main() {
    std::vector<u8> src, dst;
    for (;;) {
        unsigned char head[8];
        if (fread(head, 1, 8, stdin) != 8) return 0;
        int from = head[0], to = head[1], quirks = head[3];
        bool sat = head[2] != 0;
        u64 n = (u64)head[4] | ((u64)head[5] << 8) | ((u64)head[6] << 16) | ((u64)head[7] << 24);
        int s = size_of(from), d = size_of(to);
        if (s < 0 || d < 0) return 2;
        src.assign(n * s, 0);
        if (n && fread(src.data(), 1, n * s, stdin) != n * s) return 3;
        dispatch(from, to, src, dst, n, sat, quirks);
        fwrite(dst.data(), 1, dst.size(), stdout);
    }
}
