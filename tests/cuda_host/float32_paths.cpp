// The float32 fast paths of kernels.cu (encode_f32, decode_f32) against the double-precision rules
// they replace (encode, decode), on the host. Prints the first difference per format and exits 1,
// or exits 0. With the argument `all`, every one of the 2^32 float32 patterns; otherwise every
// pattern of the top 16 bits combined with low halves chosen at each format's rounding points
// (ties, one either side, all ones) and a stride through the rest.
#include "kernels.cu"

#include <cstdio>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
    bool all = argc > 1 && strcmp(argv[1], "all") == 0;
    // Every narrow format the kernels encode to (formats.cuh), torch's NaN bytes included.
    std::vector<Narrow> formats;
#define FORMAT(F) formats.push_back(F());
    DTCAST_FORMATS(FORMAT)
    std::vector<u32> lows = {0, 1, 2, 0xFFFF, 0x7FFF, 0x8000, 0x8001, 0x5555, 0xAAAA};
    for (u32 shift : {13u, 16u, 20u, 21u}) {
        u32 tie = 1u << (shift - 1);
        for (u32 hi = 0; hi < 2; ++hi) {
            u32 base = (hi << shift) & 0xFFFF;
            for (u32 v : {tie - 1, tie, tie + 1, (1u << shift) - 1}) lows.push_back((base | v) & 0xFFFF);
        }
    }
    int failures = 0;
    for (const Narrow& f : formats) {
        for (int overflow = 0; overflow < 3; ++overflow) {
            u64 checked = 0;
            auto check = [&](u32 bits) -> bool {
                float x = u2f(bits);
                if (isnan_f(x)) return true;
                ++checked;
                u32 want = encode(f, (double)x, overflow, overflow);
                u32 got = encode_f32(f, x, overflow, overflow);
                if (want != got) {
                    printf("encode e%um%u overflow %d: %08x -> f32 path %x, double path %x\n", f.exp_bits,
                           f.man_bits, overflow, bits, got, want);
                    return false;
                }
                return true;
            };
            bool ok = true;
            if (all) {
                for (u64 b = 0; b < (1ull << 32) && ok; ++b) ok = check((u32)b);
            } else {
                for (u32 hi = 0; hi < 0x10000 && ok; ++hi)
                    for (u32 lo : lows) ok = ok && check((hi << 16) | lo);
                for (u64 b = 0; b < (1ull << 32) && ok; b += 4093) ok = check((u32)b);
            }
            if (!ok) ++failures;
            if (all) printf("encode e%um%u overflow %d: %llu values\n", f.exp_bits, f.man_bits, overflow,
                            (unsigned long long)checked);
        }
        for (u32 code = 0; code < (2u << (f.exp_bits + f.man_bits)); ++code) {
            if (is_nan_code(f, code)) continue;
            float want = (float)decode(f, code), got = decode_f32(f, code);
            if (f2u(want) != f2u(got)) {
                printf("decode e%um%u: %x -> f32 path %08x, double path %08x\n", f.exp_bits, f.man_bits, code,
                       f2u(got), f2u(want));
                ++failures;
                break;
            }
        }
    }
    return failures ? 1 : 0;
}
