"""Repository rule exposing the CUDA runtime and NCCL from a local CUDA install.

Creates @local_cuda with targets :cuda_runtime, :cublas and :nccl, and
defs.bzl with NVCC (the compiler's path, for the genrules that compile .cu
files). Where CUDA (with
nccl.h) is absent the targets still exist but carry no headers, so only a
--config=cuda build that actually compiles them fails, with a message naming the
missing path.
"""

_BUILD_WITH_CUDA = """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "cuda_headers",
    hdrs = glob(["include/*.h", "include/*.hpp", "include/crt/**", "include/nv/**"]),
    includes = ["include"],
)

# Linked dynamically: the binary takes libcudart and libnccl from the machine it
# runs on (see docs/gpu.md), so one build serves any driver that CUDA 13 supports.
cc_library(
    name = "cuda_runtime",
    linkopts = ["-L{root}/lib64", "-Wl,-rpath,{root}/lib64", "-lcudart", "-ldl", "-lrt", "-lpthread"],
    deps = [":cuda_headers"],
)

cc_library(
    name = "nccl",
    linkopts = ["-L{nccl_lib}", "-Wl,-rpath,{nccl_lib}", "-lnccl"],
    deps = [":cuda_runtime"],
)

# cuBLAS and cuBLASLt, dynamically as the runtime (trainer_cuda's products).
cc_library(
    name = "cublas",
    linkopts = ["-L{root}/lib64", "-Wl,-rpath,{root}/lib64", "-lcublasLt", "-lcublas"],
    deps = [":cuda_runtime"],
)
"""

_BUILD_WITHOUT_CUDA = """
package(default_visibility = ["//visibility:public"])

genrule(
    name = "missing",
    outs = ["missing.h"],
    cmd = "echo 'CUDA not found at {root} (need include/nccl.h); install CUDA or build without --config=cuda' >&2; exit 1",
)

cc_library(name = "cuda_runtime", hdrs = [":missing"])

cc_library(name = "nccl", hdrs = [":missing"])

cc_library(name = "cublas", hdrs = [":missing"])
"""

def _cuda_configure_impl(ctx):
    root = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    root_path = ctx.path(root)
    if root_path.get_child("include").get_child("nccl.h").exists:
        ctx.symlink(root_path.get_child("include"), "include")
        nccl_lib = root + "/lib64"
        if not root_path.get_child("lib64").get_child("libnccl.so").exists:
            nccl_lib = root + "/lib"
        ctx.file("BUILD", _BUILD_WITH_CUDA.format(root = root, nccl_lib = nccl_lib))
    else:
        ctx.file("BUILD", _BUILD_WITHOUT_CUDA.format(root = root))
    ctx.file("defs.bzl", 'NVCC = "{root}/bin/nvcc"\n'.format(root = root))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH"],
    local = True,
)
