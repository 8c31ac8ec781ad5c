#include "format/file_format.hpp"

#include <cctype>
#include <fstream>
#include <vector>

namespace tezip {

FileFormat parse_file_format(const std::string& text) {
  FileFormat f;
  std::size_t colon = text.find(':');
  f.container = text.substr(0, colon);
  while (colon != std::string::npos) {
    const std::size_t next = text.find(':', colon + 1);
    const std::string q = text.substr(colon + 1, next == std::string::npos ? std::string::npos : next - colon - 1);
    if (q == "a") f.plain = true;
    else if (q == "p") f.palette = true;
    else if (f.container == "png" && (q == "1" || q == "2" || q == "4")) f.bits = unsigned(q[0] - '0');
    else if (!q.empty() && q.size() <= 5 && q.find_first_not_of("0123456789") == std::string::npos) f.maxval = std::uint32_t(std::stoul(q));
    colon = next;
  }
  if (f.maxval > 65535) f.maxval = 0;
  return f;
}

std::string to_string(const FileFormat& f) {
  std::string out = f.container;
  if (f.maxval) out += ":" + std::to_string(f.maxval);
  if (f.plain) out += ":a";
  if (f.bits) out += ":" + std::to_string(f.bits);
  if (f.palette) out += ":p";
  return out;
}

namespace {

std::vector<unsigned char> head(const std::filesystem::path& path, std::size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::vector<unsigned char> out(bytes);
  in.read(reinterpret_cast<char*>(out.data()), std::streamsize(bytes));
  out.resize(std::size_t(std::max<std::streamsize>(0, in.gcount())));
  return out;
}

// Magic, width, height, maxval of a PNM header (comments skipped); false when not P2, P3, P5 or P6.
bool pnm_header(const std::vector<unsigned char>& h, char& kind, std::uint32_t& maxval) {
  if (h.size() < 2 || h[0] != 'P' || (h[1] != '2' && h[1] != '3' && h[1] != '5' && h[1] != '6')) return false;
  kind = char(h[1]);
  std::size_t i = 2;
  std::uint64_t values[3] = {};
  for (auto& v : values) {
    for (;;) {
      while (i < h.size() && std::isspace(h[i])) ++i;
      if (i < h.size() && h[i] == '#') {
        while (i < h.size() && h[i] != '\n') ++i;
        continue;
      }
      break;
    }
    if (i >= h.size() || !std::isdigit(h[i])) return false;
    while (i < h.size() && std::isdigit(h[i]) && v < 1000000) v = v * 10 + (h[i++] - '0');
  }
  maxval = std::uint32_t(values[2]);
  return maxval >= 1 && maxval <= 65535;
}

}  // namespace

FileFormat detect_file_format(const std::filesystem::path& path, const std::string& container, std::uint32_t max_value) {
  FileFormat f;
  f.container = container;
  if (container == "pgm" || container == "ppm") {
    char kind = 0;
    std::uint32_t maxval = 0;
    if (pnm_header(head(path, 1024), kind, maxval)) {
      if (maxval != max_value) f.maxval = maxval;
      f.plain = kind == '2' || kind == '3';
    }
  } else if (container == "png") {
    // Signature, IHDR length and type, width, height, then bit depth (byte 24) and colour type (25).
    const auto h = head(path, 26);
    if (h.size() == 26 && h[12] == 'I' && h[13] == 'H' && h[14] == 'D' && h[15] == 'R') {
      const unsigned depth = h[24], colour = h[25];
      if (colour == 3) f.palette = true;
      else if (colour == 0 && depth < 8) f.bits = depth;
    }
  }
  return f;
}

std::string restoration_note(const FileFormat& f) {
  if (f.container == "jpeg") return "written as PNG: the decoded JPEG pixels, not the JPEG file";
  if (f.container == "video") return "written as PNG: the decoded video frames";
  if (f.container == "npy") return "written as PNG, one file per frame";
  if (f.palette) return "written as 8-bit colour PNG: the palette is not kept";
  if (f.bits == 2 || f.bits == 4) return "written as 8-bit gray PNG (values as read, scaled to 0-255)";
  return "";
}

}  // namespace tezip
