#!/usr/bin/env python3
"""Times rearrange cases with the framework peers, in one process: torch
`x.permute(perm).contiguous()` and XLA `jax.jit(lambda a: jnp.transpose(a, perm))`, each framework
that imports (a missing one is skipped), against a device-to-device copy of the same bytes timed
in the same process. The cases come from a case file, usually one written by
`rearrange_bench --random SEED --emit-cases FILE`; lines with --src-strides or --dst-strides are
skipped (both peers take a contiguous source here).

  python3 bench/peers_random.py CASES [--dry-run] [--only TEXT] [--elem-bytes 1,2,4,8,16]
                                      [--warmup 3] [--runs 15] [--samples 65536]

Element types: the line's --dtype (u8 uint8, f16 float16, bf16 bfloat16, f32 float32, f64 float64,
and the integer types); an opaque `--elem-bytes 16` element runs as complex128, the 16-byte type
both frameworks have (other opaque sizes are skipped). jax runs with jax_enable_x64 for float64
and complex128, and without preallocation so that torch has room too.

Method: random data (never zeros), warm-up runs first; bandwidth = 2 x bytes / median time, as
rearrange_bench reports it. torch: CUDA events around each launch, median of --runs. XLA: --runs
loops of several launches, each loop ended by block_until_ready and timed on the host clock; the
median per-launch time. Copy: torch `dst.copy_(src)` timed with events; without torch, a jitted
`a.copy()` that is checked to write a new buffer. Check: every result is compared bit for bit with
its own source on --samples random elements (plus the first and last), gathered by index rather
than by the operation under test. Output: one markdown table row per case and per-element-size
geometric means, printed and written to $OUT/peers_random.md when OUT is set (rewritten after each
case, so a run cut short keeps its rows). --dry-run lists the parsed cases and imports nothing.
"""
import argparse
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field

DTYPES = {  # case-file dtype -> (framework dtype name, bytes)
    "u8": ("uint8", 1), "i8": ("int8", 1), "u16": ("uint16", 2), "i16": ("int16", 2),
    "u32": ("uint32", 4), "i32": ("int32", 4), "u64": ("uint64", 8), "i64": ("int64", 8),
    "f16": ("float16", 2), "bf16": ("bfloat16", 2), "f32": ("float32", 4), "f64": ("float64", 8),
}
OPAQUE = {16: "complex128"}  # opaque element bytes -> framework dtype name


@dataclass
class Case:
    line: str
    shape: list
    perm: list
    dtype: str  # framework dtype name
    elem_bytes: int
    results: dict = field(default_factory=dict)  # "torch"/"xla"/"copy" -> (GB/s, check)

    @property
    def numel(self):
        return math.prod(self.shape)

    @property
    def bytes(self):
        return self.numel * self.elem_bytes

    @property
    def out_shape(self):
        return [self.shape[p] for p in self.perm]


def parse_line(text):
    """The options of `rearrange --key value ...` as a dict (keys without dashes)."""
    words = text.split()
    if not words or words[0] != "rearrange":
        raise ValueError("not a rearrange line")
    values, i = {}, 1
    while i < len(words):
        if not words[i].startswith("--"):
            raise ValueError(f"expected an option, got '{words[i]}'")
        has_value = i + 1 < len(words) and not words[i + 1].startswith("--")
        values[words[i][2:]] = words[i + 1] if has_value else ""
        i += 2 if has_value else 1
    return values


def make_case(text):
    """A Case, or the reason the line is skipped (a string)."""
    values = parse_line(text)
    if "src-strides" in values or "dst-strides" in values:
        return "strided view"
    shape = [int(v) for v in values["shape"].split(",")]
    perm = [int(v) for v in values["perm"].split(",")]
    if sorted(perm) != list(range(len(shape))):
        raise ValueError(f"--perm {values['perm']} is not a permutation of the {len(shape)} dimensions")
    if "elem-bytes" in values:
        elem_bytes = int(values["elem-bytes"])
        if elem_bytes not in OPAQUE:
            return f"no framework type of {elem_bytes} bytes"
        return Case(text, shape, perm, OPAQUE[elem_bytes], elem_bytes)
    if values.get("dtype") not in DTYPES:
        raise ValueError(f"unknown --dtype {values.get('dtype')}")
    dtype, elem_bytes = DTYPES[values["dtype"]]
    return Case(text, shape, perm, dtype, elem_bytes)


