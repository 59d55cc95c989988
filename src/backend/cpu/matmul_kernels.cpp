#include "backend/cpu/matmul_kernels.h"

#include <cpuid.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "backend/cpu/act_q8.h"

namespace th::cpu {

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Generic: return "generic";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "unknown";
}

namespace {

// CPU features from cpuid, and whether the OS saves the wide registers (xgetbv):
// a CPU with AVX-512 under an OS that does not enable it must not run it. Also the vendor
// and family (stream_prefetch()).
struct CpuFeatures {
  bool amd = false;
  unsigned family = 0;  // base family, plus the extended family when the base is 0xf
  bool avx2 = false, fma = false, f16c = false, bmi2 = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512vnni = false;
  bool avx512bf16 = false, avx512vbmi = false, gfni = false;
};

CpuFeatures detect_features() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d)) f.amd = b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163;  // "AuthenticAMD"
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  f.family = (a >> 8) & 0xf;
  if (f.family == 0xf) f.family += (a >> 20) & 0xff;
  const bool osxsave = c & (1u << 27);
  const bool avx = c & (1u << 28);
  f.fma = c & (1u << 12);
  f.f16c = c & (1u << 29);
  if (!osxsave || !avx) return f;
  unsigned xlo = 0, xhi = 0;
  __asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  const bool os_ymm = (xlo & 0x6) == 0x6;            // SSE and AVX state
  const bool os_zmm = (xlo & 0xe6) == 0xe6;          // plus opmask and ZMM state
  if (!os_ymm || __get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = b & (1u << 5);
  f.bmi2 = b & (1u << 8);
  if (os_zmm) {
    f.avx512f = b & (1u << 16);
    f.avx512dq = b & (1u << 17);
    f.avx512bw = b & (1u << 30);
    f.avx512vl = b & (1u << 31);
    f.avx512vnni = c & (1u << 11);
    f.avx512vbmi = c & (1u << 1);
    f.gfni = c & (1u << 8);
    if (a >= 1) {  // leaf 7 has subleaf 1
      unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
      __cpuid_count(7, 1, a1, b1, c1, d1);
      f.avx512bf16 = a1 & (1u << 5);
    }
  }
  return f;
}

}  // namespace

const std::vector<Isa>& available_isas() {
  static const std::vector<Isa> isas = [] {
    const CpuFeatures f = detect_features();
    std::vector<Isa> v = {Isa::Generic};
    const bool avx2 = f.avx2 && f.fma && f.f16c && f.bmi2;
    if (avx2) v.push_back(Isa::Avx2);
    if (avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni) v.push_back(Isa::Avx512);
    return v;
  }();
  return isas;
}

bool has_isa(Isa isa) {
  const std::vector<Isa>& v = available_isas();
  return std::find(v.begin(), v.end(), isa) != v.end();
}

bool has_avx512_bf16() {
  static const bool yes = [] {
    const std::vector<Isa>& isas = available_isas();
    return isas.back() == Isa::Avx512 && detect_features().avx512bf16;
  }();
  return yes;
}

bool has_avx512_vbmi() {
  static const bool yes = [] {
    const std::vector<Isa>& isas = available_isas();
    return isas.back() == Isa::Avx512 && detect_features().avx512vbmi;
  }();
  return yes;
}

bool has_avx512_gfni() {
  static const bool yes = [] {
    const std::vector<Isa>& isas = available_isas();
    const CpuFeatures f = detect_features();
    return isas.back() == Isa::Avx512 && f.gfni && f.avx512vbmi;
  }();
  return yes;
}

Isa best_isa() {
  const std::vector<Isa>& isas = available_isas();
  if (const char* env = std::getenv("TOKENHIVE_ISA"); env && *env) {
    for (Isa i : isas)
      if (isa_name(i) == env) return i;
  }
  return isas.back();
}

std::string_view stream_prefetch_name(StreamPrefetch p) { return p == StreamPrefetch::Nta ? "nta" : "l2"; }

StreamPrefetch default_stream_prefetch(bool amd, unsigned family) {
  return amd && family >= 0x1a ? StreamPrefetch::Nta : StreamPrefetch::L2;
}

StreamPrefetch parse_stream_prefetch(const char* value, StreamPrefetch fallback, std::string* error) {
  if (value == nullptr || *value == '\0') return fallback;
  for (StreamPrefetch p : {StreamPrefetch::L2, StreamPrefetch::Nta})
    if (stream_prefetch_name(p) == value) return p;
  if (error)
    *error = std::string("TOKENHIVE_STREAM_PREFETCH=") + value + ": not l2 or nta; using " +
             std::string(stream_prefetch_name(fallback));
  return fallback;
}

