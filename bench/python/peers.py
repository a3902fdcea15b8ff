"""shapejit from Python beside torch eager, torch.compile and Liger-Kernel, in one process.

    python bench/python/peers.py [--suite rope,rearrange] [--no-compile] [--runs 21]

Rope: the lines of bench/cases/rope-bench.txt, out of place, i64 positions drawn at random from a
4096-row f32 table; bytes counted as the C++ rope bench counts them (q and k read and written, the
positions, each token's cos and sin). Peers: torch eager (the rotate-half formula models use, in
the data dtype), torch.compile of the same function, and Liger-Kernel's Triton rope (in place,
half-split only, with its duplicated [1, S, R] cos/sin gathered beforehand).

Rearrange: the lines of bench/cases/rearrange-bench-dl.txt (torch has no negative strides: those
lines are skipped); bytes read plus written. Peers: torch's copy_ of the permuted view into a
preallocated output, and torch.compile of permute().contiguous().

Each figure is the median over --runs repeats of CUDA-event time of a batch of back-to-back calls
(enough for about 2 ms of work, at least 4), per call, after warm-up; "copy" is a torch copy of the
same bytes timed the same way. Inputs are random; shapejit's output is poisoned and checked against
torch before timing (rope within the dtype's rounding, rearrange bit-exact).
"""

import argparse
import pathlib
import statistics
import sys

import torch

import shapejit

ROOT = pathlib.Path(__file__).resolve().parents[2]
DTYPES = {"u8": torch.uint8, "i8": torch.int8, "i16": torch.int16, "i32": torch.int32,
          "i64": torch.int64, "f16": torch.float16, "bf16": torch.bfloat16,
          "f32": torch.float32, "f64": torch.float64}


def parse_line(line: str) -> dict:
    words = line.split()
    return {words[i][2:]: words[i + 1] for i in range(1, len(words) - 1, 2) if words[i].startswith("--")}


def ints(text: str) -> list:
    return [int(v) for v in text.split(",")]


def case_lines(path: pathlib.Path) -> list:
    return [l.strip() for l in path.read_text().splitlines() if l.strip() and not l.startswith("#")]


def per_call_us(fn, runs: int, guess_us: float = 0.0) -> float:
    """Median CUDA-event microseconds per call over batches of back-to-back calls."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    if guess_us <= 0:
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        guess_us = max(start.elapsed_time(stop) * 1e3, 1.0)
    calls = max(4, min(200, int(2000 / guess_us)))
    times = []
    for _ in range(runs):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3 / calls)
    return statistics.median(times)


def copy_us(nbytes: int, runs: int) -> float:
    """A torch copy of nbytes / 2 bytes (so nbytes read plus written)."""
    a = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda").random_(0, 255)
    b = torch.empty_like(a)
    return per_call_us(lambda: b.copy_(a), runs)


def row(name: str, cells: list) -> None:
    print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def cell(nbytes: float, us) -> str:
    return "n/a" if us is None else f"{nbytes / us / 1e3:.0f} GB/s ({us:.1f} us)"


def try_compile(fn, enabled: bool):
    if not enabled:
        return None
    return torch.compile(fn, dynamic=False, fullgraph=True)


# ------------------------------------------------------------------------------------------------
# Rope


def rope_reference(q, cos_t, sin_t, pos, style: str, rotary: int):
    """What a model's eager code computes: the rotation in q's dtype, tables gathered by position."""
    c = cos_t[pos].unsqueeze(2).to(q.dtype)
    s = sin_t[pos].unsqueeze(2).to(q.dtype)
    xr, rest = q[..., :rotary], q[..., rotary:]
    if style == "neox":
        x1, x2 = xr[..., : rotary // 2], xr[..., rotary // 2:]
        out = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
    else:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        out = torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)
    return torch.cat((out, rest), dim=-1) if rest.shape[-1] else out


def rope_eager(q, k, cos_t, sin_t, pos, style: str, rotary: int):
    return rope_reference(q, cos_t, sin_t, pos, style, rotary), rope_reference(k, cos_t, sin_t, pos, style, rotary)


def liger_rope():
    try:
        from liger_kernel.ops.rope import LigerRopeFunction
    except ImportError:
        return None
    return LigerRopeFunction


def run_rope(args) -> None:
    liger = liger_rope()
    print("\n## rope (bench/cases/rope-bench.txt)\n")
    row("case", ["copy (same bytes)", "shapejit plan", "shapejit one-shot", "torch eager",
                 "torch.compile", "Liger-Kernel", "shapejit of copy"])
    row("---", ["---"] * 7)
    for line in case_lines(ROOT / "bench/cases/rope-bench.txt"):
        o = parse_line(line)
        b, s, h, d = ints(o["shape"])
        hk = int(o.get("k-heads", h))
        rotary = int(o.get("rotary-dim", d))
        style, dtype = o["algo"], DTYPES[o["dtype"]]
        q = torch.randn(b, s, h, d, device="cuda", dtype=dtype)
        k = torch.randn(b, s, hk, d, device="cuda", dtype=dtype)
        cos_t, sin_t = shapejit.rope_tables(4096, rotary, theta=10000.0, dtype="f32", device="cuda")
        pos = torch.randint(0, 4096, (b, s), device="cuda", dtype=torch.int64)
        out, k_out = torch.full_like(q, float("nan")), torch.full_like(k, float("nan"))
        plan = shapejit.plan_rope(q, k, cos=cos_t, positions=pos, style=style, rotary_dim=rotary)
        plan.launch(q, k, cos=cos_t, sin=sin_t, positions=pos, out=out, k_out=k_out)
        ref_q, ref_k = rope_eager(q.double(), k.double(), cos_t.double(), sin_t.double(), pos, style, rotary)
        tol = 2 * torch.finfo(dtype).eps * 4
        for got, want in ((out, ref_q), (k_out, ref_k)):
            if not torch.allclose(got.double(), want, atol=tol, rtol=tol):
                sys.exit(f"{line}: shapejit differs from the reference")
        nbytes = 2 * (q.numel() + k.numel()) * q.element_size() + b * s * (8 + 4 * rotary)
        runs = args.runs
        sj_plan = per_call_us(lambda: plan.launch(q, k, cos=cos_t, sin=sin_t, positions=pos, out=out,
                                                  k_out=k_out), runs)
        sj_one = per_call_us(lambda: shapejit.rope(q, k, cos=cos_t, sin=sin_t, positions=pos,
                                                   style=style, rotary_dim=rotary, out=out, k_out=k_out), runs)
        eager = per_call_us(lambda: rope_eager(q, k, cos_t, sin_t, pos, style, rotary), runs)
        compiled_fn = try_compile(rope_eager, args.compile)
        compiled = None
        if compiled_fn is not None:
            compiled = per_call_us(lambda: compiled_fn(q, k, cos_t, sin_t, pos, style, rotary), runs)
        lig = None
        if liger is not None and style == "neox":
            # Liger takes [B, H, S, D] views of [B, S, H, D] memory and duplicated [B, S, R] tables,
            # and rotates in place (so q2/k2 drift; timing only).
            c = torch.cat((cos_t[pos], cos_t[pos]), dim=-1).to(dtype)
            sn = torch.cat((sin_t[pos], sin_t[pos]), dim=-1).to(dtype)
            q2, k2 = q.clone(), k.clone()
            lig = per_call_us(lambda: liger.apply(q2.transpose(1, 2), k2.transpose(1, 2), c, sn), runs)
        copy = copy_us(int(nbytes), runs)
        row(line.removeprefix("rope "), [cell(nbytes, copy), cell(nbytes, sj_plan), cell(nbytes, sj_one),
                                         cell(nbytes, eager), cell(nbytes, compiled), cell(nbytes, lig),
                                         f"{copy / sj_plan * 100:.0f}%"])
        del q, k, out, k_out
        torch.cuda.empty_cache()


# ------------------------------------------------------------------------------------------------
# Rearrange


def source_view(o: dict, dtype):
    """The case's source: a random contiguous tensor of the shape, or the strided view it names."""
    shape = ints(o["shape"])
    if "src-strides" not in o:
        return fill(torch.empty(shape, dtype=dtype, device="cuda"))
    strides = ints(o["src-strides"])
    span = 1 + sum((e - 1) * st for e, st in zip(shape, strides))
    return fill(torch.empty(span, dtype=dtype, device="cuda")).as_strided(shape, strides)


