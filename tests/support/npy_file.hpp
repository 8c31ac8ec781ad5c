#pragma once
// A .npy file of uint8 values ('|u1', C order) written for tests.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace tezip::test {

// `values` in C order; empty: a fixed pattern ((i * 37) % 251) of the shape's size.
inline void write_npy(const std::filesystem::path& path, const std::vector<std::uint64_t>& shape,
                      std::vector<std::uint8_t> values = {}) {
  std::string dims;
  std::uint64_t count = 1;
  for (auto d : shape) dims += std::to_string(d) + ",", count *= d;
  if (values.empty())
    for (std::uint64_t i = 0; i < count; ++i) values.push_back(std::uint8_t((i * 37) % 251));
  std::string header = "{'descr': '|u1', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const char len[2] = {char(header.size() & 0xff), char(header.size() >> 8)};
  out.write(len, 2);
  out << header;
  out.write(reinterpret_cast<const char*>(values.data()), std::streamsize(values.size()));
}

}  // namespace tezip::test
