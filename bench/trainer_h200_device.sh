#!/usr/bin/env bash
# One device call of bench/trainer_h200.py (see its docstring): SETUP, then the named call.
#   bash bench/trainer_h200_device.sh setup | llama | llama-autotune | llama-parity | gpt2 | profile | gpt2-ab | picks-parity | inductor-ab | graphs
#   (setup: only SETUP, a check)
# Needs the torchao wheel in .whl/ (carry: [".whl"]); writes everything under $OUT.
set -uo pipefail
call=${1:?usage: bench/trainer_h200_device.sh llama|llama-autotune|llama-parity|gpt2|profile|gpt2-ab|picks-parity|inductor-ab|graphs}
: "${OUT:?OUT must be set (the device machine sets it)}"
case $call in setup|llama|llama-autotune|llama-parity|gpt2|profile|gpt2-ab|picks-parity|inductor-ab|graphs) ;; *) echo "unknown call $call: llama, llama-autotune, llama-parity, gpt2, profile, gpt2-ab, picks-parity, inductor-ab or graphs" >&2; exit 2 ;; esac
wheel=$(ls .whl/torchao-0.18.0-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || { echo "no .whl/torchao-0.18.0-*.whl: run with carry [\".whl\"]" >&2; exit 2; }
python -m pip install -q --no-index --no-deps --target /tmp/ao "$wheel" || python -m zipfile -e "$wheel" /tmp/ao
export PYTHONPATH=$PWD/core/src:$PWD/trainer/src:/tmp/ao
python -c 'import torch, torchao; print("torch", torch.__version__, "torchao", torchao.__version__)' || exit 2
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
mkdir -p "$OUT" && cp bench/results/trainer_h200.json "$OUT/" 2>/dev/null
mkdir -p "$OUT/record"
cp bench/results/autotune-record/*.json "$OUT/record/" 2>/dev/null
common=(--record-dir "$OUT/record" --out "$OUT/trainer_h200.json" --steps 20 --warmup 6)
bench() { timeout 560 python bench/trainer_h200.py "$@" "${common[@]}"; }
# ab NAME MODEL MODE BATCH FP8 INDUCTOR_OPTS: one trial (statictrain_trainer.trial, its own caches) with the inductor
# options (comma-separated, "-" for none) set to True; prints "NAME: exit RC tokens/s MFU first-step-s"
ab() {
  local n=$1 model=$2 mode=$3 batch=$4 fp8=$5 opts=$6
  STATICTRAIN_ENTRYPOINT=statictrain_trainer.examples.$model:build STATICTRAIN_COMPILE_MODE=$mode STATICTRAIN_BATCH_SIZE=$batch \
  STATICTRAIN_PRECISION=bf16 STATICTRAIN_FP8=$fp8 TORCHINDUCTOR_CACHE_DIR=/tmp/$n TRITON_CACHE_DIR=/tmp/$n-triton \
  timeout "${AB_TIMEOUT:-150}" python -c 'import runpy, sys, torch._inductor.config as c
for k in sys.argv[1].split(","): k != "-" and setattr(c, k, True)
sys.argv = sys.argv[1:]; runpy.run_module("statictrain_trainer.trial", run_name="__main__")' "$opts" \
    --result "$OUT/$n.json" --steps 30 --warmup 8 > "$OUT/$n.log" 2>&1
  echo "$n: exit $? $(python -c 'import json,sys; d=json.load(open(sys.argv[1])); print(round(d["tokens_per_s"]), round(d["mfu"], 4), round(d["time_to_first_step_seconds"], 1))' "$OUT/$n.json" 2>&1 | tail -1)"
}
case $call in
  setup) echo "setup only" ;;
  llama) bench --model llama --phase single autotune --autotune-budget 330 --deadline-s 530 --workdir /tmp/bl \
           > "$OUT/llama.log" 2>&1 ;;
  llama-autotune) bench --model llama --phase autotune --autotune-budget 480 --deadline-s 540 --workdir /tmp/bl \
           > "$OUT/llama-autotune.log" 2>&1 ;;
  llama-parity) bench --model llama --phase parity --parity-steps 100 --parity-batch 4 --parity-eager-seeds 2 \
           --workdir /tmp/bl > "$OUT/llama-parity.log" 2>&1 ;;
  gpt2) bench --model gpt2 --phase single autotune parity --autotune-budget 330 --deadline-s 510 --workdir /tmp/bg \
           > "$OUT/gpt2.log" 2>&1 ;;
  gpt2-ab)  # GPT-2 at batch 16/64/128: inductor's coordinate-descent tuning and the flash backend, each on or off
    for v in "none 16 0 auto" "default 16 0 auto" "default 16 1 auto" "default 16 0 flash" "default 64 0 auto" \
             "default 64 1 auto" "default 128 0 auto"; do
      set -- $v
      STATICTRAIN_ATTENTION=$4 TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=$3 ab ab-gpt2-$1-$2-cd$3-$4 gpt2 $1 $2 false -
    done | tee "$OUT/gpt2-ab.log" ;;
  inductor-ab)  # inductor options the runtime does not set, each on alone: GPT-2 at 16 (bf16), then Llama at 16 with fp8
    for v in "gpt2 none 16 false -" "gpt2 default 16 false -" "gpt2 default 16 false cpp_wrapper" \
             "gpt2 default 16 false combo_kernels" "gpt2 default 16 false aggressive_fusion" \
             "llama default 16 true -" "llama default 16 true cpp_wrapper" "llama default 16 true combo_kernels"; do
      set -- $v; ab ia-$1-$2-$3-fp8$4-$5 "$@"
    done | tee "$OUT/inductor-ab.log" ;;
  graphs)  # CUDA graphs (reduce-overhead) on GPT-2 beside eager and default (GRAPHS: MODE:BATCH words to run instead)
    for v in ${GRAPHS:-none:16 default:16 reduce-overhead:16 reduce-overhead:32 default:64 reduce-overhead:64 reduce-overhead:128}; do
      ab "gr-gpt2-${v/:/-}" gpt2 "${v%:*}" "${v#*:}" false -
    done | tee "$OUT/graphs.log" ;;
  picks-parity)  # each model's autotuned pick (mode and levers together) against its bf16 eager band
    timeout 270 python bench/trainer_h200.py --model gpt2 --phase parity --parity-options pick --parity-eager-seeds 2 \
      --workdir /tmp/bg "${common[@]}" > "$OUT/gpt2-pick-parity.log" 2>&1
    echo "gpt2 pick parity: exit $?"
    timeout 290 python bench/trainer_h200.py --model llama --phase parity --parity-options pick --parity-steps 100 \
      --parity-batch 4 --parity-eager-seeds 2 --workdir /tmp/bl "${common[@]}" > "$OUT/llama-pick-parity.log" 2>&1 ;;
  profile)
    for v in "llama bf16 false" "llama fp8 true" "gpt2 bf16 false" "gpt2 fp8 true"; do
      set -- $v
      STATICTRAIN_ENTRYPOINT=statictrain_trainer.examples.$1:build STATICTRAIN_COMPILE_MODE=default \
      STATICTRAIN_PRECISION=bf16 STATICTRAIN_FP8=$3 timeout 130 python -m statictrain_trainer.trial \
        --result "$OUT/prof-$1-$2.json" --steps 12 --warmup 6 --profile "$OUT/prof-$1-$2" > "$OUT/prof-$1-$2.log" 2>&1
      echo "profile $1 $2: exit $?"
    done ;;
esac
rc=$?
for d in /tmp/bl /tmp/bg; do [ -d "$d/autotune-logs" ] && cp -r "$d/autotune-logs" "$OUT/autotune-logs-$(basename "$d")"; done
tail -n 40 "$OUT"/*.log
[ -f "$OUT/$call.log" ] && { echo "== $call.log"; cat "$OUT/$call.log"; }
exit $rc
