#include "io/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "format/errors.hpp"
#include "io/temporary_files.hpp"

namespace tezip {

void write_file_atomically(const std::filesystem::path& path, std::span<const std::uint8_t> bytes, bool create_folder) {
  const TemporaryPath temporary(temporary_name_beside(path));
  if (create_folder && path.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) throw OutputError(path.parent_path().string() + ": cannot create the folder: " + ec.message());
  }
  const int fd = ::open(temporary.path().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw OutputError(path.string() + ": cannot create: " + std::strerror(errno));
  auto fail = [&](const char* what, int error) {
    ::unlink(temporary.path().c_str());
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
  if (::rename(temporary.path().c_str(), path.c_str()) != 0) fail("cannot rename into place", errno);
}

}  // namespace tezip
