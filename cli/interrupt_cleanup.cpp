#include "cli/interrupt_cleanup.hpp"

#include <signal.h>

#include "io/temporary_files.hpp"

namespace tezip::cli {
namespace {

sigset_t cleanup_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace

InterruptCleanup::InterruptCleanup() {
  const sigset_t set = cleanup_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  thread_ = std::thread([this, set] {
    for (;;) {
      int signal = 0;
      if (sigwait(&set, &signal) != 0) continue;
      if (stopping_) return;  // the destructor's wake-up call
      remove_temporary_paths_and_exit(128 + signal);
    }
  });
  waiter_ = thread_.native_handle();
}

InterruptCleanup::~InterruptCleanup() {
  stopping_ = true;
  pthread_kill(waiter_, SIGTERM);  // delivered to the waiting thread alone: it is blocked in sigwait
  thread_.join();
}

}  // namespace tezip::cli
