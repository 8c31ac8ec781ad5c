#include "format/frame.hpp"

namespace tezip {

std::string to_string(PixelType type) {
  switch (type) {
    case PixelType::U8: return "uint8";
    case PixelType::U16: return "uint16";
  }
  return "unknown";
}

bool safe_frame_name(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameBytes || name == "." || name == "..") return false;
  return name.find_first_of(std::string("/\\\0", 3)) == std::string::npos;
}

bool safe_sequence_name(const std::string& name) {
  if (name.empty()) return true;
  if (name.size() > kMaxNameBytes) return false;
  std::size_t begin = 0;
  for (;;) {
    const std::size_t end = name.find('/', begin);
    if (!safe_frame_name(name.substr(begin, end == std::string::npos ? std::string::npos : end - begin))) return false;
    if (end == std::string::npos) return true;
    begin = end + 1;
  }
}

}  // namespace tezip
