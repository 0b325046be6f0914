// See gguf_reader.h.
#include "gguf_reader.h"

#include "common_internal.h"

#include <cstdint>
#include <cstring>

namespace kz {

GgufReader::GgufReader(const char *path_) : path(path_) {
    f_ = std::fopen(path_, "rb");
    if (!f_) throw Error(KZ_ERR_IO, "cannot open " + path);
    char magic[4] = {0, 0, 0, 0};
    if (std::fread(magic, 1, 4, f_) != 4 || std::memcmp(magic, "GGUF", 4) != 0) {
        std::fclose(f_);
        throw Error(KZ_ERR_FORMAT, "not a GGUF file: " + path);
    }
    gguf_init_params gp = {true, &meta_};
    g_ = gguf_init_from_file(path_, gp);
    if (!g_) {
        std::fclose(f_);
        throw Error(KZ_ERR_FORMAT, "cannot parse GGUF file " + path);
    }
}

GgufReader::~GgufReader() {
    if (f_) std::fclose(f_);
    if (g_) gguf_free(g_);
    if (meta_) ggml_free(meta_);
}

ggml_tensor *GgufReader::src(const std::string &name, bool required) const {
    ggml_tensor *t = ggml_get_tensor(meta_, name.c_str());
    if (!t && required) throw Error(KZ_ERR_FORMAT, "missing tensor " + name + " in " + path);
    return t;
}

std::vector<float> GgufReader::read(const ggml_tensor *t) const {
    int64_t id = gguf_find_tensor(g_, t->name);
    size_t off = gguf_get_data_offset(g_) + gguf_get_tensor_offset(g_, id);
    size_t nbytes = ggml_nbytes(t);
    std::vector<uint8_t> raw(nbytes);
    if (std::fseek(f_, (long)off, SEEK_SET) != 0 || std::fread(raw.data(), 1, nbytes, f_) != nbytes)
        throw Error(KZ_ERR_IO, std::string("cannot read tensor ") + t->name + " from " + path);
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

double GgufReader::num(const std::string &key, double def) const {
    int64_t id = gguf_find_key(g_, key.c_str());
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
        default: return def;
    }
}

std::vector<int> GgufReader::ints(const std::string &key, std::vector<int> def) const {
    int64_t id = gguf_find_key(g_, key.c_str());
    if (id < 0) return def;
    if (gguf_get_kv_type(g_, id) != GGUF_TYPE_ARRAY) throw Error(KZ_ERR_FORMAT, key + " is not an array in " + path);
    const size_t n = gguf_get_arr_n(g_, id);
    const void *data = gguf_get_arr_data(g_, id);
    std::vector<int> out(n);
    switch (gguf_get_arr_type(g_, id)) {
        case GGUF_TYPE_INT32: for (size_t i = 0; i < n; i++) out[i] = ((const int32_t *)data)[i]; break;
        case GGUF_TYPE_UINT32: for (size_t i = 0; i < n; i++) out[i] = (int)((const uint32_t *)data)[i]; break;
        default: throw Error(KZ_ERR_FORMAT, key + " is not an array of 32-bit integers in " + path);
    }
    return out;
}

}  // namespace kz
