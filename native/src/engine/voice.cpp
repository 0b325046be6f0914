// Voices and their files (kazetts/voice.h): the format of docs/voices.md, read and written
// through ggml's GGUF code, sealed with SHA-256. The Python engine (kazetts/engine/voice.py)
// calls these, so a voice file has one reader and one writer.
#include "kazetts/voice.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/common_internal.h"
#include "core/sha256.h"

namespace {

const char *const ARCH = "kazetts.voice";
const std::string K = "kazetts.voice.";
const int CODEBOOKS = 16;
const int READABLE[] = {1, 2};

}  // namespace

struct kz_voice {
    std::string model_type, speaker_encoder_sha256, ref_text;
    int32_t hidden_size = 0;
    bool has_ref_text = false;
    std::vector<float> xvector;
    std::vector<int32_t> ref_codes;  // [frames][16]; empty: none
    float ref_seconds = 0.0f, ref_silence = 0.0f;
    int32_t format_version = KZ_VOICE_FORMAT;

    // sha256 over everything the voice is made of, in the order of docs/voices.md: model type,
    // hidden size, speaker encoder digest (each with a NUL), ref_seconds and ref_silence as
    // float32, ref_text and a NUL, the x-vector as float32, the reference codes as int32
    // (all little-endian, as the hosts ggml runs on).
    std::string seal() const {
        kz::Sha256 h;
        h.update(std::string("kazetts.voice/2", 16));
        for (const std::string &text : {model_type, std::to_string(hidden_size), speaker_encoder_sha256}) {
            h.update(text.c_str(), text.size() + 1);
        }
        const float seconds[2] = {ref_seconds, ref_silence};
        h.update(seconds, sizeof seconds);
        h.update(ref_text.c_str(), ref_text.size() + 1);
        h.update(xvector.data(), xvector.size() * sizeof(float));
        h.update(ref_codes.data(), ref_codes.size() * sizeof(int32_t));
        return h.hex();
    }
};

namespace {

using kz::Error;

void check_parts(const kz_voice &v) {
    auto bad = [](const std::string &what) { throw Error(KZ_ERR_INVALID_ARGUMENT, what); };
    if (v.model_type.empty()) bad("a voice needs the model type it was made for");
    if (v.hidden_size < 1) bad("a voice needs its model's hidden size (>= 1)");
    if (v.speaker_encoder_sha256.empty()) bad("a voice needs its model's speaker encoder digest");
    for (float x : v.xvector) {
        if (!std::isfinite(x)) bad("the x-vector holds NaN or infinite values");
    }
    if (!std::isfinite(v.ref_seconds) || v.ref_seconds < 0) bad("ref_seconds must be a finite number >= 0");
    if (!std::isfinite(v.ref_silence) || v.ref_silence < 0) bad("ref_silence must be a finite number >= 0");
}

// A GGUF voice file opened for reading: ggml's parse of it, with every value checked for the
// type it must have before it is read (ggml's getters assert on a wrong type).
class VoiceFile {
  public:
    explicit VoiceFile(const std::string &path) : path_(path) {
        try {
            file_ = std::make_unique<kz::GgufFile>(path.c_str());
        } catch (const Error &e) {
            if (e.status == KZ_ERR_IO) {
                const std::string what = e.what(), prefix = path + ": ";  // GgufFile names the file first
                const std::string why = what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what;
                throw Error(KZ_ERR_IO, "cannot read the voice file " + path + ": " + why);
            }
            fail(path + " is not a kazetts voice file (damaged, or not a GGUF file)");
        }
        g_ = file_->gguf();
    }

    [[noreturn]] void fail(const std::string &message) const { throw Error(KZ_ERR_FORMAT, message); }
    [[noreturn]] void damaged(const std::string &what) const { fail(path_ + ": " + what); }

    int64_t key(const std::string &name) const { return gguf_find_key(g_, name.c_str()); }

    bool is_text(int64_t id) const { return id >= 0 && gguf_get_kv_type(g_, id) == GGUF_TYPE_STRING; }
    std::string text(int64_t id) const { return gguf_get_val_str(g_, id); }

