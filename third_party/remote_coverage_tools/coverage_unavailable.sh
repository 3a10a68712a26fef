#!/bin/sh
echo "coverage unavailable offline: remote_coverage_tools is a stub (third_party/remote_coverage_tools)" >&2
exit 1
