// FP8 E4M3 (OCP 8-bit floating point, "E4M3FN": the format of Hopper's fp8 tensor cores
// and of __nv_fp8_e4m3) on the host: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no
// infinities; S.1111.111 is NaN; the largest finite magnitude is 448 (S.1111.110); the
// smallest subnormal 2^-9.
//
// Encoding rounds to nearest, ties to even, and saturates: a finite magnitude above 448
// and +-inf give +-448 (as __nv_cvt_float_to_fp8 with __NV_SATFINITE). NaN gives 0x7f
// (0xff for a negative NaN).
//
// Rows carry one f32 scale each: a row x is stored as codes c and scale s with
// x[i] ~ decode(c[i]) * s, s = max|x| / 448 over the row's finite values (1 when that is 0),
// so the row's largest magnitude uses the format's whole range.
#pragma once

#include <cstdint>

namespace th {

/// The value of an e4m3 code (exact in f32).
float fp8_e4m3_to_f32(uint8_t code);

/// The nearest e4m3 code (ties to even), saturating at +-448; NaN -> 0x7f | sign.
uint8_t f32_to_fp8_e4m3(float x);

/// Encodes n values with one scale (returned): codes[i] = f32_to_fp8_e4m3(x[i] / scale).
/// scale = max |x[i]| over finite x[i], divided by 448; 1 when that maximum is 0 or there
/// is no finite value. NaN stays NaN; +-inf saturates to +-448 (times the scale).
float quantize_row_fp8_e4m3(const float* x, uint8_t* codes, int64_t n);

/// out[i] = fp8_e4m3_to_f32(codes[i]) * scale.
void dequantize_row_fp8_e4m3(const uint8_t* codes, float scale, float* out, int64_t n);

// DType::FP8_E4M3, the weight format of the fp8 compute type: blocks of 32 values, each
// one byte of scale exponent e followed by 32 codes (33 bytes, 8.25 bits a weight: 1.94x
// fewer bytes than bf16), value i = fp8_e4m3_to_f32(code[i]) * 2^(e - 127), as OCP's
// MX formats (E8M0 scale) but with the scale rounded up rather than down: the block's
// largest finite magnitude maps into (224, 448], so nothing saturates (MX's
// floor(log2(amax)) - 8 would clip up to 12% off the largest value) and every value keeps
// e4m3's 2^-4 relative rounding, subnormals aside (below amax * 2^-14). A power-of-two
// scale makes decoding exact and cheap: a code plus 8 bits of exponent. e is clamped to
// [1, 246] (scales 2^-126 .. 2^119: every finite f32 amax fits but the last 2^-0.2 of
// the range, which saturates), so 2^(e - 119) is a normal f32 for the kernels' decoding.
constexpr int kFp8BlockElements = 32;
constexpr int kFp8BlockBytes = 33;
constexpr int kFp8MinScaleExp = 1, kFp8MaxScaleExp = 246;

/// One block: 32 values -> its 33 bytes at dst (NaN -> NaN codes, +-inf saturate).
void quantize_block_fp8_e4m3(const float* x, uint8_t* dst);
/// One block's 33 bytes -> 32 values.
void dequantize_block_fp8_e4m3(const uint8_t* src, float* out);

}  // namespace th
