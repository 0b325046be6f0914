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
    KZ_ERR_COMPUTE = 5,          /* ggml failed to run a graph */
    KZ_ERR_STATE = 6             /* a call out of order (e.g. decoding after a failed step) */
} kz_status;

/* The library's ABI version; bumped whenever a signature or struct changes. */
KZ_API int kz_abi_version(void);

/* The ggml this library was built against: "llama-cpp-python <version>, ggml <version> (<commit>)".
 * A process must run it with that same ggml; kazetts' Python loader compares them. */
KZ_API const char *kz_built_with(void);

/* A static, human-readable name of a status code. */
KZ_API const char *kz_status_name(int status);

#ifdef __cplusplus
}
#endif

#endif
