// Internal helpers shared by the stages; never part of the C ABI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "ggml.h"
#include "gguf.h"
#include "kazetts/common.h"

#define KZ_ABI_VERSION 10

// Most codebooks a model may have (Qwen3-TTS has 16): bounds the per-codebook graphs and loops.
#define KZ_MAX_CODEBOOKS 64

namespace kz {

// Thrown inside the library only; every exported function catches it and returns its status.
struct Error : std::runtime_error {
    int status;
    Error(int s, const std::string &message) : std::runtime_error(message), status(s) {}
};

// ggml's gguf_init_from_file without its log lines about a damaged file (the callers name the
// file and the fault in their own error); other threads' log lines pass as before.
gguf_context *parse_gguf_quietly(const char *path, gguf_init_params params);

// A GGUF opened for loading: ggml's parse of its header (tensor data not read) and the open file.
// Opening checks what a stage relies on before it reads any size from the table: every tensor
// lies inside the file (64-bit offsets, no overflow), has at least one element, a ggml type
// and dimensions that fit an int. Errors name the file.
class GgufFile {
  public:
    // `meta`: also create ggml tensors (shapes only) for the tensor table
    GgufFile(const char *path, bool meta = false);
    ~GgufFile();
    GgufFile(const GgufFile &) = delete;
    GgufFile &operator=(const GgufFile &) = delete;

    gguf_context *gguf() const { return g_; }
    ggml_context *meta() const { return meta_; }
    const std::string &path() const { return path_; }
    uint64_t size() const { return size_; }

    // the id of a tensor, or -1 when it is absent and not `required` (else a KZ_ERR_FORMAT)
    int64_t find(const std::string &name, bool required = true, const std::string &hint = "") const;
    // raw bytes of a tensor as stored
    std::vector<uint8_t> read(int64_t id) const;
    // nbytes of them from byte `at` (KZ_ERR_FORMAT past the tensor's end, KZ_ERR_IO when unreadable)
    void read_part(int64_t id, uint64_t at, size_t nbytes, void *dst) const;
    // a numeric key (`fallback` when absent); KZ_ERR_FORMAT when it is not a finite number
    double real(const std::string &key, double fallback) const;
    // an integer key in [lo, hi] (`fallback` when absent); KZ_ERR_FORMAT otherwise
    int64_t integer(const std::string &key, int64_t fallback, int64_t lo, int64_t hi) const;
    // an error about this file
    Error error(const std::string &what, int status = KZ_ERR_FORMAT) const;

  private:
    std::string path_;
    FILE *f_ = nullptr;
    gguf_context *g_ = nullptr;
    ggml_context *meta_ = nullptr;
    uint64_t size_ = 0;
};

// "[a, b, c]"
std::string shape_str(const int64_t *ne, int n);

// Whether ggml can turn a tensor of this type into F32 rows (what every stage does on load).
bool can_dequantize(ggml_type t);

// A loader's error message naming its file: `message` as is when it does, else "path: message".
std::string about_file(const char *path, const std::string &message);

// A JSON string literal of s (quotes, backslashes and control characters escaped), and a JSON
// list of such strings: what the exported model descriptions are written with.
std::string json_string(const std::string &s);
std::string json_list(const std::vector<std::string> &items);

// Copies a message into a caller-owned buffer (truncated, always NUL-terminated).
void write_error(char *buf, size_t len, const std::string &message);

// Asks the kernel to back a weight buffer with huge pages (Linux transparent huge pages in
// "madvise" mode): the stages stream their weights on every step, and 4 KiB pages cost a TLB
// miss per page. Call before the buffer is first written. A no-op where unsupported.
void advise_huge_pages(void *base, size_t size);

// Hands the C heap's free pages back to the system (glibc keeps what a load freed, e.g. its
// staging buffers, inside the heap and counted in the process's RSS). A no-op elsewhere.
void release_free_heap();

// The exception barrier of every exported function: runs `body`, returns KZ_OK, or turns an
// exception into its status and hands its message to `report`; `unexpected` is the status of
// a std::exception that is not a kz::Error.
template <class Body, class Report>
int run_guarded(Body &&body, Report &&report, int unexpected) {
    try {
        body();
        return KZ_OK;
    } catch (const Error &e) {
        report(e.what());
        return e.status;
    } catch (const std::bad_alloc &) {
        report("out of memory");
        return KZ_ERR_NO_MEMORY;
    } catch (const std::exception &e) {
        report(e.what());
        return unexpected;
    }
}

// The loader of every stage's handle (kz_*_load): *out and err cleared, path and out checked,
// then `make` builds the handle (a std::unique_ptr<T>), which reaches *out only when all of it
// succeeded; a failure's message, naming the file, goes to err.
template <class T, class Make>
int load_handle(const char *path, T **out, char *err, size_t err_len, Make &&make) {
    write_error(err, err_len, "");
    if (out) *out = nullptr;
    return run_guarded(
        [&] {
            if (!path || !out) throw Error(KZ_ERR_INVALID_ARGUMENT, "null path or output handle");
            std::unique_ptr<T> handle = make();
            *out = handle.release();
        },
        [&](const char *message) { write_error(err, err_len, about_file(path, message)); }, KZ_ERR_FORMAT);
}

// Every other exported call on a stage's handle: KZ_ERR_INVALID_ARGUMENT for NULL, else `body`,
// whose failure's message becomes the handle's last_error (cleared by a call that succeeds).
template <class T, class Body>
int call_handle(T *handle, Body &&body) {
    if (!handle) return KZ_ERR_INVALID_ARGUMENT;
    handle->last_error.clear();
    return run_guarded(body, [&](const char *message) { handle->last_error = message; }, KZ_ERR_COMPUTE);
}

}  // namespace kz
