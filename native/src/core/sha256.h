// SHA-256 (FIPS 180-4), for the digests kazetts writes into its files (a voice's seal, the
// speaker encoder's fingerprint): the same hex strings as Python's hashlib.sha256.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kz {

class Sha256 {
  public:
    Sha256();
    void update(const void *data, size_t n);
    void update(const std::string &s) { update(s.data(), s.size()); }
    // The digest as 64 lowercase hex digits; the object is spent afterwards.
    std::string hex();

  private:
    void block(const uint8_t *p);
    uint32_t h_[8];
    uint8_t buf_[64];
    size_t used_ = 0;
    uint64_t bytes_ = 0;
};

}  // namespace kz