def read_cases(path, only, sizes):
    cases, skipped = [], []
    with open(path) as f:
        for number, raw in enumerate(f, 1):
            text = raw.strip()
            if not text or text.startswith("#") or (only and only not in text):
                continue
            try:
                case = make_case(text)
            except (ValueError, KeyError) as e:
                sys.exit(f"{path}:{number}: {e}: {text}")
            if isinstance(case, str):
                skipped.append(f"{text} ({case})")
            elif case.elem_bytes in sizes:
                cases.append(case)
    return cases, skipped


def sample_indices(case, samples, seed):
    """Output and source multi-indices of `samples` random elements, the first and the last."""
    import numpy as np

    lin = np.concatenate([[0, case.numel - 1], np.random.default_rng(seed).integers(0, case.numel, samples)])
    out_idx = np.unravel_index(lin, case.out_shape)
    src_idx = [None] * len(case.shape)
    for d, p in enumerate(case.perm):  # output dim d is source dim perm[d]
        src_idx[p] = out_idx[d]
    return out_idx, tuple(src_idx)


def gbs(case, ms):
    return 2.0 * case.bytes / (ms * 1e6)


class Torch:
    name = "torch"

    def __init__(self):
        import torch

        if not torch.cuda.is_available():
            raise ImportError("torch has no CUDA device")
        self.torch = torch
        self.version = torch.__version__
        self.device = torch.cuda.get_device_name()

    def random(self, case, seed):
        torch = self.torch
        dtype = getattr(torch, case.dtype)
        g = torch.Generator(device="cuda").manual_seed(seed)
        if dtype.is_complex:
            return torch.randn(case.shape, dtype=dtype, device="cuda", generator=g)
        if dtype.is_floating_point:
            return torch.rand(case.shape, dtype=dtype, device="cuda", generator=g)
        return torch.randint(1, 127, case.shape, dtype=dtype, device="cuda", generator=g)

    def median_ms(self, fn, warmup, runs):
        torch = self.torch
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(runs):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        return statistics.median(times)

    def gathered_equal(self, x, y, out_idx, src_idx):
        # Value equality is bit equality here: the random data holds no NaN and no negative zero.
        torch = self.torch

        def take(t, idx):
            return t[tuple(torch.as_tensor(i, device=t.device) for i in idx)]

        return torch.equal(take(y, out_idx), take(x, src_idx))

    def copy(self, case, args, seed):
        x = self.random(case, seed)
        dst = self.torch.empty_like(x)
        dst.copy_(x)
        check = "ok" if self.torch.equal(dst, x) else "MISMATCH"
        ms = self.median_ms(lambda: dst.copy_(x), args.warmup, args.runs)
        del x, dst
        self.torch.cuda.empty_cache()
        return gbs(case, ms), check

    def rearrange(self, case, args, seed):
        x = self.random(case, seed)
        y = x.permute(case.perm).contiguous()
        out_idx, src_idx = sample_indices(case, args.samples, seed)
        fresh = y.data_ptr() != x.data_ptr() and list(y.shape) == case.out_shape
        check = "ok" if fresh and self.gathered_equal(x, y, out_idx, src_idx) else "MISMATCH"
        del y
        ms = self.median_ms(lambda: x.permute(case.perm).contiguous(), args.warmup, args.runs)
        del x
        self.torch.cuda.empty_cache()
        return gbs(case, ms), check


