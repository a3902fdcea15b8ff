"""The torch ways to apply a Hadamard transform, timed as bench/hadamard_bench.cpp times shapejit:
`x @ H` with H precomputed in x's dtype, and torch.compile of that function, on the same sizes
(x of about --mib MiB, [rows, n]), against torch's device copy of the same bytes in this process.

    python bench/python/hadamard_torch.py [--mib 256] [--runs 50]

CUDA events around each call, median of --runs after 10 warm-up calls. Bandwidth counts x read plus
y written, as the C++ bench does (a matmul also reads H, not counted). H is Sylvester's matrix for
powers of two; for 12, 20 and 28 times 2^k it is a random +-1 matrix of the same size (the time of
a dense product does not depend on the signs), so only the power-of-two results are checked: each
is compared on its first row with a float64 fast Walsh-Hadamard transform. Needs torch and a GPU.
"""

import argparse
import math

import torch

from cuda_timing import median_event_ms

SIZES = [128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 12 * 256, 20 * 1024, 28 * 1024]


def sylvester(n: int, dtype, device) -> torch.Tensor:
    h = torch.ones(1, 1, dtype=torch.float32, device=device)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h.to(dtype)


def fwht64(row: torch.Tensor) -> torch.Tensor:
    """Unscaled float64 fast Walsh-Hadamard transform of one row (Sylvester ordering)."""
    x = row.double().clone()
    n, h = x.numel(), 1
    while h < n:
        x = x.view(-1, 2, h)
        x = torch.stack([x[:, 0] + x[:, 1], x[:, 0] - x[:, 1]], 1).view(n)
        h *= 2
    return x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    device = torch.device("cuda")
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| case | torch x @ H of copy | torch.compile of copy | copy GB/s (same bytes) | check |")
    print("| --- | --- | --- | --- | --- |")
    cases = [(torch.bfloat16, n) for n in SIZES] + [(torch.float16, n) for n in SIZES]
    cases += [(torch.float32, n) for n in (128, 1024, 4096, 8192)]
    for dtype, n in cases:
        size = torch.finfo(dtype).bits // 8
        rows = max(1, (args.mib << 20) // (n * size))
        x = (torch.rand(rows, n, device=device) * 4 - 2).to(dtype)
        pow2 = n & (n - 1) == 0
        h = sylvester(n, dtype, device) if pow2 else (torch.randint(0, 2, (n, n), device=device) * 2 - 1).to(dtype)
        scale = 1 / math.sqrt(n)
        h = h * scale
        eager = lambda: x @ h  # noqa: E731
        compiled = torch.compile(lambda a, b: a @ b)
        check = "-"
        if pow2:
            got = (x[:1] @ h).double()[0]
            want = fwht64(x[0]) * scale
            check = "ok" if torch.allclose(got, want, rtol=2e-2, atol=2e-2 * want.abs().max().item()) else "WRONG"
        y = torch.empty_like(x)
        bytes_moved = 2 * x.numel() * size
        copy = bytes_moved / (median_event_ms(lambda: y.copy_(x), args.runs, warmup=10) * 1e6)
        t_eager = bytes_moved / (median_event_ms(eager, args.runs, warmup=10) * 1e6)
        t_compiled = bytes_moved / (median_event_ms(lambda: compiled(x, h), args.runs, warmup=10) * 1e6)
        name = str(dtype).replace("torch.", "")
        print(f"| {name} [{rows},{n}] | {100 * t_eager / copy:.1f}% | {100 * t_compiled / copy:.1f}% | {copy:.0f} | {check} |",
              flush=True)
        del x, h, y


if __name__ == "__main__":
    main()
