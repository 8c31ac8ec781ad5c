#include "io/source.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "format/errors.hpp"
#include "format/file_format.hpp"
#include "io/image_codec.hpp"
#include "io/npy.hpp"

namespace fs = std::filesystem;

namespace tezip {
namespace {

std::string describe(const Geometry& g) {
  return std::to_string(g.width) + "x" + std::to_string(g.height) + " " + std::to_string(g.channels) +
         (g.channels == 1 ? " channel " : " channels ") + to_string(g.type);
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Canonical format name for an image file extension, or "" when the file is not an image we read.
std::string image_format(const fs::path& path) {
  const std::string ext = lower(path.extension().string());
  if (ext == ".png") return "png";
  if (ext == ".pgm") return "pgm";
  if (ext == ".ppm") return "ppm";
  if (ext == ".pnm") return "pnm";  // resolved to pgm or ppm once the channel count is known
  if (ext == ".bmp") return "bmp";
  if (ext == ".tif" || ext == ".tiff") return "tiff";
  if (ext == ".jpg" || ext == ".jpeg") return "jpeg";
  return "";
}

bool hidden(const fs::path& path) {
  const std::string name = path.filename().string();
  return !name.empty() && name[0] == '.';
}

std::string frame_name(std::size_t index) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "frame_%06zu", index);
  return buf;
}

// Geometry of a decoded image; rejects what a Frame cannot hold.
Geometry geometry_of(const RasterImage& m, const std::string& file) {
  Geometry g;
  if (m.bits == 8) {
    g.type = PixelType::U8;
  } else if (m.bits == 16) {
    g.type = PixelType::U16;
  } else {
    throw InputError(file + ": only 8-bit and 16-bit unsigned images are supported");
  }
  if (m.channels == 4) throw InputError(file + ": 4-channel images are not supported");
  if (m.channels != 1 && m.channels != 3) {
    throw InputError(file + ": " + std::to_string(m.channels) + "-channel images are not supported");
  }
  g.channels = m.channels;
  g.width = m.width;
  g.height = m.height;
  return g;
}

// Interleaved samples to planes, C channels (a constant, so that no sample costs a division).
template <std::size_t C, class T>
void deinterleave(const T* p, std::size_t plane, std::uint16_t* out) {
  for (std::size_t j = 0; j < plane; ++j)
    for (std::size_t k = 0; k < C; ++k) out[k * plane + j] = p[j * C + k];
}

// Interleaved image to planar uint16, keeping the codec's channel order (B, G, R).
Pixels to_planar(const RasterImage& m, const Geometry& g) {
  Pixels out(g.pixel_count());
  const std::size_t plane = g.plane_size();
  auto convert = [&](const auto* p) {
    if (g.channels == 3) {
      deinterleave<3>(p, plane, out.data());
    } else if (g.channels == 1) {
      deinterleave<1>(p, plane, out.data());
    } else {
      throw std::logic_error("to_planar: 1 or 3 channels (geometry_of checks)");
    }
  };
  if (g.type == PixelType::U8) {
    convert(m.samples.data());
  } else {
    convert(reinterpret_cast<const std::uint16_t*>(m.samples.data()));
  }
  return out;
}

RasterImage read_image(const fs::path& path) { return read_image_file(path); }

class FolderSource final : public SequenceSource {
 public:
  FolderSource(std::string name, std::vector<fs::path> files) : name_(std::move(name)), files_(std::move(files)) {
    geometry_ = geometry_of(read_image(files_.front()), files_.front().string());
  }
  const std::string& name() const override { return name_; }
  const Geometry& geometry() const override { return geometry_; }
  std::size_t frame_count() const override { return files_.size(); }
  Frame read(std::size_t index) override {
    const fs::path& path = files_.at(index);
    const std::string file = path.string();
    const RasterImage m = read_image(path);
    const Geometry g = geometry_of(m, file);
    if (!(g == geometry_)) {
      throw InputError(file + ": " + describe(g) + " differs from the sequence's " + describe(geometry_));
    }
    Frame f;
    f.name = path.filename().string();
    f.format = image_format(path);
    if (f.format == "pnm") f.format = g.channels == 1 ? "pgm" : "ppm";
    f.format = to_string(detect_file_format(path, f.format, g.max_value()));
    f.pixels = to_planar(m, g);
    return f;
  }

