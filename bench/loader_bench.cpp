// Training-loader throughput (DESIGN.md §7): samples/s and MB/s of decoded pixels from a Stream
// (1 and 2 decode threads) against reading the same clips, in the same shuffled order, from one
// raw .npy file per frame and from PNG files decoded by OpenCV. Each case runs in a child process
// so its peak RSS is its own. The dataset is made here from synthetic frames.
//
//   loader_bench DIR [sequences=160] [frames=64] [size=96] [clip_len=4] [shuffle_buffer=64] [cases]
//
// cases: the ones to run, comma-separated, of stream1, stream2, npy, png (default: all), e.g.
// `perf record ... loader_bench DIR 160 64 96 4 64 stream1` to profile the Stream alone.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <random>
#include <string>
#include <vector>

#include "compressor/encoder.hpp"
#include "loader/stream.hpp"

namespace fs = std::filesystem;
using namespace tezip;

namespace {

struct Setup {
  fs::path dir;
  int sequences = 160, frames = 64, size = 96;
  std::size_t clip_len = 4, shuffle_buffer = 64;
};

std::string frame_name(int t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "f%05d", t);
  return buf;
}

// A textured scene drifting across the frame, with sensor noise: compressible, not trivial.
cv::Mat scene(int size, int sequence, int t) {
  cv::Mat m(size, size, CV_8U);
  std::mt19937 noise(unsigned(sequence * 100003 + t));
  for (int y = 0; y < size; ++y)
    for (int x = 0; x < size; ++x) {
      const double v = 128 + 60 * std::sin((x + t + sequence) * 0.11) * std::cos((y - t) * 0.07) + 30 * std::sin((x + y) * 0.013 * (sequence % 7 + 1));
      m.at<std::uint8_t>(y, x) = cv::saturate_cast<std::uint8_t>(v + int(noise() % 5) - 2);
    }
  return m;
}

