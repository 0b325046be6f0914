// The text-stream commit rule (see text_stream.h).
#include "engine/text_stream.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "engine/text_split.h"

namespace kz {

namespace {

struct Range {
    char32_t first, last;
};

const Range LETTERS[] = {
#include "engine/letters.inc"
};

bool ascii_digit(char32_t c) { return c >= U'0' && c <= U'9'; }

// A sentence end no later text can move: a character follows that no end would swallow
// (whitespace extends the end's run, a closing quote or bracket may still follow . ! ?).
bool settled(const std::u32string &text, size_t end) {
    if (end >= text.size()) return false;
    const char32_t c = text[end];
    return !is_space(c) && std::u32string(U"\"'\u201d\u2019)]").find(c) == std::u32string::npos;
}

}  // namespace

bool is_letter(char32_t c) {
    const Range *end = std::end(LETTERS);
    const Range *at =
        std::upper_bound(std::begin(LETTERS), end, c, [](char32_t v, const Range &r) { return v < r.first; });
    return at != std::begin(LETTERS) && c <= (at - 1)->last;
}

size_t final_boundary(const std::u32string &text, size_t limit) {
    if (text.size() < 2) return 0;
    for (size_t b = std::min(limit, text.size() - 1); b > 0; --b) {
        const char32_t before = text[b - 1], after = text[b];
        if (is_space(before)) continue;
        if (after == U' ' || after == U'\t' || ascii_digit(after) || ascii_digit(before) ||
            (is_letter(before) && !is_letter(after))) {
            return b;
        }
    }
    return 0;
}

size_t piece_end(const std::u32string &text, size_t piece_chars, size_t committed, bool ended) {
    for (size_t end : sentence_ends(text.substr(0, piece_chars))) {
        if (end >= std::max(piece_chars / 2, committed) && (ended || settled(text, end))) return end;
    }
    if (text.size() > piece_chars) return cut_point(text.substr(0, piece_chars), committed);
    return ended ? text.size() : std::u32string::npos;
}

}  // namespace kz