 private:
  std::string name_;
  std::vector<fs::path> files_;
  Geometry geometry_;
};

// Reads frames at computed offsets so a large array is never held in memory whole.
class NpySource final : public SequenceSource {
 public:
  NpySource(fs::path path, std::string name, Geometry g, std::size_t frames, std::uint64_t offset)
      : path_(std::move(path)), name_(std::move(name)), geometry_(g), frames_(frames), offset_(offset) {}
  const std::string& name() const override { return name_; }
  const Geometry& geometry() const override { return geometry_; }
  std::size_t frame_count() const override { return frames_; }
  Frame read(std::size_t index) override {
    if (index >= frames_) throw std::out_of_range("NpySource::read: frame index out of range");
    const std::string file = path_.string();
    if (!in_.is_open()) {
      in_.open(path_, std::ios::binary);
      if (!in_) throw InputError(file + ": cannot open");
    }
    const std::size_t bytes = geometry_.raw_bytes();
    std::vector<std::uint8_t>& raw = raw_;  // kept between frames: no fresh pages to fault in each time
    raw.resize(bytes);
    in_.clear();
    in_.seekg(std::streamoff(offset_ + index * bytes));
    in_.read(reinterpret_cast<char*>(raw.data()), std::streamsize(bytes));
    if (!in_ || std::size_t(in_.gcount()) != bytes) {
      throw InputError(file + ": cannot read frame " + std::to_string(index) + " (file changed or truncated?)");
    }
    Frame f;
    f.name = frame_name(index);
    f.format = "npy";
    f.pixels.resize(geometry_.pixel_count());
    const std::size_t plane = geometry_.plane_size();
    const std::size_t c = geometry_.channels;
    // (H, W, C) interleaved in the file, planes in the frame; .npy data is little-endian ('<u2'),
    // whatever this machine is. One loop per type, so that the compiler vectorizes each.
    if (geometry_.type == PixelType::U8 && c == 1) {
      std::copy(raw.begin(), raw.end(), f.pixels.begin());
    } else if (geometry_.type == PixelType::U8) {
      for (std::size_t k = 0; k < c; ++k) {
        std::uint16_t* out = f.pixels.data() + k * plane;
        for (std::size_t i = 0; i < plane; ++i) out[i] = raw[i * c + k];
      }
    } else {
      for (std::size_t k = 0; k < c; ++k) {
        std::uint16_t* out = f.pixels.data() + k * plane;
        for (std::size_t i = 0; i < plane; ++i) {
          const std::size_t e = i * c + k;
          out[i] = std::uint16_t(raw[2 * e] | (raw[2 * e + 1] << 8));
        }
      }
    }
    return f;
  }

 private:
  fs::path path_;
  std::string name_;
  Geometry geometry_;
  std::size_t frames_;
  std::uint64_t offset_;
  std::ifstream in_;
  std::vector<std::uint8_t> raw_;  // the last frame's bytes as read
};

class VideoSource final : public SequenceSource {
 public:
  explicit VideoSource(fs::path path) : path_(std::move(path)) {
    // CAP_PROP_FRAME_COUNT is an estimate from the container and is wrong for many files, so the
    // frames are counted by decoding once; grab() skips the colour conversion.
    open();
    RasterImage first;
    if (!video_->read(first)) throw InputError(path_.string() + ": the video has no frames");
    geometry_ = geometry_of(first, path_.string());
    frames_ = 1;
    while (video_->skip()) ++frames_;
    open();
  }
  const std::string& name() const override { return name_; }
  const Geometry& geometry() const override { return geometry_; }
  std::size_t frame_count() const override { return frames_; }
  Frame read(std::size_t index) override {
    const std::string file = path_.string();
    if (index >= frames_) throw std::out_of_range("VideoSource::read: frame index out of range");
    if (index < next_) open();  // going back means decoding again from the start
    while (next_ < index) {
      if (!video_->skip()) throw InputError(file + ": cannot decode frame " + std::to_string(next_));
      ++next_;
    }
    RasterImage m;
    if (!video_->read(m)) throw InputError(file + ": cannot decode frame " + std::to_string(index));
    ++next_;
    const Geometry g = geometry_of(m, file);
    if (!(g == geometry_)) {
      throw InputError(file + ": frame " + std::to_string(index) + " is " + describe(g) +
                       ", differing from the video's " + describe(geometry_));
    }
    Frame f;
    f.name = frame_name(index);
    f.format = "video";
    f.pixels = to_planar(m, g);
    return f;
  }

