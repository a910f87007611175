/*
 * fold as a torch.distributed backend (torch 1.13's c10d::ProcessGroup API).
 *
 *   FoldContext       one fold context per process group, its lock, its requests in
 *                     flight and the thread that completes futures (context.cpp)
 *   StoreOob          fold's out-of-band allgather over the c10d Store (store_oob.cpp)
 *   WorkFold          a collective's Work: a fold request, or a call already done (work.cpp)
 *   ProcessGroupFold  the collectives fold serves, the others delegated or refused
 *                     (process_group.cpp); torch dtypes and ops to fold's (tensor_map.cpp)
 *
 * Threads: fold lets one thread at a time use a context (fold.h), so every fold call
 * below holds FoldContext::mu. Python threads, the autograd engine and the progress
 * thread may all reach one context; none calls fold without the lock.
 */
#pragma once

#include <fold/fold.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fold_torch {

class WorkFold;

/* fold's out-of-band allgather (fold_context_params_t.oob) over a c10d Store: each rank
 * sets "fold/oob/<round>/<rank>" and gets every other rank's key of the round. */
class StoreOob {
 public:
  StoreOob(c10::intrusive_ptr<c10d::Store> store, int rank, int size);
  /* The fold_oob_allgather_fn; arg is a StoreOob. Never throws (fold is C). */
  static int allgather(const void *sendbuf, void *recvbuf, size_t len, void *arg);
  /* Every rank past fold_finalize before any returns, so the rank hosting the store
   * does not take it away while another still reads the last round. */
  void exit_barrier();

 private:
  std::string key(uint64_t round, int rank) const;
  c10::intrusive_ptr<c10d::Store> store_;
  int rank_, size_;
  uint64_t round_ = 0;
};

/* A fold context with what may touch it: the lock, the requests in flight, and the
 * progress thread, which exists only once a Work's future was asked for (DDP does): a
 * future completes without anyone calling wait(), so something must poll fold for it. */
class FoldContext {
 public:
  /* bootstrap: "store" (the allgather over store) or "pmix" (fold_init's own). */
  FoldContext(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
              const std::string &bootstrap);
  ~FoldContext();
  /* Waits for the requests in flight, stops the progress thread, fold_finalize.
   * Collective; idempotent. */
  void shutdown();
  /* Shuts down every live context, oldest first (at the interpreter's exit: every rank
   * made its groups in the same order). */
  static void shutdown_all();

  fold_comm_h world() const { return world_; }
  bool live() const { return ctx_ != nullptr; }

  std::mutex mu;   /* held around every fold call on this context */

  /* With mu held: a request started; the Work stays alive until it completes. */
  void track_locked(const c10::intrusive_ptr<WorkFold> &work);
  /* With mu held: tests every request in flight; completed ones are untracked and
   * returned, for the caller to finish after dropping mu. */
  std::vector<c10::intrusive_ptr<WorkFold>> poll_locked();
  void untrack_locked(const WorkFold *work);
  /* A Work's future was asked for: the progress thread now polls until it completes. */
  void want_progress();

 private:
  void progress_loop();

  fold_context_h ctx_ = nullptr;
  fold_comm_h world_ = nullptr;
  std::unique_ptr<StoreOob> oob_;
  std::deque<c10::intrusive_ptr<WorkFold>> inflight_;   /* under mu */

  std::mutex progress_mu_;
  std::condition_variable progress_cv_;
  std::thread progress_;
  int progress_wanted_ = 0;   /* futures not yet completed; under progress_mu_ */
  bool progress_stop_ = false;
};

/* A collective's Work. Either already complete (blocking calls: small ones, broadcast,
 * barrier) or holding a fold request completed by wait(), isCompleted() or the
 * progress thread, whichever gets there first (under the context's lock). */
class WorkFold : public c10d::Work {
 public:
  WorkFold(std::shared_ptr<FoldContext> ctx, c10d::OpType type, const char *name,
           std::vector<at::Tensor> tensors, double divide_by);
  ~WorkFold() override;

  /* Starts nothing: a finished call's Work. status is fold's. */
  void finish_now(int status);
  /* Takes the request of a started call; the caller holds ctx->mu. */
  void set_request_locked(fold_request_h req) { req_ = req; }

