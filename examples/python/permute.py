"""Permute a tensor with shapejit: one-shot, through a plan, and as a torch.compile'd op, checked
against torch and timed against x.permute(dims).contiguous().

    python examples/python/permute.py [--shape 64,512,32,128] [--dims 0,2,1,3] [--dtype float16]

Needs torch and a CUDA GPU.
"""

import argparse

import torch

import shapejit


def bandwidth(fn, nbytes: int, iterations: int = 50) -> float:
    """GB/s counting bytes read and written."""
    fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iterations):
        fn()
    end.record()
    end.synchronize()
    return 2 * nbytes * iterations / (start.elapsed_time(end) * 1e6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="64,512,32,128")
    parser.add_argument("--dims", default="0,2,1,3")
    parser.add_argument("--dtype", default="float16")
    args = parser.parse_args()
    shape = [int(e) for e in args.shape.split(",")]
    dims = [int(d) for d in args.dims.split(",")]
    x = torch.randn(shape, device="cuda").to(getattr(torch, args.dtype))
    expected = x.permute(dims).contiguous()

    y = shapejit.permute(x, dims)  # one-shot: planned once, cached by shape, stride and dtype
    assert torch.equal(y, expected)

    out = torch.empty_like(expected)
    plan = shapejit.plan_copy(out, x.permute(dims))  # a plan: the lowest overhead per launch
    print(plan.describe().splitlines()[0])
    print("manifest line:", plan.manifest_line())
    plan.launch(out, x.permute(dims))
    assert torch.equal(out, expected)

    compiled = torch.compile(lambda t: shapejit.permute(t, dims) * 2, fullgraph=True)
    assert torch.equal(compiled(x), expected * 2)

    nbytes = x.numel() * x.element_size()
    view = x.permute(dims)
    print(f"shapejit.permute: {bandwidth(lambda: shapejit.permute(x, dims), nbytes):.0f} GB/s; "
          f"plan.launch: {bandwidth(lambda: plan.launch(out, view), nbytes):.0f} GB/s; "
          f"torch: {bandwidth(lambda: x.permute(dims).contiguous(), nbytes):.0f} GB/s")


if __name__ == "__main__":
    main()
