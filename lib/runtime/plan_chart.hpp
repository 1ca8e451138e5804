// `meshloom plan --png`: trainer x time of two plans side by side, drawn by
// scripts/plot/plot_plan.py (found from the working folder or beside the
// executable; $MESHLOOM_PLOT_SCRIPT and $MESHLOOM_PYTHON override).
#pragma once

#include <string>

#include "plan/plan.hpp"

namespace meshloom {

// Writes both plans as JSON beside `png` and draws them into it.
void draw(const plan::Plan& hdp, const plan::Plan& stat, const std::string& png);

}  // namespace meshloom
