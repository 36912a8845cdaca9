// Native check of the run arena (the session's memory plan): a run that repeats the last one's allocations gets
// them all placed in one block smaller than their sizes added up, a value allocated after another died takes its
// room (the memory a layer just used), and, over runs that change sizes, order and lifetimes at random and keep
// some buffers past their run, no two live buffers ever share a byte (each is filled with its own tag and checked
// when it dies). Also: one run at a time, and a failed run teaches nothing.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "run_arena.h"

using namespace mrt;

namespace {

int errors = 0;

void expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s\n", what);
    ++errors;
  }
}

// Live buffers by address, each filled with its tag byte; overlap and content checked on every change.
struct Ledger {
  struct Entry {
    std::shared_ptr<Buffer> buf;
    size_t bytes;
    uint8_t tag;
  };
  std::map<uintptr_t, Entry> live;
  uint8_t next_tag = 1;

  std::shared_ptr<Buffer> take(Allocator& a, size_t bytes) {
    std::shared_ptr<Buffer> b = a.allocate(bytes);
    const uintptr_t lo = reinterpret_cast<uintptr_t>(b->data);
    auto after = live.lower_bound(lo);
    if (after != live.end() && after->first < lo + bytes) expect(false, "a new buffer overlaps a live one above it");
    if (after != live.begin()) {
      auto before = std::prev(after);
      if (before->first + before->second.bytes > lo) expect(false, "a new buffer overlaps a live one below it");
    }
    const uint8_t tag = next_tag;
    next_tag = static_cast<uint8_t>(next_tag == 255 ? 1 : next_tag + 1);
    std::memset(b->data, tag, bytes);
    live[lo] = Entry{b, bytes, tag};
    return b;
  }
  void drop(const std::shared_ptr<Buffer>& b) {
    auto it = live.find(reinterpret_cast<uintptr_t>(b->data));
    if (it == live.end()) return;
    const auto* p = static_cast<const uint8_t*>(b->data);
    bool intact = true;
    for (size_t i = 0; i < it->second.bytes; ++i) intact &= p[i] == it->second.tag;
    expect(intact, "a buffer was overwritten while alive");
    live.erase(it);
  }
};

// A chain of layers: each output lives until the next layer's output is made (sizes in KiB).
std::vector<void*> run_chain(RunArena& arena, const std::vector<size_t>& kib, Ledger& ledger) {
  std::vector<void*> where;
  expect(arena.begin_run(), "begin_run on an idle arena");
  std::shared_ptr<Buffer> prev;
  for (size_t k : kib) {
    std::shared_ptr<Buffer> out = ledger.take(arena, k * 1024);
    where.push_back(out->data);
    if (prev) ledger.drop(prev);
    prev = std::move(out);
  }
  ledger.drop(prev);
  prev.reset();
  arena.end_run(true);
  return where;
}

void check_plan() {
  auto arena = std::make_shared<RunArena>(std::make_shared<Allocator>());
  Ledger ledger;
  const std::vector<size_t> kib = {1600, 1600, 800, 4800, 1200, 300, 1800, 1800, 300};
  size_t total = 0;
  for (size_t k : kib) total += k * 1024;
  run_chain(*arena, kib, ledger);
  RunArena::Stats st = arena->stats();
  expect(st.placed == 0, "the first run has no plan to follow");
  expect(st.plan_bytes > 0 && st.plan_bytes < total, "the plan is smaller than the sizes added up");
  const std::vector<void*> second = run_chain(*arena, kib, ledger);
  st = arena->stats();
  expect(st.placed == kib.size() && st.allocations == kib.size(), "the second run is placed in full");
  expect(st.block_bytes == st.plan_bytes, "the block is the plan's size");
  // layer 2 (800 KiB) is made while layer 1 lives and after layer 0 died: it takes layer 0's room
  expect(second[2] == second[0], "a value takes the room of one that just died");
  const std::vector<void*> third = run_chain(*arena, kib, ledger);
  expect(third == second, "the same run twice lands at the same places");
  expect(arena->stats().plans_learned == 1, "a run that follows the plan keeps it");

  // a failed run teaches nothing; a different run teaches a new plan
  expect(arena->begin_run(), "begin_run");
  expect(!arena->begin_run(), "one run at a time");
  ledger.drop(ledger.take(*arena, 12345));
  arena->end_run(false);
  expect(arena->stats().plans_learned == 1, "a failed run does not change the plan");
  run_chain(*arena, {100, 200, 300}, ledger);
  expect(arena->stats().plans_learned == 2, "a different run is learned");
  expect(ledger.live.empty(), "every buffer was dropped");
}

void check_random(unsigned seed, int runs) {
  auto arena = std::make_shared<RunArena>(std::make_shared<Allocator>());
  Ledger ledger;
  std::mt19937 rng(seed);
  std::vector<std::shared_ptr<Buffer>> kept;  // buffers held past their run (outputs a caller keeps)
  // three patterns a session sees (feed shapes), each a list of (size, lifetime in allocations)
  std::vector<std::vector<std::pair<size_t, int>>> patterns(3);
  for (auto& p : patterns)
    for (int i = 0, n = 10 + static_cast<int>(rng() % 30); i < n; ++i)
      p.emplace_back(64 + rng() % 100000, 1 + static_cast<int>(rng() % 5));
  for (int r = 0; r < runs; ++r) {
    auto pattern = patterns[rng() % patterns.size()];
    if (rng() % 4 == 0) pattern[rng() % pattern.size()].first += 64 * (1 + rng() % 8);  // one size changes
    if (rng() % 4 == 0) pattern[rng() % pattern.size()].second += 3;                   // one value lives longer
    const bool held = arena->begin_run();
    expect(held, "begin_run on an idle arena");
    std::vector<std::pair<std::shared_ptr<Buffer>, int>> alive;  // buffer, allocations left to live
    for (const auto& [bytes, life] : pattern) {
      for (auto& a : alive) --a.second;
      for (auto it = alive.begin(); it != alive.end();) {
        if (it->second <= 0) {
          ledger.drop(it->first);
          it = alive.erase(it);
        } else {
          ++it;
        }
      }
      alive.emplace_back(ledger.take(*arena, bytes), life);
    }
    for (auto& a : alive) {
      if (rng() % 8 == 0) kept.push_back(a.first);  // the caller keeps it
      else ledger.drop(a.first);
    }
    alive.clear();
    arena->end_run(rng() % 16 != 0);  // now and then a run fails
    while (kept.size() > 4 || (!kept.empty() && rng() % 3 == 0)) {  // and the caller lets some go later
      ledger.drop(kept.front());
      kept.erase(kept.begin());
    }
  }
  for (auto& b : kept) ledger.drop(b);
  kept.clear();
  const RunArena::Stats st = arena->stats();
  expect(st.plans_learned > 1 && st.block_bytes > 0, "random runs learn plans and place buffers");
  std::printf("seed %u: %llu plans learned, block %zu bytes\n", seed, static_cast<unsigned long long>(st.plans_learned),
              st.block_bytes);
}

}  // namespace

int main() {
  check_plan();
  for (unsigned seed = 1; seed <= 20; ++seed) check_random(seed, 200);
  if (errors) {
    std::fprintf(stderr, "%d failures\n", errors);
    return 1;
  }
  std::printf("arena_check: ok\n");
  return 0;
}
