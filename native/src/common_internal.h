// Internal helpers shared by the stages; never part of the C ABI.
#pragma once

#include <cstddef>
#include <new>
#include <stdexcept>
#include <string>

#include "kazetts/common.h"

#define KZ_ABI_VERSION 3

namespace kz {

// Thrown inside the library only; every exported function catches it and returns its status.
struct Error : std::runtime_error {
    int status;
    Error(int s, const std::string &message) : std::runtime_error(message), status(s) {}
};

// Copies a message into a caller-owned buffer (truncated, always NUL-terminated).
void write_error(char *buf, size_t len, const std::string &message);

// Asks the kernel to back a weight buffer with huge pages (Linux transparent huge pages in
// "madvise" mode): the stages stream their weights on every step, and 4 KiB pages cost a TLB
// miss per page. Call before the buffer is first written. A no-op where unsupported.
void advise_huge_pages(void *base, size_t size);

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

}  // namespace kz
