/*
 * A collective's Work. A started call holds a fold request; whichever thread finds it
 * finished first (wait(), isCompleted(), the progress thread, the context's shutdown)
 * takes it under the context's lock and then, without the lock, finishes the Work:
 * AVG's division, Work::finish (which wakes other waiters), the future. Futures'
 * callbacks run outside fold's lock, so a callback may start the next collective.
 */
#include "fold_torch.h"

#include <sched.h>

#include <chrono>
#include <stdexcept>

namespace fold_torch {

WorkFold::WorkFold(std::shared_ptr<FoldContext> ctx, c10d::OpType type, const char *name,
                   std::vector<at::Tensor> tensors, double divide_by)
    : c10d::Work(-1, type), ctx_(std::move(ctx)), name_(name),
      tensors_(std::move(tensors)), divide_by_(divide_by) {}

/* A started Work is tracked by its context until taken, so none dies in flight. */
WorkFold::~WorkFold() = default;

std::exception_ptr WorkFold::error_for(int status) const
{
  if (status == FOLD_OK) {
    return nullptr;
  }
  return std::make_exception_ptr(std::runtime_error(fold_failure(name_, status)));
}

void WorkFold::finish_now(int status)
{
  status_ = status;
  finish_taken();
}

bool WorkFold::take_locked(int status)
{
  if (req_ == nullptr) {
    return false;
  }
  fold_request_free(req_);
  req_ = nullptr;
  status_ = status;
  return true;
}

bool WorkFold::poll_locked()
{
  if (req_ == nullptr) {
    return false;
  }
  int status = fold_test(req_);
  return status != FOLD_INPROGRESS && take_locked(status);
}

void WorkFold::finish_taken()
{
  std::exception_ptr error = error_for(status_);
  if (!error && divide_by_ > 0) {
    try {
      tensors_[0].div_(divide_by_);
    } catch (...) {
      error = std::current_exception();
    }
  }
  finish(error);
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (future_ && !future_marked_) {
      future_marked_ = true;
      future = future_;
    }
  }
  if (future) {
    settle(future, error);
  }
}

void WorkFold::settle(const c10::intrusive_ptr<c10::ivalue::Future> &future,
                      const std::exception_ptr &error)
{
  if (error) {
    future->setError(error);
  } else {
    future->markCompleted(c10::IValue(tensors_));
  }
}

bool WorkFold::isCompleted()
{
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_) {
      return true;
    }
  }
  bool took = false;
  {
    /* Another thread in fold (a wait, the progress thread) will get there as well. */
    std::unique_lock<std::mutex> lock(ctx_->mu, std::try_to_lock);
    if (lock.owns_lock() && poll_locked()) {
      ctx_->untrack_locked(this);
      took = true;
    }
  }
  if (took) {
    finish_taken();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

bool WorkFold::wait(std::chrono::milliseconds timeout)
{
  bool took = false;
  if (timeout == kNoTimeout) {
    std::lock_guard<std::mutex> lock(ctx_->mu);
    if (req_ != nullptr) {
      took = take_locked(fold_wait(req_));   /* fold's own FOLD_TIMEOUT bounds it */
      ctx_->untrack_locked(this);
    }
  } else {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(ctx_->mu);
        if (req_ == nullptr) {
          break;
        }
        if (poll_locked()) {
          ctx_->untrack_locked(this);
          took = true;
          break;
        }
      }
      TORCH_CHECK(std::chrono::steady_clock::now() < deadline, "fold: ", name_,
                  " did not complete within ", timeout.count(), " ms");
      sched_yield();
    }
  }
  if (took) {
    finish_taken();
  }
  /* Taken by another thread: it finishes the Work in a moment. */
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return completed_; });
  if (exception_) {
    std::rethrow_exception(exception_);
  }
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkFold::getFuture()
{
  c10::intrusive_ptr<c10::ivalue::Future> future;
  bool mark_now = false, need_progress = false;
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!future_) {
      future_ = c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()));
      if (completed_) {
        future_marked_ = mark_now = true;
        error = exception_;
      } else {
        need_progress = true;
      }
    }
    future = future_;
  }
  if (mark_now) {
    settle(future, error);
  }
  if (need_progress) {
    ctx_->want_progress();
  }
  return future;
}

}  // namespace fold_torch
