// Process-wide glibc malloc settings for training. A training step allocates and
// frees the same large activation and gradient tensors every step. With glibc's
// defaults, tensors above the (dynamic) mmap threshold are mmap'ed and munmap'ed
// each time and the freed heap top is trimmed back to the OS, so every step
// faults in and zeroes fresh pages, a sizeable share of a BERT step
// (experiments/results/train_throughput.md, "Findings"). Keeping freed memory
// in the heap removes that cost; the price is that RSS stays at the step's
// peak, which the next step reaches again anyway.
#pragma once

namespace gradzip {

// Call at process start, before any large allocation. Keeps freed memory in the
// heap (M_MMAP_MAX = 0, M_TRIM_THRESHOLD = 2 GiB) unless the environment has
// GRADZIP_RETAIN_MEMORY=0 or sets GLIBC_TUNABLES (the user's settings win).
// Returns whether the settings were applied.
bool retainFreedMemory();

}  // namespace gradzip
