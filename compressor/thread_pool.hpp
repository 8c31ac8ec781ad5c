#pragma once
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <queue>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace tezip {

// A fixed set of worker threads running submitted jobs in order of submission.
class ThreadPool {
 public:
  // Throws std::runtime_error when the system refuses a thread; those started are stopped first.
  explicit ThreadPool(unsigned threads) {
    try {
      for (unsigned i = 0; i < std::max(1u, threads); ++i) workers_.emplace_back([this] { run(); });
    } catch (const std::system_error& e) {
      stop();
      throw std::runtime_error("cannot start " + std::to_string(threads) + " threads (" + e.what() + "); try a smaller -T");
    }
  }
  ~ThreadPool() { stop(); }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Runs `job` on a worker; its result or exception arrives through the future.
  template <class F>
  auto submit(F job) -> std::future<decltype(job())> {
    auto task = std::make_shared<std::packaged_task<decltype(job())()>>(std::move(job));
    auto result = task->get_future();
    {
      std::lock_guard lock(mutex_);
      jobs_.emplace([task] { (*task)(); });
    }
    wake_.notify_one();
    return result;
  }

  unsigned size() const { return unsigned(workers_.size()); }

 private:
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }

  void run() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop();
      }
      job();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::queue<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace tezip
