#include "run_arena.h"

#include <algorithm>
#include <limits>
#include <map>

namespace mrt {

namespace {
constexpr size_t kAlign = 64;
size_t rounded(size_t bytes) { return ((bytes ? bytes : 1) + kAlign - 1) / kAlign * kAlign; }
}  // namespace

bool RunArena::begin_run() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (running_) return false;
  running_ = true;
  ++run_;
  trace_.clear();
  clock_ = 0;
  deviated_ = false;
  if (plan_bytes_ > 0 && (blocks_.empty() || blocks_.back()->bytes < plan_bytes_)) {
    auto b = std::make_unique<Block>();
    b->memory = Tensor(DType::kUInt8, Shape{static_cast<int64_t>(plan_bytes_)});
    b->bytes = plan_bytes_;
    Block* old = blocks_.empty() ? nullptr : blocks_.back().get();
    blocks_.push_back(std::move(b));
    if (old) drop_block_if_done(old);
    // The free lists hold the buffers of the runs before the plan; from now on the block holds those values.
    fallback_->trim();
  }
  return true;
}

void RunArena::end_run(bool completed) {
  std::lock_guard<std::mutex> lock(mutex_);
  running_ = false;
  if (!completed) return;
  bool same = !deviated_ && trace_.size() == plan_.size();
  for (size_t k = 0; same && k < trace_.size(); ++k)
    // a value placed by the plan that now outlives the run would block its room next time
    same = trace_[k].bytes == plan_[k].bytes && (plan_[k].offset < 0 || trace_[k].died >= 0);
  if (!same) learn();
}

bool RunArena::room_is_free(const Block& b, size_t offset, size_t bytes) const {
  for (const auto& [data, l] : lent_)
    if (l.block == &b && l.offset < offset + bytes && offset < l.offset + l.bytes) return false;
  return true;
}

std::shared_ptr<Buffer> RunArena::allocate(size_t bytes) {
  const size_t key = rounded(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!running_) return fallback_->allocate(key);  // (nothing to plan outside a run)
  const size_t k = trace_.size();
  trace_.push_back(Slot{key, clock_++, -1, -1});
  Block* b = blocks_.empty() ? nullptr : blocks_.back().get();
  std::shared_ptr<Buffer> buf;
  Lent lent{run_, k, nullptr, 0, key};
  if (k < plan_.size() && plan_[k].bytes == key && plan_[k].offset >= 0) {
    const size_t off = static_cast<size_t>(plan_[k].offset);
    if (b && off + key <= b->bytes && room_is_free(*b, off, key)) {
      buf = std::make_shared<Buffer>();
      buf->data = static_cast<char*>(b->memory.raw()) + off;
      buf->bytes = key;
      ++b->live;
      lent.block = b, lent.offset = off;
      trace_[k].offset = static_cast<int64_t>(off);
    } else {
      deviated_ = true;
    }
  } else if (k >= plan_.size() || plan_[k].bytes != key) {
    deviated_ = true;
  }
  if (!buf) buf = fallback_->allocate(key);
  buf->pool = shared_from_this();  // its release comes here, so the trace sees when it died
  lent_[buf->data] = lent;
  return buf;
}

void RunArena::release(void* data, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = lent_.find(data);
  if (it == lent_.end()) {  // (not one of ours: cannot happen, but the fallback can take it)
    fallback_->release(data, bytes);
    return;
  }
  const Lent l = it->second;
  lent_.erase(it);
  if (running_ && l.run == run_) trace_[l.index].died = clock_++;
  if (!l.block) {
    fallback_->release(data, bytes);
    return;
  }
  --l.block->live;
  drop_block_if_done(l.block);
}

void RunArena::drop_block_if_done(Block* b) {
  if (b->live > 0 || blocks_.empty() || blocks_.back().get() == b) return;
  blocks_.erase(std::remove_if(blocks_.begin(), blocks_.end(), [&](const auto& p) { return p.get() == b; }),
                blocks_.end());
}

// Offsets for the allocations of the run just ended, in the order they were made: each goes to the smallest gap
// between the placed buffers alive at its birth that holds it, else above them all. Values still alive at the
// end of the run (outputs, anything kept) are not placed.
void RunArena::learn() {
  ++plans_learned_;
  plan_ = trace_;
  // events by time: birth (index) or death (~index)
  std::vector<int64_t> events(static_cast<size_t>(clock_), std::numeric_limits<int64_t>::min());
  for (size_t k = 0; k < plan_.size(); ++k) {
    Slot& s = plan_[k];
    s.offset = -1;
    events[static_cast<size_t>(s.born)] = static_cast<int64_t>(k);
    if (s.died >= 0) events[static_cast<size_t>(s.died)] = ~static_cast<int64_t>(k);
  }
  std::map<size_t, size_t> alive;  // offset -> end, of the placed buffers alive now
  size_t top = 0;
  for (int64_t e : events) {
    if (e == std::numeric_limits<int64_t>::min()) continue;  // (a release of an earlier run's buffer)
    if (e < 0) {
      const Slot& s = plan_[static_cast<size_t>(~e)];
      if (s.offset >= 0) alive.erase(static_cast<size_t>(s.offset));
      continue;
    }
    Slot& s = plan_[static_cast<size_t>(e)];
    if (s.died < 0) continue;
    size_t best = std::numeric_limits<size_t>::max(), best_gap = std::numeric_limits<size_t>::max(), cursor = 0;
    for (const auto& [off, end] : alive) {
      if (off >= cursor + s.bytes && off - cursor < best_gap) best = cursor, best_gap = off - cursor;
      cursor = std::max(cursor, end);
    }
    if (best == std::numeric_limits<size_t>::max()) best = cursor;
    s.offset = static_cast<int64_t>(best);
    alive.emplace(best, best + s.bytes);
    top = std::max(top, best + s.bytes);
  }
  plan_bytes_ = top;
}

RunArena::Stats RunArena::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Stats st;
  st.block_bytes = blocks_.empty() ? 0 : blocks_.back()->bytes;
  st.plan_bytes = plan_bytes_;
  for (const Slot& s : plan_)
    if (s.offset >= 0) st.planned_bytes += s.bytes;
  st.allocations = trace_.size();
  for (const Slot& s : trace_)
    if (s.offset >= 0) ++st.placed;
  st.plans_learned = plans_learned_;
  return st;
}

}  // namespace mrt
