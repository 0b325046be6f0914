// A GGUF file opened for a stage that stages its weights in F32: the tensor table (shapes and
// types, no data; every tensor checked by kz::GgufFile to lie inside the file with sizes that
// fit), one tensor's values converted to F32 on request, and checked numeric keys.
// Internal (not part of the C ABI); throws kz::Error naming the file.
#pragma once

#include <string>
#include <vector>

#include "core/common_internal.h"
#include "ggml.h"
#include "gguf.h"

namespace kz {

class GgufReader {
  public:
    explicit GgufReader(const char *path_) : file(path_, true), path(path_) {}

    // The tensor's metadata (shape, type; no data); nullptr when absent and not required.
    ggml_tensor *src(const std::string &name, bool required = true) const;
    // Its values in F32 (F32 copied, other types through ggml's to_float; KZ_ERR_FORMAT for a
    // type ggml cannot convert).
    std::vector<float> read(const ggml_tensor *t) const;
    // A numeric key's value, finite and within the int range (stages cast several to int), or
    // def when absent.
    double num(const std::string &key, double def) const;
    // An integer array key's values, or def when absent.
    std::vector<int> ints(const std::string &key, std::vector<int> def) const;
    // Required keys (KZ_ERR_FORMAT when absent): a number, an integer array, a string.
    double num(const std::string &key) const;
    std::vector<int> ints(const std::string &key) const;
    std::string str(const std::string &key) const;
    // A format error naming the file unless `ok`.
    void need(bool ok, const std::string &what) const {
        if (!ok) throw file.error(what);
    }

    const GgufFile file;
    const std::string path;

  private:
    int64_t required_key(const std::string &key) const;
};

// torch Conv1d weight [cout, cin, k] (ggml ne [k, cin, cout]) as the im2col matmul reads it:
// [cin*k, cout], row j*cin + c (tap-major).
std::vector<float> conv_taps(const std::vector<float> &w, int cout, int cin, int k);

}  // namespace kz
