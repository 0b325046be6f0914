// Internal helpers shared by the stages; never part of the C ABI.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

#define KZ_ABI_VERSION 1

namespace kz {

// Thrown inside the library only; every exported function catches it and returns its status.
struct Error : std::runtime_error {
    int status;
    Error(int s, const std::string &message) : std::runtime_error(message), status(s) {}
};

// Copies a message into a caller-owned buffer (truncated, always NUL-terminated).
void write_error(char *buf, size_t len, const std::string &message);

}  // namespace kz
