#include "compressor/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "compressor/errors.hpp"

namespace tezip {

void write_file_atomically(const std::filesystem::path& path, std::span<const std::uint8_t> bytes) {
  static std::atomic<unsigned> counter = 0;
  const auto temporary = path.parent_path() / ("." + path.filename().string() + ".tmp-" + std::to_string(::getpid()) +
                                               "-" + std::to_string(counter++));
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw OutputError(path.string() + ": cannot create: " + std::strerror(errno));
  auto fail = [&](const char* what, int error) {
    ::unlink(temporary.c_str());
    throw OutputError(path.string() + ": " + what + ": " + std::strerror(error));
  };
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : ENOSPC;
      ::close(fd);
      fail("write failed", error);
    }
    bytes = bytes.subspan(std::size_t(n));
  }
  if (::close(fd) != 0) fail("close failed", errno);
  if (::rename(temporary.c_str(), path.c_str()) != 0) fail("cannot rename into place", errno);
}

}  // namespace tezip