    // An integer key's value (false when it holds another type).
    bool integer(int64_t id, int64_t *out) const {
        switch (gguf_get_kv_type(g_, id)) {
            case GGUF_TYPE_UINT8: *out = gguf_get_val_u8(g_, id); return true;
            case GGUF_TYPE_INT8: *out = gguf_get_val_i8(g_, id); return true;
            case GGUF_TYPE_UINT16: *out = gguf_get_val_u16(g_, id); return true;
            case GGUF_TYPE_INT16: *out = gguf_get_val_i16(g_, id); return true;
            case GGUF_TYPE_UINT32: *out = gguf_get_val_u32(g_, id); return true;
            case GGUF_TYPE_INT32: *out = gguf_get_val_i32(g_, id); return true;
            case GGUF_TYPE_UINT64: *out = int64_t(gguf_get_val_u64(g_, id) & INT64_MAX); return true;
            case GGUF_TYPE_INT64: *out = gguf_get_val_i64(g_, id); return true;
            default: return false;
        }
    }

    // ref_seconds / ref_silence: a finite number >= 0 (0 when absent).
    float seconds(const std::string &name) const {
        const int64_t id = key(K + name);
        if (id < 0) return 0.0f;
        double value = NAN;
        int64_t n = 0;
        const gguf_type type = gguf_get_kv_type(g_, id);
        if (type == GGUF_TYPE_FLOAT32)
            value = gguf_get_val_f32(g_, id);
        else if (type == GGUF_TYPE_FLOAT64)
            value = gguf_get_val_f64(g_, id);
        else if (integer(id, &n))
            value = double(n);
        else
            damaged("the voice file's " + name + " is damaged (not a number)");
        if (!std::isfinite(value) || value < 0) {
            char shown[32];
            std::snprintf(shown, sizeof shown, "%g", value);
            damaged("the voice file's " + name + " is damaged (" + shown + ")");
        }
        return float(value);
    }

    // A tensor's bytes, of the type it must have (-1 size: any).
    std::vector<uint8_t> tensor(const char *name, ggml_type type, int64_t want_values, bool *present) const {
        const int64_t id = gguf_find_tensor(g_, name);
        *present = id >= 0;
        if (id < 0) return {};
        const ggml_type stored = gguf_get_tensor_type(g_, id);
        if (stored != type) {
            damaged(std::string(name) + " is stored as " + upper(ggml_type_name(stored)) +
                    ", a voice file holds it as " + upper(ggml_type_name(type)));
        }
        std::vector<uint8_t> bytes = file_->read(id);
        const int64_t values = int64_t(bytes.size() / ggml_type_size(type));
        if (want_values >= 0 && values != want_values) {
            damaged(std::string(name) + " has " + std::to_string(values) + " values, the file says hidden size " +
                    std::to_string(want_values));
        }
        return bytes;
    }

  private:
    static std::string upper(std::string s) {
        for (char &c : s) c = char(c >= 'a' && c <= 'z' ? c - 32 : c);
        return s;
    }

