// Runs dtcast's scaled-format kernels (device/src/cuda/scaled.cu) on the host, so that the test
// suite can compare them byte for byte with dtcast-quant's CPU results without a GPU. Each job's
// elements go through the same per-element functions the GPU threads call; the amax job splits
// its elements into the GPU's runs and takes them in reverse order (the maxima commute).
//
// Protocol on stdin, repeated until EOF (integers little-endian; `bytes` = u64 length, then data):
//   op u8: 0 dequantize, 1 gpt-oss, 2 amax, 3 encode
//   0/1: element bits u8, output dtype index u8, quirks u8 (the float32 -> output cast's, as
//        harness.cpp), by_byte u8, kind u32, a u64, b u64, rows u64, cols u64, per_expert u64,
//        values bytes, factors bytes, scales bytes, elements bytes  -> rows*cols outputs
//   2:   input dtype index u8, default_nan u8, kind u32, a u64, b u64, rows u64, cols u64,
//        scale count u64, input bytes  -> scale count float32 amaxes
//   3:   input dtype index u8, element dtype index u8, quirks u8 (float32 -> element),
//        divide u8, arithmetic u8 (DTCAST_ARITH_*), canonical_nan u8, ct_float4 u8, limit f32,
//        kind u32, a u64, b u64, rows u64, cols u64, factors bytes, input bytes  -> the
//        elements' bytes
// (dtype indices: DType::ALL's, as DTCAST_LANES numbers them; the inputs are float32, bfloat16
// and float16.)
#include "kernels.cu"
#include "scaled.cu"

#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <vector>

