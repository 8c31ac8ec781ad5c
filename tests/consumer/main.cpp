// A consumer of the installed libtezip: opens an archive with tezip::Reader, decodes every frame,
// streams one epoch, and checks that no libtorch was mapped (a PredNet archive of exact arithmetic
// included) and that the shipped models are found in the installed data folder.
//   tezip_consumer ARCHIVE [PREFIX]
#include <fstream>
#include <iostream>
#include <string>

#include "format/errors.hpp"
#include "loader/reader.hpp"
#include "loader/stream.hpp"
#include "predictor/learned_predictor.hpp"

namespace {

int fail(const std::string& why) {
  std::cerr << "tezip_consumer: " << why << "\n";
  return 1;
}

bool maps_contain(const std::string& needle) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find(needle) != std::string::npos) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return fail("usage: tezip_consumer ARCHIVE [PREFIX]");
  try {
    tezip::Reader reader(argv[1]);
    std::size_t frames = 0, bytes = 0;
    for (std::size_t s = 0; s < reader.num_sequences(); ++s)
      for (std::size_t t = 0; t < reader.num_frames(s); ++t, ++frames) bytes += reader.frame(s, t).data.size();

    tezip::StreamOptions options;
    options.clip_len = 2;
    options.shuffle_buffer = 4;
    tezip::Stream stream(argv[1], options);
    std::size_t samples = 0;
    while (stream.next()) ++samples;
    if (frames == 0 || samples != stream.size()) return fail("decoded nothing, or the stream ended early");

    if (maps_contain("libtorch")) return fail("libtorch is mapped into a process that only decodes");
    // Open MPI (the MPI module's) and OpenSSL cost every process milliseconds to load.
    if (maps_contain("libmpi")) return fail("Open MPI is mapped into a process that is not an MPI rank");
    if (maps_contain("libcrypto")) return fail("OpenSSL's libcrypto is mapped into a process that only decodes");
    if (!maps_contain("libtezip.so.0")) return fail("libtezip.so.0 is not mapped");
    std::cout << "decoded " << frames << " frames (" << bytes << " bytes), " << samples << " samples; no libtorch\n";

    if (argc > 2) {
      const auto model = tezip::default_model_path();
      const std::string prefix = argv[2];
      if (model.string().rfind(prefix, 0) != 0) return fail("the default model " + model.string() + " is not under " + prefix);
      std::cout << "default model: " << model.string() << "\n";
    }
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  return 0;
}
