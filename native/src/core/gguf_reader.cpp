// See gguf_reader.h.
#include "core/gguf_reader.h"

#include <cmath>
#include <cstdint>

namespace kz {

ggml_tensor *GgufReader::src(const std::string &name, bool required) const {
    ggml_tensor *t = ggml_get_tensor(file.meta(), name.c_str());
    if (!t && required) throw Error(KZ_ERR_FORMAT, "missing tensor " + name + " in " + path);
    return t;
}

std::vector<float> GgufReader::read(const ggml_tensor *t) const {
    need(can_dequantize(t->type),
         std::string("tensor ") + t->name + " has unsupported type " + ggml_type_name(t->type));
    const int64_t id = gguf_find_tensor(file.gguf(), t->name);
    std::vector<float> out(ggml_nelements(t));
    if (t->type == GGML_TYPE_F32) {  // read in place: no second copy of the largest tensors
        need(gguf_get_tensor_size(file.gguf(), id) == out.size() * sizeof(float),
             std::string("tensor ") + t->name + " has a wrong size");
        file.read_part(id, 0, out.size() * sizeof(float), out.data());
    } else {
        const std::vector<uint8_t> raw = file.read(id);
        ggml_get_type_traits(t->type)->to_float(raw.data(), out.data(), (int64_t)out.size());
    }
    return out;
}

double GgufReader::num(const std::string &key, double def) const {
    const double v = file.real(key, def);
    if (std::fabs(v) > (double)INT32_MAX) throw file.error("key " + key + " is out of range");
    return v;
}

std::vector<int> GgufReader::ints(const std::string &key, std::vector<int> def) const {
    gguf_context *g = file.gguf();
    int64_t id = gguf_find_key(g, key.c_str());
    if (id < 0) return def;
    if (gguf_get_kv_type(g, id) != GGUF_TYPE_ARRAY) throw file.error(key + " is not an array");
    const size_t n = gguf_get_arr_n(g, id);
    std::vector<int> out(n);
    switch (gguf_get_arr_type(g, id)) {
        case GGUF_TYPE_INT32:
            for (size_t i = 0; i < n; i++) out[i] = ((const int32_t *)gguf_get_arr_data(g, id))[i];
            break;
        case GGUF_TYPE_UINT32:
            for (size_t i = 0; i < n; i++) {
                const uint32_t v = ((const uint32_t *)gguf_get_arr_data(g, id))[i];
                if (v > (uint32_t)INT32_MAX) throw file.error(key + " holds a value out of range");
                out[i] = (int)v;
            }
            break;
        default: throw file.error(key + " is not an array of 32-bit integers");
    }
    return out;
}

int64_t GgufReader::required_key(const std::string &key) const {
    const int64_t id = gguf_find_key(file.gguf(), key.c_str());
    if (id < 0) throw file.error("missing key " + key);
    return id;
}

double GgufReader::num(const std::string &key) const {
    required_key(key);
    return num(key, 0.0);
}

std::vector<int> GgufReader::ints(const std::string &key) const {
    required_key(key);
    return ints(key, {});
}

std::string GgufReader::str(const std::string &key) const {
    const int64_t id = required_key(key);
    if (gguf_get_kv_type(file.gguf(), id) != GGUF_TYPE_STRING) throw file.error("key " + key + " is not a string");
    return gguf_get_val_str(file.gguf(), id);
}

std::vector<float> conv_taps(const std::vector<float> &w, int cout, int cin, int k) {
    std::vector<float> p(w.size());
    for (int o = 0; o < cout; o++)
        for (int ci = 0; ci < cin; ci++)
            for (int j = 0; j < k; j++)
                p[ci + (size_t)cin * (j + (size_t)k * o)] = w[j + (size_t)k * (ci + (size_t)cin * o)];
    return p;
}

}  // namespace kz
