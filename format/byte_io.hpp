#pragma once
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "codecs/varint.hpp"
#include "format/errors.hpp"

namespace tezip {

static_assert(std::endian::native == std::endian::little, "the archive layout assumes a little-endian host");

// Appends little-endian integers, varints and length-prefixed strings.
class ByteWriter {
 public:
  void u8(std::uint8_t v) { bytes_.push_back(v); }
  void u32(std::uint32_t v) { raw(&v, sizeof v); }
  void u64(std::uint64_t v) { raw(&v, sizeof v); }
  void f64(double v) { raw(&v, sizeof v); }
  void varint(std::uint64_t v) { codecs::append_varint(v, bytes_); }
  void string(const std::string& s) {
    varint(s.size());
    raw(s.data(), s.size());
  }
  void blob(std::span<const std::uint8_t> b) {
    varint(b.size());
    raw(b.data(), b.size());
  }
  void raw(const void* data, std::size_t size) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + size);
  }
  std::vector<std::uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<std::uint8_t> bytes_;
};

// Reads what ByteWriter wrote, trusting nothing: every read is checked against what is left, and
// failures throw DataError naming `what` (e.g. "archive index").
class ByteReader {
 public:
  ByteReader(std::span<const std::uint8_t> bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}

  std::uint8_t u8() { return take(1)[0]; }
  std::uint32_t u32() { return load<std::uint32_t>(); }
  std::uint64_t u64() { return load<std::uint64_t>(); }
  double f64() { return load<double>(); }
  std::uint64_t varint() {
    std::uint64_t v = 0;
    switch (codecs::decode_varint(bytes_, position_, v)) {
      case codecs::VarintStatus::ok: return v;
      case codecs::VarintStatus::truncated: fail("truncated");
      case codecs::VarintStatus::overflow: break;
    }
    fail("varint overflows 64 bits");
  }
  // A count or size that must not exceed `limit`.
  std::uint64_t varint(std::uint64_t limit, const char* name) {
    const std::uint64_t v = varint();
    if (v > limit) fail(std::string(name) + " " + std::to_string(v) + " exceeds its limit " + std::to_string(limit));
    return v;
  }
  std::string string(std::size_t limit = 4096) {
    const auto size = varint(limit, "string length");
    const auto b = take(size);
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }
  std::span<const std::uint8_t> blob() { return take(varint(remaining(), "block size")); }
  std::span<const std::uint8_t> take(std::size_t size) {
    if (size > remaining()) fail("truncated");
    auto out = bytes_.subspan(position_, size);
    position_ += size;
    return out;
  }
  std::size_t remaining() const { return bytes_.size() - position_; }
  void expect_end() const {
    if (remaining() != 0) fail(std::to_string(remaining()) + " unexpected trailing bytes");
  }
  [[noreturn]] void fail(const std::string& why) const { throw DataError(what_ + ": " + why); }

 private:
  template <class T>
  T load() {
    T v;
    std::memcpy(&v, take(sizeof(T)).data(), sizeof(T));
    return v;
  }

  std::span<const std::uint8_t> bytes_;
  std::size_t position_ = 0;
  std::string what_;
};

}  // namespace tezip
