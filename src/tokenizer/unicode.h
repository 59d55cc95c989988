// UTF-8 and code-point helpers the tokenizers share. The decoding rules are
// llama.cpp's (src/unicode.cpp), not the strict Unicode ones, because token
// ids depend on them: an invalid byte becomes one U+FFFD and decoding goes on
// at the next byte, while overlong forms and surrogates decode as they stand.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace th::unicode {

/// @brief Byte length of the UTF-8 sequence that `lead` starts, from its high
/// nibble alone (continuation bytes count as 1), as llama.cpp's unicode_len_utf8.
inline size_t utf8_len(char lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[static_cast<uint8_t>(lead) >> 4];
}

/// @brief Code points of `text`, each invalid byte giving U+FFFD (llama.cpp's
/// unicode_cpts_from_utf8). Values above U+10FFFF, which llama.cpp cannot
/// encode again, also become U+FFFD.
std::vector<uint32_t> decode_utf8(std::string_view text);

/// @brief Appends the UTF-8 form of `cpt` (surrogates included; nothing is
/// checked beyond cpt <= 0x10FFFF, larger values give U+FFFD).
void append_utf8(std::string& out, uint32_t cpt);

/// @brief True for the code points with the White_Space property, which is
/// what llama.cpp's tables call whitespace.
bool is_whitespace(uint32_t cpt);

/// @brief GPT-2's bytes_to_unicode: the UTF-8 text of the code point that
/// byte-level BPE uses for byte `b`.
const std::string& byte_to_utf8(uint8_t b);

/// @brief The inverse of byte_to_utf8 for one code point; false when `cpt`
/// stands for no byte.
bool utf8_cpt_to_byte(uint32_t cpt, uint8_t* byte);

/// @brief Length of the longest prefix of `s` that is complete, valid UTF-8
/// (strict: no overlongs, surrogates or values past U+10FFFF).
size_t valid_utf8_prefix(std::string_view s);

/// @brief True when `s` is entirely valid UTF-8 (strict).
inline bool is_valid_utf8(std::string_view s) { return valid_utf8_prefix(s) == s.size(); }

/// @brief Moves what is complete in `pending` to the result: valid characters
/// as they are, each maximal ill-formed subsequence as one U+FFFD. A valid but
/// unfinished character at the end stays in `pending`, unless `final`, when it
/// too becomes U+FFFD.
std::string drain_utf8(std::string& pending, bool final);

}  // namespace th::unicode
