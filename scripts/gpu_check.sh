#!/usr/bin/env bash
# Issue 71's check on one GPU machine: CUDA, CMake, ninja and python3 with the
# pinned torch (and torchvision), but no Debian packages and no registry.
# Build dependencies travel as .deb files prepared by scripts/gpu_deps.sh
# (carry .gpu-deps); this script unpacks them into a private prefix, builds
# the CUDA path, and then
#   1. runs the tests labelled `gpu` (every compressor on CUDA tensors, two
#      ranks sharing the GPU over Gloo, a one-rank NCCL group);
#   2. trains ResNet-18 on synthetic images on the GPU in gradzip and the same
#      model in Python PyTorch eager, and compares time per step;
#   3. trains two gradzip ranks on the one GPU (comm.cuda_backend: gloo);
#   4. times the compressors on the GPU against a device-to-device copy;
#   5. writes experiments/results/gpu_check.md, and puts it, the compressor
#      results and a tarball of every log into OUTDIR.
# It is meant to finish in under 10 minutes on 16 cores, build included.
#   scripts/gpu_deps.sh                  # here, once: .gpu-deps/debs
#   scripts/gpu_check.sh [OUTDIR]        # there (device tool: OUTDIR=$OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dest=${1:-${OUT:-$root/gpu_check_out}}
out=/tmp/gpu_check  # logs and runs; only the report, the bench results and a log tarball go to $dest
rm -rf "$out" && mkdir -p "$out" "$dest"
results=$root/experiments/results/gpu_check.md
prefix=$root/.gpu-deps/root
build=$root/build-gpu
jobs=$(nproc)
log() { printf '\n== gpu_check: %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }
keep_logs() { tar -czf "$dest/gpu_check_logs.tar.gz" -C "$out" --exclude runs . 2>/dev/null; }
fail() { echo "gpu_check: $*" >&2; keep_logs; exit 1; }

log "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || fail "nvidia-smi failed: no GPU"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))" ||
  fail "python3 cannot import torch or see the GPU"

log "dependencies from .gpu-deps/debs"
ls .gpu-deps/debs/*.deb >/dev/null 2>&1 || fail ".gpu-deps/debs is empty: run scripts/gpu_deps.sh here first and carry .gpu-deps"
rm -rf "$prefix" && mkdir -p "$prefix"
for f in .gpu-deps/debs/*.deb; do dpkg -x "$f" "$prefix" || fail "cannot unpack $f"; done
arch_lib=$prefix/usr/lib/x86_64-linux-gnu
export PATH=$prefix/usr/bin:$PATH
export LD_LIBRARY_PATH=$arch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PKG_CONFIG_SYSROOT_DIR=$prefix
export PKG_CONFIG_LIBDIR=$arch_lib/pkgconfig:$prefix/usr/share/pkgconfig

log "configure"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRADZIP_CUDA=ON -DGRADZIP_IMAGE_FOLDER=OFF \
  -DGRADZIP_PYTHON_PACKAGE=OFF -DGRADZIP_PYTHON="$(command -v python3)" -DCMAKE_PREFIX_PATH="$prefix/usr" \
  -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$arch_lib" > "$out/configure.log" 2>&1 ||
  { tail -40 "$out/configure.log"; fail "configure failed (configure.log)"; }

log "build (-j$jobs)"
ninja -C "$build" -j"$jobs" gradzip tests/gpu/gradzip_gpu_tests > "$out/build.log" 2>&1 ||
  { grep -E "error|FAILED" -A3 "$out/build.log" | head -60; fail "build failed (build.log)"; }

log "gpu tests"
ctest --test-dir "$build" -L gpu --output-on-failure --timeout 300 > "$out/gpu_tests.log" 2>&1
tests_rc=$?
tail -5 "$out/gpu_tests.log"

log "training step: gradzip against PyTorch eager"
steps=300 warm=50 batch=64 size=224
cat > "$out/resnet18_gpu.yaml" <<YAML
run: {name: resnet18_gpu, out_dir: $out/runs, seed: 1, device: cuda}
model: {name: resnet18, num_classes: 10, resnet: {stem: imagenet}}
data: {dataset: synthetic, batch_size: $batch, image_size: [$size, $size], channels: 3, workers: 8, prefetch: 8,
       synthetic: {train_size: 100000, test_size: 640, num_classes: 10}}
optim: {name: sgd, lr: 0.1, momentum: 0.9}
train: {max_steps: $((steps + warm)), eval_every: $warm, eval_batches: 1}
compress: {name: fp32}
YAML
"$build/gradzip" train "$out/resnet18_gpu.yaml" --overwrite > "$out/train_gradzip.log" 2>&1 ||
  { tail -20 "$out/train_gradzip.log"; echo "gpu_check: gradzip training failed (train_gradzip.log)"; }
python3 experiments/python/gpu_step_compare.py --batch "$batch" --size "$size" --steps "$steps" --warmup "$warm" \
  --num-classes 10 > "$out/train_torch.log" 2>&1 ||
  { tail -20 "$out/train_torch.log"; echo "gpu_check: PyTorch training failed (train_torch.log)"; }

log "two ranks on one GPU over Gloo"
port=$((29000 + RANDOM % 1000))
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$build/gradzip" train \
    "$out/resnet18_gpu.yaml" --overwrite --set run.name=two_ranks --set comm.cuda_backend=gloo \
    --set train.max_steps=30 --set train.eval_every=15 --set 'compress={name: thc, collective: ps, thc: {bits: 4}}' \
    > "$out/two_ranks_$r.log" 2>&1 &
done
wait
two_rc=$(grep -l "done:" "$out"/two_ranks_*.log 2>/dev/null | wc -l)

log "compressors on the GPU against a device-to-device copy"
"$build/gradzip" bench compressors --device cuda --compressors fp16 bf16 cnat topkc \
  'thc:{deployment: allreduce, rotation_block_log2: 12}' --out "$out/gpu_compressors.jsonl" > "$out/bench.log" 2>&1 ||
  { tail -20 "$out/bench.log"; echo "gpu_check: compressor bench failed (bench.log)"; }

log "results"
python3 experiments/python/gpu_check_report.py --out-dir "$out" --tests-rc "$tests_rc" --two-ranks-done "$two_rc" \
  --steps "$steps" --warmup "$warm" --batch "$batch" > "$results" || fail "report failed"
cp -f "$results" "$dest/"
cp -f "$out/gpu_compressors.jsonl" "$dest/" 2>/dev/null
keep_logs
cat "$results"
