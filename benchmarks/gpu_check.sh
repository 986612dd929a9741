#!/usr/bin/env bash
# The GPU check of issue #28, item 6: one script of at most ~8 minutes on one NVIDIA card, run from the
# project root:
#
#     bash benchmarks/gpu_check.sh            # the markdown block for the README on stdout (and in $OUT)
#
# 1. all-MiniLM-L6-v2 encoding throughput, csbench's encode_texts against SentenceTransformer.encode on
#    the same real texts, fp32 and bf16, and whether both give every query the same rank of its correct
#    code on a real pool (benchmarks/gpu_check.py: CoSQA's 500 dev queries against its 6,267-code pool
#    from ../shared/data, else standard-library functions);
# 2. one short bf16 training of MiniLM (the tiny study's data: python-stdlib, no attack) through
#    `accelerate launch`, as the train rule starts one (csbench.launch), capped at TRAIN_STEPS steps;
# 3. the card's peak memory, sampled by nvidia-smi in the background every 200 ms during both.
#
# Without an NVIDIA GPU it stops at once with status 2 and says so (tests/models/test_gpu_check.py).
# Python: PYTHON if set, else .venv/bin/python (`make setup`) when its torch sees CUDA, else python3
# (a device machine's image holds torch, transformers, accelerate and sentence-transformers; csbench's
# own dependencies must then be importable too, e.g. carried as wheels: /work/.library/device/README.md).
# The training needs data/attacked/python-stdlib/none/{train,valid}.parquet (`make run` with the tiny
# config writes them); without them that part is skipped, said so.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

TRAIN_STEPS=${TRAIN_STEPS:-200}
OUT_DIR=${OUT:-$(mktemp -d)}
mkdir -p "$OUT_DIR"

if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "gpu_check: no NVIDIA GPU here (nvidia-smi is not installed): run it on a machine with one" >&2
  exit 2
fi
CARD=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
if [ -z "$CARD" ]; then
  echo "gpu_check: no NVIDIA GPU here (nvidia-smi lists none): run it on a machine with one" >&2
  exit 2
fi

cuda_python() { "$1" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; }
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ] && cuda_python .venv/bin/python; then PY=.venv/bin/python; else PY=python3; fi
fi
if ! cuda_python "$PY"; then
  echo "gpu_check: $PY's torch sees no CUDA device (a CPU build?): set PYTHON to one with CUDA" >&2
  exit 2
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1

# 3. peak memory: nvidia-smi samples the card every 200 ms until this script ends
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$OUT_DIR/memory.csv" 2>/dev/null &
SAMPLER=$!
trap 'kill $SAMPLER 2>/dev/null' EXIT
peak() { sort -n "$OUT_DIR/memory.csv" 2>/dev/null | tail -n 1; }

# 1. encoding (about 2-3 minutes on an H100, most of it loading and the warm-up)
timeout 300 "$PY" benchmarks/gpu_check.py --device cuda --markdown "$OUT_DIR/encode.md" >"$OUT_DIR/encode.log" 2>&1
ENCODE_STATUS=$?
ENCODE_PEAK=$(peak)

# 2. training: accelerate launch, one process, bf16, TRAIN_STEPS optimizer steps
TRAIN_DATA=data/attacked/python-stdlib/none
TRAIN_LINE="skipped: no $TRAIN_DATA/train.parquet (run \`make run\` with workflow/configs/tiny.yaml first)"
if [ -f "$TRAIN_DATA/train.parquet" ] && [ -f "$TRAIN_DATA/valid.parquet" ]; then
  overlay="$OUT_DIR/gpu_check.yaml"
  cat >"$overlay" <<YAML
grid:
  trained: {models: [minilm], attacks: [none, no_comment], losses: [ce], seeds: [0], inference: [confused]}
models:
  minilm:
    training: {epochs: 1, batch_size: 32, max_steps: $TRAIN_STEPS, mixed_precision: bf16, validations_per_epoch: 1,
               patience: null, checkpoint_every: null, log_every: 50}
YAML
  start=$(date +%s)
  timeout 240 "$PY" -m accelerate.commands.launch --num_processes 1 --num_machines 1 --mixed_precision bf16 \
    --main_process_port 0 -m csbench --quiet train --config params.yaml --config workflow/configs/tiny.yaml \
    --config "$overlay" --dataset python-stdlib --attack none --model minilm --loss ce --seed 0 \
    >"$OUT_DIR/train.log" 2>&1
  TRAIN_STATUS=$?
  seconds=$(($(date +%s) - start))
  record=checkpoints/python-stdlib/none/minilm/ce/0/train.json
  if [ $TRAIN_STATUS -eq 0 ] && [ -f "$record" ]; then
    TRAIN_LINE=$("$PY" - "$record" "$seconds" <<'PY'
import json, sys
record = json.load(open(sys.argv[1]))
keys = ("mixed_precision", "steps", "optimizer_steps", "best_valid_mrr", "processes", "device")
found = {k: record[k] for k in keys if k in record}
print(f"{sys.argv[2]} s wall clock (start-up included); train.json: {json.dumps(found)}")
PY
)
  else
    TRAIN_LINE="failed (exit $TRAIN_STATUS after ${seconds} s): see $OUT_DIR/train.log"
  fi
fi
TRAIN_PEAK=$(peak)

{
  echo "## GPU check ($(date -u +%Y-%m-%d), benchmarks/gpu_check.sh)"
  echo
  echo "Card (nvidia-smi: name, memory, driver): $CARD"
  echo
  if [ $ENCODE_STATUS -eq 0 ]; then cat "$OUT_DIR/encode.md"; else
    echo "Encoding: failed (exit $ENCODE_STATUS):"; echo; echo '```'; tail -n 20 "$OUT_DIR/encode.log"; echo '```'
  fi
  echo
  echo "bf16 training of MiniLM through accelerate launch (1 process, at most $TRAIN_STEPS steps): $TRAIN_LINE"
  echo
  echo "Peak GPU memory (nvidia-smi, every 200 ms): ${ENCODE_PEAK:-?} MiB up to the end of the encoding,"
  echo "${TRAIN_PEAK:-?} MiB over the whole check."
} | tee "$OUT_DIR/gpu_check.md"
[ $ENCODE_STATUS -eq 0 ]