static bool read_exact(void* p, size_t n) { return n == 0 || fread(p, 1, n, stdin) == n; }
template <class T> static T get() {
    T v;
    if (!read_exact(&v, sizeof v)) exit(3);
    return v;
}
static std::vector<u8> get_bytes() {
    u64 n = get<u64>();
    std::vector<u8> v(n);
    if (!read_exact(v.data(), n)) exit(3);
    return v;
}
static Quirks quirks_of(int bits) {
    Quirks q = {(bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0, (bits & 8) != 0, (bits & 16) != 0};
    return q;
}
static void put(const std::vector<u8>& v) { fwrite(v.data(), 1, v.size(), stdout); }

template <int EBITS, class O>
static void dequant(bool gpt, const std::vector<u8>& el, const float* values, const float* factors,
                    const std::vector<u8>& scales, bool by_byte, ScaleMap m, u64 rows, u64 per_expert, Quirks q) {
    std::vector<u8> out(rows * m.cols * O::SIZE);
    for (u64 i = 0; i < rows * m.cols; ++i) {
        if (gpt) gpt_oss_element<EBITS, O>(el.data(), values, scales.data(), m, per_expert, q, i, out.data());
        else dequant_element<EBITS, O>(el.data(), values, factors, scales.data(), by_byte, m, q, i, out.data());
    }
    put(out);
}
template <int EBITS>
static void dequant_to(int out, bool gpt, const std::vector<u8>& el, const float* values, const float* factors,
                       const std::vector<u8>& scales, bool by_byte, ScaleMap m, u64 rows, u64 per_expert, Quirks q) {
#define OUT_CASE(I, L) if (out == I) { dequant<EBITS, L>(gpt, el, values, factors, scales, by_byte, m, rows, per_expert, q); return; }
    DTCAST_LANES(OUT_CASE)
    exit(2);
}

template <class In>
static void amax(const std::vector<u8>& src, ScaleMap m, u64 rows, u64 count, bool canonical) {
    std::vector<u32> magnitude(count, 0);
    std::vector<u64> nan_key(count, 0);
    const u64 run = 16, n = rows * m.cols;
    for (u64 t = (n + run - 1) / run; t-- > 0;) {
        u64 end = (t + 1) * run < n ? (t + 1) * run : n;
        amax_elements<In>(src.data(), m, t * run, end, magnitude.data(), nan_key.data());
    }
    std::vector<float> amax(count);
    for (u64 s = 0; s < count; ++s) amax[s] = amax_value<In>(src.data(), magnitude[s], nan_key[s], canonical);
    fwrite(amax.data(), 4, count, stdout);
}

template <class In, class E>
static void encode(const std::vector<u8>& src, const float* factors, ScaleMap m, u64 rows, EncodeRules r, Quirks q) {
    std::vector<u8> out(rows * m.cols * E::BITS / 8);
    for (u64 j = 0; j < out.size(); ++j) encode_byte<In, E>(src.data(), factors, m, r, q, j, out.data());
    put(out);
}
template <class In>
static void encode_to(int element, const std::vector<u8>& src, const float* factors, ScaleMap m, u64 rows,
                      EncodeRules r, Quirks q) {
#define ELEMENT_CASE(I, L) if (element == I) { encode<In, L>(src, factors, m, rows, r, q); return; }
    DTCAST_LANES(ELEMENT_CASE)
    exit(2);
}

// The dtype index of the lane L.
template <class L> static int index_of() {
    int index = -1;
#define INDEX_CASE(I, M) if (std::is_same<L, M>::value) index = I;
    DTCAST_LANES(INDEX_CASE)
    return index;
}
// Calls `run` with the input lane whose dtype index is `input` (float32, bfloat16, float16).
template <class Run> static void with_input(int input, Run run) {
    if (input == index_of<Lane_float32>()) run(Lane_float32());
    else if (input == index_of<Lane_bfloat16>()) run(Lane_bfloat16());
    else if (input == index_of<Lane_float16>()) run(Lane_float16());
    else exit(2);
}

int main() {
    for (;;) {
        u8 op;
        if (fread(&op, 1, 1, stdin) != 1) return 0;
        if (op <= 1) {
            u8 ebits = get<u8>(), out = get<u8>(), quirks = get<u8>(), by_byte = get<u8>();
            u32 kind = get<u32>();
            u64 a = get<u64>(), b = get<u64>(), rows = get<u64>(), cols = get<u64>(), per_expert = get<u64>();
            std::vector<u8> values = get_bytes(), factors = get_bytes(), scales = get_bytes(), el = get_bytes();
            ScaleMap m = scale_map(kind, a, b, cols);
            const float* v = (const float*)values.data();
            const float* f = (const float*)factors.data();
            if (ebits == 4) dequant_to<4>(out, op == 1, el, v, f, scales, by_byte != 0, m, rows, per_expert, quirks_of(quirks));
            else dequant_to<8>(out, op == 1, el, v, f, scales, by_byte != 0, m, rows, per_expert, quirks_of(quirks));
        } else if (op == 2) {
            u8 input = get<u8>(), default_nan = get<u8>();
            u32 kind = get<u32>();
            u64 a = get<u64>(), b = get<u64>(), rows = get<u64>(), cols = get<u64>(), count = get<u64>();
            std::vector<u8> src = get_bytes();
            ScaleMap m = scale_map(kind, a, b, cols);
            with_input(input, [&](auto lane) { amax<decltype(lane)>(src, m, rows, count, default_nan != 0); });
        } else if (op == 3) {
            u8 input = get<u8>(), element = get<u8>(), quirks = get<u8>();
            EncodeRules r;
            r.divide = get<u8>() != 0;
            r.arithmetic = get<u8>();
            r.canonical_nan = get<u8>() != 0;
            r.ct_float4 = get<u8>() != 0;
            r.limit = get<float>();
            u32 kind = get<u32>();
            u64 a = get<u64>(), b = get<u64>(), rows = get<u64>(), cols = get<u64>();
            std::vector<u8> factors = get_bytes(), src = get_bytes();
            ScaleMap m = scale_map(kind, a, b, cols);
            const float* f = (const float*)factors.data();
            with_input(input, [&](auto lane) { encode_to<decltype(lane)>(element, src, f, m, rows, r, quirks_of(quirks)); });
        } else {
            return 2;
        }
        fflush(stdout);
    }
}
