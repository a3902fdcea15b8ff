#!/usr/bin/env python3
"""Times rearrange cases with the framework peers, in one process: torch
`x.permute(perm).contiguous()` and XLA `jax.jit(lambda a: jnp.transpose(a, perm))`, against a
device-to-device copy (torch `dst.copy_(src)`) of the same bytes. torch is required (it makes and
checks the data); jax is skipped when it does not import. The cases come from a case file, usually
one written by `rearrange_bench --random SEED --emit-cases FILE`; lines with --src-strides or
--dst-strides are skipped (both peers take a contiguous source here).

  python3 bench/peers_random.py CASES [--dry-run] [--only TEXT] [--elem-bytes 1,2,4,8,16]
                                      [--warmup 3] [--runs 15] [--samples 65536] [--max-seconds 480]
                                      [--case-seconds 90]

Element types: the line's --dtype (u8 uint8, f16 float16, bf16 bfloat16, f32 float32, f64 float64,
and the integer types); an opaque `--elem-bytes 16` element runs as complex128, the 16-byte type
both frameworks have (other opaque sizes are skipped). jax runs with jax_enable_x64 (for float64
and complex128) and without preallocation, so that torch has room too.

Each case runs in a child process of its own (this script with --case-index), killed with its
process group after --case-seconds: a framework call that never returns costs one case, which the
table marks "timeout", and the steps it finished before (torch, copy) keep their figures.

Method, per case: one source on the GPU, made once by torch from random bytes in 1..255 (no element
is zero; floats get their top exponent bit cleared, so no Inf or NaN) and handed to jax zero-copy
through DLPack (a host copy through jax.device_put only where DLPack fails, named in the check
column). Each result is checked on its first call (XLA compiles there), then warm-up runs; neither
is timed. torch and copy: CUDA
events around each launch, median of --runs. XLA: --runs loops of several launches, each loop
ended by block_until_ready and timed on the host clock (at most ~8 GB of outputs in flight), the
median per-launch time. Bandwidth = 2 x bytes / median time, as rearrange_bench reports it.
Check, on the GPU with torch: each result must be a new buffer of the output shape whose elements
at --samples random flat output indices (plus the first and last) equal, bit for bit, the source
elements at the flat source indices computed from them by integer arithmetic (unravel by the
output shape, permute, dot with the source strides); the copy is compared whole. XLA's result
comes to torch through DLPack for the check. Output: one markdown table row per case as it
completes and per-element-size geometric means, printed and written to $OUT/peers_random.md when
OUT is set (rewritten after each case, so a run cut short keeps its rows); per-phase seconds go to
stderr. --max-seconds stops starting new cases after that many seconds (the report counts the
cases not started). --dry-run lists the parsed cases and imports nothing.
"""
import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

# Before jax is imported: allocate GPU memory as needed, leaving the rest to torch.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

DTYPES = {  # case-file dtype -> (framework dtype name, bytes)
    "u8": ("uint8", 1), "i8": ("int8", 1), "u16": ("uint16", 2), "i16": ("int16", 2),
    "u32": ("uint32", 4), "i32": ("int32", 4), "u64": ("uint64", 8), "i64": ("int64", 8),
    "f16": ("float16", 2), "bf16": ("bfloat16", 2), "f32": ("float32", 4), "f64": ("float64", 8),
}
OPAQUE = {16: "complex128"}  # opaque element bytes -> framework dtype name
BITS = {1: "uint8", 2: "int16", 4: "int32", 8: "int64", 16: "int64"}  # integer view for bitwise checks
FLOAT_PART = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "complex128": 8}  # bytes per float
INFLIGHT_BYTES = 8e9  # XLA outputs dispatched ahead of one block_until_ready


@dataclass
class Case:
    line: str
    shape: list
    perm: list
    dtype: str  # framework dtype name
    elem_bytes: int
    results: dict = field(default_factory=dict)  # "torch"/"xla"/"copy" -> (GB/s, check)
    seconds: dict = field(default_factory=dict)  # phase -> wall seconds it took

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


def row_major_strides(shape):
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return strides[::-1]


