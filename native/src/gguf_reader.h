// A GGUF file opened for a stage that stages its weights in F32: the tensor table (shapes and
// types, no data), one tensor's values converted to F32 on request, and numeric keys.
// Internal (not part of the C ABI); throws kz::Error.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "ggml.h"
#include "gguf.h"

namespace kz {

class GgufReader {
public:
    explicit GgufReader(const char *path);  // KZ_ERR_IO if it cannot be opened, KZ_ERR_FORMAT if not a GGUF
    ~GgufReader();
    GgufReader(const GgufReader &) = delete;
    GgufReader &operator=(const GgufReader &) = delete;

    // The tensor's metadata (shape, type; no data); nullptr when absent and not required.
    ggml_tensor *src(const std::string &name, bool required = true) const;
    // Its values in F32 (F32 copied, other types through ggml's to_float).
    std::vector<float> read(const ggml_tensor *t) const;
    // A numeric key's value (any integer or float type), or def when absent.
    double num(const std::string &key, double def) const;
    // An integer array key's values, or def when absent.
    std::vector<int> ints(const std::string &key, std::vector<int> def) const;

    const std::string path;

private:
    gguf_context *g_ = nullptr;
    ggml_context *meta_ = nullptr;
    FILE *f_ = nullptr;
};

}  // namespace kz
