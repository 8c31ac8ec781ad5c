#pragma once
// libtorch adapter: a torch::data stream dataset of clips from a tezip archive or dataset index.
// Built only when libtorch is found (CMake option TEZIP_TORCH); the core library never sees torch.
#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>

#include "loader/stream.hpp"

namespace tezip::torch_loader {

// Batches are tensors (B, T, C, H, W). `dtype` kUInt8 keeps 8-bit pixels; 16-bit pixels come as
// kInt32 (torch has no uint16) unless a floating dtype is asked for, which scales to [0, 1].
// Decoding runs in the Stream's own threads (options.threads): use the DataLoader with workers = 0.
// A batch may be short at the end of the epoch; size() is the epoch's sample count for this rank.
class ClipDataset : public torch::data::datasets::StreamDataset<ClipDataset, torch::Tensor> {
 public:
  ClipDataset(std::filesystem::path input, StreamOptions options, torch::Dtype dtype = torch::kUInt8,
              std::optional<StreamState> resume = {});

  torch::Tensor get_batch(std::size_t batch_size) override;
  torch::optional<std::size_t> size() const override;

  // Starts epoch `epoch` from its beginning (a new shuffle, and the partial exchange of blocks).
  void set_epoch(std::uint64_t epoch);
  StreamState state() const;
  const ExchangeReport& exchange_report() const;

 private:
  std::filesystem::path input_;
  StreamOptions options_;
  torch::Dtype dtype_;
  std::shared_ptr<Stream> stream_;  // shared: torch::data copies datasets
};

}  // namespace tezip::torch_loader
