// Internal: a GGUF file's tensors and keys as the stages load them (metadata parsed once, tensor
// data read one tensor at a time, converted to F32). Never part of the C ABI.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "ggml.h"
#include "gguf.h"

namespace kz {

class GgufSource {
public:
    // Opens and parses the file; throws kz::Error (KZ_ERR_IO, KZ_ERR_FORMAT).
    explicit GgufSource(const char *path);
    ~GgufSource();
    GgufSource(const GgufSource &) = delete;
    GgufSource &operator=(const GgufSource &) = delete;

    const std::string &path() const { return path_; }
    // The tensor's metadata (ne, type, name); null if absent and not required.
    ggml_tensor *src(const std::string &name, bool required = true) const;
    // The tensor's values as F32, in its stored layout.
    std::vector<float> read(const ggml_tensor *t) const;
    // A numeric key (integer, float or bool types), or `def` when absent.
    double num(const std::string &key, double def) const;
    // Required keys: a number, an int32 array, a string.
    double num(const std::string &key) const;
    std::vector<int> ints(const std::string &key) const;
    std::string str(const std::string &key) const;

private:
    int64_t key_id(const std::string &key) const;
    gguf_context *g_ = nullptr;
    ggml_context *meta_ = nullptr;
    FILE *f_ = nullptr;
    std::string path_;
};

// torch Conv1d weight [cout, cin, k] (ggml ne [k, cin, cout]) as the im2col matmul reads it:
// [cin*k, cout], row j*cin + c (tap-major).
std::vector<float> conv_taps(const std::vector<float> &w, int cout, int cin, int k);

}  // namespace kz
