// ggml's fitting searches (quant_fit.h). Plain IEEE operations in ggml's order: no fused
// multiply-add (see quant.cpp).
#include "tensor/quant_fit.h"

#include <algorithm>
#include <cmath>

#include "tensor/quant_blocks.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

namespace th::quant_fit {

// Round half to even, as ggml's nearest_int (which adds 1.5 * 2^23), so blocks match
// llama.cpp's. ggml asserts |v| < 2^22; here NaN and huge values (broken weights) are
// clamped instead, because converting them to int would be undefined behaviour.
int nearest_int(float v) {
  constexpr float kMax = 4194303.0f;
  if (!(std::fabs(v) <= kMax)) v = std::isnan(v) ? 0.0f : std::copysign(kMax, v);
  return static_cast<int>(std::nearbyint(v));
}


// ggml's make_qkx2_quants: fits x ~ scale * L - the_min with L in 0..nmax and
// the_min >= 0, trying nstep + 1 candidate scales (nmax + rmin + rdelta * i) / (max - min) and
// keeping the one whose weighted least-squares scale and offset give the smallest weighted
// error (squared, or absolute with use_mad). Returns scale; L receives the levels.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float& the_min, float rmin,
                    float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;  // the offset only ever lowers the grid: x = scale * L - the_min
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    the_min = -min;
    return 0.0f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax));
    const float diff = scale * L[i] + min - x[i];
    best_error += w[i] * (use_mad ? std::fabs(diff) : diff * diff);
  }
  uint8_t Laux[kQK];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        const float diff = this_scale * Laux[i] + this_min - x[i];
        cur_error += w[i] * (use_mad ? std::fabs(diff) : diff * diff);
      }
      if (cur_error < best_error) {
        std::copy(Laux, Laux + n, L);
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  the_min = -min;
  return scale;
}

// ggml's make_qx_quants with rmse_type 1 and no importance weights: fits x ~ scale * l with
// l in -nmax..nmax-1, weighting each element by x^2, over 19 candidate scales
// -(nmax + 0.1 i) / max. Returns scale (signed: the largest |x| maps to -nmax); L gets l + nmax.
float fit_scale_symmetric(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < 1e-15f) {  // ggml's GROUP_MAX_EPS: treat as all zero
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  auto level = [&](float iscale, int i) { return std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1); };
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = level(iscale, i);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = level(iscale, i);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    // sumlx^2 / suml2 is the error reduction of the best scale for these levels.
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(level(iscale, i) + nmax);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

float fit_scale_q3(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < 1e-15f) {  // ggml's GROUP_MAX_EPS: all zero
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  const float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  // Move single levels while that raises sumlx^2 / suml2 (the error reduction of the best
  // scale), at most 5 passes, as ggml does.
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (slx > 0) {
        float sl2 = suml2 - w * L[i] * L[i];
        const int new_l = std::clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          slx += w * x[i] * new_l;
          sl2 += w * new_l * new_l;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

}  // namespace th::quant_fit