 private:
  void open() {
    video_.reset();  // one decoder at a time
    video_ = open_video(path_);
    next_ = 0;
  }

  fs::path path_;
  std::string name_;
  Geometry geometry_;
  std::size_t frames_ = 0;
  std::size_t next_ = 0;
  std::unique_ptr<VideoDecoder> video_;
};

std::vector<std::unique_ptr<SequenceSource>> open_npy(const fs::path& path, NpyLayout layout) {
  const std::string file = path.string();
  const NpyHeader h = read_npy_header(path, 4);
  const auto& s = h.shape;
  Geometry g;
  g.type = h.type;
  bool many = false;
  std::uint64_t sequences = 1, frames = 0, height = 0, width = 0, channels = 1;
  if (s.size() == 3) {
    if (layout != NpyLayout::Auto)
      throw InputError(file + ": a 3-D array is (T,H,W); --npy-layout " + to_string(layout) + " is for 4-D arrays");
    frames = s[0], height = s[1], width = s[2];
  } else if (s.size() == 4) {
    if (layout == NpyLayout::Auto) layout = s[3] == 1 || s[3] == 3 ? NpyLayout::THWC : NpyLayout::NTHW;
    if (layout == NpyLayout::THWC) {
      if (s[3] != 1 && s[3] != 3)
        throw InputError(file + ": --npy-layout THWC needs a last dimension of 1 or 3 channels, not " + std::to_string(s[3]));
      frames = s[0], height = s[1], width = s[2], channels = s[3];
    } else {
      many = true;
      sequences = s[0], frames = s[1], height = s[2], width = s[3];
    }
  } else {
    throw InputError(file + ": a " + std::to_string(s.size()) +
                     "-D array; expected (T,H,W), (T,H,W,C) with C 1 or 3, or (N,T,H,W)");
  }
  constexpr std::uint64_t max_side = 1u << 20;
  if (height > max_side || width > max_side) throw InputError(file + ": frames too large");
  g.height = std::uint32_t(height);
  g.width = std::uint32_t(width);
  g.channels = std::uint32_t(channels);
  std::vector<std::unique_ptr<SequenceSource>> out;
  const std::uint64_t sequence_bytes = frames * g.raw_bytes();  // bounded: the file size was checked
  for (std::uint64_t n = 0; n < sequences; ++n) {
    char name[32] = "";
    if (many) std::snprintf(name, sizeof name, "seq_%05llu", static_cast<unsigned long long>(n));
    out.push_back(std::make_unique<NpySource>(path, name, g, std::size_t(frames),
                                              h.data_offset + n * sequence_bytes));
  }
  return out;
}

std::vector<fs::path> image_files(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (hidden(entry.path()) || image_format(entry.path()).empty()) continue;
    std::error_code e2;
    if (entry.is_regular_file(e2)) files.push_back(entry.path());
  }
  if (ec) throw InputError(dir.string() + ": cannot list the folder: " + ec.message());
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    return natural_less(a.filename().string(), b.filename().string());
  });
  return files;
}

constexpr int kMaxDepth = 16;  // symbolic links can make loops

std::vector<fs::path> sub_folders(const fs::path& dir) {
  std::vector<fs::path> subdirs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::error_code e2;
    if (!hidden(entry.path()) && entry.is_directory(e2)) subdirs.push_back(entry.path());
  }
  if (ec) throw InputError(dir.string() + ": cannot list the folder: " + ec.message());
  std::sort(subdirs.begin(), subdirs.end(), [](const fs::path& a, const fs::path& b) {
    return natural_less(a.filename().string(), b.filename().string());
  });
  return subdirs;
}

// The first sub-folder of `dir`, at any depth, that holds image files; empty when none does.
fs::path folder_with_images_below(const fs::path& dir, int depth) {
  if (depth >= kMaxDepth) return {};
  for (const fs::path& sub : sub_folders(dir)) {
    if (!image_files(sub).empty()) return sub;
    if (auto deeper = folder_with_images_below(sub, depth + 1); !deeper.empty()) return deeper;
  }
  return {};
}

