#include "loader/torch/clip_dataset.hpp"

#include <cstring>
#include <vector>

namespace tezip::torch_loader {

ClipDataset::ClipDataset(std::filesystem::path input, StreamOptions options, torch::Dtype dtype,
                         std::optional<StreamState> resume)
    : input_(std::move(input)), options_(options), dtype_(dtype) {
  options_.layout = ClipLayout::Planar;  // (T, C, H, W) per sample, as torch wants
  stream_ = std::make_shared<Stream>(input_, options_, resume);
}

void ClipDataset::set_epoch(std::uint64_t epoch) {
  options_.epoch = epoch;
  stream_.reset();  // stop the old workers before starting new ones
  stream_ = std::make_shared<Stream>(input_, options_);
}

StreamState ClipDataset::state() const { return stream_->state(); }
const ExchangeReport& ClipDataset::exchange_report() const { return stream_->exchange_report(); }
torch::optional<std::size_t> ClipDataset::size() const { return stream_->size(); }

torch::Tensor ClipDataset::get_batch(std::size_t batch_size) {
  std::vector<Sample> samples;
  while (samples.size() < batch_size) {
    auto s = stream_->next();
    if (!s) break;
    samples.push_back(std::move(*s));
  }
  if (samples.empty()) return torch::Tensor();
  const auto& g = samples.front().geometry;
  const std::int64_t b = std::int64_t(samples.size()), t = std::int64_t(options_.clip_len), c = g.channels, h = g.height,
                     w = g.width;
  const bool eight_bit = g.type == PixelType::U8;
  auto batch = torch::empty({b, t, c, h, w}, eight_bit ? torch::kUInt8 : torch::kInt32);
  const std::size_t per_sample = std::size_t(t * c * h * w);
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (!(samples[i].geometry == g))
      throw std::invalid_argument("ClipDataset: sequences of different frame sizes cannot share a batch");
    if (eight_bit) {
      std::memcpy(batch.data_ptr<std::uint8_t>() + i * per_sample, samples[i].data.data(), per_sample);
    } else {
      auto* out = batch.data_ptr<std::int32_t>() + i * per_sample;
      const auto* in = reinterpret_cast<const std::uint16_t*>(samples[i].data.data());
      for (std::size_t k = 0; k < per_sample; ++k) out[k] = in[k];
    }
  }
  if (torch::isFloatingType(dtype_)) return batch.to(dtype_).div_(double(g.max_value()));
  return dtype_ == batch.scalar_type() ? batch : batch.to(dtype_);
}

}  // namespace tezip::torch_loader
