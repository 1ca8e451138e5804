// Writes the generated seeds of fuzz/corpus with the project's own writers:
// `fuzz_make_seeds CONFIG.yaml OUT [REGRESSIONS]` writes OUT/protocol/* (every
// message type, encoded by lib/wire/protocol) and OUT/checkpoint/*
// (checkpoints written by ckpt::write_checkpoint holding CONFIG.yaml's text, a
// real data plane state and small tensors); with REGRESSIONS, also
// REGRESSIONS/protocol/* (protocol_regressions.cpp). Built with the replayers
// (not under MESHLOOM_FUZZ).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/bytes.hpp"
#include "ckpt/checkpoint.hpp"
#include "dataplane/data_plane.hpp"
#include "image/patches.hpp"
#include "model/batch.hpp"
#include "wire/patch_wire.hpp"
#include "wire/protocol.hpp"

using namespace meshloom;
namespace fs = std::filesystem;

// protocol_regressions.cpp
void write_protocol_regressions(const fs::path& dir);

static void put(const fs::path& file, const std::string& bytes) {
  std::ofstream(file, std::ios::binary) << bytes;
}

// Protocol seeds: kind byte (harness's switch), peer rank byte, message.
static void protocol(const fs::path& dir, int kind, const char* name, const std::string& msg) {
  put(dir / name, std::string(1, char(kind)) + std::string(1, char(3)) + msg);
}

// One seed per message kind, as the protocol harness reads them.
static void write_protocol_seeds(const fs::path& out) {
  const fs::path p = out / "protocol";
  protocol(p, 0, "assign", wire::encode(wire::Assign{{0, 2}, {1}, 5}));
  protocol(p, 1, "length_request", wire::encode(wire::LengthRequest{7, 1, {3, 9, 27, 81}}));
  protocol(p, 2, "length_reply",
           wire::encode(wire::LengthReply{1, {3, 9, 27}, {512, 17, 4096}, {256, 0, 1024}, 2.5e-6}));
  wire::TokenRequest treq;
  treq.step = 7;
  treq.ranges = {{0, 3, 0, 128}, {1, 9, 64, 17}};
  protocol(p, 3, "token_request", wire::encode(treq));

  wire::StepWork work;
  work.step = 7;
  work.global_predictions = 140;
  work.samples = {{0, 4, 0, 3, 0, 128}, {1, 5, 1, 9, 64, 17}, {0, 4, 0, 11, 0, 0}};
  wire::TrainerWork t0{0, {{{{0, 0, 100}}, {0}, 0, 0}}};
  wire::TrainerWork t1{1, {{{{0, 100, 28}, {1, 0, 17}}, {1, 2}, 0, 0.25f}}};
  work.trainers = {t0, t1};
  work.checkpoint = true;
  work.ckpt_data = "lead state";
  protocol(p, 4, "step_work", wire::encode(work));

  wire::Batch batch;
  batch.step = 7;
  batch.global_predictions = 140;
  batch.samples = wire::samples_for(work.samples, t1);
  wire::MicroBatch mb;
  mb.tokens = {464, 2068, 7586, 21831, 18045};
  mb.targets = {2068, 7586, 21831, 18045, -1};
  mb.positions = {0, 1, 2, 3, 4};
  mb.segments = {{1, 0, 5}};
  mb.group = {1, 2};
  mb.member = 1;
  mb.offload = 0.5f;
  // An image-text micro-batch: two image positions of 2 x 2 patches (12
  // values each), then a caption token. Pixel v (0..255) is pixel_value(v),
  // -1 padding (0.0); the raw seed below has 0.5 / 127.5, which no pixel gives.
  std::vector<float> patches;
  for (int v :
       {0, 255, 7, 9, 200, 128, 0, 255, 255, 0, -1, -1, 1, 2, 3, -1, -1, -1, 4, 5, 6, -1, -1, -1})
    patches.push_back(v < 0 ? 0.0f : image::pixel_value(uint8_t(v)));
  wire::MicroBatch image_mb;
  image_mb.tokens = {model::kImagePosition, model::kImagePosition, 464};
  image_mb.targets = {-1, -1, -1};
  image_mb.positions = {0, 1, 2};
  image_mb.segments = {{0, 0, 3}};
  image_mb.patches = patches;
  batch.micro = {mb, image_mb};
  protocol(p, 5, "batch", wire::encode(batch));

  wire::Report report;
  report.rank = 3;
  report.role = 1;
  report.peak_rss_kib = 123456;
  report.tokens = 4096;
  protocol(p, 6, "report", wire::encode(report));

  wire::Ack ack;
  ack.step = 7;
  ack.trainer = 1;
  ack.loss_sum = 1234.5;
  ack.predictions = 140;
  ack.tokens = 145;
  ack.echo = wire::encode(batch);
  ack.note = "checkpoint written";
  ack.micro = {145, 20000, 2, 0.01};
  protocol(p, 7, "ack", wire::encode(ack));

  ByteWriter tokens;
  tokens.put_vector(std::vector<int32_t>{464, 2068, 7586, 21831});
  wire::put_patches(tokens, {});
  protocol(p, 8, "token_reply", tokens.bytes());
  ByteWriter image_tokens;  // the patches of two image positions, as pixels
  image_tokens.put_vector(std::vector<int32_t>{model::kImagePosition, model::kImagePosition, 464});
  wire::put_patches(image_tokens, image_mb.patches);
  protocol(p, 8, "token_reply_image", image_tokens.bytes());
  ByteWriter raw_tokens;  // one value no pixel gives: raw float32
  raw_tokens.put_vector(std::vector<int32_t>{model::kImagePosition, model::kImagePosition, 464});
  patches[3] = 0.5f / 127.5f;
  wire::put_patches(raw_tokens, patches);
  protocol(p, 8, "token_reply_raw", raw_tokens.bytes());
}

