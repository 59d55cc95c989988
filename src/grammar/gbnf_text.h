// Writing GBNF: what the compilers (JSON schema, regex, choice) emit, quoted so
// that any bytes survive the trip through parse_gbnf unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace th::grammar {

/// @brief A GBNF literal matching exactly `bytes` (UTF-8 text; other bytes as \xHH would
/// be read back as code points, so the compilers only pass UTF-8).
std::string gbnf_literal(std::string_view bytes);

/// @brief A GBNF character class matching the code points in the closed ranges.
std::string gbnf_class(const std::vector<std::pair<uint32_t, uint32_t>>& ranges);

}  // namespace th::grammar
