#pragma once
#include <stdexcept>

namespace tezip::codecs {

// Coded bytes that cannot be decoded: truncated, corrupted or out of the limits the caller allowed.
struct CodecError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace tezip::codecs
