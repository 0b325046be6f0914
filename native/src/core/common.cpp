// Shared C ABI helpers (see include/kazetts/common.h).
// 64-bit file offsets (off_t, fseeko, ftello) on 32-bit targets too (armv7 Android): model
// files pass 2 GiB. Only this file does file I/O.
#define _FILE_OFFSET_BITS 64
#include "kazetts/common.h"

#include "core/common_internal.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>

#if defined(__linux__)
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#endif
#if defined(__GLIBC__)
#include <malloc.h>
#endif

int kz_abi_version(void) { return KZ_ABI_VERSION; }

const char *kz_built_with(void) { return KZ_BUILT_WITH; }

const char *kz_status_name(int status) {
    switch (status) {
        case KZ_OK: return "ok";
        case KZ_ERR_INVALID_ARGUMENT: return "invalid argument";
        case KZ_ERR_IO: return "i/o error";
        case KZ_ERR_FORMAT: return "bad model file";
        case KZ_ERR_NO_MEMORY: return "out of memory";
        case KZ_ERR_COMPUTE: return "compute failed";
        case KZ_ERR_STATE: return "invalid state";
        default: return "unknown status";
    }
}

namespace kz {

std::string about_file(const char *path, const std::string &message) {
    if (!path || !*path || message.find(path) != std::string::npos) return message;
    return std::string(path) + ": " + message;
}

void write_error(char *buf, size_t len, const std::string &message) {
    if (buf != nullptr && len > 0) {
        std::snprintf(buf, len, "%s", message.c_str());
    }
}

}  // namespace kz

void kz::advise_huge_pages(void *base, size_t size) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t page = 4096;
    uintptr_t begin = ((uintptr_t)base + page - 1) & ~(page - 1), end = ((uintptr_t)base + size) & ~(page - 1);
    if (end > begin) madvise((void *)begin, end - begin, MADV_HUGEPAGE);  // advice: failure changes nothing
#else
    (void)base;
    (void)size;
#endif
}

void kz::release_free_heap() {
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
}

int64_t kz_release_file_pages(const char *path, uint64_t offset, uint64_t length) {
#if defined(__linux__) && defined(MADV_DONTNEED)
    struct stat st;
    if (!path || stat(path, &st) != 0) return -1;
    FILE *maps = std::fopen("/proc/self/maps", "r");
    if (!maps) return -1;
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), end_of_range = offset + length;
    int64_t released = 0;
    char line[4096 + 256];
    while (std::fgets(line, sizeof line, maps)) {
        unsigned long long start, end, file_offset, inode;
        unsigned int dev_major, dev_minor;
        char perms[8];
        if (std::sscanf(line, "%llx-%llx %7s %llx %x:%x %llu", &start, &end, perms, &file_offset, &dev_major,
                        &dev_minor, &inode) != 7)
            continue;
        // read-only mappings of this file only: dropping their pages loses nothing
        if (inode != (unsigned long long)st.st_ino || dev_major != major(st.st_dev) || dev_minor != minor(st.st_dev) ||
            perms[1] != '-')
            continue;
        const uint64_t lo = std::max<uint64_t>(offset, file_offset),
                       hi = std::min<uint64_t>(end_of_range, file_offset + (end - start));
        if (lo >= hi) continue;
        const uint64_t a = (start + (lo - file_offset) + page - 1) / page * page,
                       b = (start + (hi - file_offset)) / page * page;
        if (b > a && madvise((void *)a, b - a, MADV_DONTNEED) == 0) released += (int64_t)(b - a);
    }
    std::fclose(maps);
    return released;
#else
    (void)path;
    (void)offset;
    (void)length;
    return -1;
#endif
}

// ---------------------------------------------------------------------------------------------
// GGUF files
// ---------------------------------------------------------------------------------------------