def source_index(case, out_lin):
    """The flat source index of each flat output index in out_lin (row-major both; any integer
    array type with % and //): unravel by the output shape; output dim d is source dim perm[d]."""
    strides = row_major_strides(case.shape)
    src, rest = 0, out_lin
    for d in reversed(range(len(case.perm))):
        size = case.out_shape[d]
        src = src + (rest % size) * strides[case.perm[d]]
        rest = rest // size
    return src


def gbs(case, ms):
    return 2.0 * case.bytes / (ms * 1e6)


def error_text(e):
    lines = str(e).splitlines() or [""]
    return f"error: {type(e).__name__}: {lines[0][:120]}"


class Torch:
    """Makes each case's source, checks results, times torch and the copy; all on the GPU."""
    name = "torch"

    def __init__(self):
        import torch

        if not torch.cuda.is_available():
            raise ImportError("torch has no CUDA device")
        self.torch = torch
        self.dev = "cuda"
        self.version = torch.__version__
        self.device = torch.cuda.get_device_name()

    def generator(self, seed):
        return self.torch.Generator(device=self.dev).manual_seed(seed)

    def random(self, case, seed):
        """Random bytes in 1..255 viewed as the case's type and shape; floats kept finite."""
        torch = self.torch
        raw = torch.randint(1, 256, (case.bytes,), dtype=torch.uint8, device=self.dev,
                            generator=self.generator(seed))
        part = FLOAT_PART.get(case.dtype)
        if part:  # the top byte of each little-endian float: clear the top exponent bit
            raw.view(-1, part)[:, -1] &= 0xBF
        return raw.view(getattr(torch, case.dtype)).view(case.shape)

    def sample(self, case, samples, seed):
        """(flat output indices, flat source indices) of the checked elements, on the GPU."""
        torch = self.torch
        ends = torch.tensor([0, case.numel - 1], dtype=torch.int64, device=self.dev)
        picks = torch.randint(0, case.numel, (samples,), dtype=torch.int64, device=self.dev,
                              generator=self.generator(seed + 0x5EED))
        out_lin = torch.cat([ends, picks])
        return out_lin, source_index(case, out_lin)

    def bits(self, t, elem_bytes):
        """t in row-major element order as integers, one (a row of two for 16 bytes) per element."""
        flat = t.reshape(-1).view(getattr(self.torch, BITS[elem_bytes]))
        return flat.view(-1, 2) if elem_bytes == 16 else flat

    def check(self, case, x, y, idx, fresh):
        if not fresh:
            return "MISMATCH: result shares the source buffer"
        if list(y.shape) != case.out_shape:
            return f"MISMATCH: shape {list(y.shape)}"
        out_lin, src_lin = idx
        got, want = self.bits(y, case.elem_bytes)[out_lin], self.bits(x, case.elem_bytes)[src_lin]
        return "ok" if self.torch.equal(got, want) else "MISMATCH"

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

    def rearrange(self, case, x, idx, args):
        y = x.permute(case.perm).contiguous()
        check = self.check(case, x, y, idx, fresh=y.data_ptr() != x.data_ptr())
        del y
        ms = self.median_ms(lambda: x.permute(case.perm).contiguous(), args.warmup, args.runs)
        return gbs(case, ms), check

    def copy(self, case, x, args):
        dst = self.torch.empty_like(x)
        dst.copy_(x)
        same = self.torch.equal(self.bits(dst, case.elem_bytes), self.bits(x, case.elem_bytes))
        ms = self.median_ms(lambda: dst.copy_(x), args.warmup, args.runs)
        return gbs(case, ms), "ok" if same else "MISMATCH"

    def release(self):
        """Hands torch's cached blocks back, so that jax can grow into them."""
        self.torch.cuda.synchronize()
        self.torch.cuda.empty_cache()


