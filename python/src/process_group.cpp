/*
 * The fold process group: all_reduce, reduce, broadcast and barrier on fold; the other
 * collectives go to a delegate process group (gloo, made beside it in Python) or are
 * refused with an error naming them.
 *
 * Each served call first validates (one contiguous CPU tensor, a dtype and op fold
 * has), then runs under the context's lock. all_reduce and reduce of more than
 * blocking_max bytes (FOLD_TORCH_BLOCKING_MAX, default 2 KiB: fold serves blocking
 * calls up to there on a node without its executor, and a request would cost more
 * than it could overlap) start a fold request and return a Work holding it; smaller
 * ones, broadcast and barrier run blocking and return a finished Work.
 */
#include "fold_torch.h"

namespace fold_torch {

namespace {

void check_root(int64_t root, int size, const char *op_name)
{
  TORCH_CHECK(root >= 0 && root < size, "fold: ", op_name, " root ", root,
              " is not a rank of this group of ", size);
}

}  // namespace

ProcessGroupFold::ProcessGroupFold(const c10::intrusive_ptr<c10d::Store> &store, int rank,
                                   int size, const std::string &bootstrap,
                                   c10::intrusive_ptr<c10d::ProcessGroup> delegate,
                                   size_t blocking_max)
    : c10d::ProcessGroup(rank, size),
      ctx_(std::make_shared<FoldContext>(store, rank, size, bootstrap)),
      delegate_(std::move(delegate)), bootstrap_(bootstrap), blocking_max_(blocking_max) {}

ProcessGroupFold::~ProcessGroupFold()
{
  try {
    shutdown();
  } catch (...) {
  }
}

void ProcessGroupFold::shutdown()
{
  ctx_->shutdown();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFold::reduction(std::vector<at::Tensor> &tensors,
    const c10d::ReduceOp &op, int64_t root, c10d::OpType type, const char *op_name)
{
  const at::Tensor &t = served_tensor(tensors, op_name);
  fold_dtype_t dtype = fold_dtype_of(t, op_name);
  bool avg = false;
  fold_op_t fop = fold_op_of(op, dtype, op_name, &avg);
  if (root >= 0) {
    check_root(root, getSize(), op_name);
  }
  TORCH_CHECK(ctx_->live(), "fold: ", op_name, " on a process group already shut down");
  seq_++;
  /* AVG: the ranks that get the sum divide it (a reduce's non-roots keep their input). */
  double divide_by = avg && (root < 0 || root == getRank()) ? getSize() : 0;
  auto work = c10::make_intrusive<WorkFold>(ctx_, type, op_name, tensors, divide_by);
  size_t count = (size_t)t.numel();
  if (count == 0) {
    work->finish_now(FOLD_OK);
    return work;
  }
  void *buf = t.data_ptr();
  bool blocking = count * (size_t)t.element_size() <= blocking_max_;
  std::vector<c10::intrusive_ptr<WorkFold>> done;
  int status;
  {
    std::lock_guard<std::mutex> lock(ctx_->mu);
    done = ctx_->poll_locked();   /* requests nobody waits for finish here */
    if (blocking) {
      status = root < 0
          ? fold_allreduce(FOLD_IN_PLACE, buf, count, dtype, fop, ctx_->world())
          : fold_reduce(FOLD_IN_PLACE, buf, count, dtype, fop, (int)root, ctx_->world());
    } else {
      fold_request_h req = nullptr;
      status = root < 0
          ? fold_iallreduce(FOLD_IN_PLACE, buf, count, dtype, fop, ctx_->world(), &req)
          : fold_ireduce(FOLD_IN_PLACE, buf, count, dtype, fop, (int)root, ctx_->world(),
                         &req);
      if (status == FOLD_OK) {
        work->set_request_locked(req);
        ctx_->track_locked(work);
      }
    }
  }
  for (auto &d : done) {
    d->finish_taken();
  }
  TORCH_CHECK(status == FOLD_OK, fold_failure(op_name, status));
  if (blocking) {
    work->finish_now(FOLD_OK);
  }
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFold::allreduce(std::vector<at::Tensor> &tensors,
                                                           const c10d::AllreduceOptions &opts)
{
  return reduction(tensors, opts.reduceOp, -1, c10d::OpType::ALLREDUCE, "all_reduce");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFold::reduce(std::vector<at::Tensor> &tensors,
                                                        const c10d::ReduceOptions &opts)
{
  TORCH_CHECK(opts.rootTensor == 0, "fold: reduce takes one tensor per rank");
  return reduction(tensors, opts.reduceOp, opts.rootRank, c10d::OpType::REDUCE, "reduce");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFold::broadcast(std::vector<at::Tensor> &tensors,
                                                           const c10d::BroadcastOptions &opts)
{
  const at::Tensor &t = served_tensor(tensors, "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "fold: broadcast takes one tensor per rank");
  check_root(opts.rootRank, getSize(), "broadcast");
  TORCH_CHECK(ctx_->live(), "fold: broadcast on a process group already shut down");
  seq_++;
  /* Any dtype: broadcast moves bytes. */
  size_t bytes = (size_t)t.numel() * (size_t)t.element_size();
  auto work = c10::make_intrusive<WorkFold>(ctx_, c10d::OpType::BROADCAST, "broadcast",
                                            tensors, 0);
  std::vector<c10::intrusive_ptr<WorkFold>> done;
  int status = FOLD_OK;
  {
    std::lock_guard<std::mutex> lock(ctx_->mu);
    done = ctx_->poll_locked();
    if (bytes > 0) {
      status = fold_bcast(t.data_ptr(), bytes, FOLD_UINT8, (int)opts.rootRank, ctx_->world());
    }
  }
  for (auto &d : done) {
    d->finish_taken();
  }
  TORCH_CHECK(status == FOLD_OK, fold_failure("broadcast", status));
  work->finish_now(FOLD_OK);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFold::barrier(const c10d::BarrierOptions &)
{
  TORCH_CHECK(ctx_->live(), "fold: barrier on a process group already shut down");
  seq_++;
  auto work = c10::make_intrusive<WorkFold>(ctx_, c10d::OpType::BARRIER, "barrier",
                                            std::vector<at::Tensor>(), 0);
  std::vector<c10::intrusive_ptr<WorkFold>> done;
  int status;
  {
    std::lock_guard<std::mutex> lock(ctx_->mu);
    done = ctx_->poll_locked();
    status = fold_barrier(ctx_->world());
  }
  for (auto &d : done) {
    d->finish_taken();
  }
  TORCH_CHECK(status == FOLD_OK, fold_failure("barrier", status));
  work->finish_now(FOLD_OK);
  return work;
}

c10d::ProcessGroup &ProcessGroupFold::delegate(const char *op_name)
{
  TORCH_CHECK_NOT_IMPLEMENTED(delegate_, "fold: ", op_name, " is not served by the fold"
                              " backend, which serves all_reduce, reduce, broadcast and"
                              " barrier, and no delegate is set (FOLD_TORCH_DELEGATE=none)");
  return *delegate_;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFold::allreduce_coalesced(
    std::vector<at::Tensor> &tensors, const c10d::AllreduceCoalescedOptions &opts)
{
  return delegate("allreduce_coalesced").allreduce_coalesced(tensors, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFold::allgather(
    std::vector<std::vector<at::Tensor>> &out, std::vector<at::Tensor> &in,
    const c10d::AllgatherOptions &opts)
{
  return delegate("all_gather").allgather(out, in, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFold::_allgather_base(
    at::Tensor &out, at::Tensor &in, const c10d::AllgatherOptions &opts)
{
  return delegate("_all_gather_base")._allgather_base(out, in, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFold::allgather_coalesced(
    std::vector<std::vector<at::Tensor>> &out, std::vector<at::Tensor> &in,
    const c10d::AllgatherOptions &opts)
{
  return delegate("all_gather_coalesced").allgather_coalesced(out, in, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFold::gather(
    std::vector<std::vector<at::Tensor>> &out, std::vector<at::Tensor> &in,
    const c10d::GatherOptions &opts)
{
  return delegate("gather").gather(out, in, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFold::scatter(
    std::vector<at::Tensor> &out, std::vector<std::vector<at::Tensor>> &in,
    const c10d::ScatterOptions &opts)
{
  return delegate("scatter").scatter(out, in, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFold::reduce_scatter(
    std::vector<at::Tensor> &out, std::vector<std::vector<at::Tensor>> &in,
    const c10d::ReduceScatterOptions &opts)
{
  return delegate("reduce_scatter").reduce_scatter(out, in, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFold::_reduce_scatter_base(
    at::Tensor &out, at::Tensor &in, const c10d::ReduceScatterOptions &opts)
{
  return delegate("_reduce_scatter_base")._reduce_scatter_base(out, in, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFold::alltoall_base(
    at::Tensor &out, at::Tensor &in, std::vector<int64_t> &out_splits,
    std::vector<int64_t> &in_splits, const c10d::AllToAllOptions &opts)
{
  return delegate("all_to_all_single").alltoall_base(out, in, out_splits, in_splits, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFold::alltoall(
    std::vector<at::Tensor> &out, std::vector<at::Tensor> &in,
    const c10d::AllToAllOptions &opts)
{
  return delegate("all_to_all").alltoall(out, in, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFold::send(std::vector<at::Tensor> &tensors,
                                                      int dst, int tag)
{
  return delegate("send").send(tensors, dst, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFold::recv(std::vector<at::Tensor> &tensors,
                                                      int src, int tag)
{
  return delegate("recv").recv(tensors, src, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupFold::recvAnysource(
    std::vector<at::Tensor> &tensors, int tag)
{
  return delegate("recv (any source)").recvAnysource(tensors, tag);
}

}  // namespace fold_torch
