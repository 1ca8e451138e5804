#!/usr/bin/env bash
# Regenerates the configuration reference inside docs/config.md from the code
# (`meshloom config reference`), between the config-reference markers.
set -euo pipefail
cd "$(dirname "$0")/../.."
MESHLOOM=${MESHLOOM:-build/app/meshloom}
table=$("$MESHLOOM" config reference)
/usr/bin/python3 - "$table" <<'PY'
import re, sys
table = sys.argv[1].rstrip("\n") + "\n"
text = open("docs/config.md").read()
begin, end = "<!-- config-reference:begin -->\n", "<!-- config-reference:end -->"
new = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda m: begin + table + end, text, flags=re.S)
open("docs/config.md", "w").write(new)
PY
echo "docs/config.md: configuration reference updated"
