// The Unicode data NFC needs (tokenizer/unicode_nfc.cpp), as scripts/gen_unicode_nfc.py writes
// it into unicode_nfc_tables.cpp: sorted by code point, searched by binary search.
#pragma once

#include <cstddef>
#include <cstdint>

namespace th::unicode::nfc_tables {

/// Code points first..last have canonical combining class `ccc` (every one not listed: 0).
struct CccRun {
  uint32_t first, last;
  uint8_t ccc;
};

/// `cp`'s canonical mapping (one level: the parts may map further): `first`, then `second`
/// unless it is 0 (a singleton). kNotComposed in `second` marks a pair that composition must
/// not rebuild (Full_Composition_Exclusion); the other pairs are the primary composites.
struct Mapping {
  uint32_t cp, first, second;
};
inline constexpr uint32_t kNotComposed = 0x80000000u;

/// Code points first..last whose NFC_QC is No or Maybe.
struct Run {
  uint32_t first, last;
};

/// Bit p % 64 of word p / 64: page p (code points 256p..256p+255) holds a code point with a
/// non-zero combining class or NFC_QC No/Maybe. A clear bit answers both look-ups at once.
extern const uint64_t kNoisyPages[0x110000 / 256 / 64];

extern const CccRun kCcc[];
extern const size_t kCccSize;
extern const Mapping kMappings[];
extern const size_t kMappingsSize;
extern const Run kNfcQcNotYes[];
extern const size_t kNfcQcNotYesSize;

}  // namespace th::unicode::nfc_tables