static void write_checkpoint_seeds(const fs::path& out, const std::string& config_text) {
  // Checkpoints: a full one and a delta, as a 2-tensor model would write them.
  dataplane::DataPlane::State plane;
  plane.step = 8;
  plane.streams.resize(3);
  plane.streams[1].epoch = 1;
  plane.streams[1].lanes[0].cursor = 17;
  plane.streams[1].lanes[0].offset = 300;
  plane.target = {1200, 400, 400};
  plane.delivered = {1180, 410, 398};
  ckpt::Checkpoint c;
  c.step = 7;
  c.trainers = 5;
  c.seed = 1234;
  c.config = config_text;
  c.tensors = {{"embed", {4, 2}, 0, 8}, {"norm", {2}, 8, 2}};
  c.params = {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f, 1.0f, 1.0f};
  c.m.assign(10, 0.01f);
  c.v.assign(10, 0.001f);
  c.adam_step = 7;
  c.plane = dataplane::serialize(plane);
  c.lengths = {{"pydocs", {0, 3, 9}, {512, 17, 4096}, {}}, {"photos", {1}, {300}, {256}}};
  ckpt::write_checkpoint((out / "checkpoint" / "full.h5").string(), c);
  c.lengths_full = false;
  c.lengths_base = "step_00000006.h5";
  c.lengths = {{"pydocs", {27}, {88}, {}}};
  ckpt::write_checkpoint((out / "checkpoint" / "delta.h5").string(), c);
  put(out / "checkpoint" / "plane_state", c.plane);  // not HDF5: the state decoder
}

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: fuzz_make_seeds CONFIG.yaml OUT [REGRESSIONS]\n");
    return 2;
  }
  std::ostringstream config_text;
  config_text << std::ifstream(argv[1]).rdbuf();
  const fs::path out = argv[2];
  fs::create_directories(out / "protocol");
  fs::create_directories(out / "checkpoint");
  write_protocol_seeds(out);
  write_checkpoint_seeds(out, config_text.str());
  if (argc == 4) {
    fs::create_directories(fs::path(argv[3]) / "protocol");
    write_protocol_regressions(fs::path(argv[3]) / "protocol");
  }
  std::printf("seeds written to %s\n", out.c_str());
  return 0;
}
