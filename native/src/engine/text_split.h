// Long text -> pieces one generation can say: the rule of kazetts/engine/text_split.py, in
// code points, with Python's str.isspace(). Pinned to the Python implementation by
// tests/test_native_engine.py.
#pragma once

#include <string>
#include <vector>

namespace kz {

// UTF-8 -> code points; throws kz::Error (KZ_ERR_INVALID_ARGUMENT) on invalid UTF-8.
std::u32string decode_utf8(const std::string &text);
std::string encode_utf8(const std::u32string &text);

// Python's str.isspace() for one code point.
bool is_space(char32_t c);

// Whole sentences packed into pieces of at most max_chars code points, in order; joined they
// give back the text.
std::vector<std::u32string> split_text(const std::u32string &text, size_t max_chars);

}  // namespace kz
