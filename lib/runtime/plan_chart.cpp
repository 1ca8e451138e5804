#include "runtime/plan_chart.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "base/check.hpp"
#include "plan/io/plan_io.hpp"

namespace meshloom::runtime {

namespace {

namespace fs = std::filesystem;

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// scripts/plot/NAME: ./scripts, or beside the build ($MESHLOOM_PLOT_SCRIPT
// for plot_plan.py).
std::string plot_script(const std::string& name) {
  if (const char* env = std::getenv("MESHLOOM_PLOT_SCRIPT"); env && name == "plot_plan.py")
    return env;
  std::vector<fs::path> tries = {fs::current_path() / "scripts/plot" / name};
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    exe[n] = '\0';
    const fs::path dir = fs::path(exe).parent_path();
    tries.push_back(dir / "../../scripts/plot" / name);
    tries.push_back(dir / "../scripts/plot" / name);
  }
  for (const fs::path& p : tries)
    if (fs::exists(p)) return fs::weakly_canonical(p).string();
  throw Error("cannot find scripts/plot/" + name +
              " (run from the repository root, or beside the build)");
}

// Runs plot_plan.py MODE with `inputs` into `png`.
void plot(const std::string& mode, const std::vector<std::string>& inputs, const std::string& png) {
  std::vector<std::string> args = {mode};
  args.insert(args.end(), inputs.begin(), inputs.end());
  args.insert(args.end(), {"-o", png});
  run_plot_script("plot_plan.py", args);
  std::printf("chart: %s\n", png.c_str());
}

}  // namespace

void run_plot_script(const std::string& script, const std::vector<std::string>& args) {
  const char* py = std::getenv("MESHLOOM_PYTHON");
  std::vector<std::string> words = {plot_script(script)};
  words.insert(words.end(), args.begin(), args.end());
  // Appended word by word: GCC 12 at -O3 warns (-Wrestrict) on " " + string.
  std::string cmd = quote(py ? py : "/usr/bin/python3");
  for (const std::string& w : words) {
    cmd.push_back(' ');
    cmd.append(quote(w));
  }
  if (std::system(cmd.c_str()) != 0) throw Error("plotting failed: " + cmd);
}

void draw(const plan::Plan& hdp, const plan::Plan& stat, const std::string& png) {
  const std::string stem = fs::path(png).replace_extension("").string();
  plan::write_json(hdp, stem + "." + hdp.planner + ".json");
  plan::write_json(stat, stem + ".static.json");
  plot("plan", {stem + "." + hdp.planner + ".json", stem + ".static.json"}, png);
}

void draw_pipelines(const std::vector<const plan::PipelineBatch*>& batches,
                    const std::string& png) {
  const std::string csv = fs::path(png).replace_extension(".schedule.csv").string();
  FILE* f = std::fopen(csv.c_str(), "w");
  if (!f) throw Error("cannot write " + csv);
  std::fprintf(f, "scheduler,pipeline,stage,op,micro_batch,start,end\n");
  for (const plan::PipelineBatch* b : batches)
    for (int32_t p = 0; p < b->pipelines(); ++p) {
      const plan::PipeTiming& t = b->timing[size_t(p)];
      const plan::PipeSchedule ops = plan::one_f_one_b(int(t.ops.size()), b->micro_batches_of(p));
      for (size_t s = 0; s < t.ops.size(); ++s)
        for (size_t k = 0; k < t.ops[s].size(); ++k)
          std::fprintf(f, "%s,%d,%zu,%s,%d,%.9g,%.9g\n", b->scheduler.c_str(), p, s,
                       ops[s][k].backward ? "B" : "F", ops[s][k].micro_batch, t.ops[s][k].start,
                       t.ops[s][k].end);
    }
  std::fclose(f);
  plot("pipelines", {csv}, png);
}

}  // namespace meshloom::runtime
