#!/bin/sh
# Rebuilds datasets/sample/ from Debian 12 (bookworm) packages, byte for byte on Debian 12.
#
# Needs (apt-get install): g++ pkg-config libopencv-dev (core, imgcodecs, videoio with FFmpeg),
# and apt-get able to download (it fetches two .deb files without installing them):
#   opencv-doc        4.6.0+dfsg-12  vtest.avi             Apache-2.0 AND BSD-3-Clause (OpenCV)
#   visp-images-data  3.5.0-1        mire-2/, Castle-simu  GPL-2 (Inria, ViSP)
#
# Usage: datasets/make_sample.sh [OUTPUT_DIR]   (default: the sample/ folder next to this script)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/sample}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cd "$work"
apt-get download opencv-doc=4.6.0+dfsg-12 visp-images-data=3.5.0-1
dpkg -x opencv-doc_*.deb opencv-doc
dpkg -x visp-images-data_*.deb visp
vtest=opencv-doc/usr/share/doc/opencv-doc/examples/data/vtest.avi
if [ ! -f "$vtest" ] && [ -f "$vtest.gz" ]; then gunzip -k "$vtest.gz"; fi
visp=visp/usr/share/visp-images-data/ViSP-images

# The cutting is a small OpenCV program so that decoding, cropping and encoding are the same
# library the compressor reads with.
cat > cut.cpp <<'CPP'
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>
#include <stdexcept>
#include <string>
#include <vector>

static std::string numbered(const std::string& stem, int i, const char* ext) {
  char digits[16];
  std::snprintf(digits, sizeof digits, "%04d.", i);
  return stem + digits + ext;
}

// PNG at zlib level 9 (the sample ships in the repository); PGM in binary.
static void save(const std::string& path, const cv::Mat& m) {
  const std::vector<int> params = {cv::IMWRITE_PNG_COMPRESSION, 9, cv::IMWRITE_PXM_BINARY, 1};
  if (!cv::imwrite(path, m, params)) throw std::runtime_error("cannot write " + path);
}

static cv::Mat centre(const cv::Mat& m, int w, int h) {
  return m(cv::Rect((m.cols - w) / 2, (m.rows - h) / 2, w, h)).clone();
}

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  const std::string vtest = argv[1], visp = argv[2], out = argv[3];

  // vtest: frames 240..255 (0-based decode order), region x 300..459, y 250..369.
  cv::VideoCapture cap(vtest, cv::CAP_FFMPEG);
  if (!cap.isOpened()) throw std::runtime_error("cannot open " + vtest);
  cv::Mat frame, previous;
  int cut = 0;
  for (int i = 0; i < 256 && cap.read(frame); ++i) {
    if (i < 240) continue;
    cv::Mat crop = frame(cv::Rect(300, 250, 160, 120)).clone();
    // A repeated frame would be a decoder artefact, not motion.
    if (!previous.empty() && cv::norm(crop, previous, cv::NORM_INF) == 0) throw std::runtime_error("duplicate frame");
    save(numbered(out + "/vtest/vtest_", i, "png"), crop);
    previous = crop;
    ++cut;
  }
  if (cut != 16) throw std::runtime_error("vtest.avi has fewer than 256 frames");

  // mire-2: image.0001..0016, 384x288 gray, centre 160x120, binary PGM.
  for (int i = 1; i <= 16; ++i) {
    cv::Mat m = cv::imread(numbered(visp + "/mire-2/image.", i, "pgm"), cv::IMREAD_UNCHANGED);
    if (m.empty() || m.type() != CV_8UC1) throw std::runtime_error("bad mire frame");
    save(numbered(out + "/mire/mire_", i, "pgm"), centre(m, 160, 120));
  }

  // Castle-simu depth: Depth_0001..0008.bin = uint32 LE height, uint32 LE width, uint16 LE pixels.
  for (int i = 1; i <= 8; ++i) {
    const std::string path = numbered(visp + "/mbt-depth/Castle-simu/Depth/Depth_", i, "bin");
    std::ifstream in(path, std::ios::binary);
    unsigned char hdr[8];
    if (!in.read(reinterpret_cast<char*>(hdr), 8)) throw std::runtime_error("cannot read " + path);
    const int h = hdr[0] | hdr[1] << 8 | hdr[2] << 16 | hdr[3] << 24;
    const int w = hdr[4] | hdr[5] << 8 | hdr[6] << 16 | hdr[7] << 24;
    if (h <= 0 || w <= 0 || h > 4096 || w > 4096) throw std::runtime_error("bad header in " + path);
    std::vector<unsigned char> raw(std::size_t(w) * h * 2);
    if (!in.read(reinterpret_cast<char*>(raw.data()), std::streamsize(raw.size()))) {
      throw std::runtime_error("truncated " + path);
    }
    cv::Mat m(h, w, CV_16UC1);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        const std::size_t e = (std::size_t(y) * w + x) * 2;
        m.at<std::uint16_t>(y, x) = std::uint16_t(raw[e] | raw[e + 1] << 8);
      }
    save(numbered(out + "/castle16/depth_", i, "png"), centre(m, 160, 120));
  }
  return 0;
}
CPP
# shellcheck disable=SC2046
g++ -std=c++17 -O2 cut.cpp -o cut $(pkg-config --cflags --libs opencv4)

mkdir -p "$out"
rm -rf "$out/vtest" "$out/mire" "$out/castle16"
mkdir -p "$out/vtest" "$out/mire" "$out/castle16"
./cut "$vtest" "$visp" "$out"

cd "$out"
if [ -f SHA256SUMS ] && ! sha256sum --quiet -c SHA256SUMS; then
  echo "make_sample.sh: output differs from SHA256SUMS (other OpenCV/libpng/FFmpeg versions encode differently)" >&2
  exit 1
fi
du -sh "$out"