// A folder's own images make one sequence; images in its sub-folders would be dropped without a
// word, so a folder holding both is refused.
void refuse_mixed(const fs::path& dir, std::size_t images, int depth) {
  if (const auto sub = folder_with_images_below(dir, depth); !sub.empty())
    throw InputError(dir.string() + ": holds " + std::to_string(images) + " image files of its own and more in the sub-folder " +
                     sub.string() + "; a folder is either one sequence (images only) or a dataset (sub-folders only). "
                     "Move the images into a sub-folder, or give each folder alone");
}

// A sub-folder holding image files is a sequence; one without them is searched further.
void collect_sequences(const fs::path& root, const fs::path& dir, int depth,
                       std::vector<std::unique_ptr<SequenceSource>>& out) {
  for (const fs::path& sub : sub_folders(dir)) {
    std::vector<fs::path> files = image_files(sub);
    if (!files.empty()) {
      refuse_mixed(sub, files.size(), depth + 1);
      out.push_back(std::make_unique<FolderSource>(sub.lexically_relative(root).generic_string(), std::move(files)));
    } else if (depth < kMaxDepth) {
      collect_sequences(root, sub, depth + 1, out);
    }
  }
}

}  // namespace

bool natural_less(const std::string& a, const std::string& b) {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      // Compare the digit runs by value without converting, so any length works.
      std::size_t ie = i, je = j;
      while (ie < a.size() && digit(a[ie])) ++ie;
      while (je < b.size() && digit(b[je])) ++je;
      std::size_t is = i, js = j;
      while (is + 1 < ie && a[is] == '0') ++is;
      while (js + 1 < je && b[js] == '0') ++js;
      if (ie - is != je - js) return ie - is < je - js;
      const int c = a.compare(is, ie - is, b, js, je - js);
      if (c != 0) return c < 0;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
      ++i;
      ++j;
    }
  }
  if ((i < a.size()) != (j < b.size())) return j < b.size();
  // Equal up to leading zeros ("f2" and "f02"): fall back to a total order.
  if (a.size() != b.size()) return a.size() < b.size();
  return a < b;
}

std::string to_string(NpyLayout layout) {
  switch (layout) {
    case NpyLayout::Auto: return "auto";
    case NpyLayout::THWC: return "THWC";
    case NpyLayout::NTHW: return "NTHW";
  }
  return "?";
}

NpyLayout parse_npy_layout(const std::string& text) {
  std::string t = lower(text);
  if (t == "auto") return NpyLayout::Auto;
  if (t == "thwc") return NpyLayout::THWC;
  if (t == "nthw") return NpyLayout::NTHW;
  throw std::invalid_argument("--npy-layout must be auto, THWC or NTHW, not '" + text + "'");
}

std::vector<std::unique_ptr<SequenceSource>> open_sources(const fs::path& input, const SourceOptions& options) {
  const std::string file = input.string();
  std::error_code ec;
  const fs::file_status st = fs::status(input, ec);
  if (!fs::exists(st)) throw InputError(file + ": no such file or directory");
  if (ec) throw InputError(file + ": cannot access: " + ec.message());

  std::vector<std::unique_ptr<SequenceSource>> out;
  if (fs::is_directory(st)) {
    std::vector<fs::path> files = image_files(input);
    if (!files.empty()) {
      refuse_mixed(input, files.size(), 0);
      out.push_back(std::make_unique<FolderSource>("", std::move(files)));
    } else {
      collect_sequences(input, input, 0, out);
    }
    if (out.empty()) throw InputError(file + ": no image files in the folder or its sub-folders");
    return out;
  }
  if (!fs::is_regular_file(st)) throw InputError(file + ": not a regular file or folder");
  if (lower(input.extension().string()) == ".npy") return open_npy(input, options.npy_layout);
  if (!image_format(input).empty()) {
    throw InputError(file + ": a single image is not a sequence; give the folder that holds the frames");
  }
  out.push_back(std::make_unique<VideoSource>(input));
  return out;
}

}  // namespace tezip
