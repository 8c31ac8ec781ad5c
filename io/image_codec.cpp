// The core's side of libtezip_images.so (io/image_codec.hpp): loads it once and forwards.
#include "io/image_codec.hpp"

#include "format/errors.hpp"
#include "io/images/module_table.hpp"
#include "predictor/shared_module.hpp"

namespace tezip {
namespace {

struct Loaded {
  const ImageModule* module = nullptr;
  std::string error;
};

const ImageModule& module(const std::string& purpose) {
  static const Loaded loaded = [] {
    Loaded l;
    l.module = static_cast<const ImageModule*>(load_shared_module("libtezip_images.so", "TEZIP_IMAGE_MODULE",
                                                                   TEZIP_IMAGE_MODULE_ENTRY, TEZIP_IMAGE_MODULE_ABI,
                                                                   "image files and video", l.error));
    return l;
  }();
  if (loaded.module == nullptr) throw InputError(purpose + ": " + loaded.error);
  return *loaded.module;
}

}  // namespace

RasterImage read_image_file(const std::filesystem::path& path) { return module(path.string()).read_image_file(path); }

std::vector<std::uint8_t> encode_image(const std::string& extension, const RasterImage& image, bool bilevel,
                                       const std::string& file) {
  const ImageModule* m = nullptr;
  try {
    m = &module(file);
  } catch (const InputError& e) {
    throw OutputError(e.what());
  }
  return m->encode_image(extension, image, bilevel, file);
}

std::unique_ptr<VideoDecoder> open_video(const std::filesystem::path& path) { return module(path.string()).open_video(path); }

}  // namespace tezip