def fill(t):
    if t.dtype.is_floating_point:
        return t.uniform_(-1, 1)
    return t.random_(0, 100)


def run_rearrange(args) -> None:
    print("\n## rearrange (bench/cases/rearrange-bench-dl.txt)\n")
    row("case", ["copy (same bytes)", "shapejit plan", "shapejit one-shot", "torch copy_",
                 "torch.compile", "shapejit of copy"])
    row("---", ["---"] * 6)
    for line in case_lines(ROOT / "bench/cases/rearrange-bench-dl.txt"):
        o = parse_line(line)
        if "dst-strides" in o or "-" in o.get("src-strides", "") or o["dtype"] not in DTYPES:
            row(line.removeprefix("rearrange "),
                ["skipped: a strided destination, negative strides or opaque elements"] + [""] * 5)
            continue
        dtype = DTYPES[o["dtype"]]
        perm = ints(o["perm"])
        x = source_view(o, dtype)
        view = x.permute(perm)
        y = torch.empty(view.shape, dtype=dtype, device="cuda")
        if dtype.is_floating_point:
            y.fill_(float("nan"))
        else:
            y.fill_(-1 if dtype.is_signed else 255)
        plan = shapejit.plan_copy(y, view)
        plan.launch(y, view)
        if not torch.equal(y, view.contiguous()):
            sys.exit(f"{line}: shapejit differs from torch")
        nbytes = 2 * y.numel() * y.element_size()
        runs = args.runs
        sj_plan = per_call_us(lambda: plan.launch(y, view), runs)
        sj_one = per_call_us(lambda: shapejit.copy_(y, view), runs)
        eager = per_call_us(lambda: y.copy_(view), runs)

        def permute_copy(t):
            return t.permute(perm).contiguous()
        compiled_fn = try_compile(permute_copy, args.compile)
        compiled = None
        if compiled_fn is not None:
            compiled = per_call_us(lambda: compiled_fn(x), runs)
        copy = copy_us(nbytes, runs)
        row(line.removeprefix("rearrange "), [cell(nbytes, copy), cell(nbytes, sj_plan), cell(nbytes, sj_one),
                                              cell(nbytes, eager), cell(nbytes, compiled),
                                              f"{copy / sj_plan * 100:.0f}%"])
        del x, view, y
        torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="rope,rearrange", help="rope, rearrange or both")
    parser.add_argument("--no-compile", dest="compile", action="store_false", help="skip torch.compile")
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, shapejit {shapejit.__version__}")
    torch.manual_seed(0)
    torch._dynamo.config.recompile_limit = 1 << 20  # one compiled function serves every case
    with torch.no_grad():
        suites = args.suite.split(",")
        if "rope" in suites:
            run_rope(args)
        if "rearrange" in suites:
            run_rearrange(args)


if __name__ == "__main__":
    main()
