"""A llama-style decode loop: config -> rope tables -> rope of q and k at every step, inside a
torch.compile'd attention block (no graph break), checked against plain PyTorch.

    python examples/python/llama_decode.py [--steps N] [--batch B]

Needs torch and a CUDA GPU. The config is Llama 3.1 8B's rope part (a transformers config object
or its dict works the same: shapejit.rope_tables_from_config reads either).
"""

import argparse
from types import SimpleNamespace

import torch

import shapejit

LLAMA31_8B = SimpleNamespace(
    hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
    max_position_embeddings=131072, rope_theta=500000.0,
    rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})


def torch_rope(x, cos, sin, positions):
    """The plain PyTorch (NeoX, half-split) rope the model code would run."""
    c = cos[positions].unsqueeze(-2).float()
    s = sin[positions].unsqueeze(-2).float()
    half = x.shape[-1] // 2
    x0, x1 = x[..., :half].float(), x[..., half:].float()
    return torch.cat([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).to(x.dtype)


def attention_step(q, k, v, cache_k, cache_v, positions, cos, sin):
    """One decode step, each sequence's new token at its position: rotate the new q and k, write k
    and v into the cache at that position, attend over the cache entries up to it. Shapes never
    change from step to step, so the compiled graph is reused."""
    q, k = shapejit.rope(q, k, cos=cos, sin=sin, positions=positions)
    slot = positions[:, 0]
    batch = torch.arange(q.shape[0], device=q.device)
    cache_k[batch, slot] = k[:, 0]
    cache_v[batch, slot] = v[:, 0]
    keys = cache_k.repeat_interleave(q.shape[2] // k.shape[2], dim=2)
    values = cache_v.repeat_interleave(q.shape[2] // k.shape[2], dim=2)
    scores = torch.einsum("bshd,bthd->bhst", q.float(), keys.float()) / q.shape[-1] ** 0.5
    visible = torch.arange(cache_k.shape[1], device=q.device)[None, :] <= slot[:, None]
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    return torch.einsum("bhst,bthd->bshd", scores.softmax(-1), values.float()).to(q.dtype), q, k


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--batch", type=int, default=4)
    args = parser.parse_args()
    c = LLAMA31_8B
    heads, kv_heads, dim = c.num_attention_heads, c.num_key_value_heads, c.head_dim
    cos, sin = shapejit.rope_tables_from_config(c, rows=4096, dtype="f32", device="cuda")
    print(f"tables: {tuple(cos.shape)} {cos.dtype} (rope type {c.rope_scaling['rope_type']})")

    cache_k = torch.zeros(args.batch, args.steps, kv_heads, dim, device="cuda", dtype=torch.bfloat16)
    cache_v = torch.zeros_like(cache_k)
    step_fn = torch.compile(attention_step, fullgraph=True)
    worst = 0.0
    for step in range(args.steps):
        q = torch.randn(args.batch, 1, heads, dim, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(args.batch, 1, kv_heads, dim, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        positions = torch.full((args.batch, 1), step, device="cuda", dtype=torch.int64)
        _, q_rot, k_rot = step_fn(q, k, v, cache_k, cache_v, positions, cos, sin)
        for got, x in ((q_rot, q), (k_rot, k)):
            worst = max(worst, (got.float() - torch_rope(x, cos, sin, positions).float()).abs().max().item())
    print(f"{args.steps} decode steps, batch {args.batch}: q {heads} heads, k {kv_heads} heads; "
          f"largest difference from PyTorch {worst:.3g}")
    assert worst <= 0.02, "rope differs from the PyTorch reference"
    print(f"JIT counters: {shapejit.counters()}")


if __name__ == "__main__":
    main()