StreamPrefetch stream_prefetch() {
  static const StreamPrefetch p = [] {
    const CpuFeatures f = detect_features();
    std::string error;
    const StreamPrefetch chosen =
        parse_stream_prefetch(std::getenv("TOKENHIVE_STREAM_PREFETCH"), default_stream_prefetch(f.amd, f.family), &error);
    if (!error.empty()) std::fprintf(stderr, "tokenhive: %s\n", error.c_str());
    return chosen;
  }();
  return p;
}

extern const bool g_stream_prefetch_nta = stream_prefetch() == StreamPrefetch::Nta;

// Q8_K-activation families (matmul_q2_k*.cpp, ..., matmul_q6_k*.cpp, matmul_iq4_xs*.cpp).
MatmulKernel matmul_q2_k_generic();
MatmulKernel matmul_q2_k_avx2();
MatmulKernel matmul_q2_k_avx512();
MatmulKernel matmul_q3_k_generic();
MatmulKernel matmul_q3_k_avx2();
MatmulKernel matmul_q3_k_avx512();
MatmulKernel matmul_iq4_xs_generic();
MatmulKernel matmul_iq4_xs_avx2();
MatmulKernel matmul_iq4_xs_avx512();
MatmulKernel matmul_q4_k_generic();
MatmulKernel matmul_q4_k_avx2();
MatmulKernel matmul_q4_k_avx512();
MatmulKernel matmul_q5_k_generic();
MatmulKernel matmul_q5_k_avx2();
MatmulKernel matmul_q5_k_avx512();
MatmulKernel matmul_q6_k_generic();
MatmulKernel matmul_q6_k_avx2();
MatmulKernel matmul_q6_k_avx512();

namespace {
// Every kernel family's variants, registered here. Families live in files
// named for their weight type and ISA (matmul_q8_0.cpp, matmul_q8_0_avx2.cpp, ...).
const std::vector<MatmulKernel>& all_kernels() {
  static const std::vector<MatmulKernel> kernels = {
      // Q8_K-activation families (act_q8k.h).
      matmul_q4_k_generic(), matmul_q4_k_avx2(), matmul_q4_k_avx512(),
      matmul_q5_k_generic(), matmul_q5_k_avx2(), matmul_q5_k_avx512(),
      matmul_q6_k_generic(), matmul_q6_k_avx2(), matmul_q6_k_avx512(),
      matmul_q2_k_generic(), matmul_q2_k_avx2(), matmul_q2_k_avx512(),
      matmul_q3_k_generic(), matmul_q3_k_avx2(), matmul_q3_k_avx512(),
      matmul_iq4_xs_generic(), matmul_iq4_xs_avx2(), matmul_iq4_xs_avx512(),
      // Q8_0-activation and f32-activation families (act_q8.h).
      kMatmulQ8_0Generic, kMatmulQ8_0Avx2, kMatmulQ8_0Avx512,
      kMatmulQ4_0Generic, kMatmulQ4_0Avx2, kMatmulQ4_0Avx512,
      kMatmulIQ4_NLGeneric, kMatmulIQ4_NLAvx2, has_avx512_vbmi() ? kMatmulIQ4_NLAvx512Vbmi : kMatmulIQ4_NLAvx512,
      kMatmulF32Generic,  kMatmulF32Avx2,  kMatmulF32Avx512,
      kMatmulF16Generic,  kMatmulF16Avx2,  kMatmulF16Avx512,
      // AVX-512 BF16: bf16 activations and vdpbf16ps where the CPU has it.
      kMatmulBF16Generic, kMatmulBF16Avx2, has_avx512_bf16() ? kMatmulBF16Avx512Dot : kMatmulBF16Avx512,
      // AVX-512 FP8: decoded to bf16 by vpermi2b and multiplied by vdpbf16ps where the CPU can.
      kMatmulFp8Generic,  kMatmulFp8Avx2,  has_avx512_bf16() && has_avx512_vbmi() ? kMatmulFp8Avx512Dot : kMatmulFp8Avx512,
  };
  return kernels;
}
}  // namespace

const MatmulKernel* find_matmul_kernel(DType weight, Isa isa) {
  for (const MatmulKernel& k : all_kernels())
    if (k.weight == weight && k.isa == isa) return &k;
  return nullptr;
}

}  // namespace th::cpu
