// `meshloom plan --png`: trainer x time of two plans side by side, drawn by
// scripts/plot/plot_plan.py (found from the working folder or beside the
// executable; $MESHLOOM_PLOT_SCRIPT and $MESHLOOM_PYTHON override).
#pragma once

#include <string>
#include <vector>

#include "plan/pipeline/pp_balance.hpp"
#include "plan/plan.hpp"

namespace meshloom::runtime {

// Runs scripts/plot/SCRIPT with `args` under $MESHLOOM_PYTHON (default
// /usr/bin/python3); Error when it fails.
void run_plot_script(const std::string& script, const std::vector<std::string>& args);

// Writes both plans as JSON beside `png` and draws them into it.
void draw(const plan::Plan& hdp, const plan::Plan& stat, const std::string& png);
// One step's 1F1B schedule, pipeline x stage x time, of each of `batches`
// side by side (PP-Balance and round-robin): writes their ops to a CSV
// beside `png` (scheduler, pipeline, stage, op, micro_batch, start, end)
// and draws it.
void draw_pipelines(const std::vector<const plan::PipelineBatch*>& batches, const std::string& png);

}  // namespace meshloom::runtime
