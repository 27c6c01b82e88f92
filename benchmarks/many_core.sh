#!/usr/bin/env bash
# bench_export.py at 1 to 16 onnxruntime threads, for a machine with many cores: every
# model, with the default (fast), exact and standard graphs against the peer. One model
# a call, each into its own folder, so that a time limit still leaves every finished
# model's table; the slowest model (unlimited depth) goes last.
#
#     benchmarks/many_core.sh OUT_DIR [SECONDS]     (default 480 s in all)
set -u
out=${1:?usage: benchmarks/many_core.sh OUT_DIR [SECONDS]}
budget=${2:-480}
here=$(cd "$(dirname "$0")" && pwd)
start=$(date +%s)
models=("tree, 8 classes" "RF binary" "RF 8 classes" "RF regressor" "XGBoost 8 classes"
        "LightGBM 8 classes" "XGBoost regressor" "LightGBM regressor"
        "RF 8 classes, unlimited depth")
for model in "${models[@]}"; do
    left=$((budget - ($(date +%s) - start)))
    if [ "$left" -lt 20 ]; then
        echo "skipped $model: the time budget is spent"
        continue
    fi
    slug=$(echo "$model" | tr -c 'A-Za-z0-9\n' '_')
    timeout "$left" python3 "$here/bench_export.py" --threads "${THREADS:-1,2,4,8,16}" \
        --encodings fast,exact,standard --models "$model" --test-rows "${ROWS:-20000}" \
        --repeats "${REPEATS:-3}" --single-calls "${CALLS:-200}" --out "$out/$slug" ${QUICK:+--quick} \
        || echo "failed or stopped: $model"
done
