/*
 * fold's out-of-band allgather over torch's c10d Store (the env:// rendezvous'
 * TCPStore, a FileStore, ...). Round r: every rank sets "fold/oob/<r>/<rank>" and
 * reads every other rank's key of the round. A rank that has read round r knows that
 * every rank has finished reading round r-1 (it set its round-r key after), so it can
 * delete its own key of round r-1: the store holds at most two rounds per rank.
 */
#include "fold_torch.h"

#include <cstdio>
#include <cstring>

namespace fold_torch {

StoreOob::StoreOob(c10::intrusive_ptr<c10d::Store> store, int rank, int size)
    : store_(std::move(store)), rank_(rank), size_(size) {}

std::string StoreOob::key(uint64_t round, int rank) const
{
  return "fold/oob/" + std::to_string(round) + "/" + std::to_string(rank);
}

int StoreOob::allgather(const void *sendbuf, void *recvbuf, size_t len, void *arg)
{
  StoreOob *self = static_cast<StoreOob *>(arg);
  uint64_t round = ++self->round_;
  const uint8_t *in = static_cast<const uint8_t *>(sendbuf);
  uint8_t *out = static_cast<uint8_t *>(recvbuf);
  try {
    self->store_->set(self->key(round, self->rank_), std::vector<uint8_t>(in, in + len));
    for (int r = 0; r < self->size_; r++) {
      if (r == self->rank_) {
        memcpy(out + (size_t)r * len, in, len);
        continue;
      }
      std::vector<uint8_t> got = self->store_->get(self->key(round, r));
      if (got.size() != len) {
        fprintf(stderr, "fold: store allgather round %llu: rank %d sent %zu bytes, "
                "rank %d expected %zu\n", (unsigned long long)round, r, got.size(),
                self->rank_, len);
        return -1;
      }
      memcpy(out + (size_t)r * len, got.data(), len);
    }
  } catch (const std::exception &e) {
    fprintf(stderr, "fold: store allgather round %llu on rank %d failed: %s\n",
            (unsigned long long)round, self->rank_, e.what());
    return -1;
  }
  if (round > 1) {
    try {
      self->store_->deleteKey(self->key(round - 1, self->rank_));
    } catch (const std::exception &) {
      /* A store without deleteKey (FileStore) just keeps the key. */
    }
  }
  return 0;
}

void StoreOob::exit_barrier()
{
  std::vector<std::string> keys;
  for (int r = 0; r < size_; r++) {
    keys.push_back("fold/oob/exit/" + std::to_string(r));
  }
  try {
    store_->set(keys[(size_t)rank_], std::vector<uint8_t>{1});
    store_->wait(keys);
  } catch (const std::exception &) {
    /* fold is finalized already; the store's host may simply have gone first. */
  }
}

}  // namespace fold_torch
