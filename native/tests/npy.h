// Reader of the golden dumps' .npy files (numpy's format 1.0-3.0): float32 or int32,
// little-endian, C order, which is all that kazetts/validation/goldens.py writes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

struct NpyArray {
    std::vector<int64_t> shape;
    std::vector<float> f32;    // filled when the file holds '<f4'
    std::vector<int32_t> i32;  // filled when the file holds '<i4'

    int64_t dim(size_t axis) const { return shape.at(axis); }
    int64_t size() const;
};

// Throws std::runtime_error when the file is missing or is not a float32/int32 C-order array.
NpyArray load_npy(const std::string &path);
