#!/usr/bin/env python3
"""Writes tests/data/torch_kernels.json: torch's values for the numerics the CPU tests pin
(tests/test_torch_kernels.c), computed by this file's own torch forms of SPEC 2-3 and 5 as
DeepSeek's inference/kernel.py and model.py compute them:

  act_quant      blocks of 32, amax floored at 1e-4, ue8m0 scale 2^ceil(log2(amax * f32(1/448))) from
                 the IEEE fields, x / s clamped to +-448 and cast to float8_e4m3fn (RNE);
  fp8 linear     act_quant of x, then per 32-wide K block in order acc += (xq_k . wq_k) * sx_k * ws_k,
                 weight scales e8m0 of 32x32 or 128x128 blocks, y = bf16(acc);
  sparse attn    online softmax over blocks of 64 idx entries from m = -1e30, f32 probabilities into the
                 denominator, bf16 ones into P.V, the sink added once at the end;
  rmsnorm        model.py's RMSNorm with a bf16 weight parameter loaded from an f32 tensor;
  topk           torch.topk(sorted=False) on the rows of tests/torch/topk_depth_limit_rows.json, which
                 drive libstdc++'s introselect to its depth limit.

Run where torch is (the GPU machine has it): python3 tests/torch/make_fixtures.py OUT.json
"""
import json
import math
import os
import sys

import torch

torch.manual_seed(20261201)
HERE = os.path.dirname(os.path.abspath(__file__))


def bf16_bits(t):
    return (t.to(torch.bfloat16).contiguous().view(torch.int16).to(torch.int32) & 0xFFFF).flatten().tolist()


def f32_bits(t):
    return t.float().contiguous().view(torch.int32).flatten().tolist()


def u8(t):
    return t.contiguous().view(torch.uint8).flatten().tolist()


def pow2_ceil(v):
    """2^(e + (mantissa != 0)) of a positive normal f32, from the fields."""
    b = v.float().contiguous().view(torch.int32)
    e, m = (b >> 23) & 0xFF, b & 0x7FFFFF
    return ((e + (m != 0).to(torch.int32)) << 23).view(torch.float32)


INV448 = torch.tensor(1.0 / 448.0, dtype=torch.float32)


