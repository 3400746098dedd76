#!/usr/bin/env bash
# Start, or resume, a 20,000-step forward run of one family (issue 12), one thread, in the
# background-friendly form used in docs/model_results.md ("Toward 20,000 steps per family").
#   benchmarks/long_run.sh <family> [--set key=value ...]
# Run folder: c2np_out/long/<family> (log: c2np_out/long/<family>.log). When the folder holds
# a checkpoint the run is resumed (its stored config wins; --set is ignored by a resumed run).
# A committed resume point (pretrained/_resume/<family>/) is copied in first when the folder
# does not exist, so a run continues across machines.
set -euo pipefail
family=${1:?family}; shift
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/c2np_out/long/$family
store=$root/c2np_out/fit/store_paper.h5
[ -f "$store" ] || python -m c2np build --out "$store" --radii 6-12 >/dev/null
if [ ! -d "$out" ] && [ -d "$root/pretrained/_resume/$family" ]; then
    mkdir -p "$(dirname "$out")" && cp -r "$root/pretrained/_resume/$family" "$out"
fi
resume=()
if [ -f "$out/checkpoint/state.json" ]; then resume=(--resume); fi
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
exec python -m c2np train --model "$family" --task forward --store "$store" --out "$out" \
    --config small --set epochs=20 --set steps_per_epoch=1000 --set max_train_seconds=None \
    "${resume[@]}" "$@"
