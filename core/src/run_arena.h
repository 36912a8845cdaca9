// A session's memory plan. Without one, each value gets a buffer of its own size from the free lists, which is
// the buffer of that size the previous run used: a value of a size the model makes once is written into memory
// last touched a whole run earlier, long gone from the caches (MobileNetV2's 4.8 MB expansion on 112 x 112 and
// every layer after it). The arena instead places the buffers a run allocates at offsets of one block, by the
// lifetimes the previous run showed: a buffer takes the best-fitting room that values dead at that point left,
// so a layer writes into memory a layer just before it used. The block is the plan's peak, not the sum of all
// sizes.
//
// The plan is a guess checked at every allocation: allocation k of a run is placed at the plan's offset only
// when it asks for the size the plan's k-th had and no buffer still alive overlaps that room; anything else (a
// new shape, a different order, a value kept longer, an output the caller still holds) gets a buffer of its
// own from the free lists, and the next run learns a new plan from what this run did. So the plan only
// decides where values go, never whether two live values share memory.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tensor.h"

namespace mrt {

class RunArena : public Allocator {
 public:
  explicit RunArena(std::shared_ptr<Allocator> fallback) : fallback_(std::move(fallback)) {}
  ~RunArena() override = default;

  // One run at a time: false while another run holds the arena (that run allocates from the fallback).
  bool begin_run();
  // `completed`: the run finished, so its allocations are a plan for the next one.
  void end_run(bool completed);

  std::shared_ptr<Buffer> allocate(size_t bytes) override;
  void release(void* data, size_t bytes) override;

  struct Stats {
    size_t block_bytes = 0;      // the current block
    size_t plan_bytes = 0;       // the block the plan needs
    size_t planned_bytes = 0;    // the sizes of the planned allocations added up (what the free lists would hold)
    size_t allocations = 0;      // in the last run
    size_t placed = 0;           // of them, placed in the block
    uint64_t plans_learned = 0;  // over the arena's life
  };
  Stats stats() const;

 private:
  // One allocation of a run: its rounded size, when it was made and freed (the arena's event clock; -1: still
  // alive when the run ended) and its offset in the block (-1: not placed).
  struct Slot {
    size_t bytes = 0;
    int64_t born = 0, died = -1, offset = -1;
  };
  struct Block {
    Tensor memory;
    size_t bytes = 0, live = 0;
  };
  // A buffer the arena handed out: the run and allocation it came from, and where it lies (no block: the
  // fallback's).
  struct Lent {
    uint64_t run = 0;
    size_t index = 0;
    Block* block = nullptr;
    size_t offset = 0, bytes = 0;
  };

  bool room_is_free(const Block& b, size_t offset, size_t bytes) const;
  void learn();  // plan_ from trace_
  void drop_block_if_done(Block* b);

  std::shared_ptr<Allocator> fallback_;
  mutable std::mutex mutex_;
  bool running_ = false;
  uint64_t run_ = 0;
  int64_t clock_ = 0;
  bool deviated_ = false;  // this run did not follow the plan
  std::vector<Slot> plan_, trace_;
  size_t plan_bytes_ = 0;
  std::vector<std::unique_ptr<Block>> blocks_;  // the last is current; older ones stay until their buffers die
  std::unordered_map<void*, Lent> lent_;
  uint64_t plans_learned_ = 0;
};

}  // namespace mrt
