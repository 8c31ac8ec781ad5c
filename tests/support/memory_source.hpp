#pragma once
// Frames held in memory, as a sequence source (io/source.hpp): sequences of any shape and length
// for compress_sources, without files.
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "io/source.hpp"

namespace tezip::test {

class MemorySource final : public SequenceSource {
 public:
  MemorySource(std::string name, Geometry g, std::vector<std::vector<std::uint16_t>> frames)
      : name_(std::move(name)), geometry_(g), frames_(std::move(frames)) {}
  const std::string& name() const override { return name_; }
  const Geometry& geometry() const override { return geometry_; }
  std::size_t frame_count() const override { return frames_.size(); }
  Frame read(std::size_t index) override {
    char name[32];
    std::snprintf(name, sizeof name, "f%04zu.png", index);
    const auto& f = frames_.at(index);
    return Frame{name, "png", Pixels(f.begin(), f.end())};
  }

 private:
  std::string name_;
  Geometry geometry_;
  std::vector<std::vector<std::uint16_t>> frames_;
};

}  // namespace tezip::test
