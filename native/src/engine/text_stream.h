// Text that arrives in pieces (an LLM's deltas): which prefix of the text received so far is
// final, the one definition of the commit rule (both engines: the native stream in tts.cpp,
// kazetts/engine/text_stream.py through kz_text_final_boundary / kz_text_piece_end in rules.h).
//
// Tokens are committed only up to a final boundary b: Qwen2's pre-tokenizer (llama.cpp's QWEN2
// regex) splits text into words and BPE never merges across them, so a split at b is final when
// the word holding text[b-1] cannot reach past b whatever follows: text[b-1] is not whitespace,
// and text[b] is a space or tab, or text[b-1] is a letter and text[b] is not, or either is an
// ASCII digit. A piece ends at a sentence end no later text can move (a character follows that
// no end would swallow) at or after piece_chars / 2, or at its cut point once it outgrows
// piece_chars, or at the text's end once the text has ended.
#pragma once

#include <cstddef>
#include <string>

namespace kz {

// Python's str.isalpha() for one code point (\p{L}).
bool is_letter(char32_t c);

// The last final boundary b (0 < b < text.size(), b <= limit), or 0 if there is none.
size_t final_boundary(const std::u32string &text, size_t limit);

// Where the current piece (text: its code points and what arrived after them) ends, once no
// later text can change it; `committed` code points already have tokens fed, `ended`: no more
// text comes. std::u32string::npos while the piece may still grow.
size_t piece_end(const std::u32string &text, size_t piece_chars, size_t committed, bool ended);

}  // namespace kz
