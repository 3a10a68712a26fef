#!/usr/bin/python3
"""Prints each test target's time, slowest first, from a bazel-testlogs tree.

CI runs `./bazelw test //...` (the README's command, unchanged) and then this,
so that a test that got slow shows up in every CI log. It reads what Bazel
leaves behind rather than asking for --test_summary=detailed, which would
change the test command.

Where the time comes from. First each target's test.cache_status, Bazel's
own record of the test action (a TestResultData proto, src/main/protobuf/
test_status.proto in Bazel 4.2.3): field 9 holds the wall time in ms that the
test summary prints as "PASSED in X s", field 3 the status. Where that file
is missing or unreadable, test.xml: a gtest test writes it itself (`time` on
<testsuites>, else the sum over its <testsuite>s, else over its
<testcase>s; this leaves out process start-up), for an sh_test Bazel writes
one with the wall time on its single <testcase>. A target with shards
(shard_1_of_N/) or --runs_per_test (run_1_of_N/) shows its slowest part,
which is what its wall time is closest to. A result older than --since was
not written by this run: Bazel took it from its cache, and the line says
"(cached)" with the time of the run that produced it.

Usage: test_times.py [--since EPOCH_SECONDS] [--most N] [TESTLOGS_DIR]
Exit status: 0, also when tests failed (their lines say FAILED, TIMEOUT,
...); 2 on bad
arguments. Standard library only.
"""

import argparse
import os
import re
import sys
import xml.etree.ElementTree as ElementTree

# Directories Bazel puts between a target and its test.xml.
_PART = re.compile(r"^(shard_\d+_of_\d+|run_\d+_of_\d+|attempt_\d+)$")


def _seconds(element):
    """The `time` attribute of `element` as float, or None."""
    value = element.get("time")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def read_test_xml(path):
    """(seconds, failed) from one test.xml; seconds None when it has none."""
    try:
        root = ElementTree.parse(path).getroot()
    except (ElementTree.ParseError, OSError):
        return None, True
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    failed = False
    for element in [root] + suites:
        for attribute in ("failures", "errors"):
            try:
                failed |= int(element.get(attribute, "0")) > 0
            except ValueError:
                pass
    for case in root.iter("testcase"):
        failed |= case.find("failure") is not None
        failed |= case.find("error") is not None
    if root.tag == "testsuites" and _seconds(root) is not None:
        return _seconds(root), failed
    suite_times = [_seconds(s) for s in suites]
    if suite_times and all(t is not None for t in suite_times):
        return sum(suite_times), failed
    case_times = [_seconds(c) for c in root.iter("testcase")]
    case_times = [t for t in case_times if t is not None]
    if case_times:
        return sum(case_times), failed
    return None, failed


# BlazeTestStatus (test_status.proto): the names a line shows when not PASSED.
_STATUS = {0: "NO_STATUS", 1: "PASSED", 2: "FLAKY", 3: "TIMEOUT",
           4: "FAILED", 5: "INCOMPLETE", 6: "REMOTE_FAILURE",
           7: "FAILED_TO_BUILD", 8: "BLAZE_HALTED_BEFORE_TESTING"}


def _varint(data, position):
    value, shift = 0, 0
    while True:
        if position >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position


def read_cache_status(path):
    """(seconds, status name) from a test.cache_status, or None."""
    try:
        with open(path, "rb") as status_file:
            data = status_file.read()
        position, millis, status = 0, [], None
        while position < len(data):
            key, position = _varint(data, position)
            field, wire = key >> 3, key & 7
            if wire == 0:
                value, position = _varint(data, position)
                if field == 3:
                    status = value
                elif field == 9:
                    millis.append(value)
            elif wire == 2:
                length, position = _varint(data, position)
                end = position + length
                while field == 9 and position < end:  # packed int64s
                    value, position = _varint(data, position)
                    millis.append(value)
                position = end
            elif wire == 1:
                position += 8
            elif wire == 5:
                position += 4
            else:
                raise ValueError("wire type %d" % wire)
            if position > len(data):
                raise ValueError("truncated")
    except (OSError, ValueError):
        return None
    if not millis:
        return None
    return max(millis) / 1000.0, _STATUS.get(status, "NO_STATUS")


def target_label(relative_dir):
    """bazel-testlogs/<pkg>/<name>[/shard_..] -> //<pkg>:<name>."""
    parts = [p for p in relative_dir.split(os.sep) if p and not _PART.match(p)]
    if not parts:
        return None
    return "//" + "/".join(parts[:-1]) + ":" + parts[-1]


def read_result(directory):
    """(seconds, failure or None, path read) for one result directory."""
    cache_status = os.path.join(directory, "test.cache_status")
    from_bazel = read_cache_status(cache_status)
    if from_bazel is not None:
        seconds, status = from_bazel
        return seconds, (None if status == "PASSED" else status), cache_status
    xml = os.path.join(directory, "test.xml")
    seconds, failed = read_test_xml(xml)
    return seconds, ("FAILED" if failed else None), xml


def collect(testlogs, since=None):
    """{label: (seconds, failure or None, cached)}: each target's slowest
    part."""
    targets = {}
    for directory, _, files in os.walk(testlogs, followlinks=True):
        if "test.xml" not in files and "test.cache_status" not in files:
            continue
        label = target_label(os.path.relpath(directory, testlogs))
        if label is None:
            continue
        seconds, failure, path = read_result(directory)
        cached = since is not None and os.path.getmtime(path) < since
        previous = targets.get(label)
        if previous is None:
            targets[label] = (seconds, failure, cached)
        else:
            times = [t for t in (previous[0], seconds) if t is not None]
            targets[label] = (max(times) if times else None,
                              previous[1] or failure, previous[2] and cached)
    return targets


def format_table(targets, most=None):
    """Lines, slowest first; targets without a time last, by name."""
    order = sorted(targets.items(),
                   key=lambda item: (item[1][0] is None,
                                     -(item[1][0] or 0.0), item[0]))
    if most is not None:
        order = order[:most]
    lines = []
    for label, (seconds, failure, cached) in order:
        time = "     ?  " if seconds is None else "%7.1f s" % seconds
        notes = [note for note in (failure, "(cached)" if cached else None)
                 if note]
        lines.append(" ".join([time, label] + notes))
    return lines


def main(argv):
    parser = argparse.ArgumentParser(
        description="each test target's time, slowest first")
    parser.add_argument("testlogs", nargs="?", default="bazel-testlogs")
    parser.add_argument("--since", type=float, default=None,
                        help="epoch seconds the test run started; older "
                        "results are marked (cached)")
    parser.add_argument("--most", type=int, default=None,
                        help="print at most this many targets")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.testlogs):
        print("test_times: no test logs at %s" % args.testlogs)
        return 0
    targets = collect(args.testlogs, args.since)
    total = sum(t[0] for t in targets.values() if t[0] is not None)
    print("Test times, slowest first (%d targets, %.1f s in all, from %s):"
          % (len(targets), total, args.testlogs))
    for line in format_table(targets, args.most):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