    std::string path_;
    std::unique_ptr<kz::GgufFile> file_;
    gguf_context *g_ = nullptr;
};

std::unique_ptr<kz_voice> read_voice(const std::string &path) {
    VoiceFile f(path);
    const int64_t arch = f.key("general.architecture");
    if (!f.is_text(arch) || f.text(arch) != ARCH) {
        const std::string what = f.is_text(arch) ? "a '" + f.text(arch) + "' GGUF" : "a GGUF of no architecture";
        f.fail(path + " is not a kazetts voice file (" + what + ")");
    }
    auto v = std::make_unique<kz_voice>();
    const int64_t version_id = f.key(K + "format_version");
    int64_t version = 0;
    const bool readable =
        version_id >= 0 && f.integer(version_id, &version) && (version == READABLE[0] || version == READABLE[1]);
    if (!readable) {
        const std::string shown = version_id < 0 ? "None" : version ? std::to_string(version) : "?";
        f.fail(path + " is a voice file of format " + shown + "; this kazetts reads formats 1, 2");
    }
    v->format_version = int32_t(version);
    const int64_t type = f.key(K + "model_type"), hidden = f.key(K + "hidden_size");
    const int64_t encoder = f.key(K + "speaker_encoder_sha256");
    for (const char *name : {"model_type", "hidden_size", "speaker_encoder_sha256"}) {
        if (f.key(K + name) < 0) f.damaged("the voice file has no " + K + name);
    }
    int64_t width = 0;
    if (!f.is_text(type) || !f.is_text(encoder) || !f.integer(hidden, &width) || width < 1 || width > INT32_MAX) {
        f.damaged("the voice file's model keys are damaged");
    }
    v->model_type = f.text(type), v->speaker_encoder_sha256 = f.text(encoder), v->hidden_size = int32_t(width);

    bool present = false;
    std::vector<uint8_t> x = f.tensor("x_vector", GGML_TYPE_F32, width, &present);
    if (!present) f.damaged("the voice file has no x_vector");
    v->xvector.resize(size_t(width));
    std::memcpy(v->xvector.data(), x.data(), x.size());

    const int64_t text = f.key(K + "ref_text");
    if (text >= 0 && !f.is_text(text)) f.damaged("the voice file's ref_text is damaged (not a text)");
    v->has_ref_text = text >= 0;
    if (v->has_ref_text) v->ref_text = f.text(text);

    std::vector<uint8_t> codes = f.tensor("ref_codes", GGML_TYPE_I32, -1, &present);
    const size_t n_codes = codes.size() / sizeof(int32_t);
    if (present && (n_codes == 0 || n_codes % CODEBOOKS)) {
        f.damaged("ref_codes has " + std::to_string(n_codes) + " values, not whole frames of " +
                  std::to_string(CODEBOOKS) + " codes");
    }
    v->ref_codes.resize(n_codes);
    if (n_codes) std::memcpy(v->ref_codes.data(), codes.data(), codes.size());

    v->ref_seconds = f.seconds("ref_seconds");
    v->ref_silence = f.seconds("ref_silence");

    const int64_t seal = f.key(K + "payload_sha256");
    if (seal < 0 && version != 1) {
        f.fail(path + " has no seal (" + K + "payload_sha256), which format " + std::to_string(version) +
               " files carry: it is damaged; enroll the reference again");
    }
    if (seal >= 0 && (!f.is_text(seal) || f.text(seal) != v->seal())) {  // a seal in a format-1 file is checked too
        f.fail(path +
               " is damaged: its content does not match its digest (a changed byte?); enroll the reference again");
    }
    return v;
}

// The GGUF of a voice, in the key order of docs/voices.md.
struct VoiceGguf {
    gguf_context *g = gguf_init_empty();
    ggml_context *tensors = nullptr;

    explicit VoiceGguf(const kz_voice &v) {
        if (!g) throw std::bad_alloc();
        gguf_set_val_str(g, "general.architecture", ARCH);
        gguf_set_val_u32(g, (K + "format_version").c_str(), KZ_VOICE_FORMAT);
        gguf_set_val_str(g, (K + "model_type").c_str(), v.model_type.c_str());
        gguf_set_val_u32(g, (K + "hidden_size").c_str(), uint32_t(v.hidden_size));
        gguf_set_val_str(g, (K + "speaker_encoder_sha256").c_str(), v.speaker_encoder_sha256.c_str());
        gguf_set_val_f32(g, (K + "ref_seconds").c_str(), v.ref_seconds);
        gguf_set_val_f32(g, (K + "ref_silence").c_str(), v.ref_silence);
        if (v.has_ref_text) gguf_set_val_str(g, (K + "ref_text").c_str(), v.ref_text.c_str());
        gguf_set_val_str(g, (K + "payload_sha256").c_str(), v.seal().c_str());
        ggml_init_params params{2 * ggml_tensor_overhead(), nullptr, true};
        tensors = ggml_init(params);
        if (!tensors) throw std::bad_alloc();
        add(ggml_new_tensor_1d(tensors, GGML_TYPE_F32, v.hidden_size), "x_vector", v.xvector.data());
        if (!v.ref_codes.empty()) {
            const int64_t frames = int64_t(v.ref_codes.size() / CODEBOOKS);
            add(ggml_new_tensor_2d(tensors, GGML_TYPE_I32, CODEBOOKS, frames), "ref_codes", v.ref_codes.data());
        }
    }
    ~VoiceGguf() {
        gguf_free(g);
        if (tensors) ggml_free(tensors);
    }
    VoiceGguf(const VoiceGguf &) = delete;
    VoiceGguf &operator=(const VoiceGguf &) = delete;