def act_quant(x):
    xg = x.float().unflatten(-1, (-1, 32))
    amax = xg.abs().amax(-1).clamp_min(1e-4)
    s = pow2_ceil(amax * INV448)
    q = (xg / s.unsqueeze(-1)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return q.flatten(-2), s


def e8m0_value(b):
    return torch.pow(torch.tensor(2.0, dtype=torch.float64), b.to(torch.float64) - 127).float()


def fp8_linear(x, codes, sbytes, block):
    n, k = codes.shape
    xq, sx = act_quant(x)
    wq = codes.view(torch.float8_e4m3fn).float()
    ws = e8m0_value(sbytes).repeat_interleave(block, 0)[:n].repeat_interleave(block // 32, 1)[:, : k // 32]
    acc = torch.zeros(x.shape[0], n, dtype=torch.float32)
    for kb in range(k // 32):
        sl = slice(kb * 32, (kb + 1) * 32)
        acc = acc + (xq[:, sl].float() @ wq[:, sl].T) * sx[:, kb : kb + 1] * ws[:, kb].unsqueeze(0)
    return xq, sx, acc.to(torch.bfloat16)


def fp8_case(m, k, n, block, mags):
    x = torch.empty(m, k)
    for t in range(m):
        for b in range(k // 32):
            x[t, b * 32 : (b + 1) * 32] = (torch.rand(32) * 2 - 1) * mags[(t + b) % len(mags)]
    x = x.to(torch.bfloat16)
    x[0, 0] = 448.0 * 2.0**-3  # a block whose amax / 448 is a power of two: its top maps to 448
    codes = torch.randint(0, 256, (n, k), dtype=torch.uint8)
    codes[(codes & 0x7F) == 0x7F] = 0x7E  # no NaN codes
    sbytes = torch.randint(118, 128, ((n + block - 1) // block, (k + block - 1) // block), dtype=torch.uint8)
    xq, sx, y = fp8_linear(x, codes, sbytes, block)
    return {"m": m, "k": k, "n": n, "block": block, "x": bf16_bits(x), "w": u8(codes), "ws": u8(sbytes),
            "xq": u8(xq), "sx": f32_bits(sx), "y": bf16_bits(y)}


def sparse_attn(q, rows, idx, sink, scale):
    s, nh, hd = q.shape
    topk = idx.shape[1]
    qf, rf = q.float(), rows.float()
    out = torch.zeros(s, nh, hd)
    for t in range(s):
        m = torch.full((nh,), -1e30)
        den = torch.zeros(nh)
        acc = torch.zeros(nh, hd)
        for b0 in range(0, topk, 64):
            ids = idx[t, b0 : b0 + 64].long()
            valid = ids != -1
            kb = rf[ids.clamp_min(0)] * valid.unsqueeze(-1)
            z = torch.where(valid.unsqueeze(0), qf[t] @ kb.T, torch.tensor(-math.inf)) * scale
            m_new = torch.maximum(m, z.amax(-1))
            c = torch.exp(m - m_new)
            p = torch.exp(z - m_new.unsqueeze(-1))
            den = den * c + p.sum(-1)
            acc = acc * c.unsqueeze(-1) + p.to(torch.bfloat16).float() @ kb
            m = m_new
        den = den + torch.exp(sink - m)
        out[t] = acc / den.unsqueeze(-1)
    return out.to(torch.bfloat16)


def attn_case(note, s, nh, hd, nrows, topk, idx_fn, q_scale=0.3, sink_scale=1.0):
    q = ((torch.rand(s, nh, hd) * 2 - 1) * q_scale).to(torch.bfloat16)
    rows = (torch.rand(nrows, hd) * 2 - 1).to(torch.bfloat16)
    sink = (torch.rand(nh) * 2 - 1) * sink_scale
    idx = torch.tensor([[idx_fn(t, c) for c in range(topk)] for t in range(s)], dtype=torch.int32)
    scale = float(torch.tensor(hd ** -0.5, dtype=torch.float32))
    o = sparse_attn(q, rows, idx, sink, scale)
    return {"note": note, "s": s, "nh": nh, "hd": hd, "nrows": nrows, "topk": topk, "scale": f32_bits(torch.tensor([scale]))[0],
            "q": bf16_bits(q), "rows": bf16_bits(rows), "idx": idx.flatten().tolist(), "sink": f32_bits(sink), "o": bf16_bits(o)}


def attention_cases():
    g = torch.Generator().manual_seed(7)
    rnd = lambda n: int(torch.randint(0, n, (1,), generator=g))
    cases = [
        attn_case("random rows, a few -1, 3 blocks", 3, 4, 64, 200, 150, lambda t, c: -1 if (c * 7 + t) % 11 == 0 else rnd(200)),
        attn_case("exactly 64 entries", 2, 4, 64, 100, 64, lambda t, c: rnd(100)),
        attn_case("65 entries: a block of one", 2, 4, 64, 100, 65, lambda t, c: rnd(100)),
        attn_case("1 entry", 2, 4, 64, 10, 1, lambda t, c: rnd(10)),
        attn_case("all -1 rows", 2, 4, 64, 10, 70, lambda t, c: -1 if t == 0 else rnd(10)),
        attn_case("a whole block of -1 between two", 1, 8, 128, 300, 192, lambda t, c: -1 if 64 <= c < 128 else rnd(300)),
        attn_case("prefill window: -1 past the query", 5, 4, 64, 5, 5, lambda t, c: c if c <= t else -1),
        attn_case("the flash head width", 1, 8, 512, 130, 130, lambda t, c: c),
        attn_case("large sinks", 2, 4, 64, 80, 80, lambda t, c: c, sink_scale=6.0),
    ]
    # the running max jumps in a later block: block 0 low scores, block 1 a row aligned with q
    s, nh, hd = 1, 2, 64
    q = ((torch.rand(s, nh, hd) * 2 - 1)).to(torch.bfloat16)
    rows = ((torch.rand(129, hd) * 2 - 1) * 0.05).to(torch.bfloat16)
    rows[128] = (q[0, 0].float() * 4).to(torch.bfloat16)
    idx = torch.arange(129, dtype=torch.int32).unsqueeze(0)
    sink = torch.zeros(nh)
    scale = float(torch.tensor(hd ** -0.5, dtype=torch.float32))
    o = sparse_attn(q, rows, idx, sink, scale)
    cases.append({"note": "the running max jumps in the last block", "s": s, "nh": nh, "hd": hd, "nrows": 129, "topk": 129,
                  "scale": f32_bits(torch.tensor([scale]))[0], "q": bf16_bits(q), "rows": bf16_bits(rows),
                  "idx": idx.flatten().tolist(), "sink": f32_bits(sink), "o": bf16_bits(o)})
    return cases


def rmsnorm_case(rows, n, eps):
    x = (torch.randn(rows, n) * 3).to(torch.bfloat16)
    w = torch.rand(n) * 2  # f32 values that bf16 does not hold
    xf = x.float()
    y = (w.to(torch.bfloat16) * (xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps))).to(torch.bfloat16)
    return {"rows": rows, "n": n, "eps": eps, "x": bf16_bits(x), "w": f32_bits(w), "y": bf16_bits(y)}


def topk_cases():
    with open(os.path.join(HERE, "topk_depth_limit_rows.json")) as f:
        rows = json.load(f)["rows"]
    out = []
    for r in rows:
        v = torch.tensor(r["values"], dtype=torch.float32)
        order = torch.topk(v, r["k"], largest=True, sorted=False).indices
        out.append({"n": r["n"], "k": r["k"], "values": r["values"], "unsorted_order": order.tolist(),
                    "set": sorted(order.tolist())})
    return out


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "data", "torch_kernels.json")
    doc = {
        "source": "tests/torch/make_fixtures.py, torch %s (CPU)" % torch.__version__,
        "fp8_linear": [fp8_case(3, 320, 96, 32, [2.0**-16, 1e-5, 0.5, 3.0, 60.0]), fp8_case(2, 256, 160, 128, [0.01, 1.0, 8.0]),
                       fp8_case(4, 64, 40, 32, [1.0, 2.0**-20])],
        "sparse_attn": attention_cases(),
        "rmsnorm": [rmsnorm_case(3, 64, 1e-20), rmsnorm_case(2, 512, 1e-20)],
        "topk_depth_limit": topk_cases(),
    }
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    print("wrote", path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
