// Plan on disk: a compact binary form (`meshloom plan --out`; its size is what
// sending a whole plan would cost) and a readable JSON dump for people and
// plots. The runtime does not send plans: the lead sends each constructor its
// part of the step (wire/protocol.hpp, StepWork).
//
// Binary layout (little-endian; "v" = unsigned LEB128 varint):
//   "MLPLAN" u8 version(=2) u8 rule
//   v trainers, v capacity, v static_cp, v layers, f64 kv_bytes, f64 passes,
//   v heads, v kv_heads, f64 head_bytes (Plan::heads; version 2),
//   f64 planning_seconds, v len + planner name bytes
//   v sequences, then per sequence v length
//   per sequence: v k, then the group as runs of consecutive ranks:
//     v runs, per run: v first rank, v run length
//   u8 has_offload, then per sequence f32 ratio if set
//   u8 has_cp, then per sequence v Ulysses degree u if set (version 2;
//     the kind follows from u and k: 1 ring, k ulysses, else hybrid)
//   per trainer: v micro-batches; per micro-batch: v pieces, f32 start,
//     f32 end, per piece: v sequence, v member
//   u64 FNV-1a hash of every byte before it
// Groups are mostly runs of consecutive ranks, and lengths and ranks mostly
// small, so a step of 16K trainers and 30K sequences takes a few hundred KB.
// Version 1 files (no heads, no CP algorithms) still read: every group a
// ring, heads unknown (0).
// HDP's static fallback needs no field of its own: it is planner "hdp" with
// static_cp > 0 (Plan::static_fallback()), and both travel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan.hpp"

namespace meshloom::plan {

std::vector<uint8_t> serialize(const Plan& plan);
// Throws meshloom::Error on anything malformed (truncated, bad magic,
// checksum, out-of-range value). The result is structurally sound; call
// validate() for the plan's own invariants.
Plan deserialize(const uint8_t* data, size_t size);
inline Plan deserialize(const std::vector<uint8_t>& bytes) {
  return deserialize(bytes.data(), bytes.size());
}

// Readable JSON: summary (with "fallback": "static" when hdp returned the
// grid's plan), sequences (length, group, and of split ones the CP
// algorithm, "cp" and "ulysses_degree", and the chunks),
// trainers (predicted time, micro-batches with times and pieces).
std::string to_json(const Plan& plan, int indent = 1);
void write_json(const Plan& plan, const std::string& path);

}  // namespace meshloom::plan