class Xla:
    name = "xla"

    def __init__(self):
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)
        if jax.default_backend() != "gpu":
            raise ImportError(f"jax runs on {jax.default_backend()}, not a GPU")
        self.jax, self.jnp = jax, jnp
        self.version = jax.__version__
        self.device = jax.devices()[0].device_kind

    def random(self, case, seed):
        jax, jnp = self.jax, self.jnp
        key, dtype = jax.random.PRNGKey(seed), jnp.dtype(getattr(jnp, case.dtype))
        if jnp.issubdtype(dtype, jnp.complexfloating):
            return jax.random.normal(key, case.shape, dtype)
        if jnp.issubdtype(dtype, jnp.floating):
            return jax.random.uniform(key, case.shape, dtype)
        return jax.random.randint(key, case.shape, 1, 127, dtype)

    def median_ms(self, f, x, case, warmup, runs):
        for _ in range(warmup):
            f(x).block_until_ready()
        # Several launches per host-timed loop hide the launch latency; at most ~16 GB of outputs
        # can be in flight at once.
        launches = max(2, min(20, int(16e9 // max(case.bytes, 1))))
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            for _ in range(launches):
                y = f(x)
            y.block_until_ready()
            times.append((time.perf_counter() - start) * 1e3 / launches)
            del y
        return statistics.median(times)

    def gathered_equal(self, x, y, out_idx, src_idx):
        import numpy as np

        got, want = np.asarray(y[out_idx]), np.asarray(x[src_idx])
        return np.array_equal(got.view(np.uint8), want.view(np.uint8))

    def copy(self, case, args, seed):
        x = self.random(case, seed)
        f = self.jax.jit(lambda a: a.copy())
        y = f(x)
        if y.unsafe_buffer_pointer() == x.unsafe_buffer_pointer():
            return None, "jitted copy returned its input: no baseline"
        check = "ok" if self.jnp.array_equal(x, y) else "MISMATCH"
        del y
        ms = self.median_ms(f, x, case, args.warmup, args.runs)
        return gbs(case, ms), check

    def rearrange(self, case, args, seed):
        jnp = self.jnp
        x = self.random(case, seed)
        perm = tuple(case.perm)
        f = self.jax.jit(lambda a: jnp.transpose(a, perm))
        y = f(x)
        out_idx, src_idx = sample_indices(case, args.samples, seed)
        ok = list(y.shape) == case.out_shape and self.gathered_equal(x, y, out_idx, src_idx)
        del y
        ms = self.median_ms(f, x, case, args.warmup, args.runs)
        return gbs(case, ms), "ok" if ok else "MISMATCH"


def load_peers():
    peers = []
    for peer in (Torch, Xla):
        try:
            peers.append(peer())
        except Exception as e:  # a framework that is missing or broken is skipped, not fatal
            print(f"{peer.name}: skipped ({type(e).__name__}: {e})")
    return peers


def run_case(case, peers, args, seed):
    for peer in peers:
        for kind, method in ((peer.name, peer.rearrange), ("copy", peer.copy)):
            if kind == "copy" and "copy" in case.results:
                continue  # one copy baseline per case: torch's when torch runs
            try:
                case.results[kind] = method(case, args, seed)
            except Exception as e:  # e.g. out of memory: report it on the line and go on
                case.results[kind] = (None, f"error: {type(e).__name__}: {str(e).splitlines()[0][:120]}")


def cell(case, kind):
    value, _ = case.results.get(kind, (None, "-"))
    return "-" if value is None else f"{value:.0f}"


def ratio(case, kind):
    value, copy = case.results.get(kind, (None, ""))[0], case.results.get("copy", (None, ""))[0]
    return value / copy if value and copy else None


def percent(fraction):
    return "-" if fraction is None else f"{100 * fraction:.0f}%"


def case_table(cases):
    rows = ["| shape | perm | elem bytes | torch GB/s | torch % of copy | XLA GB/s | XLA % of copy | copy GB/s | check |",
            "|---|---|---|---|---|---|---|---|---|"]
    for c in cases:
        checks = ", ".join(f"{k} {c.results[k][1]}" for k in ("torch", "xla", "copy") if k in c.results)
        rows.append(f"| {','.join(map(str, c.shape))} | {','.join(map(str, c.perm))} | {c.elem_bytes} | "
                    f"{cell(c, 'torch')} | {percent(ratio(c, 'torch'))} | {cell(c, 'xla')} | {percent(ratio(c, 'xla'))} | "
                    f"{cell(c, 'copy')} | {checks} |")
    return "\n".join(rows) + "\n"


def geomean(values):
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def summary_table(cases):
    rows = ["| elem bytes | cases | torch GB/s (geomean) | torch % of copy (geomean) | torch min | "
            "XLA GB/s (geomean) | XLA % of copy (geomean) | XLA min |",
            "|---|---|---|---|---|---|---|---|"]
    for size in sorted({c.elem_bytes for c in cases}):
        group = [c for c in cases if c.elem_bytes == size]
        cells = []
        for kind in ("torch", "xla"):
            values = [c.results[kind][0] for c in group if c.results.get(kind, (None,))[0]]
            ratios = [r for r in (ratio(c, kind) for c in group) if r]
            mean = geomean(values)
            cells += ["-" if mean is None else f"{mean:.0f}", percent(geomean(ratios)),
                      percent(min(ratios) if ratios else None)]
        rows.append(f"| {size} | {len(group)} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def report(path, head, cases):
    done = [c for c in cases if c.results]
    return (f"# Framework peers on {path}\n\n{head}\n## Cases\n\n{case_table(done)}\n"
            f"## Geometric means by element size\n\n{summary_table(done)}")


def dry_run(cases, skipped):
    print("| # | dtype | elem bytes | rank | elements | MB | shape | perm |\n|---|---|---|---|---|---|---|---|")
    for i, c in enumerate(cases):
        print(f"| {i} | {c.dtype} | {c.elem_bytes} | {len(c.shape)} | {c.numel:.3g} | {c.bytes / 1e6:.0f} | "
              f"{','.join(map(str, c.shape))} | {','.join(map(str, c.perm))} |")
    for size in sorted({c.elem_bytes for c in cases}):
        ranks = sorted(len(c.shape) for c in cases if c.elem_bytes == size)
        print(f"{size}-byte elements: {len(ranks)} cases, ranks {ranks}")
    for s in skipped:
        print(f"skipped: {s}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", help="case file (rearrange_bench --random SEED --emit-cases FILE)")
    parser.add_argument("--dry-run", action="store_true", help="list the parsed cases; import no framework")
    parser.add_argument("--only", default="", help="only lines containing this text")
    parser.add_argument("--elem-bytes", default="1,2,4,8,16", help="only these element sizes")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--samples", type=int, default=1 << 16, help="elements checked per result")
    args = parser.parse_args()
    cases, skipped = read_cases(args.cases, args.only, {int(s) for s in args.elem_bytes.split(",")})
    if args.dry_run:
        dry_run(cases, skipped)
        return 0
    peers = load_peers()
    if not peers:
        sys.exit("neither torch nor jax can run here")
    head = (f"device {peers[0].device}; " + ", ".join(f"{p.name} {p.version}" for p in peers) +
            f"; {args.warmup} warm-up + {args.runs} timed runs (median); copy baseline: {peers[0].name}; "
            f"{args.samples} sampled elements checked per result\n")
    print(head)
    out = os.environ.get("OUT")
    for i, case in enumerate(cases):
        run_case(case, peers, args, seed=i + 1)
        print(case_table([case]).splitlines()[-1], flush=True)
        if out:
            with open(os.path.join(out, "peers_random.md"), "w") as f:
                f.write(report(args.cases, head, cases))
    for s in skipped:
        print(f"skipped: {s}")
    print("\n" + summary_table(cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
