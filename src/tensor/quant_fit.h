// The scale-fitting searches of ggml's reference quantizers (ggml-quants.c), shared by the
// block codecs of quant.cpp and quant_low_bit.cpp. Each follows ggml's float operations in
// ggml's order, so that the levels and scales chosen, and so the bytes written, match
// llama.cpp's.
#pragma once

#include <cstdint>

namespace th::quant_fit {

/// @brief Round half to even, as ggml's nearest_int; NaN gives 0 and |v| > 2^22 - 1 is clamped
/// (ggml asserts instead), so broken weights are never undefined behaviour.
int nearest_int(float v);

/// @brief ggml's make_qkx2_quants: x ~ scale * L - the_min, L in 0..nmax (n <= 32), weights w,
/// error squared or (use_mad) absolute. Returns scale.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float& the_min, float rmin,
                    float rdelta, int nstep, bool use_mad);

/// @brief ggml's make_qx_quants (rmse_type 1, no importance): x ~ scale * (L - nmax). Returns scale.
float fit_scale_symmetric(int n, int nmax, const float* x, int8_t* L);

/// @brief ggml's make_q3_quants with do_rmse: x ~ scale * (L - nmax), L in 0..2 nmax - 1, refined
/// one level at a time for at most 5 passes. Returns scale.
float fit_scale_q3(int n, int nmax, const float* x, int8_t* L);

}  // namespace th::quant_fit
