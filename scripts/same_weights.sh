#!/usr/bin/env bash
# Trains the same static plans with two gradzip binaries under
# run.deterministic: true (2 local ranks, loopback) and compares the final
# weights (runs/<name>/model.pt) byte for byte: the check that a refactor left
# training unchanged.
#
#   bash scripts/same_weights.sh OLD_BINARY NEW_BINARY [STEPS]
#
# Exit 0 when every plan's weights are identical; 1 naming the plans that
# differ. Uses a temporary directory it removes.
set -euo pipefail
old=$1 new=$2 steps=${3:-40}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
plans=("{name: fp32}" "{name: fp16}" "{name: topkc, topkc: {bits: 2}}" "{name: thc, collective: ps, thc: {bits: 4}}"
       "{name: powersgd, powersgd: {rank: 4}}" "{name: topk, collective: allgather, topk: {ratio: 0.01}}")
fail=0
for i in "${!plans[@]}"; do
  plan=${plans[$i]}
  for which in old new; do
    bin=$old; [ "$which" = new ] && bin=$new
    cat > "$work/c$i.yaml" <<YAML
run: {name: p$i, out_dir: $work/$which, seed: 3, deterministic: true}
model: {name: resnet20}
data: {dataset: fashion_mnist, batch_size: 32}
optim: {name: sgd, lr: 0.05, momentum: 0.9}
train: {max_steps: $steps, eval_every: $steps, eval_batches: 2}
comm: {timeout_s: 60, bucket_mb: 0.25}
compress: $plan
YAML
    (cd "$root" && "$bin" launch -n 2 "$work/c$i.yaml" > "$work/$which-$i.log" 2>&1) ||
      { echo "plan $plan: the $which binary failed (log: $(tail -3 "$work/$which-$i.log"))"; fail=1; continue 2; }
  done
  if cmp -s "$work/old/p$i/model.pt" "$work/new/p$i/model.pt"; then
    echo "same weights: $plan ($(sha256sum < "$work/new/p$i/model.pt" | cut -c1-16))"
  else
    echo "DIFFERENT weights: $plan"; fail=1
  fi
done
exit $fail
