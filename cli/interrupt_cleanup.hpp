#pragma once
// SIGINT, SIGTERM and SIGHUP end tezip without leaving temporary files: while an InterruptCleanup
// lives, those signals are blocked in every thread (threads started later inherit the mask) and
// one thread waits for them with sigwait. On a signal it removes every registered temporary path
// (io/temporary_files.hpp) and ends the process with 128 + the signal's number, as a shell
// reports a process killed by it. Working in an ordinary thread, not a signal handler, it may
// take locks and call std::filesystem; create one first thing in main, before any other thread.
#include <pthread.h>

#include <atomic>
#include <thread>

namespace tezip::cli {

class InterruptCleanup {
 public:
  InterruptCleanup();
  ~InterruptCleanup();
  InterruptCleanup(const InterruptCleanup&) = delete;
  InterruptCleanup& operator=(const InterruptCleanup&) = delete;

 private:
  std::atomic<bool> stopping_ = false;
  pthread_t waiter_{};
  std::thread thread_;
};

}  // namespace tezip::cli
