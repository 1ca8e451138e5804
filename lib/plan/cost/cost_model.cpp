#include "plan/cost/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "base/check.hpp"
#include "base/strings.hpp"
#include "plan/cost/model_cost.hpp"

namespace meshloom::plan {

Hardware hardware_from_config(const config::PlanConfig& plan, int tp) {
  Hardware hw;
  hw.tp = tp;
  hw.flops = plan.flops * tp;
  hw.bandwidth = plan.bandwidth * tp;
  hw.intra_bandwidth = (plan.intra_bandwidth > 0 ? plan.intra_bandwidth : plan.bandwidth) * tp;
  hw.tp_link_bandwidth = plan.bandwidth;
  hw.trainers_per_node = 0;
  return hw;
}

std::vector<int32_t> uniform_nodes(int32_t ranks, int32_t per_node) {
  ML_CHECK(ranks >= 0 && per_node >= 1, strf("%d ranks, %d a node", ranks, per_node));
  std::vector<int32_t> out(static_cast<size_t>(ranks));
  for (int32_t r = 0; r < ranks; ++r) out[size_t(r)] = r / per_node;
  return out;
}

HeadShape head_shape(const model::Shape& shape, int tp) {
  const model::Shape::TpShare my = shape.tp_share(std::max(1, tp));
  HeadShape h;
  h.heads = int32_t(my.heads);
  h.kv_heads = int32_t(my.kv_heads);
  h.head_bytes = 2.0 * double(shape.head_dim) * std::max(1, tp);
  return h;
}

bool ulysses_fits(const HeadShape& h, int u) {
  return u == 1 || (u > 1 && h.heads > 0 && h.heads % u == 0);
}

int ulysses_kv_heads(const HeadShape& h, int u) {
  ML_CHECK(ulysses_fits(h, u) && h.kv_heads > 0,
           strf("Ulysses degree %d with %d heads", u, h.heads));
  const int per_member = h.heads / u;
  const int group = std::max(1, h.heads / h.kv_heads);  // query heads per KV head
  int most = 0;
  for (int j = 0; j < u; ++j) {
    const int first = j * per_member, last = first + per_member - 1;
    most = std::max(most, last / group - first / group + 1);
  }
  return most;
}

double ulysses_bytes(const HeadShape& h, int u) {
  if (u <= 1) return 0;
  const double e = ulysses_kv_heads(h, u);
  return double(u - 1) * h.head_bytes * (2.0 * double(h.heads) / u + 2.0 * e);
}

double cp_ring_block_bytes(const HeadShape& h, double kv_bytes, int u) {
  if (u <= 1) return kv_bytes;
  return double(u) * 2.0 * ulysses_kv_heads(h, u) * h.head_bytes;
}

CostModel CostModel::from_shape(const model::Shape& shape, const Hardware& hw) {
  ML_CHECK(hw.flops > 0 && hw.bandwidth > 0, "FLOP rate and bandwidth must be positive");
  CostModel m;
  m.a = 3.5 * attention_flops_per_token2(shape) / hw.flops;
  m.b = 3.0 * linear_flops_per_token(shape) / hw.flops;
  m.g = hw.micro_batch_overhead;
  m.layers = shape.n_layers;
  m.kv_bytes = kv_bytes_per_token_layer(shape);
  m.act_bytes = act_bytes_per_token_layer(shape);
  m.bandwidth = hw.bandwidth;
  m.intra_bandwidth = hw.intra_bandwidth > 0 ? hw.intra_bandwidth : hw.bandwidth;
  m.trainers_per_node = hw.trainers_per_node;
  m.latency = hw.latency;
  m.host_bandwidth = hw.host_bandwidth;
  m.host_memory = hw.host_memory;
  m.tp = std::max(1, hw.tp);
  m.heads = head_shape(shape, m.tp);
  if (m.tp > 1) {
    ML_CHECK(hw.tp_link_bandwidth > 0, "the TP link bandwidth must be positive");
    const double ring_share = 2.0 * double(m.tp - 1) / double(m.tp);
    m.tp_seconds_per_token = double(shape.n_layers) * 4 * ring_share * 2.0 * double(shape.d_model) /
                             hw.tp_link_bandwidth;
    m.b += m.tp_seconds_per_token;
  }
  return m;
}

double CostModel::micro_batch(double tokens, double attn_l2, int k, bool intra,
                              double offload_bytes) const {
  return cp_micro_batch(tokens, attn_l2, k, 1, CpLinks{intra, intra}, offload_bytes);
}

double CostModel::cp_micro_batch(double tokens, double attn_l2, int k, int u, CpLinks links,
                                 double offload_bytes) const {
  const double attn = a * attn_l2;
  double t = b * tokens + g;
  if (k <= 1) {
    t += attn;
  } else {
    ML_CHECK(u >= 1 && k % u == 0 && ulysses_fits(heads, u),
             strf("Ulysses degree %d for a group of %d (%d heads a TP rank)", u, k, heads.heads));
    if (u > 1) {
      const double bw = links.a2a_intra ? intra_bandwidth : bandwidth;
      t += double(layers) * kUlyssesPasses *
           (tokens * ulysses_bytes(heads, u) / bw + kUlyssesCollectives * latency);
    }
    const int r = k / u;
    if (r == 1) {
      t += attn;
    } else {
      // The ring across subgroups: r steps, each block's K/V arriving while
      // the previous block is computed.
      const double step = attn / r;
      const double bw = links.ring_intra ? intra_bandwidth : bandwidth;
      const double block = cp_ring_block_bytes(heads, kv_bytes, u);
      const double comm = passes * double(layers) * (tokens * block / bw + latency);
      t += step + double(r - 1) * std::max(step, comm);
    }
  }
  if (offload_bytes > 0 && host_bandwidth > 0) t = std::max(t, offload_bytes / host_bandwidth);
  return t;
}

void CostModel::set_nodes(std::vector<int32_t> node_of_rank) {
  std::vector<int32_t> count;
  for (int32_t n : node_of_rank) {
    if (n < 0) throw Error(strf("node index %d: nodes are numbered from 0", n));
    if (size_t(n) >= count.size()) count.resize(size_t(n) + 1, 0);
    ++count[size_t(n)];
  }
  nodes_ = std::move(node_of_rank);
  node_count_ = int32_t(std::count_if(count.begin(), count.end(), [](int32_t c) { return c > 0; }));
  largest_node_ = count.empty() ? 0 : *std::max_element(count.begin(), count.end());
}

int32_t CostModel::node_of(int32_t rank) const {
  if (!nodes_.empty()) {
    ML_CHECK(rank >= 0 && size_t(rank) < nodes_.size(),
             strf("HDP rank %d, but the node layout has %zu", rank, nodes_.size()));
    return nodes_[size_t(rank)];
  }
  return trainers_per_node > 0 ? rank / trainers_per_node : -1;
}

bool CostModel::one_node(std::span<const int32_t> ranks) const {
  if (ranks.size() <= 1) return true;
  const int32_t first = node_of(ranks.front());
  if (first < 0) return false;
  for (int32_t r : ranks.subspan(1))
    if (node_of(r) != first) return false;
  return true;
}

int32_t CostModel::nodes_spanned(std::span<const int32_t> ranks) const {
  if (!knows_nodes()) return 0;
  std::vector<int32_t> seen;
  for (int32_t r : ranks) seen.push_back(node_of(r));
  std::sort(seen.begin(), seen.end());
  return int32_t(std::unique(seen.begin(), seen.end()) - seen.begin());
}

int32_t CostModel::largest_node() const {
  return !nodes_.empty() ? largest_node_ : std::max(0, trainers_per_node);
}

bool CostModel::places_by_node() const { return node_count_ > 1; }

CpLinks CostModel::cp_links(std::span<const int32_t> group, int u) const {
  CpLinks l;
  l.ring_intra = one_node(group);
  l.a2a_intra = true;
  for (size_t j = 0; j + size_t(u) <= group.size() && l.a2a_intra; j += size_t(u))
    l.a2a_intra = one_node(group.subspan(j, size_t(u)));
  return l;
}

double CostModel::piece(int64_t length, int k) const {
  const int64_t tokens = (length + k - 1) / k;
  return micro_batch(double(tokens), double(length) * double(length) / k, k);
}

double CostModel::piece_compute(int64_t length, int k) const {
  const int64_t tokens = (length + k - 1) / k;
  return b * double(tokens) + a * double(length) * double(length) / k;
}

std::string CostModel::describe() const {
  const std::string layout =
      !nodes_.empty() ? strf("%d nodes", node_count_) : strf("%d per node", trainers_per_node);
  return strf(
             "a=%.3e s/token^2 b=%.3e s/token g=%.3e s; layers=%d kv=%.0f B/token/layer; "
             "link %.1f GB/s (intra-node %.1f GB/s, %s), latency %.1f us",
             a, b, g, layers, kv_bytes, bandwidth / 1e9, intra_bandwidth / 1e9, layout.c_str(),
             latency * 1e6) +
         (tp > 1 ? strf("; tp %d (collectives %.3e s/token of b)", tp, tp_seconds_per_token) : "");
}

std::string Calibration::describe() const {
  return strf("a=%.4e s/token^2 b=%.4e s/token g=%.4e s (%zu samples, rms %.3g s, R^2 %.4f)", a, b,
              g, samples, rms, r2);
}

namespace {

// Solves the n x n system m x = v (n <= 3) by Gaussian elimination with
// partial pivoting; false when singular.
bool solve(int n, double m[3][3], double v[3], double x[3]) {
  for (int c = 0; c < n; ++c) {
    int p = c;
    for (int r = c + 1; r < n; ++r)
      if (std::fabs(m[r][c]) > std::fabs(m[p][c])) p = r;
    if (std::fabs(m[p][c]) < 1e-300) return false;
    std::swap(m[c], m[p]);
    std::swap(v[c], v[p]);
    for (int r = c + 1; r < n; ++r) {
      const double f = m[r][c] / m[c][c];
      for (int j = c; j < n; ++j) m[r][j] -= f * m[c][j];
      v[r] -= f * v[c];
    }
  }
  for (int c = n - 1; c >= 0; --c) {
    double s = v[c];
    for (int j = c + 1; j < n; ++j) s -= m[c][j] * x[j];
    x[c] = s / m[c][c];
  }
  return true;
}

}  // namespace

Calibration calibrate(const std::vector<CalibrationSample>& samples) {
  if (samples.empty()) throw Error("calibration needs at least one sample");
  // Columns scaled to unit RMS so that sum_l2 (~1e10) and 1 sit in one system.
  double scale[3] = {0, 0, 1};
  for (const auto& s : samples) {
    scale[0] += s.sum_l2 * s.sum_l2;
    scale[1] += s.tokens * s.tokens;
  }
  for (int j = 0; j < 2; ++j) scale[j] = scale[j] > 0 ? std::sqrt(scale[j] / samples.size()) : 1;
  auto column = [&](const CalibrationSample& s, int j) {
    return (j == 0 ? s.sum_l2 : j == 1 ? s.tokens : 1.0) / scale[j];
  };
  double mean_y = 0;
  for (const auto& s : samples) mean_y += s.seconds;
  mean_y /= double(samples.size());

  Calibration best;
  double best_sse = INFINITY;
  for (int mask = 1; mask < 8; ++mask) {
    int idx[3], n = 0;
    for (int j = 0; j < 3; ++j)
      if (mask & (1 << j)) idx[n++] = j;
    double m[3][3] = {}, v[3] = {}, x[3] = {};
    for (const auto& s : samples)
      for (int r = 0; r < n; ++r) {
        v[r] += column(s, idx[r]) * s.seconds;
        for (int c = 0; c < n; ++c) m[r][c] += column(s, idx[r]) * column(s, idx[c]);
      }
    if (!solve(n, m, v, x)) continue;
    double coef[3] = {0, 0, 0};
    bool ok = true;
    for (int r = 0; r < n; ++r) {
      if (x[r] < 0) ok = false;
      coef[idx[r]] = x[r] / scale[idx[r]];
    }
    if (!ok) continue;
    double sse = 0;
    for (const auto& s : samples) {
      const double e = coef[0] * s.sum_l2 + coef[1] * s.tokens + coef[2] - s.seconds;
      sse += e * e;
    }
    if (sse < best_sse * (1 - 1e-12)) {
      best_sse = sse;
      best.a = coef[0];
      best.b = coef[1];
      best.g = coef[2];
    }
  }
  if (!std::isfinite(best_sse))
    throw Error("calibration: the samples determine no non-negative fit");
  double sst = 0;
  for (const auto& s : samples) sst += (s.seconds - mean_y) * (s.seconds - mean_y);
  best.samples = samples.size();
  best.rms = std::sqrt(best_sse / double(samples.size()));
  best.r2 = sst > 0 ? 1.0 - best_sse / sst : 1.0;
  return best;
}

std::vector<CalibrationSample> read_calibration_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read calibration file '" + path + "'");
  std::vector<CalibrationSample> out;
  std::string line;
  int line_no = 0;
  bool header = false;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (!header) {
      if (line != "tokens,sum_l2,seconds")
        throw Error(strf("%s:%d: expected the header 'tokens,sum_l2,seconds', got '%s'",
                         path.c_str(), line_no, line.c_str()));
      header = true;
      continue;
    }
    const std::vector<std::string> f = split(line, ',');
    CalibrationSample s;
    char* end = nullptr;
    bool ok = f.size() == 3;
    double v[3] = {0, 0, 0};
    for (size_t j = 0; ok && j < 3; ++j) {
      v[j] = std::strtod(f[j].c_str(), &end);
      ok = end != f[j].c_str() && *end == '\0' && std::isfinite(v[j]) && v[j] >= 0;
    }
    if (!ok)
      throw Error(
          strf("%s:%d: expected three non-negative numbers 'tokens,sum_l2,seconds', got '%s'",
               path.c_str(), line_no, line.c_str()));
    s.tokens = v[0];
    s.sum_l2 = v[1];
    s.seconds = v[2];
    out.push_back(s);
  }
  if (out.empty()) throw Error("calibration file '" + path + "' holds no samples");
  return out;
}

CostModel calibrated(CostModel model, const Calibration& fit) {
  model.a = fit.a;
  model.b = fit.b;
  model.g = fit.g;
  return model;
}

}  // namespace meshloom::plan
