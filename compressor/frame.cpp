#include "compressor/frame.hpp"

namespace tezip {

std::string to_string(PixelType type) {
  switch (type) {
    case PixelType::U8: return "uint8";
    case PixelType::U16: return "uint16";
  }
  return "unknown";
}

}  // namespace tezip
