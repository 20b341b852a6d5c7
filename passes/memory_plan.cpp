#include "passes/memory_plan.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <string>

#include "ir/assert.h"
#include "ir/buffers.h"

namespace lathe {

namespace {
constexpr int64_t kAlign = 256;
int64_t align_up(int64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }
}  // namespace

// 1. Live range of each activation over the launch order (ir/buffers.h), sizes at
//    the graph's planned bindings (attrs B, S, T: the largest step the plan runs).
// 2. Place buffers largest first; each goes to the lowest offset where it overlaps
//    no already-placed buffer whose live range intersects its own (best fit among
//    the gaps).
// 3. arena_bytes = the end of the highest buffer.
PassResult memory_plan(Graph& g, const PassContext&) {
  std::vector<NodeId> order = g.topo_order();
  std::vector<LiveRange> live = live_ranges(g, order);
  Bindings b = graph_bindings(g);
  struct Buf {
    ValueId v;
    int64_t size;
    LiveRange r;
    int64_t offset = -1;
  };
  std::vector<Buf> bufs;
  // Offsets are 64-bit integers: the buffers together must stay well inside them (a
  // batch of 65536 at 4M tokens without flash attention wrapped the scores' size
  // negative and failed the verifier's check, an abort).
  double total = 0;
  for (size_t v = 0; v < live.size(); ++v)
    if (live[v].first >= 0) {
      const double bytes = value_bytes(g.value(ValueId(v)), b);
      total += bytes;
      if (!(total < 0x1p61)) {
        char eb[32];
        std::snprintf(eb, sizeof eb, "%.3g", bytes / 1e18);
        throw Error(g.name + " at batch " + std::to_string(b.B) + ", " + std::to_string(b.S) + " new tokens, context " +
                    std::to_string(b.T) + " is too large to cost: its activations pass 2^61 bytes (" +
                    g.value(ValueId(v)).name + " alone holds " + eb + " EB; lathe counts bytes in 64-bit integers)");
      }
      bufs.push_back({ValueId(v), align_up(std::max<int64_t>(1, int64_t(bytes))), live[v]});
    }
  std::vector<size_t> by_size(bufs.size());
  for (size_t i = 0; i < bufs.size(); ++i) by_size[i] = i;
  std::stable_sort(by_size.begin(), by_size.end(), [&](size_t a, size_t c) { return bufs[a].size > bufs[c].size; });
  // Placed buffers are filed under every block of kSpan launches their live range
  // touches, so finding the ones whose range intersects a new buffer's looks at its
  // blocks only (linear in the graph for short-lived activations, where comparing
  // with every placed buffer was quadratic: seconds at thousands of layers).
  constexpr int64_t kSpan = 64;
  std::vector<std::vector<size_t>> blocks(order.size() / kSpan + 1);
  std::vector<size_t> seen(bufs.size(), SIZE_MAX);  // the last buffer that looked at j
  int64_t arena = 0;
  std::vector<std::pair<int64_t, int64_t>> busy;  // [lo, hi) of conflicting buffers
  for (size_t i : by_size) {
    Buf& x = bufs[i];
    busy.clear();
    for (int64_t blk = x.r.first / kSpan; blk <= x.r.last / kSpan; ++blk)
      for (size_t j : blocks[size_t(blk)]) {
        if (seen[j] == i) continue;
        seen[j] = i;
        const Buf& y = bufs[j];
        if (x.r.first <= y.r.last && y.r.first <= x.r.last) busy.push_back({y.offset, y.offset + y.size});
      }
    std::sort(busy.begin(), busy.end());
    int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
    for (auto [lo, hi] : busy) {
      if (lo - cursor >= x.size && lo - cursor < best_gap) {
        best = cursor;
        best_gap = lo - cursor;
      }
      cursor = std::max(cursor, hi);
    }
    if (best < 0) best = cursor;  // past every conflicting buffer
    x.offset = best;
    arena = std::max(arena, best + x.size);
    for (int64_t blk = x.r.first / kSpan; blk <= x.r.last / kSpan; ++blk) blocks[size_t(blk)].push_back(i);
  }
  bool changed = g.attrs.i("arena_bytes", -1) != arena;
  for (const Buf& x : bufs) {
    Value& v = g.value_mut(x.v);
    changed |= v.offset != x.offset;
    v.offset = x.offset;
  }
  g.attrs.set("arena_bytes", arena);
  double naive = 0;
  for (const Buf& x : bufs) naive += double(x.size);
  char note[200];
  std::snprintf(note, sizeof note, "%zu buffers in a %.2f MB arena (%.2f MB without reuse)", bufs.size(),
                double(arena) / 1e6, naive / 1e6);
  return {changed, note};
}

}  // namespace lathe
