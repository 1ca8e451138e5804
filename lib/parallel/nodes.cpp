#include "parallel/nodes.hpp"

#include <algorithm>
#include <map>

#include "base/strings.hpp"

namespace meshloom::parallel {

namespace {

// "loaders 0-1" / "loader 1": the role's indices among `ranks`.
std::string role_part(const RoleLayout& layout, Role role, const std::vector<int>& ranks) {
  std::vector<int> indices;
  for (int r : ranks)
    if (layout.role_of(r) == role) indices.push_back(layout.index_in_role(r));
  if (indices.empty()) return "";
  std::string text =
      strf("%s%s %s", role_name(role), indices.size() > 1 ? "s" : "", index_runs(indices).c_str());
  if (role == Role::constructor && indices.front() == 0) text += " (lead)";
  return text;
}

}  // namespace

NodeIndex index_nodes(const std::vector<std::string>& hosts) {
  NodeIndex out;
  std::map<std::string, int> seen;
  for (const std::string& host : hosts) {
    const auto [at, added] = seen.try_emplace(host, int(out.names.size()));
    if (added) out.names.push_back(host);
    out.node.push_back(at->second);
  }
  return out;
}

std::vector<std::string> describe_nodes(const RoleLayout& layout, const TrainerMesh& mesh,
                                        const std::vector<std::string>& hosts) {
  const NodeIndex nodes = index_nodes(hosts);
  if (nodes.names.size() < 2) return {};
  std::vector<std::vector<int>> ranks(nodes.names.size());  // per node, ascending
  for (int r = 0; r < int(hosts.size()); ++r) ranks[size_t(nodes.node[size_t(r)])].push_back(r);
  size_t least = hosts.size(), most = 0;
  for (const auto& on : ranks) {
    least = std::min(least, on.size());
    most = std::max(most, on.size());
  }
  std::vector<std::string> lines{
      least == most ? strf("%zu nodes, %zu ranks each", ranks.size(), most)
                    : strf("%zu nodes, %zu to %zu ranks each", ranks.size(), least, most)};
  const int first_trainer = layout.first_rank(Role::trainer);
  for (size_t n = 0; n < ranks.size(); ++n) {
    const std::vector<int>& on = ranks[n];
    std::vector<std::string> parts;
    for (Role role : {Role::constructor, Role::loader, Role::trainer}) {
      std::string part = role_part(layout, role, on);
      if (part.empty()) continue;
      if (role == Role::trainer) {
        std::vector<int> hdp;
        for (int r : on)
          if (layout.role_of(r) == Role::trainer)
            hdp.push_back(mesh.hdp_rank_of(r - first_trainer));
        hdp.erase(std::unique(hdp.begin(), hdp.end()), hdp.end());
        part += strf(" (HDP rank%s %s)", hdp.size() > 1 ? "s" : "", index_runs(hdp).c_str());
      }
      parts.push_back(part);
    }
    lines.push_back(strf("%s: rank%s %s: %s", nodes.names[n].c_str(), on.size() > 1 ? "s" : "",
                         index_runs(on).c_str(), join(parts, ", ").c_str()));
  }
  return lines;
}

}  // namespace meshloom::parallel
