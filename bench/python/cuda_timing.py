"""CUDA-event timing shared by the Python benchmarks."""

import statistics

import torch


def median_event_ms(fn, runs: int, warmup: int) -> float:
    """Median milliseconds of one call of fn, CUDA events around each of `runs` calls after `warmup`."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)
