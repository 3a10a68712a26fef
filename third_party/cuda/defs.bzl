"""Helpers for targets that need CUDA/NCCL (built only with --config=cuda)."""

def cuda_only():
    """target_compatible_with value: compatible only under --config=cuda."""
    return select({
        "//third_party/cuda:enabled": [],
        "//conditions:default": ["//tools/build:incompatible"],
    })
