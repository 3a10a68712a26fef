"""mtb_proto_library: C++ code for .proto files with the system protoc.

Bazel's cc_proto_library needs protobuf's source repository, which cannot be
downloaded offline; Debian's protoc (3.21.12) matches Debian's libprotobuf, so a
genrule calling it is enough. Imports are resolved from the workspace root, so a
.proto imports another as "common/results/results.proto".
"""

load("@rules_cc//cc:defs.bzl", "cc_library")

def mtb_proto_library(name, srcs, deps = [], visibility = None):
    """Generates <name> (a cc_library) from srcs.

    Args:
      name: the cc_library's name; <name>_protos is a filegroup of the sources
        that dependent proto libraries need for their imports.
      srcs: .proto files in this package.
      deps: other mtb_proto_library targets these files import.
      visibility: as usual.
    """
    native.filegroup(
        name = name + "_protos",
        srcs = srcs + [dep + "_protos" for dep in deps],
        visibility = visibility,
    )
    outs = []
    for src in srcs:
        stem = src[:-len(".proto")]
        outs += [stem + ".pb.h", stem + ".pb.cc"]
    native.genrule(
        name = name + "_genproto",
        srcs = srcs + [dep + "_protos" for dep in deps],
        outs = outs,
        cmd = "protoc --proto_path=. --cpp_out=$(GENDIR) " +
              " ".join(["$(location %s)" % src for src in srcs]),
        message = "protoc " + name,
    )
    cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + ["//third_party/system:protobuf"],
        visibility = visibility,
    )
