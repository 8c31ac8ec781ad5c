// The output-safety matrix (issue 11): every command that writes, with -o as ".", "..", a trailing
// slash, the input itself, a folder holding the input, an existing file or folder with and without
// -f, and a read-only folder. In every case the user's other files must be exactly as they were,
// and a refusal must be one line (exit 2), never a usage text or a crash.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/cli_run.hpp"
#include "support/synthetic.hpp"
#include "support/temp_dir.hpp"
#include "support/tree_snapshot.hpp"

namespace fs = std::filesystem;
using tezip::test::quote;
using tezip::test::snapshot_tree;
using tezip::test::temporaries_in;
using tezip::test::tezip_cli_in;

namespace {

// A user's folder: the input frames, an archive of them, an unrelated file, an existing file and an
// existing folder named like outputs. Commands run inside it (work/), so "." and ".." mean it.
struct UserFolder {
  tezip::test::TempDir root{"tezip-test-matrix"};
  fs::path work = root / "work";
  UserFolder() {
    tezip::test::SyntheticSpec spec;
    spec.frames = 4;
    tezip::test::write_synthetic_sequence(work / "in", spec);
    std::ofstream(work / "precious.txt") << "mine";
    std::ofstream(work / "existing.tzp") << "not an archive, but mine";
    fs::create_directories(work / "existing_dir");
    std::ofstream(work / "existing_dir" / "keep.txt") << "keep";
    REQUIRE(tezip_cli_in(work, "compress -q in -o a.tzp").code == 0);
  }
};


}  // namespace

TEST_CASE("output-safety matrix: no command touches the user's other files", "[safety][matrix]") {
  // {command with OUT for the output, the output as typed, whether it may succeed, what it writes}
  struct Case {
    std::string command;
    std::string output;
    bool may_succeed;
  };
  const std::vector<std::string> compress = {"compress in -o OUT", "compress in -o OUT -f"};
  const std::vector<std::string> decompress = {"decompress a.tzp -o OUT", "decompress a.tzp -o OUT -f"};
  const std::vector<std::string> batch = {"batch in -o OUT"};
  const std::vector<std::string> train = {"train in -o OUT --epochs 1 --steps 1", "train in -o OUT -f --epochs 1 --steps 1"};
  // Outputs that must always be refused: the current folder, its parent, the root, and whatever
  // is, holds or lies inside the command's input ("in" for compress, batch and train, "a.tzp" for
  // decompress).
  // Never "/" or anything outside the test's own folder: a binary with these bugs (TEZIP_TEST_BINARY
  // set to an old build) would remove it. The root is covered by test_safety's library check.
  const std::vector<std::string> always = {".", "..", "./", "../", "../work"};
  const std::vector<std::string> about_in = {"in", "in/", "in/x", "in/sub/x"};
  const std::vector<std::string> about_archive = {"a.tzp", "a.tzp/", "a.tzp/x"};
  std::vector<Case> cases;
  for (const auto* family : {&compress, &decompress, &batch, &train})
    for (const auto& command : *family) {
      for (const auto& output : always) cases.push_back({command, output, false});
      for (const auto& output : family == &decompress ? about_archive : about_in) cases.push_back({command, output, false});
    }
  cases.push_back({"decompress a.tzp -o OUT", "in/x", true});  // beside the frames, not in the archive
  // Existing things: refused without -f; with -f only what the command may replace.
  for (const auto& command : compress) {
    const bool force = command.find("-f") != std::string::npos;
    cases.push_back({command, "existing.tzp", force});  // a regular file: replaced with -f
    cases.push_back({command, "existing_dir", false});  // a folder: never, the output is a file
    cases.push_back({command, "existing_dir/", false});
    cases.push_back({command, "new.tzp/", false});      // a trailing slash names a folder
    cases.push_back({command, "new.tzp", true});
  }
  for (const auto& command : decompress) {
    const bool force = command.find("-f") != std::string::npos;
    cases.push_back({command, "existing_dir", force});
    cases.push_back({command, "existing_dir/", force});
    cases.push_back({command, "existing.tzp", force});
    cases.push_back({command, "newdir/", true});
    cases.push_back({command, "newdir", true});
  }
  cases.push_back({"batch in -o OUT", "newdir/", true});
  cases.push_back({"batch in -o OUT", "existing.tzp", false});  // a file where a folder is needed

  std::size_t refusals = 0, successes = 0;
  for (const auto& c : cases) {
    UserFolder user;
    std::string command = c.command;
    command.replace(command.find("OUT"), 3, c.output);
    CAPTURE(command);
    const auto before = snapshot_tree(user.root.path());
    const auto run = tezip_cli_in(user.work, command + " -q");
    auto after = snapshot_tree(user.root.path());
    CHECK(temporaries_in(after).empty());
    if (run.code == 0) {
      ++successes;
      CHECK(c.may_succeed);
      // Only the output changed: remove it from both pictures and compare the rest.
      std::string out = c.output;
      while (out.size() > 1 && out.back() == '/') out.pop_back();
      const std::string prefix = "work/" + out;
      auto strip = [&](tezip::test::TreeSnapshot tree) {
        for (auto it = tree.begin(); it != tree.end();)
          it = it->first == prefix || it->first.rfind(prefix + "/", 0) == 0 ? tree.erase(it) : std::next(it);
        return tree;
      };
      CHECK(strip(after) == strip(before));
    } else {
      ++refusals;
      CHECK(run.code == 2);
      CHECK(std::count(run.output.begin(), run.output.end(), '\n') == 1);
      CHECK(after == before);
    }
  }
  WARN("output-safety matrix: " << cases.size() << " cases, " << refusals << " refused cleanly, " << successes << " written");
}

TEST_CASE("output-safety matrix: a read-only folder", "[safety][matrix]") {
  UserFolder user;
  fs::create_directories(user.work / "ro");
  std::ofstream(user.work / "ro" / "keep.txt") << "keep";
  REQUIRE(::chmod((user.work / "ro").c_str(), 0555) == 0);
  if (::geteuid() == 0) {
    // Root writes into a read-only folder anyway: what is checked then is that nothing else changes.
    WARN("running as root: permission bits do not stop writes, so only 'nothing else touched' is checked");
  }
  const auto before = snapshot_tree(user.root.path());
  for (const std::string command : {"compress in -o ro/x.tzp", "decompress a.tzp -o ro/out", "batch in -o ro/shards"}) {
    CAPTURE(command);
    const auto run = tezip_cli_in(user.work, command + " -q");
    auto after = snapshot_tree(user.root.path());
    CHECK(temporaries_in(after).empty());
    if (::geteuid() != 0) {
      CHECK(run.code == 2);
      CHECK(after == before);
    } else {
      for (const auto& [path, kind] : before) CHECK(after.count(path) == 1);
    }
  }
  ::chmod((user.work / "ro").c_str(), 0755);
}