    void add(ggml_tensor *t, const char *name, const void *data) {
        ggml_set_name(t, name);
        t->data = const_cast<void *>(data);  // read by gguf_write_* only
        gguf_add_tensor(g, t);
    }

    void write(FILE *f, const std::string &path) const {
        if (!gguf_write_to_file_ptr(g, f, false) || std::fflush(f) != 0 || ferror(f)) {
            throw Error(KZ_ERR_IO, "cannot write the voice file " + path + ": " + std::strerror(errno ? errno : EIO));
        }
    }
};

void write_to(const kz_voice &v, const std::string &path) {
    VoiceGguf gguf(v);
    FILE *f = std::fopen(path.c_str(), "wb");
    if (!f) throw Error(KZ_ERR_IO, "cannot write the voice file " + path + ": " + std::strerror(errno));
    try {
        gguf.write(f, path);
    } catch (...) {
        std::fclose(f);
        throw;
    }
    if (std::fclose(f) != 0)
        throw Error(KZ_ERR_IO, "cannot write the voice file " + path + ": " + std::strerror(errno));
}

// Written beside `path` under a fresh name, flushed to the disk, then put in place.
void save(const kz_voice &v, const std::string &path, bool replace) {
    VoiceGguf gguf(v);
    std::string staging = path + ".XXXXXX";
    const int fd = mkstemp(&staging[0]);
    if (fd < 0) throw Error(KZ_ERR_IO, "cannot write the voice file " + path + ": " + std::strerror(errno));
    FILE *f = fdopen(fd, "wb");
    try {
        if (!f) throw Error(KZ_ERR_IO, "cannot write the voice file " + path + ": " + std::strerror(errno));
        gguf.write(f, path);
        if (fsync(fd) != 0) throw Error(KZ_ERR_IO, "cannot write the voice file " + path + ": " + std::strerror(errno));
        std::fclose(f), f = nullptr;
        const bool placed =
            replace ? std::rename(staging.c_str(), path.c_str()) == 0 : link(staging.c_str(), path.c_str()) == 0;
        if (!placed) {
            const int e = errno;
            throw Error(KZ_ERR_IO, e == EEXIST ? path + " exists; it was left as it was"
                                               : "cannot write the voice file " + path + ": " + std::strerror(e));
        }
        if (!replace) unlink(staging.c_str());
    } catch (...) {
        if (f) std::fclose(f);
        unlink(staging.c_str());
        throw;
    }
}

// What a voice's model and this model differ in: their type and width, else their speaker
// encoders, each digest shown to the first 12 (or 24, or all) digits that tell them apart.
std::string model_difference(const std::string &voice_type, int32_t voice_hidden, const std::string &voice_sha,
                             const std::string &type, int32_t hidden, const std::string &sha) {
    if (voice_type != type || voice_hidden != hidden) {
        return "a " + voice_type + " model of hidden size " + std::to_string(voice_hidden) + ", this is a " + type +
               " model of hidden size " + std::to_string(hidden);
    }
    size_t shown = std::max(voice_sha.size(), sha.size());
    for (size_t n : {size_t(12), size_t(24)}) {
        if (voice_sha.substr(0, n) != sha.substr(0, n)) {
            shown = n;
            break;
        }
    }
    return "another speaker encoder (" + voice_sha.substr(0, shown) + ", this model's is " + sha.substr(0, shown) + ")";
}

template <class Body>
int guarded(char *err, size_t err_len, Body &&body) {
    kz::write_error(err, err_len, "");
    return kz::run_guarded(body, [&](const char *m) { kz::write_error(err, err_len, m); }, KZ_ERR_FORMAT);
}

}  // namespace

