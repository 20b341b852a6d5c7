#include "ir/verifier.h"

#include <algorithm>

#include "ir/assert.h"
#include "ir/buffers.h"
#include "ir/text.h"

namespace lathe {

std::vector<std::string> verify(const Graph& g) {
  std::vector<std::string> errs;
  for (size_t i = 0; i < g.node_capacity(); ++i) {
    const Node& n = g.node(NodeId(i));
    if (!n.alive) continue;
    bool inputs_ok = true;
    for (ValueId v : n.inputs) {
      if (v < 0 || size_t(v) >= g.value_capacity() || !g.value(v).alive) {
        errs.push_back("node '" + n.name + "' reads a dead or unknown value");
        inputs_ok = false;
        continue;
      }
      const Value& val = g.value(v);
      if (val.kind == ValueKind::activation && val.producer == kNone)
        errs.push_back("node '" + n.name + "' reads " + value_ref(val) + " which has no producer");
    }
    for (ValueId v : n.outputs) {
      if (v < 0 || size_t(v) >= g.value_capacity() || g.value(v).producer != n.id || !g.value(v).alive)
        errs.push_back("node '" + n.name + "' output is not produced by it");
    }
    if (!inputs_ok) continue;
    std::string why;
    std::vector<TypeShape> want = infer_outputs(g, n, &why);
    if (!why.empty()) {
      errs.push_back(why);
      continue;
    }
    if (want.size() != n.outputs.size()) {
      errs.push_back("node '" + n.name + "' has " + std::to_string(n.outputs.size()) +
                     " outputs, shape inference gives " + std::to_string(want.size()));
      continue;
    }
    for (size_t o = 0; o < want.size(); ++o) {
      const Value& v = g.value(n.outputs[o]);
      if (!(v.type() == want[o]))
        errs.push_back("node '" + n.name + "' output " + value_ref(v) + " is " +
                       std::string(dtype_name(v.dtype)) + shape_str(v.shape) + ", inference gives " +
                       std::string(dtype_name(want[o].dtype)) + shape_str(want[o].shape));
    }
  }
  std::vector<NodeId> order = g.topo_order();
  if (order.size() != g.num_nodes()) errs.push_back("graph has a cycle");

  if (g.attrs.has("arena_bytes") && order.size() == g.num_nodes()) {
    int64_t arena = g.attrs.i("arena_bytes");
    Bindings b = graph_bindings(g);
    std::vector<LiveRange> live = live_ranges(g, order);
    struct Buf {
      ValueId v;
      int64_t lo, hi;
      LiveRange r;
    };
    std::vector<Buf> bufs;
    for (size_t v = 0; v < g.value_capacity(); ++v) {
      if (live[v].first < 0) continue;
      const Value& val = g.value(ValueId(v));
      if (val.offset < 0) {
        errs.push_back("memory plan: " + value_ref(val) + " has no offset");
        continue;
      }
      int64_t size = int64_t(value_bytes(val, b));
      // Compared as offset > arena - size, which cannot overflow (an offset near 2^63
      // wrapped past the arena and was accepted).
      if (size > arena || val.offset > arena - size) {
        errs.push_back("memory plan: " + value_ref(val) + " ends past the arena (offset " +
                       std::to_string(val.offset) + " + " + std::to_string(size) + " bytes > " +
                       std::to_string(arena) + ")");
        continue;
      }
      bufs.push_back({ValueId(v), val.offset, val.offset + size, live[v]});
    }
    // The arena ends at the highest buffer, padded to the planner's alignment (256 B,
    // passes/memory_plan.cpp; 4 KiB allowed): a larger one is an edit, which asked the
    // runtime for 9e12 MB ("use a smaller --batch").
    int64_t top = 0;
    for (const Buf& x : bufs) top = std::max(top, x.hi);
    if (errs.empty() && arena > top + 4096)
      errs.push_back("memory plan: arena_bytes " + std::to_string(arena) + " exceeds the end of its highest buffer (" +
                     std::to_string(top) + " bytes) by more than alignment");
    // Sweep over time: each buffer is checked against those still live when it starts.
    std::stable_sort(bufs.begin(), bufs.end(), [](const Buf& x, const Buf& y) { return x.r.first < y.r.first; });
    std::vector<size_t> live_now;
    for (size_t j = 0; j < bufs.size(); ++j) {
      const Buf& y = bufs[j];
      std::erase_if(live_now, [&](size_t i) { return bufs[i].r.last < y.r.first; });
      for (size_t i : live_now) {
        const Buf& x = bufs[i];
        if (x.lo < y.hi && y.lo < x.hi)
          errs.push_back("memory plan: " + value_ref(g.value(x.v)) + " and " + value_ref(g.value(y.v)) +
                         " are live at once and overlap in the arena");
      }
      live_now.push_back(j);
    }
  }
  return errs;
}

void verify_or_die(const Graph& g, const std::string& context) {
  std::vector<std::string> errs = verify(g);
  if (errs.empty()) return;
  std::string msg = "IR verification failed after " + context + ":";
  for (size_t i = 0; i < errs.size() && i < 20; ++i) msg += "\n  " + errs[i];
  if (errs.size() > 20) msg += "\n  ... " + std::to_string(errs.size() - 20) + " more";
  LATHE_ASSERT(false, msg);
}

}  // namespace lathe
