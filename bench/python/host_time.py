"""Host time per call of shapejit from Python on torch tensors: plan.launch with tensors and with
integer device pointers, and the one-shot calls, for the decode rope [64, 1, 32/8, 128] bf16 (q and
k, i32 positions) and the attention permute [64, 512, 32, 128] f16 -> dims 0,2,1,3; and the GPU
time of that permute through Python and through torch.

    python bench/python/host_time.py [--calls 200] [--rounds 50]

Each host figure is the median over --rounds rounds of the wall time of --calls back-to-back calls
divided by --calls. Rounds are short enough that the launch queue never fills (the GPU drains
between rounds), so a call's time is the host's even where its kernel runs longer. Needs torch and
a CUDA GPU.
"""

import argparse
import statistics
import time

import torch

import shapejit
from shapejit import _shapejit
from cuda_timing import median_event_ms


def host_us(fn, calls: int, rounds: int) -> float:
    """Median host microseconds per call of fn."""
    for _ in range(100):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(times)


def gpu_us(fn, runs: int = 50) -> float:
    """Median CUDA-event microseconds of one call of fn."""
    return median_event_ms(fn, runs, warmup=5) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per round")
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    dev = "cuda"
    q = torch.randn(64, 1, 32, 128, device=dev, dtype=torch.bfloat16)
    k = torch.randn(64, 1, 8, 128, device=dev, dtype=torch.bfloat16)
    cos, sin = shapejit.rope_tables(4096, 128, theta=10000.0, dtype="f32", device=dev)
    pos = torch.randint(0, 4096, (64, 1), device=dev, dtype=torch.int32)
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    plan = shapejit.plan_rope(q, k, cos=cos, positions=pos)
    ptrs = [t.data_ptr() for t in (q, k, cos, sin, pos, q_out, k_out)]
    stream = torch.cuda.current_stream().cuda_stream
    rows = [
        ("rope decode, plan.launch(tensors)",
         lambda: plan.launch(q, k, cos=cos, sin=sin, positions=pos, out=q_out, k_out=k_out)),
        ("rope decode, plan.launch(device pointers)",
         lambda: plan.launch(ptrs[0], ptrs[1], cos=ptrs[2], sin=ptrs[3], positions=ptrs[4], out=ptrs[5],
                             k_out=ptrs[6], stream=stream)),
        ("rope decode, shapejit.rope(..., out=, k_out=)",
         lambda: shapejit.rope(q, k, cos=cos, sin=sin, positions=pos, out=q_out, k_out=k_out)),
        ("rope decode, shapejit.rope(...) allocating outputs",
         lambda: shapejit.rope(q, k, cos=cos, sin=sin, positions=pos)),
    ]
    x = torch.randn(64, 512, 32, 128, device=dev, dtype=torch.float16)
    y = torch.empty(64, 32, 512, 128, device=dev, dtype=torch.float16)
    view = x.permute(0, 2, 1, 3)
    copy_plan = shapejit.plan_copy(y, view)
    rows += [
        ("permute [64,512,32,128] f16, plan.launch(tensors)", lambda: copy_plan.launch(y, view)),
        ("permute, plan.launch(device pointers)",
         lambda: copy_plan.launch(y.data_ptr(), x.data_ptr(), stream=stream)),
        ("permute, shapejit.permute(x, dims)", lambda: shapejit.permute(x, (0, 2, 1, 3))),
        ("permute, shapejit.permute(x, dims, out=y)", lambda: shapejit.permute(x, (0, 2, 1, 3), out=y)),
        ("for reference: torch x.permute(dims).contiguous()", lambda: x.permute(0, 2, 1, 3).contiguous()),
        ("for reference: torch.empty_like(y) alone", lambda: torch.empty_like(y)),
        ("for reference: torch x.new_empty(shape) alone", lambda: x.new_empty((64, 32, 512, 128))),
    ]
    # The one-shot calls again with their outputs allocated by torch from Python, as they are where
    # the C++ allocation is off.
    torch_allocated = [
        ("rope decode, shapejit.rope(...) allocating outputs, torch allocation",
         lambda: shapejit.rope(q, k, cos=cos, sin=sin, positions=pos)),
        ("permute, shapejit.permute(x, dims), torch allocation", lambda: shapejit.permute(x, (0, 2, 1, 3))),
    ]
    print(f"C++ allocation of one-shot outputs: {'on' if _shapejit.torch_allocation(True) else 'off'}")
    print(f"| call | host us per call (median of {args.rounds} rounds x {args.calls}) |\n|---|---|")
    for name, fn in rows:
        print(f"| {name} | {host_us(fn, args.calls, args.rounds):.2f} |")
    _shapejit.torch_allocation(False)
    for name, fn in torch_allocated:
        print(f"| {name} | {host_us(fn, args.calls, args.rounds):.2f} |")
    _shapejit.torch_allocation(True)
    nbytes = 2 * x.numel() * x.element_size()
    print("\n| permute [64,512,32,128] f16 -> 0,2,1,3 | GPU us per call | GB/s |\n|---|---|---|")
    for name, fn in (("shapejit.permute", lambda: shapejit.permute(x, (0, 2, 1, 3))),
                     ("plan.launch", lambda: copy_plan.launch(y, view)),
                     ("torch permute().contiguous()", lambda: view.contiguous()),
                     ("torch copy of the same bytes", lambda: y.view(-1).copy_(x.view(-1)))):
        us = gpu_us(fn)
        print(f"| {name} | {us:.1f} | {nbytes / us / 1e3:.0f} |")


if __name__ == "__main__":
    main()
