// The long-text split (see text_split.h), the rule of two regexes (kazetts/validation/oracles/text_split.py):
//   sentence end: (?<=[.!?…。！？])["'”’)\]]*\s+  |  (?<=[。！？])  |  \n+
//   clause:       [,;:，；：、]\s*
#include "engine/text_split.h"

#include <cstdint>

#include "core/common_internal.h"

namespace kz {

namespace {

bool one_of(char32_t c, const char32_t *set) {
    for (; *set; ++set) {
        if (*set == c) return true;
    }
    return false;
}

const char32_t SENTENCE_PUNCT[] = U".!?\u2026\u3002\uff01\uff1f";
const char32_t CJK_SENTENCE_PUNCT[] = U"\u3002\uff01\uff1f";
const char32_t CLOSERS[] = U"\"'\u201d\u2019)]";
const char32_t CLAUSE_PUNCT[] = U",;:\uff0c\uff1b\uff1a\u3001";

// End of the whitespace run starting at i (i when there is none), not past `end`.
size_t skip_spaces(const std::u32string &s, size_t i, size_t end) {
    while (i < end && is_space(s[i])) ++i;
    return i;
}

std::vector<std::u32string> split_sentences(const std::u32string &s) {
    std::vector<std::u32string> pieces;
    size_t start = 0;
    for (size_t end : sentence_ends(s)) {
        if (end > start) {
            pieces.push_back(s.substr(start, end - start));
            start = end;
        }
    }
    if (start < s.size()) pieces.push_back(s.substr(start));
    return pieces;
}

// A sentence longer than max_chars cut at its last clause boundary, else its last space, else hard.
std::vector<std::u32string> cut(std::u32string sentence, size_t max_chars) {
    std::vector<std::u32string> pieces;
    while (sentence.size() > max_chars) {
        const size_t at = cut_point(sentence.substr(0, max_chars), 0);
        pieces.push_back(sentence.substr(0, at));
        sentence = sentence.substr(at);
    }
    if (!sentence.empty()) pieces.push_back(sentence);
    return pieces;
}

}  // namespace

// re.finditer over the sentence-end pattern: the end of every match, in order. An empty match
// (after CJK punctuation) may not repeat at its own position, where a non-empty one may follow.
std::vector<size_t> sentence_ends(const std::u32string &s) {
    std::vector<size_t> ends;
    size_t i = 0;
    bool empty_allowed = true;
    while (i <= s.size()) {
        const bool after_punct = i > 0 && one_of(s[i - 1], SENTENCE_PUNCT);
        if (after_punct) {
            size_t j = i;
            while (j < s.size() && one_of(s[j], CLOSERS)) ++j;
            size_t k = skip_spaces(s, j, s.size());
            if (k > j) {
                ends.push_back(k);
                i = k, empty_allowed = true;
                continue;
            }
        }
        if (empty_allowed && i > 0 && one_of(s[i - 1], CJK_SENTENCE_PUNCT)) {
            ends.push_back(i);
            empty_allowed = false;
            continue;
        }
        if (i < s.size() && s[i] == U'\n') {
            size_t k = i;
            while (k < s.size() && s[k] == U'\n') ++k;
            ends.push_back(k);
            i = k, empty_allowed = true;
            continue;
        }
        ++i, empty_allowed = true;
    }
    return ends;
}

size_t cut_point(const std::u32string &window, size_t earliest) {
    const size_t n = window.size();
    size_t clause = 0, space = 0;
    for (size_t i = 0; i < n;) {  // re.finditer over the clause pattern: the last match end inside
        if (one_of(window[i], CLAUSE_PUNCT)) {
            const size_t end = skip_spaces(window, i + 1, n);
            if (earliest < end && end < n) clause = end;
            i = end;
        } else {
            ++i;
        }
    }
    for (size_t i = 1; i < n; ++i) {
        if (is_space(window[i]) && i + 1 > earliest) space = i + 1;
    }
    return clause ? clause : space ? space : n;
}

bool is_space(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::u32string decode_utf8(const std::string &text) {
    std::u32string out;
    out.reserve(text.size());
    const auto *s = reinterpret_cast<const unsigned char *>(text.data());
    const size_t n = text.size();
    for (size_t i = 0; i < n;) {
        unsigned char b = s[i];
        int len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
        if (!len || i + size_t(len) > n) throw Error(KZ_ERR_INVALID_ARGUMENT, "text is not valid UTF-8");
        char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
        for (int k = 1; k < len; ++k) {
            if ((s[i + size_t(k)] & 0xC0) != 0x80) throw Error(KZ_ERR_INVALID_ARGUMENT, "text is not valid UTF-8");
            c = (c << 6) | (s[i + size_t(k)] & 0x3F);
        }
        const char32_t min_for_len[] = {0, 0, 0x80, 0x800, 0x10000};
        if (c < min_for_len[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
            throw Error(KZ_ERR_INVALID_ARGUMENT, "text is not valid UTF-8");
        }
        out.push_back(c);
        i += size_t(len);
    }
    return out;
}

std::string encode_utf8(const std::u32string &text) {
    std::string out;
    out.reserve(text.size());
    for (char32_t c : text) {
        if (c < 0x80) {
            out += char(c);
        } else if (c < 0x800) {
            out += char(0xC0 | (c >> 6));
            out += char(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            out += char(0xE0 | (c >> 12));
            out += char(0x80 | ((c >> 6) & 0x3F));
            out += char(0x80 | (c & 0x3F));
        } else {
            out += char(0xF0 | (c >> 18));
            out += char(0x80 | ((c >> 12) & 0x3F));
            out += char(0x80 | ((c >> 6) & 0x3F));
            out += char(0x80 | (c & 0x3F));
        }
    }
    return out;
}

std::vector<std::u32string> split_text(const std::u32string &text, size_t max_chars) {
    std::vector<std::u32string> pieces;
    for (const std::u32string &sentence : split_sentences(text)) {
        for (std::u32string &part : cut(sentence, max_chars)) {
            if (!pieces.empty() && pieces.back().size() + part.size() <= max_chars) {
                pieces.back() += part;
            } else {
                pieces.push_back(std::move(part));
            }
        }
    }
    return pieces;
}

}  // namespace kz