extern "C" {

KZ_API kz_voice_info kz_voice_default_info(void) {
    kz_voice_info info{};
    info.struct_size = sizeof(kz_voice_info);
    info.format_version = KZ_VOICE_FORMAT;
    return info;
}

KZ_API int kz_voice_new(const kz_voice_info *info, kz_voice **out, char *err, size_t err_len) {
    if (out) *out = nullptr;
    return guarded(err, err_len, [&] {
        if (!info || !out || info->struct_size != sizeof(kz_voice_info) || !info->xvector ||
            (info->ref_frames && !info->ref_codes) || info->ref_frames < 0) {
            throw Error(KZ_ERR_INVALID_ARGUMENT, "a voice needs its info (of this library's size) and an x-vector");
        }
        auto v = std::make_unique<kz_voice>();
        v->model_type = info->model_type ? info->model_type : "";
        v->speaker_encoder_sha256 = info->speaker_encoder_sha256 ? info->speaker_encoder_sha256 : "";
        v->hidden_size = info->hidden_size;
        v->has_ref_text = info->ref_text && *info->ref_text;
        if (v->has_ref_text) v->ref_text = info->ref_text;
        if (info->hidden_size > 0) v->xvector.assign(info->xvector, info->xvector + info->hidden_size);
        if (info->ref_frames)
            v->ref_codes.assign(info->ref_codes, info->ref_codes + size_t(info->ref_frames) * CODEBOOKS);
        v->ref_seconds = info->ref_seconds, v->ref_silence = info->ref_silence;
        check_parts(*v);
        *out = v.release();
    });
}

KZ_API int kz_voice_read(const char *path, kz_voice **out, char *err, size_t err_len) {
    if (out) *out = nullptr;
    return guarded(err, err_len, [&] {
        if (!path || !out) throw Error(KZ_ERR_INVALID_ARGUMENT, "null path or output handle");
        *out = read_voice(path).release();
    });
}

KZ_API int kz_voice_get(const kz_voice *v, kz_voice_info *info) {
    if (!v || !info || info->struct_size != sizeof(kz_voice_info)) return KZ_ERR_INVALID_ARGUMENT;
    info->model_type = v->model_type.c_str();
    info->hidden_size = v->hidden_size;
    info->speaker_encoder_sha256 = v->speaker_encoder_sha256.c_str();
    info->xvector = v->xvector.data();
    info->ref_text = v->has_ref_text ? v->ref_text.c_str() : nullptr;
    info->ref_codes = v->ref_codes.empty() ? nullptr : v->ref_codes.data();
    info->ref_frames = int32_t(v->ref_codes.size() / CODEBOOKS);
    info->ref_seconds = v->ref_seconds, info->ref_silence = v->ref_silence;
    info->format_version = v->format_version;
    return KZ_OK;
}

KZ_API void kz_voice_payload_sha256(const kz_voice *v, char *out) {
    if (!out) return;
    const std::string hex = v ? v->seal() : std::string();
    std::memcpy(out, hex.c_str(), hex.size() + 1);
}

KZ_API int kz_voice_write(const kz_voice *v, const char *path, char *err, size_t err_len) {
    return guarded(err, err_len, [&] {
        if (!v || !path) throw Error(KZ_ERR_INVALID_ARGUMENT, "null voice or path");
        write_to(*v, path);
    });
}

KZ_API int kz_voice_save(const kz_voice *v, const char *path, int replace, char *err, size_t err_len) {
    return guarded(err, err_len, [&] {
        if (!v || !path || !*path) throw Error(KZ_ERR_INVALID_ARGUMENT, "null voice or empty path");
        save(*v, path, replace != 0);
    });
}

KZ_API void kz_voice_free(kz_voice *v) { delete v; }

KZ_API int kz_voice_check_model(const char *voice_type, int32_t voice_hidden, const char *voice_sha256,
                                const char *model_type, int32_t model_hidden, const char *model_sha256,
                                const char *what, char *err, size_t err_len) {
    return guarded(err, err_len, [&] {
        if (!voice_type || !voice_sha256 || !model_type || !model_sha256 || !what) {
            throw Error(KZ_ERR_INVALID_ARGUMENT, "null model description");
        }
        if (voice_type == std::string(model_type) && voice_hidden == model_hidden &&
            voice_sha256 == std::string(model_sha256)) {
            return;
        }
        throw Error(KZ_ERR_INVALID_ARGUMENT, std::string(what) + " was made for " +
                                                 model_difference(voice_type, voice_hidden, voice_sha256, model_type,
                                                                  model_hidden, model_sha256) +
                                                 ": enroll the reference again with this model");
    });
}

}  // extern "C"
