// Unicode Normalization Form C (UAX #15): canonical decomposition, canonical ordering and
// canonical composition (Hangul syllables by their algorithm), on the tables that
// scripts/gen_unicode_nfc.py generates from the Unicode Character Database (its version is
// named in unicode_nfc_tables.cpp). tokenizer.json's "NFC" normalizer (Qwen 2/3) is this.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace th::unicode {

/// @brief Canonical combining class of `cp` (0 for starters and unassigned code points).
uint8_t combining_class(uint32_t cp);

/// @brief True when `text` is NFC by the quick check alone: no code point in it is
/// NFC_QC=No/Maybe or combining. Most text (all ASCII, most Latin-1 and CJK) passes, and
/// to_nfc then returns it unchanged without decomposing it. A lead byte of U+0300 or above
/// without its continuation bytes fails it (to_nfc then keeps the bytes as they are).
bool nfc_quick_yes(std::string_view text);

/// @brief The NFC form of `text`. Each byte that is not part of valid UTF-8 stays as it is
/// and ends the stretch of text that composes (normalization is defined on code points only).
std::string to_nfc(std::string_view text);

}  // namespace th::unicode
