#!/usr/bin/env bash
# quickstart.sh: install what is missing, build, and run the quickstart job
# (configs/quickstart.yaml) on 8 ranks of this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
NP=${NP:-8}
echo "[quickstart] mpirun -np $NP build/app/meshloom train --config configs/quickstart.yaml --dry-run"
mpirun --oversubscribe --bind-to none -np "$NP" build/app/meshloom train \
  --config configs/quickstart.yaml --dry-run "$@"
