"""The Python peer of //trainer/checkpoint:checkpoint_benchmark: one round of
torch.save + fsync and of a cold torch.load of the same state dict (the
tensors' names and shapes come from the benchmark), timed inside Python so
that the interpreter's start is not counted.

  /usr/bin/python3 torch_save_peer.py SHAPES.json PATH
writes PATH (left for the caller to delete: deleting is not timed) and
prints one line: "<save seconds> <load seconds> <file bytes>".
"""
import json
import os
import sys
import time

import torch


def main():
    shapes_path, path = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    state = {}
    for entry in json.load(open(shapes_path)):
        if entry["dtype"] == "int64":
            state[entry["name"]] = torch.zeros(entry["shape"], dtype=torch.int64)
        else:
            state[entry["name"]] = torch.randn(entry["shape"], dtype=torch.float32)
    start = time.perf_counter()
    with open(path, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    save = time.perf_counter() - start
    # Cold load: the file's pages are clean after fsync, so the kernel drops
    # them and torch.load reads the disk.
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    start = time.perf_counter()
    loaded = torch.load(path)
    load = time.perf_counter() - start
    assert len(loaded) == len(state)
    size = os.path.getsize(path)
    print(f"{save} {load} {size}")


if __name__ == "__main__":
    main()
