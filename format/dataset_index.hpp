#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tezip {

// A dataset written as several archives (shards) by a batch job, listed in one JSON file
// (format in docs/batch.md). Readers, `decompress`, `info` and `verify` accept it like one archive.
struct ShardEntry {
  std::string path;                    // archive path relative to the index file's folder
  std::uint64_t size = 0;              // archive bytes
  std::uint64_t hash = 0;              // XXH64 of the whole archive file
  std::vector<std::string> sequences;  // sequence names, in the shard's order
  std::uint64_t frames = 0;
  std::uint64_t raw_bytes = 0;
};

// The PredNet model a batch job adapted to the dataset (`tezip batch --adapt`): one file beside the
// shards, which record its weights' SHA-256 and find it there when decoding.
struct ModelEntry {
  std::string path;            // a file name in the index's folder
  std::uint64_t size = 0;      // bytes
  std::uint64_t hash = 0;      // XXH64 of the file
  std::string weights_sha256;  // what the shards' predictor identity names
};

struct DatasetIndex {
  std::vector<ShardEntry> shards;
  std::optional<ModelEntry> model;
};

// True when `path` is a dataset index rather than an archive (cheap: looks at the first bytes).
bool is_dataset_index(const std::filesystem::path& path);
// True when `path` is a regular file holding JSON whose "format" is tezip's (a damaged index may
// still fail read_dataset_index); a batch job replaces only such a file.
bool looks_like_dataset_index(const std::filesystem::path& path);
// Throws InputError / DataError with the file name on anything malformed.
DatasetIndex read_dataset_index(const std::filesystem::path& path);
// Written atomically (temporary name, then rename).
void write_dataset_index(const std::filesystem::path& path, const DatasetIndex& index);
// The archives an input names: the shards of a dataset index (absolute paths), or the archive itself.
std::vector<std::filesystem::path> archive_paths(const std::filesystem::path& input);
// XXH64 of a whole file, read in blocks: the checksum ShardEntry::hash holds.
std::uint64_t hash_file(const std::filesystem::path& path);

}  // namespace tezip
