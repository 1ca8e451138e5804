#include "runtime/plan_chart.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "base/check.hpp"
#include "plan/plan_io.hpp"

namespace meshloom {

namespace {

namespace fs = std::filesystem;

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// scripts/plot/plot_plan.py: $MESHLOOM_PLOT_SCRIPT, ./scripts, or beside the build.
std::string plot_script() {
  if (const char* env = std::getenv("MESHLOOM_PLOT_SCRIPT")) return env;
  std::vector<fs::path> tries = {fs::current_path() / "scripts/plot/plot_plan.py"};
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    exe[n] = '\0';
    const fs::path dir = fs::path(exe).parent_path();
    tries.push_back(dir / "../../scripts/plot/plot_plan.py");
    tries.push_back(dir / "../scripts/plot/plot_plan.py");
  }
  for (const fs::path& p : tries)
    if (fs::exists(p)) return fs::weakly_canonical(p).string();
  throw Error(
      "cannot find scripts/plot/plot_plan.py (run from the repository root, or set "
      "MESHLOOM_PLOT_SCRIPT)");
}

}  // namespace

void draw(const plan::Plan& hdp, const plan::Plan& stat, const std::string& png) {
  const std::string stem = fs::path(png).replace_extension("").string();
  plan::write_json(hdp, stem + "." + hdp.planner + ".json");
  plan::write_json(stat, stem + ".static.json");
  const char* py = std::getenv("MESHLOOM_PYTHON");
  const std::string cmd = quote(py ? py : "/usr/bin/python3") + " " + quote(plot_script()) +
                          " plan " + quote(stem + "." + hdp.planner + ".json") + " " +
                          quote(stem + ".static.json") + " -o " + quote(png);
  if (std::system(cmd.c_str()) != 0) throw Error("plotting failed: " + cmd);
  std::printf("chart: %s\n", png.c_str());
}

}  // namespace meshloom
