#pragma once
// The table libtezip_images.so exports and the core loads (io/image_codec.cpp): internal, not
// installed (io/images/ is left out of the install rules in CMakeLists.txt). Both sides are built
// together; `abi` refuses a module from another build (predictor/shared_module.hpp).
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "io/image_codec.hpp"

namespace tezip {

struct ImageModule {
  const char* abi;
  RasterImage (*read_image_file)(const std::filesystem::path&);
  std::vector<std::uint8_t> (*encode_image)(const std::string&, const RasterImage&, bool, const std::string&);
  std::unique_ptr<VideoDecoder> (*open_video)(const std::filesystem::path&);
};

#define TEZIP_IMAGE_MODULE_ABI "tezip-images " TEZIP_VERSION_STRING "; " __VERSION__
#define TEZIP_IMAGE_MODULE_ENTRY "tezip_image_module_v1"

}  // namespace tezip
