// A PredNet model embedded in the archive (archive version 3 and 4, docs/format.md): decompress and
// verify need no model file, a damaged or mismatched embedded model is refused with one clear
// error. Runs in the torch-free build too.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "compressor/decoder.hpp"
#include "compressor/encoder.hpp"
#include "format/archive.hpp"
#include "format/errors.hpp"
#include "loader/chunk_store.hpp"
#include "loader/reader.hpp"
#include "predictor/model_file.hpp"
#include "support/cli_run.hpp"
#include "support/shipped_model.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace tezip {
namespace {

const fs::path kMire = fs::path(TEZIP_SOURCE_DIR) / "datasets/sample/mire";
using test::kShippedModel;
using test::perturbed_model;

void write_bytes(const fs::path& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

std::uint32_t header_version(const fs::path& archive) {
  const auto bytes = test::read_file(archive);
  REQUIRE(bytes.size() > 12);
  return std::uint32_t(bytes[8]) | std::uint32_t(bytes[9]) << 8 | std::uint32_t(bytes[10]) << 16 | std::uint32_t(bytes[11]) << 24;
}

}  // namespace

TEST_CASE("an embedded model decodes the archive with the model file gone", "[embedded][cli]") {
  test::TempDir dir;
  ModelFile model = perturbed_model(0.01f);
  const auto bytes = model.serialize();
  write_bytes(dir / "custom.tzm", bytes);
  const std::string archive = test::quote(dir / "e.tzp"), plain = test::quote(dir / "p.tzp");
  auto run = test::tezip_cli("compress " + test::quote(kMire) + " -o " + archive + " --predictor prednet --model " +
                             test::quote(dir / "custom.tzm") + " --embed-model --gop 8 -q");
  REQUIRE(run.code == 0);
  run = test::tezip_cli("compress " + test::quote(kMire) + " -o " + plain + " --predictor prednet --model " +
                        test::quote(dir / "custom.tzm") + " --gop 8 -q");
  REQUIRE(run.code == 0);
  CHECK(header_version(dir / "e.tzp") == kArchiveVersion);
  CHECK(header_version(dir / "p.tzp") == kArchiveVersion);  // from version 4 the index says whether there is a model
  // The model is the archive's only difference: the whole model file, once, and its entry in the
  // (compressed) index.
  CHECK(fs::file_size(dir / "e.tzp") >= fs::file_size(dir / "p.tzp") + bytes.size());
  CHECK(fs::file_size(dir / "e.tzp") <= fs::file_size(dir / "p.tzp") + bytes.size() + 40);
  {
    const ArchiveReader reader(dir / "e.tzp");
    CHECK(reader.read_embedded_model() == bytes);
    CHECK(reader.index().settings.predictor.weights_sha256 == model.weights_sha256);
  }
  fs::remove(dir / "custom.tzm");

  // No model file anywhere: the plain archive cannot be decoded, the embedded one can.
  run = test::tezip_cli("verify " + plain);
  CHECK(run.code == 2);
  CHECK_THAT(run.output, Contains("not in the model search path"));
  run = test::tezip_cli("verify " + archive + " --against " + test::quote(kMire));
  CHECK(run.code == 0);
  CHECK_THAT(run.output, Contains("checksums ok") && Contains("max_error=0"));
  run = test::tezip_cli("decompress " + archive + " -o " + test::quote(dir / "out") + " -q");
  REQUIRE(run.code == 0);
  for (const auto& entry : fs::directory_iterator(kMire))
    CHECK(test::read_file(dir / "out" / entry.path().filename()) == test::read_file(entry.path()));
  // In the library (the Reader and the Python module open archives through ArchiveDecoder).
  const ArchiveDecoder decoder(dir / "e.tzp");
  CHECK(decoder.decode_chunk(0).size() == 8);
}

TEST_CASE("a Reader and a chunk store's partial copy use the embedded model", "[embedded][store]") {
  test::TempDir dir;
  write_bytes(dir / "custom.tzm", perturbed_model(0.015f).serialize());
  const fs::path archive = dir / "e.tzp";
  auto run = test::tezip_cli("compress " + test::quote(kMire) + " -o " + test::quote(archive) + " --predictor prednet --model " +
                             test::quote(dir / "custom.tzm") + " --embed-model --gop 4 -q");
  REQUIRE(run.code == 0);
  fs::remove(dir / "custom.tzm");
  const Reader global(archive);
  REQUIRE(global.blocks().size() == 4);
  {
    ChunkStore store(dir / "store", archive);
    const std::vector<std::size_t> mine{1, 3};
    store.stage(mine);
  }
  // The store's sparse copy holds the header, the model, its chunks and the index.
  const Reader local(std::make_shared<const ChunkStore>(dir / "store"));
  for (const std::size_t c : {std::size_t(1), std::size_t(3)}) {
    const auto& b = global.blocks()[c];
    CHECK(local.clip(b.sequence, b.first_frame, b.frame_count).data == global.clip(b.sequence, b.first_frame, b.frame_count).data);
  }
}

TEST_CASE("a damaged or mismatched embedded model is refused with one clear error", "[embedded][cli]") {
  test::TempDir dir;
  ModelFile model = perturbed_model(0.02f);
  write_bytes(dir / "custom.tzm", model.serialize());
  const fs::path good = dir / "e.tzp";
  auto run = test::tezip_cli("compress " + test::quote(kMire) + " -o " + test::quote(good) + " --predictor prednet --model " +
                             test::quote(dir / "custom.tzm") + " --embed-model --gop 8 -q");
  REQUIRE(run.code == 0);

  SECTION("a flipped byte in the model's weights") {
    auto bytes = test::read_file(good);
    const EmbeddedModel where = ArchiveReader(good).index().model;
    bytes[where.offset + where.size - 100] ^= 0x40;
    write_bytes(dir / "damaged.tzp", bytes);
    run = test::tezip_cli("verify " + test::quote(dir / "damaged.tzp"));
    CHECK(run.code == 2);
    CHECK_THAT(run.output, Contains("embedded PredNet model is damaged"));
    CHECK_THROWS_AS(ArchiveDecoder(dir / "damaged.tzp"), DataError);
    // The model it was written with, given by hand, still decodes it (the chunks are intact).
    run = test::tezip_cli("verify " + test::quote(dir / "damaged.tzp") + " --model " + test::quote(dir / "custom.tzm") + " --against " +
                          test::quote(kMire));
    CHECK(run.code == 0);
  }

  SECTION("a valid model that is not the one the archive was written with") {
    // Rewritten with another embedded model and a consistent index: only the SHA-256 can tell.
    const ArchiveReader reader(good);
    ArchiveIndex index = reader.index();
    ModelFile other = perturbed_model(0.03f);
    {
      ArchiveWriter writer(dir / "other.tzp", false);
      index.model = writer.embed_model(other.serialize());
      for (std::size_t i = 0; i < index.chunks.size(); ++i) writer.append_chunk(reader.read_chunk(i), index.chunks[i]);
      writer.finish(index);
    }
    run = test::tezip_cli("decompress " + test::quote(dir / "other.tzp") + " -o " + test::quote(dir / "out") + " -q");
    CHECK(run.code == 2);
    CHECK_THAT(run.output, Contains("embedded PredNet model is another model") && Contains(model.weights_sha256.substr(0, 16)));
    CHECK_FALSE(fs::exists(dir / "out"));
  }

  SECTION("a model file that is not a model") {
    const ArchiveReader reader(good);
    ArchiveIndex index = reader.index();
    {
      ArchiveWriter writer(dir / "junk.tzp", false);
      index.model = writer.embed_model(std::vector<std::uint8_t>(500, 7));
      for (std::size_t i = 0; i < index.chunks.size(); ++i) writer.append_chunk(reader.read_chunk(i), index.chunks[i]);
      writer.finish(index);
    }
    run = test::tezip_cli("verify " + test::quote(dir / "junk.tzp"));
    CHECK(run.code == 2);
    CHECK_THAT(run.output, Contains("embedded PredNet model: not a usable tezip model"));
  }
}

TEST_CASE("the index of an archive with a model is checked like the rest", "[embedded][archive]") {
  ArchiveIndex index;
  index.settings.predictor = {"previous", "", "", "", ""};
  index.model = {16, 1000, 123};
  for (const std::uint32_t version : {3u, 4u}) {
    CAPTURE(version);
    index.model = {16, 1000, 123};
    auto body = serialize_index(index, version);
    CHECK(parse_index(body, 2000, ArchiveLimits{}, version).model.size == 1000);
    CHECK_THROWS_AS(parse_index(body, 900, ArchiveLimits{}, version), DataError);  // past the chunk area
    index.model.offset = 20;
    body = serialize_index(index, version);
    CHECK_THROWS_AS(parse_index(body, 2000, ArchiveLimits{}, version), DataError);  // not right after the header
    index.model = {16, std::uint64_t(1) << 40, 0};
    body = serialize_index(index, version);
    CHECK_THROWS_AS(parse_index(body, std::uint64_t(1) << 41, ArchiveLimits{}, version), DataError);  // over the size limit
    // Version 2 has no model fields: the same bytes do not parse as version 2.
    CHECK_THROWS_AS(parse_index(body, std::uint64_t(1) << 41, ArchiveLimits{}, 2), DataError);
  }
  // Version 4 says whether there is a model; a flag other than 0 or 1 is damage.
  index.model = {};
  auto body = serialize_index(index);
  CHECK(parse_index(body, 2000, ArchiveLimits{}).model.size == 0);
  CHECK_THROWS_AS(serialize_index(index, 3), std::invalid_argument);
}

}  // namespace tezip
