// See gguf_source.h.
#include "gguf_source.h"

#include "common_internal.h"

#include <cstring>
#include <limits>

namespace kz {

GgufSource::GgufSource(const char *path) : path_(path) {
    f_ = std::fopen(path, "rb");
    if (!f_) throw Error(KZ_ERR_IO, std::string("cannot open ") + path);
    char magic[4] = {0, 0, 0, 0};
    if (std::fread(magic, 1, 4, f_) != 4 || std::memcmp(magic, "GGUF", 4) != 0) {
        std::fclose(f_);
        throw Error(KZ_ERR_FORMAT, std::string("not a GGUF file: ") + path);
    }
    gguf_init_params gp = {true, &meta_};
    g_ = gguf_init_from_file(path, gp);
    if (!g_) {
        std::fclose(f_);
        throw Error(KZ_ERR_FORMAT, std::string("cannot parse GGUF file ") + path);
    }
}

GgufSource::~GgufSource() {
    if (f_) std::fclose(f_);
    if (g_) gguf_free(g_);
    if (meta_) ggml_free(meta_);
}

ggml_tensor *GgufSource::src(const std::string &name, bool required) const {
    ggml_tensor *t = ggml_get_tensor(meta_, name.c_str());
    if (!t && required) throw Error(KZ_ERR_FORMAT, "missing tensor " + name + " in " + path_);
    return t;
}

std::vector<float> GgufSource::read(const ggml_tensor *t) const {
    const int64_t id = gguf_find_tensor(g_, t->name);
    const size_t off = gguf_get_data_offset(g_) + gguf_get_tensor_offset(g_, id), nbytes = ggml_nbytes(t);
    std::vector<uint8_t> raw(nbytes);
    if (std::fseek(f_, (long)off, SEEK_SET) != 0 || std::fread(raw.data(), 1, nbytes, f_) != nbytes)
        throw Error(KZ_ERR_IO, std::string("cannot read tensor ") + t->name + " from " + path_);
    std::vector<float> out(ggml_nelements(t));
    if (t->type == GGML_TYPE_F32) {
        std::memcpy(out.data(), raw.data(), nbytes);
    } else {
        const ggml_type_traits *tr = ggml_get_type_traits(t->type);
        if (!tr || !tr->to_float) throw Error(KZ_ERR_FORMAT, std::string("unsupported tensor type for ") + t->name);
        tr->to_float(raw.data(), out.data(), (int64_t)out.size());
    }
    return out;
}

double GgufSource::num(const std::string &key, double def) const {
    const int64_t id = gguf_find_key(g_, key.c_str());
    if (id < 0) return def;
    switch (gguf_get_kv_type(g_, id)) {
        case GGUF_TYPE_UINT8: return gguf_get_val_u8(g_, id);
        case GGUF_TYPE_INT8: return gguf_get_val_i8(g_, id);
        case GGUF_TYPE_UINT16: return gguf_get_val_u16(g_, id);
        case GGUF_TYPE_INT16: return gguf_get_val_i16(g_, id);
        case GGUF_TYPE_UINT32: return gguf_get_val_u32(g_, id);
        case GGUF_TYPE_INT32: return gguf_get_val_i32(g_, id);
        case GGUF_TYPE_UINT64: return (double)gguf_get_val_u64(g_, id);
        case GGUF_TYPE_INT64: return (double)gguf_get_val_i64(g_, id);
        case GGUF_TYPE_FLOAT32: return gguf_get_val_f32(g_, id);
        case GGUF_TYPE_FLOAT64: return gguf_get_val_f64(g_, id);
        case GGUF_TYPE_BOOL: return gguf_get_val_bool(g_, id) ? 1 : 0;
        default: return def;
    }
}

int64_t GgufSource::key_id(const std::string &key) const {
    const int64_t id = gguf_find_key(g_, key.c_str());
    if (id < 0) throw Error(KZ_ERR_FORMAT, "missing key " + key + " in " + path_);
    return id;
}

double GgufSource::num(const std::string &key) const {
    const int64_t id = key_id(key);
    const double nan = std::numeric_limits<double>::quiet_NaN(), v = num(key, nan);
    if (v != v || gguf_get_kv_type(g_, id) == GGUF_TYPE_STRING) throw Error(KZ_ERR_FORMAT, "key " + key + " is not a number");
    return v;
}

std::vector<int> GgufSource::ints(const std::string &key) const {
    const int64_t id = key_id(key);
    if (gguf_get_kv_type(g_, id) != GGUF_TYPE_ARRAY || gguf_get_arr_type(g_, id) != GGUF_TYPE_INT32)
        throw Error(KZ_ERR_FORMAT, "key " + key + " is not an int32 array");
    const int32_t *p = (const int32_t *)gguf_get_arr_data(g_, id);
    return std::vector<int>(p, p + gguf_get_arr_n(g_, id));
}

std::string GgufSource::str(const std::string &key) const {
    const int64_t id = key_id(key);
    if (gguf_get_kv_type(g_, id) != GGUF_TYPE_STRING) throw Error(KZ_ERR_FORMAT, "key " + key + " is not a string");
    return gguf_get_val_str(g_, id);
}

std::vector<float> conv_taps(const std::vector<float> &w, int cout, int cin, int k) {
    std::vector<float> p(w.size());
    for (int o = 0; o < cout; o++)
        for (int ci = 0; ci < cin; ci++)
            for (int j = 0; j < k; j++) p[ci + (size_t)cin * (j + (size_t)k * o)] = w[j + (size_t)k * (ci + (size_t)cin * o)];
    return p;
}

}  // namespace kz