  bool isCompleted() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  std::vector<at::Tensor> result() override { return tensors_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  /* With ctx->mu held: fold_test; true if the request finished and this thread took
   * it (then finish_taken() is the caller's, after dropping the lock). */
  bool poll_locked();
  /* With ctx->mu held: the request finished with `status` (not FOLD_INPROGRESS); frees
   * it. Returns false if another thread had already taken it. */
  bool take_locked(int status);
  /* Without ctx->mu: the result's last touch (AVG's division), then Work::finish and
   * the future. Once per Work, by the thread whose take_locked returned true. */
  void finish_taken();

 private:
  std::exception_ptr error_for(int status) const;
  /* Completes the future once, with the error or the tensors; without mutex_. */
  void settle(const c10::intrusive_ptr<c10::ivalue::Future> &future,
              const std::exception_ptr &error);

  std::shared_ptr<FoldContext> ctx_;
  const char *name_;                 /* "all_reduce", ...: named in errors */
  std::vector<at::Tensor> tensors_;
  double divide_by_;                 /* AVG: the group size; else 0 */
  fold_request_h req_ = nullptr;     /* under ctx->mu */
  int status_ = FOLD_OK;             /* the request's, once taken */
  c10::intrusive_ptr<c10::ivalue::Future> future_;   /* under mutex_ */
  bool future_marked_ = false;                       /* under mutex_ */
};

/* torch's dtypes and ops as fold's; each throws an error naming the operation for what
 * fold does not serve. */
fold_dtype_t fold_dtype_of(const at::Tensor &t, const char *op_name);
/* The fold op for a torch ReduceOp on dtype; *avg set for AVG (served as SUM, then a
 * division by the group size). */
fold_op_t fold_op_of(const c10d::ReduceOp &op, fold_dtype_t dtype, const char *op_name,
                     bool *avg);
/* A contiguous CPU tensor, one per call. */
const at::Tensor &served_tensor(const std::vector<at::Tensor> &tensors, const char *op_name);
/* fold's status as a message: "fold: all_reduce failed: <fold_status_string>". */
std::string fold_failure(const char *op_name, int status);

class ProcessGroupFold : public c10d::ProcessGroup {
 public:
  /* delegate: the process group other collectives go to (gloo), or null to refuse them.
   * blocking_max: all_reduce and reduce of at most this many bytes run blocking. */
  ProcessGroupFold(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                   const std::string &bootstrap,
                   c10::intrusive_ptr<c10d::ProcessGroup> delegate, size_t blocking_max);
  ~ProcessGroupFold() override;

  const std::string getBackendName() const override { return "fold"; }
  /* Collective: the ranks finalize fold together (destroy_process_group, or atexit). */
  void shutdown();
  bool has_delegate() const { return static_cast<bool>(delegate_); }
  const std::string &bootstrap() const { return bootstrap_; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
      const c10d::AllreduceOptions &opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
      const c10d::ReduceOptions &opts = c10d::ReduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
      const c10d::BroadcastOptions &opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions &opts = c10d::BarrierOptions()) override;

  /* Not fold's: handed to the delegate, or refused naming the operation. */
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor> &tensors,
      const c10d::AllreduceCoalescedOptions &opts = c10d::AllreduceCoalescedOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &out,
      std::vector<at::Tensor> &in,
      const c10d::AllgatherOptions &opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &out, at::Tensor &in,
      const c10d::AllgatherOptions &opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>> &out, std::vector<at::Tensor> &in,
      const c10d::AllgatherOptions &opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &out,
      std::vector<at::Tensor> &in,
      const c10d::GatherOptions &opts = c10d::GatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &out,
      std::vector<std::vector<at::Tensor>> &in,
      const c10d::ScatterOptions &opts = c10d::ScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &out,
      std::vector<std::vector<at::Tensor>> &in,
      const c10d::ReduceScatterOptions &opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor &out, at::Tensor &in,
      const c10d::ReduceScatterOptions &opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &out, at::Tensor &in,
      std::vector<int64_t> &out_splits, std::vector<int64_t> &in_splits,
      const c10d::AllToAllOptions &opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &out,
      std::vector<at::Tensor> &in,
      const c10d::AllToAllOptions &opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors,
                                               int tag) override;

  void setSequenceNumberForGroup() override { seq_ = 0; }
  uint64_t getSequenceNumberForGroup() override { return seq_; }

 private:
  /* The delegate, or an error naming op_name. */
  c10d::ProcessGroup &delegate(const char *op_name);
  /* allreduce and reduce: root < 0 for allreduce. */
  c10::intrusive_ptr<c10d::Work> reduction(std::vector<at::Tensor> &tensors,
                                           const c10d::ReduceOp &op, int64_t root,
                                           c10d::OpType type, const char *op_name);

  std::shared_ptr<FoldContext> ctx_;
  c10::intrusive_ptr<c10d::ProcessGroup> delegate_;
  std::string bootstrap_;
  size_t blocking_max_;
  uint64_t seq_ = 0;
};

}  // namespace fold_torch
