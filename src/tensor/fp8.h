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

}  // namespace th
