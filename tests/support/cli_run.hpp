#pragma once
// Runs the tezip binary (TEZIP_BINARY) as a user would, capturing its output and exit code.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace tezip::test {

struct Run {
  int code = -1;
  std::string output;  // stdout and stderr together
};

inline std::string quote(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

// The binary under test: TEZIP_BINARY, or $TEZIP_TEST_BINARY when set (to run these tests against
// another build, e.g. to see a new test fail on the old code). Such a build may destroy what its
// -o names: tests give it only paths inside their own temporary folders, never "/" or $HOME.
inline std::string tezip_binary() {
  const char* other = std::getenv("TEZIP_TEST_BINARY");
  return other && *other ? other : TEZIP_BINARY;
}

// `env` is prepended to the command line (e.g. "ATEN_CPU_CAPABILITY=default", or "cd DIR &&").
inline Run tezip_cli(const std::string& args, const std::string& env = "") {
  const std::string command = (env.empty() ? "" : env + " ") + quote(tezip_binary()) + " " + args + " 2>&1 </dev/null";
  Run run;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) run.output.append(buf, n);
  const int status = ::pclose(pipe);
  run.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  UNSCOPED_INFO("$ " << env << (env.empty() ? "" : " ") << "tezip " << args << "\n" << run.output << "[exit " << run.code << "]");
  return run;
}

// tezip run in the folder `dir`, as a user who has cd'ed there.
inline Run tezip_cli_in(const std::filesystem::path& dir, const std::string& args) {
  return tezip_cli(args, "cd " + quote(dir) + " &&");
}

inline std::vector<std::uint8_t> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), {});
}

}  // namespace tezip::test
