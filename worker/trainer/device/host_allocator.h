#pragma once

// How the trainer's process allocates host memory.
//
// A training step allocates and frees the same large tensors every step (activations,
// convolution workspaces, gradients). glibc's malloc gives blocks of 128 KiB and more back
// to the kernel when they are freed (munmap, or trimming the heap's top) and takes them
// again on the next step, so every step pays a page fault per 4 KiB touched plus the
// kernel's zeroing of each page: for ResNet-18 on CIFAR-sized images at batch 64 that was
// ~100k faults and ~10 % of a CPU step. Keeping freed memory for reuse removes it, at the
// cost of a resident set that stays at the peak of a step (which every step reaches
// anyway). This is what PyTorch's caching allocators do on GPUs.

#include <functional>

namespace baton::trainer {

// Looks an environment variable up; nullptr when unset.
using HostEnvLookup = std::function<const char*(const char*)>;

// Whether the environment already tunes glibc's malloc (GLIBC_TUNABLES naming a
// glibc.malloc tunable, or one of the MALLOC_*_ variables): then the user's choice stands.
bool MallocTunedByEnvironment(const HostEnvLookup& lookup);

// Unless MallocTunedByEnvironment: blocks up to 32 MiB (glibc's largest mmap threshold) come
// from the heap and are reused after free, and the heap is never trimmed back to the
// kernel. Call once, early. Returns whether it changed the settings.
bool KeepFreedHostMemory(const HostEnvLookup& lookup);

}  // namespace baton::trainer
