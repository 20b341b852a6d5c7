#include "passes/rewrite.h"

namespace lathe {

std::string op_tag(const Node& n) { return n.name + ":" + std::string(op_name(n.kind)); }

void absorb(Node& into, const Node& part) {
  if (part.absorbed.empty()) {
    into.absorbed.push_back(op_tag(part));
    return;
  }
  into.absorbed.insert(into.absorbed.end(), part.absorbed.begin(), part.absorbed.end());
}

NodeId sole_user(const Graph& g, ValueId v) {
  std::vector<NodeId> u = g.users(v);
  if (u.size() != 1) return kNone;
  int uses = 0;
  for (ValueId in : g.node(u[0]).inputs) uses += in == v;
  return uses == 1 ? u[0] : kNone;
}

std::string name_prefix(const std::string& name) {
  size_t dot = name.rfind('.');
  return dot == std::string::npos ? std::string() : name.substr(0, dot + 1);
}

}  // namespace lathe