void write_npy(const fs::path& path, const cv::Mat& m) {
  std::string header = "{'descr': '|u1', 'fortran_order': False, 'shape': (" + std::to_string(m.rows) + ", " +
                       std::to_string(m.cols) + "), }";
  header.append(128 - 10 - header.size() - 1, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const std::uint16_t len = std::uint16_t(header.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out << header;
  out.write(reinterpret_cast<const char*>(m.data), std::streamsize(m.total()));
}

void make_dataset(const Setup& s) {
  if (fs::exists(s.dir / "data.tzp")) return;
  for (int q = 0; q < s.sequences; ++q) {
    const auto png = s.dir / "png" / ("s" + std::to_string(q)), npy = s.dir / "npy" / ("s" + std::to_string(q));
    fs::create_directories(png);
    fs::create_directories(npy);
    for (int t = 0; t < s.frames; ++t) {
      const cv::Mat m = scene(s.size, q, t);
      cv::imwrite((png / (frame_name(t) + ".png")).string(), m);
      write_npy(npy / (frame_name(t) + ".npy"), m);
    }
  }
  CompressOptions options;
  options.gop.size = 16;
  options.threads = 2;
  const auto report = compress(s.dir / "png", s.dir / "data.tzp", options);
  std::printf("dataset: %d sequences x %d frames of %dx%d gray uint8: %.1f MB raw, archive %.1f MB (ratio %.2f), %.1f s to compress\n",
              s.sequences, s.frames, s.size, s.size, report.raw_bytes / 1e6, report.archive_bytes / 1e6,
              double(report.raw_bytes) / double(report.archive_bytes), report.seconds);
}

struct Result {
  double seconds = 0;
  std::uint64_t samples = 0, bytes = 0;
};

// Runs `body` in a child; prints its throughput and peak RSS.
void measure(const char* label, const std::function<Result()>& body) {
  int pipe_fd[2];
  if (::pipe(pipe_fd) != 0) return;
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(pipe_fd[0]);
    const Result r = body();
    if (::write(pipe_fd[1], &r, sizeof r) != sizeof r) _exit(1);
    _exit(0);
  }
  ::close(pipe_fd[1]);
  Result r;
  const bool got = ::read(pipe_fd[0], &r, sizeof r) == sizeof r;
  ::close(pipe_fd[0]);
  int status = 0;
  rusage usage{};
  ::wait4(child, &status, 0, &usage);
  if (!got) {
    std::printf("%-22s failed\n", label);
    return;
  }
  std::printf("%-22s %9.0f samples/s %8.1f MB/s   peak RSS %6.1f MB\n", label, r.samples / r.seconds, r.bytes / 1e6 / r.seconds,
              usage.ru_maxrss / 1024.0);
}

StreamOptions stream_options(const Setup& s, unsigned threads) {
  StreamOptions o;
  o.clip_len = s.clip_len;
  o.stride = s.clip_len;
  o.seed = 1;
  o.shuffle_buffer = s.shuffle_buffer;
  o.threads = threads;
  o.prefetch = 16;
  o.layout = ClipLayout::Interleaved;
  return o;
}

Result run_stream(const Setup& s, unsigned threads) {
  const auto start = std::chrono::steady_clock::now();
  Stream stream(s.dir / "data.tzp", stream_options(s, threads));
  Result r;
  while (auto sample = stream.next()) {
    ++r.samples;
    r.bytes += sample->data.size();
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

// The same clips in the Stream's order, read frame by frame from files.
Result run_files(const Setup& s, bool png) {
  const Reader reader(s.dir / "data.tzp");
  const StreamPlan plan(reader, stream_options(s, 0));
  const auto order = plan.order(0, 0);
  const auto start = std::chrono::steady_clock::now();
  Result r;
  std::vector<std::uint8_t> clip;
  for (const auto j : order.deliver) {
    const auto& ref = order.decode[j];
    clip.clear();
    for (std::size_t k = 0; k < s.clip_len; ++k) {
      const auto folder = s.dir / (png ? "png" : "npy") / ("s" + std::to_string(ref.sequence));
      const auto name = frame_name(int(ref.start + k));
      if (png) {
        const cv::Mat m = cv::imread((folder / (name + ".png")).string(), cv::IMREAD_UNCHANGED);
        clip.insert(clip.end(), m.data, m.data + m.total() * m.elemSize());
      } else {
        std::ifstream in(folder / (name + ".npy"), std::ios::binary);
        in.seekg(128);
        const std::size_t n = std::size_t(s.size) * std::size_t(s.size), at = clip.size();
        clip.resize(at + n);
        in.read(reinterpret_cast<char*>(clip.data() + at), std::streamsize(n));
      }
    }
    ++r.samples;
    r.bytes += clip.size();
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  // DIR is a work folder it fills: an option in its place (--help) is not taken for one.
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: loader_bench DIR [sequences] [frames] [size] [clip_len] [shuffle_buffer] [stream1,stream2,npy,png]\n");
    const std::string first = argc < 2 ? "" : argv[1];
    return first == "-h" || first == "--help" ? 0 : 2;
  }
  Setup s;
  s.dir = argv[1];
  if (argc > 2) s.sequences = std::stoi(argv[2]);
  if (argc > 3) s.frames = std::stoi(argv[3]);
  if (argc > 4) s.size = std::stoi(argv[4]);
  if (argc > 5) s.clip_len = std::stoul(argv[5]);
  if (argc > 6) s.shuffle_buffer = std::stoul(argv[6]);
  const std::string cases = argc > 7 ? "," + std::string(argv[7]) + "," : ",stream1,stream2,npy,png,";
  const auto wanted = [&](const char* name) { return cases.find("," + std::string(name) + ",") != std::string::npos; };
  fs::create_directories(s.dir);
  make_dataset(s);
  const std::size_t samples = std::size_t(s.sequences) * (std::size_t(s.frames) / s.clip_len);
  const double sample_mb = double(s.clip_len) * s.size * s.size / 1e6;
  std::printf("samples: %zu clips of %zu frames (%.3f MB each); shuffle buffer %zu samples (%.1f MB): dataset = %.0fx the buffer\n",
              samples, s.clip_len, sample_mb, s.shuffle_buffer, s.shuffle_buffer * sample_mb,
              double(samples) / double(s.shuffle_buffer));
  // Warm the page cache for every format alike, then measure.
  run_files(s, false);
  if (wanted("stream1")) measure("stream, 1 thread", [&] { return run_stream(s, 1); });
  if (wanted("stream2")) measure("stream, 2 threads", [&] { return run_stream(s, 2); });
  if (wanted("npy")) measure("raw .npy per frame", [&] { return run_files(s, false); });
  if (wanted("png")) measure("PNG + OpenCV", [&] { return run_files(s, true); });
  return 0;
}
