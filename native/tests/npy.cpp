#include "npy.h"

#include <cstring>
#include <fstream>
#include <stdexcept>

int64_t NpyArray::size() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

namespace {

std::string header_value(const std::string &header, const std::string &key) {
    size_t at = header.find("'" + key + "'");
    if (at == std::string::npos) throw std::runtime_error("npy header without " + key);
    size_t colon = header.find(':', at);
    size_t end = key == "shape" ? header.find(')', colon) + 1 : header.find(',', colon);
    return header.substr(colon + 1, end - colon - 1);
}

std::vector<int64_t> parse_shape(const std::string &text) {
    std::vector<int64_t> shape;
    const char *p = text.c_str();
    while (*p) {
        if (*p >= '0' && *p <= '9') {
            char *end = nullptr;
            shape.push_back(std::strtoll(p, &end, 10));
            p = end;
        } else {
            ++p;
        }
    }
    return shape;  // "()" is a scalar: no axes
}

template <typename T>
void read_values(std::ifstream &in, int64_t n, std::vector<T> &out, const std::string &path) {
    out.resize(size_t(n));
    in.read(reinterpret_cast<char *>(out.data()), std::streamsize(n * sizeof(T)));
    if (!in) throw std::runtime_error(path + ": truncated data");
}

}  // namespace

NpyArray load_npy(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path);
    char magic[8];
    in.read(magic, 8);
    if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0) throw std::runtime_error(path + ": not a .npy file");
    uint32_t header_len = 0;
    unsigned char len_bytes[4] = {0, 0, 0, 0};
    in.read(reinterpret_cast<char *>(len_bytes), magic[6] == 1 ? 2 : 4);  // version 1: 2 bytes, later: 4
    for (int i = 3; i >= 0; --i) header_len = header_len << 8 | len_bytes[i];
    std::string header(header_len, '\0');
    in.read(&header[0], header_len);
    if (!in) throw std::runtime_error(path + ": truncated header");
    if (header_value(header, "fortran_order").find("False") == std::string::npos)
        throw std::runtime_error(path + ": Fortran order is not supported");
    NpyArray a;
    a.shape = parse_shape(header_value(header, "shape"));
    std::string descr = header_value(header, "descr");
    if (descr.find("<f4") != std::string::npos) {
        read_values(in, a.size(), a.f32, path);
    } else if (descr.find("<i4") != std::string::npos) {
        read_values(in, a.size(), a.i32, path);
    } else {
        throw std::runtime_error(path + ": dtype " + descr + " is not float32 or int32");
    }
    return a;
}
