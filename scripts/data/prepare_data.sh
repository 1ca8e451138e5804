#!/usr/bin/env bash
# prepare_data.sh: turn the real text installed by scripts/setup.sh into
# indexed datasets under data/prepared/ (skipped when already there):
#   pydocs    Python 3.11 documentation sources (*.rst.txt), one document per file
#   bible     King James Bible, one document per book
#   fortunes  fortune cookies, one document per cookie
# and packs Debian's clip art (openclipart-png) into WebDataset shards
# data/images/clipart-*.tar for configs/quickstart_images.yaml.
# TOKENIZER=byte scripts/data/prepare_data.sh uses the byte tokenizer instead of gpt2.
set -euo pipefail
cd "$(dirname "$0")/../.."
MESHLOOM=${MESHLOOM:-build/app/meshloom}
TOKENIZER=${TOKENIZER:-gpt2}
OUT=${OUT:-data/prepared}
mkdir -p "$OUT" data/raw
prep() {  # name format input...
  local name=$1 format=$2; shift 2
  if [[ -f $OUT/$name.idx && -f $OUT/$name.bin ]]; then
    echo "[prepare] $OUT/$name ready"
    return
  fi
  "$MESHLOOM" prepare --input "$@" --format "$format" --tokenizer "$TOKENIZER" --out "$OUT/$name"
}
[[ -f data/raw/bible.jsonl ]] || /usr/bin/python3 scripts/data/corpora.py bible data/raw/bible.jsonl
[[ -f data/raw/fortunes.jsonl ]] || /usr/bin/python3 scripts/data/corpora.py fortunes data/raw/fortunes.jsonl
prep pydocs text /usr/share/doc/python3.11/html/_sources
prep bible jsonl data/raw/bible.jsonl
prep fortunes jsonl data/raw/fortunes.jsonl
if [[ -f data/images/clipart-000000.tar ]]; then
  echo "[prepare] data/images/clipart-*.tar ready"
elif [[ -d /usr/share/openclipart/png ]]; then
  mkdir -p data/images
  /usr/bin/python3 scripts/data/pack_images.py data/images/clipart /usr/share/openclipart/png
fi
