// ggml's quantized block layouts, byte for byte: a GGUF tensor row of a block
// type is an array of these structs, so their sizes and field order are the
// file format. fp16 fields hold raw IEEE half bits (see half.h).
#pragma once

#include <bit>
#include <cstdint>

namespace th {

// GGUF stores blocks little-endian and tokenhive reads them in place.
static_assert(std::endian::native == std::endian::little, "tokenhive assumes a little-endian host");

inline constexpr int kQK = 32;           // elements per block of q4_0, q4_1, q5_0, q5_1, q8_0
inline constexpr int kQKK = 256;         // elements per super-block of the K-quants
inline constexpr int kKScaleBytes = 12;  // eight 6-bit scales and eight 6-bit mins

// x = qs[i] * d
struct BlockQ8_0 {
  static constexpr int kElements = kQK;
  uint16_t d;
  int8_t qs[kQK];
};

// x = (q - 8) * d; qs[i] holds element i in its low nibble and i + 16 in its high one.
struct BlockQ4_0 {
  static constexpr int kElements = kQK;
  uint16_t d;
  uint8_t qs[kQK / 2];
};

// x = q * d + m, nibbles as in q4_0.
struct BlockQ4_1 {
  static constexpr int kElements = kQK;
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};

// x = (q - 16) * d; low 4 bits as in q4_0, bit 4 of element i is bit i of qh (little-endian).
struct BlockQ5_0 {
  static constexpr int kElements = kQK;
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};

// x = q * d + m, bits as in q5_0.
struct BlockQ5_1 {
  static constexpr int kElements = kQK;
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};

// Eight sub-blocks of 32: x = d * sc[j] * q - dmin * m[j], q in 0..15, with sc/m 6-bit
// (packing in quant.cpp, scale_min_k4). qs holds four 64-element chunks of 32 bytes:
// sub-block 2c in the low nibbles of chunk c, sub-block 2c+1 in the high ones.
struct BlockQ4_K {
  static constexpr int kElements = kQKK;
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQKK / 2];
};

// As q4_K with q in 0..31; bit 4 of element 32j + l is bit j of qh[l].
struct BlockQ5_K {
  static constexpr int kElements = kQKK;
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQKK / 8];
  uint8_t qs[kQKK / 2];
};

// Sixteen sub-blocks of 16: x = d * scales[e / 16] * (q - 32), q in 0..63, low 4 bits in
// ql, high 2 bits in qh (element layout in quant.cpp, q6_k_location).
struct BlockQ6_K {
  static constexpr int kElements = kQKK;
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  uint16_t d;
};

// Sixteen sub-blocks of 16: x = d * (sc[g] & 0xF) * q - dmin * (sc[g] >> 4), q in 0..3. qs holds
// two 128-element halves of 32 bytes: element 128h + 32j + l has its 2 bits at bit 2j of
// qs[32h + l] (element layout in quant_low_bit.cpp, q2_location).
struct BlockQ2_K {
  static constexpr int kElements = kQKK;
  uint8_t scales[kQKK / 16];
  uint8_t qs[kQKK / 4];
  uint16_t d;
  uint16_t dmin;
};

// Sixteen sub-blocks of 16: x = d * (s[g] - 32) * (q - 4), q in 0..7, s 6-bit (packing in
// quant_low_bit.cpp, q3_scale). The low 2 bits of q sit as in q2_K; bit 2 of element e is
// bit e / 32 of hmask[e % 32].
struct BlockQ3_K {
  static constexpr int kElements = kQKK;
  uint8_t hmask[kQKK / 8];
  uint8_t qs[kQKK / 4];
  uint8_t scales[12];
  uint16_t d;
};

// x = d * kIq4Values[q], q a nibble laid out as in q4_0; the 16 levels are ggml's
// kvalues_iq4nl, a non-linear grid denser near 0.
struct BlockIQ4_NL {
  static constexpr int kElements = kQK;
  uint16_t d;
  uint8_t qs[kQK / 2];
};

// Eight sub-blocks of 32: x = d * (ls[j] - 32) * kIq4Values[q], ls 6-bit: low 4 bits in
// nibble j % 2 of scales_l[j / 2], high 2 bits at bit 2j of scales_h. Sub-block j's nibbles
// are qs[16j .. 16j + 15], laid out as in q4_0.
struct BlockIQ4_XS {
  static constexpr int kElements = kQKK;
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQKK / 64];
  uint8_t qs[kQKK / 2];
};

// ggml's kvalues_iq4nl: the levels of iq4_nl and iq4_xs, ascending.
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};

// Activations for the K-quant dot products (never stored in files): x = qs[i] * d, with
// bsums[g] the sum of qs[16g .. 16g+15], so a kernel can fold a per-sub-block offset
// (q4_K/q5_K mins, q6_K's -32) into one multiply per 16 elements.
struct BlockQ8_K {
  static constexpr int kElements = kQKK;
  float d;
  int8_t qs[kQKK];
  int16_t bsums[kQKK / 16];
};

// ggml's sizeof(block_*): any padding here would shift every block after the first.
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136);

}  // namespace th