namespace kz {

namespace {

// ggml's GGUF parser logs what it finds wrong in a damaged file (through ggml's process-wide log),
// then fails; kazetts names the file and the fault in its own one-line error instead. While a
// file is parsed, this thread's messages are dropped and the others' passed on to whoever had
// the log (restored afterwards; parses are serialized so that each restores what it found).
thread_local bool parsing_gguf = false;
std::mutex gguf_log_mutex;
ggml_log_callback outer_log = nullptr;
void *outer_log_data = nullptr;

void log_outside_parse(ggml_log_level level, const char *text, void *) {
    if (parsing_gguf) return;
    if (outer_log) {
        outer_log(level, text, outer_log_data);
    } else {
        std::fputs(text, stderr);
    }
}

}  // namespace

gguf_context *parse_gguf_quietly(const char *path, gguf_init_params params) {
    std::lock_guard<std::mutex> lock(gguf_log_mutex);
    ggml_log_get(&outer_log, &outer_log_data);
    ggml_log_set(log_outside_parse, nullptr);
    parsing_gguf = true;
    gguf_context *g = gguf_init_from_file(path, params);
    parsing_gguf = false;
    ggml_log_set(outer_log, outer_log_data);
    return g;
}

GgufFile::GgufFile(const char *path, bool meta) : path_(path ? path : "") {
    if (!path) throw Error(KZ_ERR_INVALID_ARGUMENT, "null path");
    f_ = std::fopen(path, "rb");
    if (!f_) throw error(std::string("cannot open: ") + std::strerror(errno), KZ_ERR_IO);
    if (fseeko(f_, 0, SEEK_END) != 0) throw error("cannot seek", KZ_ERR_IO);
    const off_t end = ftello(f_);
    if (end < 0) throw error("cannot tell its size", KZ_ERR_IO);
    size_ = (uint64_t)end;
    char magic[4] = {0, 0, 0, 0};
    if (fseeko(f_, 0, SEEK_SET) != 0 || std::fread(magic, 1, 4, f_) != 4 || std::memcmp(magic, "GGUF", 4) != 0) {
        throw error("not a GGUF file");
    }
    gguf_init_params gp{true, meta ? &meta_ : nullptr};
    g_ = parse_gguf_quietly(path, gp);
    if (!g_) throw error("not a valid GGUF file (or truncated header)");
    const uint64_t data = gguf_get_data_offset(g_);
    for (int64_t i = 0; i < gguf_get_n_tensors(g_); i++) {
        const std::string name = gguf_get_tensor_name(g_, i);
        const uint64_t off = gguf_get_tensor_offset(g_, i), nbytes = gguf_get_tensor_size(g_, i);
        if (data > size_ || off > size_ - data || nbytes > size_ - data - off) {
            throw error("tensor " + name + " lies past the end of the file (truncated?)");
        }
        const int64_t *ne = gguf_get_tensor_ne(g_, i);
        for (int d = 0; d < GGML_MAX_DIMS; d++) {
            if (ne[d] < 1 || ne[d] > INT_MAX)
                throw error("tensor " + name + " has shape " + shape_str(ne, GGML_MAX_DIMS));
        }
    }
}

GgufFile::~GgufFile() {
    if (meta_) ggml_free(meta_);
    if (g_) gguf_free(g_);
    if (f_) std::fclose(f_);
}

Error GgufFile::error(const std::string &what, int status) const { return Error(status, path_ + ": " + what); }

int64_t GgufFile::find(const std::string &name, bool required, const std::string &hint) const {
    const int64_t id = gguf_find_tensor(g_, name.c_str());
    if (id < 0 && required) throw error("tensor " + name + " is missing" + hint);
    return id;
}

std::vector<uint8_t> GgufFile::read(int64_t id) const {
    std::vector<uint8_t> buf(gguf_get_tensor_size(g_, id));
    read_part(id, 0, buf.size(), buf.data());
    return buf;
}

void GgufFile::read_part(int64_t id, uint64_t at, size_t nbytes, void *dst) const {
    const uint64_t size = gguf_get_tensor_size(g_, id);
    if (at > size || nbytes > size - at)
        throw error(std::string("read past the end of tensor ") + gguf_get_tensor_name(g_, id));
    const uint64_t off =
        (uint64_t)gguf_get_data_offset(g_) + gguf_get_tensor_offset(g_, id) + at;  // inside the file: checked on open
    if (off > (uint64_t)std::numeric_limits<off_t>::max() || fseeko(f_, (off_t)off, SEEK_SET) != 0 ||
        std::fread(dst, 1, nbytes, f_) != nbytes) {
        throw error(std::string("cannot read tensor ") + gguf_get_tensor_name(g_, id), KZ_ERR_IO);
    }
}

double GgufFile::real(const std::string &key, double fallback) const {
    const int64_t id = gguf_find_key(g_, key.c_str());
    if (id < 0) return fallback;
    double v;
    switch (gguf_get_kv_type(g_, id)) {
        case GGUF_TYPE_UINT8: v = gguf_get_val_u8(g_, id); break;
        case GGUF_TYPE_INT8: v = gguf_get_val_i8(g_, id); break;
        case GGUF_TYPE_UINT16: v = gguf_get_val_u16(g_, id); break;
        case GGUF_TYPE_INT16: v = gguf_get_val_i16(g_, id); break;
        case GGUF_TYPE_UINT32: v = gguf_get_val_u32(g_, id); break;
        case GGUF_TYPE_INT32: v = gguf_get_val_i32(g_, id); break;
        case GGUF_TYPE_UINT64: v = (double)gguf_get_val_u64(g_, id); break;
        case GGUF_TYPE_INT64: v = (double)gguf_get_val_i64(g_, id); break;
        case GGUF_TYPE_FLOAT32: v = gguf_get_val_f32(g_, id); break;
        case GGUF_TYPE_FLOAT64: v = gguf_get_val_f64(g_, id); break;
        case GGUF_TYPE_BOOL: v = gguf_get_val_bool(g_, id) ? 1 : 0; break;
        default: throw error("key " + key + " is not a number");
    }
    if (!std::isfinite(v)) throw error("key " + key + " is not a finite number");
    return v;
}

int64_t GgufFile::integer(const std::string &key, int64_t fallback, int64_t lo, int64_t hi) const {
    const int64_t id = gguf_find_key(g_, key.c_str());
    if (id < 0) return fallback;
    const gguf_type t = gguf_get_kv_type(g_, id);
    if (t == GGUF_TYPE_FLOAT32 || t == GGUF_TYPE_FLOAT64) throw error("key " + key + " is not an integer");
    int64_t v;
    if (t == GGUF_TYPE_INT64) {
        v = gguf_get_val_i64(g_, id);
    } else if (t == GGUF_TYPE_UINT64) {
        v = (int64_t)std::min<uint64_t>(gguf_get_val_u64(g_, id), (uint64_t)INT64_MAX);
    } else {
        v = (int64_t)real(key, 0.0);  // the 8- to 32-bit integers, exact in a double (real() rejects non-numbers)
    }
    if (v < lo || v > hi) {
        throw error("key " + key + " = " + std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "]");
    }
    return v;
}

std::string shape_str(const int64_t *ne, int n) {
    std::string s = "[";
    for (int i = 0; i < n; i++) s += (i ? ", " : "") + std::to_string(ne[i]);
    return s + "]";
}

bool can_dequantize(ggml_type t) {
    if (t == GGML_TYPE_F32) return true;
    if ((int)t < 0 || t >= GGML_TYPE_COUNT) return false;
    const ggml_type_traits *tr = ggml_get_type_traits(t);
    return tr && tr->to_float != nullptr && tr->blck_size > 0;
}

std::string json_string(const std::string &s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += char(c);
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += char(c);
        }
    }
    return out + "\"";
}

std::string json_list(const std::vector<std::string> &items) {
    std::string out = "[";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + json_string(items[i]);
    return out + "]";
}

}  // namespace kz
