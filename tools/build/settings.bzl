"""Boolean build settings (bazel_skylib's bool_flag is not available offline)."""

def _bool_flag_impl(ctx):
    return []

bool_flag = rule(
    implementation = _bool_flag_impl,
    build_setting = config.bool(flag = True),
)