class Xla:
    """Times jnp.transpose under jax.jit on the source torch made; torch checks the result."""
    name = "xla"

    def __init__(self, gpu):
        import jax
        import jax.numpy as jnp
        import numpy as np

        jax.config.update("jax_enable_x64", True)
        if jax.default_backend() != "gpu":
            raise ImportError(f"jax runs on {jax.default_backend()}, not a GPU")
        self.jax, self.jnp, self.np, self.gpu = jax, jnp, np, gpu
        self.version = jax.__version__

    def from_torch(self, case, x):
        """(jax array of x's bytes, note): zero-copy through DLPack, else a host copy."""
        try:
            xj = self.jax.dlpack.from_dlpack(x)
            same = xj.unsafe_buffer_pointer() == x.data_ptr()
            return xj, "" if same else " (dlpack copied the input)"
        except Exception as e:
            host = x.reshape(-1).view(self.gpu.torch.uint8).cpu().numpy()
            host = host.view(self.jnp.dtype(case.dtype)).reshape(case.shape)
            return self.jax.device_put(host), f" (input by device_put: dlpack {type(e).__name__})"

    def to_torch(self, case, y):
        """(torch tensor of y's bytes, note): zero-copy through DLPack, else through the host."""
        torch = self.gpu.torch
        try:
            return torch.from_dlpack(y), ""
        except Exception as e:
            host = self.np.asarray(y).reshape(-1).view(self.np.uint8).copy()
            t = torch.from_numpy(host).to(self.gpu.dev).view(getattr(torch, case.dtype)).view(list(y.shape))
            return t, f" (checked through the host: dlpack {type(e).__name__})"

    def median_ms(self, f, xj, case, args):
        for _ in range(args.warmup):
            f(xj).block_until_ready()
        # Several launches per host-timed loop hide the launch latency; outputs in flight stay bounded.
        launches = max(2, min(20, int(INFLIGHT_BYTES // max(case.bytes, 1))))
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            for _ in range(launches):
                y = f(xj)
            y.block_until_ready()
            times.append((time.perf_counter() - start) * 1e3 / launches)
            del y
        return statistics.median(times)

    def rearrange(self, case, x, idx, args):
        jnp, perm = self.jnp, tuple(case.perm)
        xj, note = self.from_torch(case, x)
        f = self.jax.jit(lambda a: jnp.transpose(a, perm))
        start = time.perf_counter()
        y = f(xj)  # compiles
        y.block_until_ready()
        case.seconds["xla compile+1"] = time.perf_counter() - start
        fresh = y.unsafe_buffer_pointer() != xj.unsafe_buffer_pointer()
        yt, note_out = self.to_torch(case, y)
        check = self.gpu.check(case, x, yt, idx, fresh) + note + note_out
        del yt, y
        ms = self.median_ms(f, xj, case, args)
        del xj
        return gbs(case, ms), check


def load_peers():
    """(Torch, Xla or None); exits when torch cannot run."""
    try:
        gpu = Torch()
    except Exception as e:
        sys.exit(f"torch cannot run here ({type(e).__name__}: {e}); it makes and checks the data")
    try:
        xla = Xla(gpu)
    except Exception as e:  # a missing or broken jax is skipped, not fatal
        print(f"xla: skipped ({type(e).__name__}: {e})", flush=True)
        xla = None
    return gpu, xla


def run_step(case, kind, fn, *fn_args):
    start = time.perf_counter()
    try:
        case.results[kind] = fn(*fn_args)
    except Exception as e:  # e.g. out of memory: report it on the line and go on
        case.results[kind] = (None, error_text(e))
    case.seconds[kind] = time.perf_counter() - start


def run_case(case, gpu, xla, args, seed):
    """Fills case.results for torch, copy and XLA, all on one source made once."""
    kinds = ["torch", "copy"] + (["xla"] if xla else [])
    start = time.perf_counter()
    try:
        x = gpu.random(case, seed)
        idx = gpu.sample(case, args.samples, seed)
    except Exception as e:
        for kind in kinds:
            case.results[kind] = (None, error_text(e))
        gpu.release()
        return
    case.seconds["data"] = time.perf_counter() - start
    run_step(case, "torch", gpu.rearrange, case, x, idx, args)
    run_step(case, "copy", gpu.copy, case, x, args)
    gpu.release()
    if xla:
        run_step(case, "xla", xla.rearrange, case, x, idx, args)
    del x, idx
    gpu.release()


def gpu_name():
    import torch

    return torch.cuda.get_device_name()


def child_main(case, index, args):
    """Child mode: runs one case and prints each step's result as a JSON line as it completes."""
    gpu, xla = load_peers()

    class Reporting(dict):
        def __setitem__(self, kind, result):
            super().__setitem__(kind, result)
            print(json.dumps({"kind": kind, "result": list(result)}), flush=True)

    case.results = Reporting()
    run_case(case, gpu, xla, args, seed=index + 1)
    print(json.dumps({"seconds": case.seconds}), flush=True)
    return 0


def child_command(index, args):
    command = [sys.executable, os.path.abspath(__file__), args.cases, "--case-index", str(index),
               "--elem-bytes", args.elem_bytes, "--warmup", str(args.warmup), "--runs", str(args.runs),
               "--samples", str(args.samples)]
    return command + (["--only", args.only] if args.only else [])


def run_case_in_child(case, index, args, kinds):
    """Fills case.results from a child process; a child past --case-seconds is killed, and the
    steps it had not reported are marked as timed out."""
    child = subprocess.Popen(child_command(index, args), stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        output, _ = child.communicate(timeout=args.case_seconds)
        failure = None if child.returncode == 0 else f"error: child exited with {child.returncode}"
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        output, _ = child.communicate()
        failure = f"timeout after {args.case_seconds:g} s"
    for line in output.splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue  # a framework's own output
        if "kind" in message:
            case.results[message["kind"]] = tuple(message["result"])
        else:
            case.seconds.update(message.get("seconds", {}))
    if failure:
        for kind in kinds:
            case.results.setdefault(kind, (None, failure))


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


def progress(i, n, case, elapsed):
    """One stderr line per case: where the run stands and where the case's time went."""
    total = sum(v for k, v in case.seconds.items() if k != "xla compile+1")  # that one is inside "xla"
    phases = ", ".join(f"{k} {v:.2f}" for k, v in case.seconds.items())
    print(f"[{i + 1}/{n}] {elapsed:.0f} s elapsed; case {total:.1f} s ({phases})", file=sys.stderr, flush=True)


def write_report(out, path, head, cases):
    if out:
        with open(os.path.join(out, "peers_random.md"), "w") as f:
            f.write(report(path, head, cases))


def main():
    started = time.monotonic()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", help="case file (rearrange_bench --random SEED --emit-cases FILE)")
    parser.add_argument("--dry-run", action="store_true", help="list the parsed cases; import no framework")
    parser.add_argument("--only", default="", help="only lines containing this text")
    parser.add_argument("--elem-bytes", default="1,2,4,8,16", help="only these element sizes")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--samples", type=int, default=1 << 16, help="elements checked per result")
    parser.add_argument("--max-seconds", type=float, default=480,
                        help="start no new case after this many seconds (from the script's start)")
    parser.add_argument("--case-seconds", type=float, default=90,
                        help="kill a case's child process after this many seconds")
    parser.add_argument("--case-index", type=int, default=None, help=argparse.SUPPRESS)  # child mode
    args = parser.parse_args()
    cases, skipped = read_cases(args.cases, args.only, {int(s) for s in args.elem_bytes.split(",")})
    if args.dry_run:
        dry_run(cases, skipped)
        return 0
    if args.case_index is not None:
        return child_main(cases[args.case_index], args.case_index, args)
    gpu, xla = load_peers()
    versions = f"torch {gpu.version}" + (f", jax {xla.version}" if xla else ", no jax")
    kinds = ["torch", "copy"] + (["xla"] if xla else [])
    head = (f"device {gpu_name()}; {versions}; {args.warmup} warm-up + {args.runs} timed runs (median); "
            f"copy baseline: torch; one random source per case, made by torch"
            f"{' and shared with XLA through DLPack' if xla else ''}; "
            f"{args.samples} sampled elements checked bitwise per result\n")
    del gpu, xla  # the cases run in child processes
    print(head, flush=True)
    print(case_table([]), end="", flush=True)
    out = os.environ.get("OUT")
    done = 0
    for i, case in enumerate(cases):
        if time.monotonic() - started >= args.max_seconds:
            break
        run_case_in_child(case, i, args, kinds)
        done += 1
        print(case_table([case]).splitlines()[-1], flush=True)
        progress(i, len(cases), case, time.monotonic() - started)
        write_report(out, args.cases, head, cases)
    status = (f"{done} of {len(cases)} cases run in {time.monotonic() - started:.0f} s"
              + (f"; {len(cases) - done} not started (--max-seconds {args.max_seconds:g})" if done < len(cases) else "")
              + "\n")
    head += "\n" + status
    write_report(out, args.cases, head, cases)
    for s in skipped:
        print(f"skipped: {s}")
    print("\n" + status + "\n" + summary_table([c for c in cases if c.results]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
