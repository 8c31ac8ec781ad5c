// libtezip_images.so: io/image_codec.hpp on OpenCV. The only code that includes OpenCV.
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>

#include <cstring>

#include "format/errors.hpp"
#include "io/image_codec.hpp"
#include "io/images/module_table.hpp"

namespace tezip {
namespace {

RasterImage from_mat(const cv::Mat& m) {
  RasterImage image;
  image.width = std::uint32_t(m.cols);
  image.height = std::uint32_t(m.rows);
  image.channels = std::uint32_t(m.channels());
  image.bits = m.depth() == CV_8U ? 8 : m.depth() == CV_16U ? 16 : 0;
  if (image.bits == 0) return image;  // the caller refuses it by its bits
  const std::size_t row = std::size_t(m.cols) * m.elemSize();
  image.samples.resize(row * std::size_t(m.rows));
  for (int y = 0; y < m.rows; ++y) std::memcpy(image.samples.data() + std::size_t(y) * row, m.ptr(y), row);
  return image;
}

RasterImage read_image_file(const std::filesystem::path& path) {
  cv::Mat m;
  try {
    m = cv::imread(path.string(), cv::IMREAD_UNCHANGED);
  } catch (const cv::Exception&) {
    m.release();  // a decoder that throws is the same to us as one that returns nothing
  }
  if (m.empty()) throw InputError(path.string() + ": cannot read the image (unreadable or corrupt)");
  return from_mat(m);
}

std::vector<std::uint8_t> encode_image(const std::string& extension, const RasterImage& image, bool bilevel,
                                       const std::string& file) {
  const int depth = image.bits == 16 ? CV_16U : CV_8U;
  // The samples are only read: OpenCV's encoders take a const image.
  const cv::Mat m(int(image.height), int(image.width), CV_MAKETYPE(depth, int(image.channels)),
                  const_cast<std::uint8_t*>(image.samples.data()));
  std::vector<int> params;
  if (bilevel) params = {cv::IMWRITE_PNG_BILEVEL, 1};
  std::vector<std::uint8_t> encoded;
  try {
    if (!cv::imencode(extension, m, encoded, params)) throw OutputError(file + ": cannot write: the encoder failed");
  } catch (const cv::Exception& e) {
    throw OutputError(file + ": cannot write: " + e.what());
  }
  return encoded;
}

class OpenCvVideo final : public VideoDecoder {
 public:
  explicit OpenCvVideo(const std::filesystem::path& path) {
    bool ok = false;
    // FFmpeg first: the other back ends guess (CAP_IMAGES reads "clip_01.avi" as an image-sequence
    // pattern), and are only tried when FFmpeg cannot open the file.
    for (int api : {int(cv::CAP_FFMPEG), int(cv::CAP_ANY)}) {
      try {
        ok = capture_.open(path.string(), api);
      } catch (const cv::Exception&) {
        ok = false;
      }
      if (ok && capture_.isOpened()) break;
    }
    if (!ok || !capture_.isOpened())
      throw InputError(path.string() + ": cannot open as a video (not a supported image, video or .npy file)");
  }
  bool read(RasterImage& image) override {
    cv::Mat m;
    if (!capture_.read(m) || m.empty()) return false;
    image = from_mat(m);
    return true;
  }
  bool skip() override { return capture_.grab(); }

 private:
  cv::VideoCapture capture_;
};

std::unique_ptr<VideoDecoder> open_video(const std::filesystem::path& path) { return std::make_unique<OpenCvVideo>(path); }

const ImageModule kModule = {TEZIP_IMAGE_MODULE_ABI, &read_image_file, &encode_image, &open_video};

}  // namespace
}  // namespace tezip

extern "C" __attribute__((visibility("default"))) const tezip::ImageModule* tezip_image_module_v1() { return &tezip::kModule; }
