#include "io/npy.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <fstream>
#include <limits>
#include <optional>
#include <string>

#include "format/errors.hpp"

namespace tezip {
namespace {

// The header is a Python dict literal; NumPy writes it one way, but other writers (and hostile
// files) may not, so this is a small strict parser rather than pattern matching on NumPy's spacing.
class DictParser {
 public:
  DictParser(const std::string& text, const std::string& file) : text_(text), file_(file) {}

  NpyHeader parse(std::size_t max_dims) {
    std::optional<std::string> descr;
    std::optional<bool> fortran;
    std::optional<std::vector<std::uint64_t>> shape;
    expect('{');
    while (!accept('}')) {
      std::string key = string_literal();
      expect(':');
      if (key == "descr" && !descr) {
        descr = string_literal();
      } else if (key == "fortran_order" && !fortran) {
        fortran = boolean();
      } else if (key == "shape" && !shape) {
        shape = tuple(max_dims);
      } else {
        fail("unexpected or repeated key '" + key + "' in the header");
      }
      if (!accept(',')) {
        expect('}');
        break;
      }
    }
    skip_space();
    if (pos_ != text_.size()) fail("trailing bytes after the header dict");
    if (!descr || !fortran || !shape) fail("header lacks 'descr', 'fortran_order' or 'shape'");
    if (*fortran) fail("Fortran-order arrays are not supported (save with C order)");

    NpyHeader header;
    std::uint64_t element = 0;
    if (*descr == "|u1" || *descr == "<u1") {
      header.type = PixelType::U8;
      element = 1;
    } else if (*descr == "<u2" || (*descr == "=u2" && std::endian::native == std::endian::little)) {
      header.type = PixelType::U16;
      element = 2;
    } else {
      fail("dtype '" + *descr + "' is not supported (only uint8 '|u1' and little-endian uint16 '<u2')");
    }
    header.shape = std::move(*shape);
    std::uint64_t bytes = element;
    for (std::uint64_t d : header.shape) {
      if (d == 0) fail("the array is empty (a dimension is 0)");
      if (bytes > std::numeric_limits<std::uint64_t>::max() / d) fail("the shape is too large");
      bytes *= d;
    }
    header.data_bytes = bytes;
    return header;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw InputError(file_ + ": not a usable .npy file: " + why);
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool accept(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!accept(c)) fail(std::string("malformed header dict (expected '") + c + "')");
  }
  std::string string_literal() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
      fail("malformed header dict (expected a string)");
    }
    char quote = text_[pos_++];
    std::size_t end = text_.find(quote, pos_);
    if (end == std::string::npos) fail("malformed header dict (unterminated string)");
    std::string s = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }
  bool boolean() {
    skip_space();
    for (auto [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      std::string w(word);
      if (text_.compare(pos_, w.size(), w) == 0) {
        pos_ += w.size();
        return value;
      }
    }
    fail("malformed header dict (expected True or False)");
  }
  std::vector<std::uint64_t> tuple(std::size_t max_dims) {
    std::vector<std::uint64_t> dims;
    expect('(');
    while (!accept(')')) {
      skip_space();
      std::uint64_t v = 0;
      std::size_t start = pos_;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        unsigned digit = unsigned(text_[pos_] - '0');
        if (v > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) fail("a dimension is too large");
        v = v * 10 + digit;
        ++pos_;
      }
      if (pos_ == start) fail("malformed shape");
      // Python writes long integers with an L suffix in old files.
      if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;
      dims.push_back(v);
      if (dims.size() > max_dims) fail("more than " + std::to_string(max_dims) + " dimensions");
      if (!accept(',')) {
        expect(')');
        break;
      }
    }
    return dims;
  }

  const std::string& text_;
  const std::string& file_;
  std::size_t pos_ = 0;
};

}  // namespace

NpyHeader read_npy_header(const std::filesystem::path& path, std::size_t max_dims) {
  const std::string file = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(file + ": cannot open");
  std::array<unsigned char, 12> pre{};
  in.read(reinterpret_cast<char*>(pre.data()), 10);
  static constexpr unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (in.gcount() != 10 || !std::equal(magic, magic + 6, pre.begin())) {
    throw InputError(file + ": not a .npy file (bad magic)");
  }
  const unsigned major = pre[6];
  std::uint64_t header_len = 0;
  std::uint64_t prefix = 0;
  if (major == 1) {
    header_len = pre[8] | (unsigned(pre[9]) << 8);
    prefix = 10;
  } else if (major == 2 || major == 3) {
    in.read(reinterpret_cast<char*>(pre.data()) + 10, 2);
    if (in.gcount() != 2) throw InputError(file + ": not a usable .npy file: truncated header");
    header_len = std::uint64_t(pre[8]) | (std::uint64_t(pre[9]) << 8) | (std::uint64_t(pre[10]) << 16) |
                 (std::uint64_t(pre[11]) << 24);
    prefix = 12;
  } else {
    throw InputError(file + ": .npy format version " + std::to_string(major) + " is not supported");
  }
  // NumPy's own limit; a larger length is a damaged file, not a header worth allocating for.
  if (header_len > (1u << 20)) throw InputError(file + ": not a usable .npy file: header too long");
  std::string text(header_len, '\0');
  in.read(text.data(), std::streamsize(header_len));
  if (std::uint64_t(in.gcount()) != header_len) {
    throw InputError(file + ": not a usable .npy file: truncated header");
  }
  NpyHeader header = DictParser(text, file).parse(max_dims);
  header.data_offset = prefix + header_len;

  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) throw InputError(file + ": cannot read the file size");
  if (size < header.data_offset || size - header.data_offset != header.data_bytes) {
    throw InputError(file + ": the file holds " + std::to_string(size - std::min(size, header.data_offset)) +
                     " data bytes but its header's shape and dtype need " + std::to_string(header.data_bytes));
  }
  return header;
}

}  // namespace tezip
