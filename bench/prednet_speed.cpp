// Float inference speed of PredNet stacks: frames/s of one time step (predict + correct) on a
// [B, 1, H, W] batch, the way the coder drives the network. Picks the shipped model's size
// (docs/training.md). Usage: prednet_speed [H W B THREADS SECONDS] [STACK...], a stack as 1,16,32,64.
#include <torch/torch.h>

#include <time.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "predictor/learned/prednet.hpp"

namespace {

std::vector<int> parse_stack(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoi(item));
  return out;
}

double cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

struct Speed {
  double wall = 0, cpu = 0;  // frames/s by the clock, and by process CPU time x threads
};

// The machine this ran on was shared, so besides wall-clock frames/s the process CPU time gives
// what the threads would do with their cores to themselves.
Speed frames_per_second(const std::vector<int>& stack, int h, int w, int batch, int threads, double seconds) {
  tezip::PredNetOptions options;
  options.a_channels = stack;
  tezip::PredNet net(options);
  net->eval();
  torch::NoGradGuard no_grad;
  auto state = net->initial_state(batch, h, w, torch::TensorOptions().dtype(torch::kFloat32));
  const auto frame = torch::rand({batch, stack[0], h, w});
  for (int i = 0; i < 3; ++i) {
    net->predict(state);
    net->correct(state, frame);
  }
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = cpu_seconds();
  int steps = 0;
  double elapsed = 0;
  do {
    net->predict(state);
    net->correct(state, frame);
    ++steps;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } while (elapsed < seconds);
  const double frames = double(steps) * batch;
  return {frames / elapsed, frames * threads / (cpu_seconds() - cpu_start)};
}

}  // namespace

int main(int argc, char** argv) {
  int h = 128, w = 160, batch = 8;
  double seconds = 3;
  std::vector<int> threads = {2, 1};
  std::vector<std::string> stacks = {"1,8,16,32", "1,12,24,48", "1,16,32,64", "1,8,16,32,64"};
  if (argc >= 6) {
    h = std::atoi(argv[1]);
    w = std::atoi(argv[2]);
    batch = std::atoi(argv[3]);
    threads = {std::atoi(argv[4])};
    seconds = std::atof(argv[5]);
  }
  if (argc > 6) stacks.assign(argv + 6, argv + argc);
  std::printf("| stack | parameters | threads | frames/s at %dx%d (B=%d), wall | by CPU time |\n|---|---|---|---|---|\n", h, w, batch);
  for (const auto& text : stacks) {
    const auto stack = parse_stack(text);
    tezip::PredNetOptions options;
    options.a_channels = stack;
    tezip::PredNet net(options);
    std::int64_t params = 0;
    for (const auto& p : net->parameters()) params += p.numel();
    for (int t : threads) {
      torch::set_num_threads(t);
      const Speed speed = frames_per_second(stack, h, w, batch, t, seconds);
      std::printf("| %s | %lld | %d | %.0f | %.0f |\n", text.c_str(), (long long)params, t, speed.wall, speed.cpu);
      std::fflush(stdout);
    }
  }
}
