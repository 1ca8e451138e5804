// The models the planner prices (model::Shape; plan/cost/model_cost.hpp
// counts their FLOPs and bytes): the named shapes of the paper, and the
// experiment's own.
//
// Named shapes are the models of ByteScale's evaluation (Table 1: layers /
// heads / KV groups / hidden) with the feed-forward sizes of their public
// releases, so `meshloom simulate --model llama-7b` means the same model the
// paper trained. One rule is not obvious: ByteScale lists 56 heads for the
// 30B model, which does not divide its hidden size 6656; we use LLaMA-30B's 52
// heads (head size 128). Attention FLOPs depend only on heads x head size =
// hidden, so only the K/V bytes per token follow from that choice.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/shape.hpp"

namespace meshloom::plan {

// llama-7b, llama-13b, llama-30b, llama-70b, mixtral-8x7b, mixtral-8x22b;
// "7b", "13b", "30b", "70b" are accepted too. Throws meshloom::Error naming
// the known shapes on anything else.
model::Shape model_shape(const std::string& name);
std::vector<std::string> model_shape_names();

// The shape of the experiment's own model (the `model:` config section, and
// the patch embedding and image share when the data has image sources).
model::Shape shape_from_config(const config::Config& c);

}  // namespace meshloom::plan
