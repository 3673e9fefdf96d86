#!/usr/bin/env bash
# Weight-training speed on this machine's GPU: promptgym's SFT and RL vs plain transformers + peft and TRL.
#
# Needs no network and no model files: bench/gpu/speed.py builds the embedded models' architectures with random
# weights. A machine without promptgym's dependencies gets them from wheels in .whl/ (see docs/benchmarks.md,
# "Weight training on a GPU"). At most about 5 minutes on one GPU; JSON lines in $OUT (default bench/results/gpu).
#
#     bash bench/gpu/run.sh                                  # extra arguments go to speed.py (--profile FILE)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-bench/results/gpu}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/pg-site .whl/*.whl \
        && export PYTHONPATH="/tmp/pg-site:$PWD"
fi
PYTHON="${PYTHON:-python3}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee "$OUT/gpu.txt"
timeout 60 "$PYTHON" -m promptgym.cli.main doctor 2>&1 | tee "$OUT/doctor.txt"
timeout 150 "$PYTHON" -m pytest -q -p no:cacheprovider tests/finetune/test_cuda.py tests/finetune/test_shared_prefix.py \
    tests/finetune/test_device.py 2>&1 | tail -25 | tee "$OUT/tests.txt"
timeout 300 "$PYTHON" bench/gpu/speed.py --device cuda --out "$OUT/gpu.jsonl" "$@" 2>"$OUT/speed.stderr"
echo "exit $?"
