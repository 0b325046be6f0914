// Long text -> pieces one generation can say, in code points, with Python's str.isspace():
// the one definition of the rule (both engines; exported by rules.cpp). Pinned to the regex
// statement of it in kazetts/validation/oracles/text_split.py by tests/test_text_split.py.
#pragma once

#include <string>
#include <vector>

namespace kz {

// UTF-8 -> code points; throws kz::Error (KZ_ERR_INVALID_ARGUMENT) on invalid UTF-8.
std::u32string decode_utf8(const std::string &text);
std::string encode_utf8(const std::u32string &text);

// Python's str.isspace() for one code point.
bool is_space(char32_t c);

// Positions just after each sentence end (after its trailing whitespace), in order.
std::vector<size_t> sentence_ends(const std::u32string &text);

// Where to cut a sentence too long for `window` (its first max_chars code points): after its
// last clause boundary, else after its last space, else at the window's end; never at or
// before `earliest`.
size_t cut_point(const std::u32string &window, size_t earliest);

// Whole sentences packed into pieces of at most max_chars code points, in order; joined they
// give back the text.
std::vector<std::u32string> split_text(const std::u32string &text, size_t max_chars);

}  // namespace kz
