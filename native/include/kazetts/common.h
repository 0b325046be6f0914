/* kazetts native C ABI: conventions shared by every stage.
 *
 * JNI-ready: opaque handles, integer status codes, no C++ types or exceptions across the
 * boundary, caller-chosen thread counts, no global state (two loads are two independent
 * handles). Functions that can fail return a kz_status; a handle keeps its last error message
 * (kz_*_last_error), and loaders, which have no handle yet, write theirs into a caller buffer.
 */
#ifndef KAZETTS_COMMON_H
#define KAZETTS_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define KZ_API __declspec(dllexport)
#else
#define KZ_API __attribute__((visibility("default")))
#endif

typedef enum kz_status {
    KZ_OK = 0,
    KZ_ERR_INVALID_ARGUMENT = 1, /* a null pointer, a bad count, a code out of range */
    KZ_ERR_IO = 2,               /* the file cannot be opened or read */
    KZ_ERR_FORMAT = 3,           /* the file is not what it should be: missing tensor, wrong shape, bad type */
    KZ_ERR_NO_MEMORY = 4,
    KZ_ERR_COMPUTE = 5, /* ggml failed to run a graph */
    KZ_ERR_STATE = 6    /* a call out of order (e.g. decoding after a failed step) */
} kz_status;

/* The library's ABI version; bumped whenever a signature or struct changes. */
KZ_API int kz_abi_version(void);

/* The ggml this library was built against: "llama-cpp-python <version>, ggml <version> (<commit>)".
 * A process must run it with that same ggml; kazetts' Python loader compares them. */
KZ_API const char *kz_built_with(void);

/* A static, human-readable name of a status code. */
KZ_API const char *kz_status_name(int status);

/* Drops this process's resident pages of bytes [offset, offset + length) of the file at `path`
 * from every read-only mapping of it (whole pages inside the range only), e.g. a tensor of a
 * memory-mapped model that is never read: the pages stay in the page cache and come back on
 * the next read, but no longer count in the process's RSS. Returns the bytes released, or -1
 * where it cannot tell (not Linux, no /proc, no such file). */
KZ_API int64_t kz_release_file_pages(const char *path, uint64_t offset, uint64_t length);

#ifdef __cplusplus
}
#endif

#endif
