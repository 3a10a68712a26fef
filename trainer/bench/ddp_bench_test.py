#!/usr/bin/python3
"""ddp_bench.py's rows from hand-made rounds: one row per GEMM backend, each
against the same PyTorch rounds, with CPU ms per step beside tokens/s (the
benchmark itself is a manual command)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__))))
import ddp_bench  # noqa: E402


def ours(tokens, cpu_ms):
    phases = dict(forward_ms=1.0, backward_ms=2.0, optimizer_ms=3.0,
                  comm_wait_ms=0.5, step_ms=7.0, cpu_ms=cpu_ms)
    return dict(tokens_per_second=tokens, cpu_ms=cpu_ms, phases=phases,
                vm_hwm=100, vm_growth=10, tensor_peak=5, blas="openblas",
                libtorch="1.13", buckets=2, build="opt")


def theirs(tokens, cpu_ms):
    return dict(tokens_per_second=tokens, cpu_ms=cpu_ms, vm_hwm=200,
                vm_growth=20, blas="openblas", torch="1.13.0",
                adamw_foreach=False)


class RowsTest(unittest.TestCase):

    def test_each_backend_is_its_own_row_against_the_same_pytorch_rounds(self):
        pytorch = [theirs(100, 40.0), theirs(200, 44.0), theirs(100, 42.0)]
        runs = {"onednn": [ours(300, 20.0), ours(400, 22.0), ours(100, 21.0)],
                "blas": [ours(100, 40.0), ours(200, 40.0), ours(150, 60.0)]}
        facts = {}
        rows = [ddp_bench.summarise(runs[gemm], pytorch, facts, gemm=gemm,
                                    model="tiny", precision="fp32", world=2,
                                    strategy="ddp")
                for gemm in ("onednn", "blas")]
        onednn, blas = rows
        self.assertEqual((onednn["gemm"], blas["gemm"]), ("onednn", "blas"))
        # Per-round ratios 3, 2, 1 (not median 300 / median 100).
        self.assertEqual(onednn["ratio"], 2.0)
        self.assertEqual((onednn["low"], onednn["high"]), (1.0, 3.0))
        self.assertEqual(blas["ratio"], 1.0)
        # CPU ms per step: medians on both sides; PyTorch's / ours per round.
        self.assertEqual(onednn["cpu_ours"], 21.0)
        self.assertEqual(blas["cpu_ours"], 40.0)
        self.assertEqual(onednn["cpu_theirs"], 42.0)
        self.assertEqual(onednn["cpu_ratio"], 2.0)
        self.assertEqual(blas["cpu_low"], 0.7)
        self.assertEqual(facts["build"], "opt")


if __name__ == "__main__":
    unittest.main()
