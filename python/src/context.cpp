/*
 * One fold context per process group: bootstrap, the requests in flight, and the
 * progress thread that completes futures nobody waits on with wait() (DDP's buckets).
 */
#include "fold_torch.h"

#include <sched.h>

#include <chrono>

namespace fold_torch {

namespace {

/* Live contexts in creation order, for shutdown_all(). */
std::mutex live_mu;
std::vector<FoldContext *> live_contexts;

}  // namespace

FoldContext::FoldContext(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                         const std::string &bootstrap)
{
  fold_context_params_t params;
  fold_context_params_init(&params);
  if (bootstrap == "store") {
    oob_ = std::make_unique<StoreOob>(store, rank, size);
    params.oob.allgather = StoreOob::allgather;
    params.oob.arg = oob_.get();
    params.oob.rank = rank;
    params.oob.size = size;
  } else {
    TORCH_CHECK(bootstrap == "pmix", "fold: unknown bootstrap '", bootstrap,
                "' (expected 'store' or 'pmix')");
  }
  int status = fold_init(&params, &ctx_);
  TORCH_CHECK(status == FOLD_OK, "fold: fold_init (bootstrap ", bootstrap, ") failed: ",
              fold_status_string(status));
  world_ = fold_comm_world(ctx_);
  int fold_rank = -1, fold_size = -1;
  fold_comm_rank(world_, &fold_rank);
  fold_comm_size(world_, &fold_size);
  if (fold_rank != rank || fold_size != size) {
    fold_finalize(ctx_);
    ctx_ = nullptr;
    TORCH_CHECK(false, "fold: the launcher (", bootstrap, ") made this rank ", fold_rank,
                " of ", fold_size, ", torch says ", rank, " of ", size,
                "; set FOLD_TORCH_BOOTSTRAP=store");
  }
  std::lock_guard<std::mutex> lock(live_mu);
  live_contexts.push_back(this);
}

void FoldContext::shutdown_all()
{
  for (;;) {
    FoldContext *oldest;
    {
      std::lock_guard<std::mutex> lock(live_mu);
      if (live_contexts.empty()) {
        return;
      }
      oldest = live_contexts.front();
    }
    oldest->shutdown();   /* takes itself off the list */
  }
}

FoldContext::~FoldContext()
{
  try {
    shutdown();
  } catch (...) {
  }
}

void FoldContext::shutdown()
{
  {
    std::lock_guard<std::mutex> lock(progress_mu_);
    progress_stop_ = true;
  }
  progress_cv_.notify_all();
  if (progress_.joinable()) {
    progress_.join();
  }
  std::vector<c10::intrusive_ptr<WorkFold>> taken;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (ctx_ == nullptr) {
      return;
    }
    /* fold_finalize wants every request completed and freed. */
    while (!inflight_.empty()) {
      taken.push_back(inflight_.front());
      inflight_.pop_front();
    }
  }
  for (auto &work : taken) {
    try {
      work->wait();   /* fold_wait under mu */
    } catch (const std::exception &) {
      /* its error stays with the Work */
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    fold_finalize(ctx_);
    ctx_ = nullptr;
    world_ = nullptr;
    if (oob_) {
      oob_->exit_barrier();
    }
  }
  std::lock_guard<std::mutex> lock(live_mu);
  for (auto it = live_contexts.begin(); it != live_contexts.end(); ++it) {
    if (*it == this) {
      live_contexts.erase(it);
      break;
    }
  }
}

void FoldContext::track_locked(const c10::intrusive_ptr<WorkFold> &work)
{
  inflight_.push_back(work);
}

void FoldContext::untrack_locked(const WorkFold *work)
{
  for (auto it = inflight_.begin(); it != inflight_.end(); ++it) {
    if (it->get() == work) {
      inflight_.erase(it);
      return;
    }
  }
}

std::vector<c10::intrusive_ptr<WorkFold>> FoldContext::poll_locked()
{
  std::vector<c10::intrusive_ptr<WorkFold>> done;
  for (auto it = inflight_.begin(); it != inflight_.end();) {
    c10::intrusive_ptr<WorkFold> work = *it;
    if (work->poll_locked()) {
      done.push_back(work);
      it = inflight_.erase(it);
    } else {
      ++it;
    }
  }
  return done;
}

void FoldContext::want_progress()
{
  std::lock_guard<std::mutex> lock(progress_mu_);
  if (progress_stop_) {
    return;
  }
  progress_wanted_ = 1;
  if (!progress_.joinable()) {
    progress_ = std::thread([this] { progress_loop(); });
  }
  progress_cv_.notify_one();
}

/* Polls while requests are in flight, yielding the core between polls: the thread
 * shares it with its rank's own, which computes meanwhile (DDP's backward) or sleeps
 * on a future. Only after 10 ms without a completion (a peer far behind) does it sleep
 * between polls, 20 us at a time. Sleeps on the condition variable when nothing is in
 * flight. fold advances a pipelined call only when polled, so the polls must come
 * often while a peer keeps up. */
void FoldContext::progress_loop()
{
  auto last_done = std::chrono::steady_clock::now();
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(progress_mu_);
      progress_cv_.wait(lock, [this] { return progress_stop_ || progress_wanted_; });
      if (progress_stop_) {
        return;
      }
    }
    std::vector<c10::intrusive_ptr<WorkFold>> done;
    bool empty;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (ctx_ == nullptr) {
        return;
      }
      done = poll_locked();
      empty = inflight_.empty();
    }
    for (auto &work : done) {
      work->finish_taken();
    }
    if (empty) {
      /* Both locks (in this order, as nowhere the other way round): a request tracked
       * meanwhile keeps the thread polling. */
      std::lock_guard<std::mutex> wanted_lock(progress_mu_);
      std::lock_guard<std::mutex> lock(mu);
      if (inflight_.empty()) {
        progress_wanted_ = 0;
      }
      last_done = std::chrono::steady_clock::now();
      continue;
    }
    auto now = std::chrono::steady_clock::now();
    if (!done.empty()) {
      last_done = now;
    } else if (now - last_done < std::chrono::milliseconds(10)) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

}  // namespace fold_torch
