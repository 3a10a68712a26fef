"""static_system_libs_binary: a cc_binary rebuilt with static system libraries.

comm_bench_nccl is copied alone to GPU machines that have CUDA and NCCL but not
Debian's Abseil, glog or protobuf. The system-library targets in
//third_party/system switch to their .a archives under
//tools/build:static_system_libs; this rule applies that setting to one binary
only (a configuration transition), so the rest of the build (and LibTorch, which
brings its own shared glog) is unaffected.
"""

def _static_transition_impl(settings, attr):
    return {"//tools/build:static_system_libs": True}

_static_transition = transition(
    implementation = _static_transition_impl,
    inputs = [],
    outputs = ["//tools/build:static_system_libs"],
)

def _static_system_libs_binary_impl(ctx):
    binary = ctx.attr.binary[0][DefaultInfo].files_to_run.executable
    out = ctx.actions.declare_file(ctx.label.name)
    ctx.actions.symlink(output = out, target_file = binary, is_executable = True)
    return [DefaultInfo(executable = out, files = depset([out]))]

static_system_libs_binary = rule(
    implementation = _static_system_libs_binary_impl,
    attrs = {
        "binary": attr.label(cfg = _static_transition, executable = True, mandatory = True),
        "_allowlist_function_transition": attr.label(
            default = "@bazel_tools//tools/allowlists/function_transition_allowlist",
        ),
    },
    executable = True,
)
