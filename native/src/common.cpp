// Shared C ABI helpers (see include/kazetts/common.h).
#include "kazetts/common.h"

#include "common_internal.h"

#include <cstdint>
#include <cstdio>

#if defined(__linux__)
#include <sys/mman.h>
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
