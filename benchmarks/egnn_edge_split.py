"""A measured and rejected speed-up of the EGNN layer (docs/models.md, "Training step cost
(session 9)"): the edge MLP's first linear layer on [h_i, h_j, rbf, d^2, edge features]
computed as per-node projections of h gathered per edge plus the edge terms
(W [a, b, c] = W_a a + W_b b + W_c c). Mathematically the same layer, but the sums are
rounded differently, so training would no longer be bit-identical to the previous code.

Prints the largest differences of the layer's outputs and gradients, and CPU ms of forward +
backward of both forms on one random layer (N atoms, E random edges, hidden 64, 9 edge
features as the shipped denoisers), interleaved.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/egnn_edge_split.py
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--atoms", type=int, default=2000)
    ap.add_argument("--edges", type=int, default=24000)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    if a.atoms < 2 or a.edges < 1 or a.repeats < 1:
        print("egnn_edge_split: --atoms >= 2, --edges >= 1 and --repeats >= 1", file=sys.stderr)
        return 2
    import torch

    from c2np.models.backbone import EGNNLayer, gaussian_rbf, scatter_mean, scatter_sum

    torch.set_num_threads(1)
    torch.manual_seed(0)
    H, N, E = 64, a.atoms, a.edges
    layer = EGNNLayer(H, 16, 8.0, True, edge_dim=9)
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.05 * torch.randn(p.shape))
    h0, x0, attr = torch.randn(N, H), 8 * torch.randn(N, 3), torch.rand(E, 9)
    edges = torch.stack([torch.randint(0, N, (E,)), torch.randint(0, N, (E,))])

    def split(h: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        src, dst = edges
        rel = x.index_select(0, dst) - x.index_select(0, src)
        d2 = (rel * rel).sum(-1)
        d = torch.sqrt(d2 + 1e-8)
        edge: Any = layer.edge
        lin = edge[0][0]
        W = lin.weight
        rest = torch.cat([gaussian_rbf(d, 0.0, layer.rbf_max, layer.n_rbf),
                          (d2 / layer.rbf_max ** 2).clamp(max=10).unsqueeze(-1), attr], -1)
        pre = ((h @ W[:, :H].T).index_select(0, dst) + (h @ W[:, H:2 * H].T).index_select(0, src)
               + torch.addmm(lin.bias, rest, W[:, 2 * H:].T))
        m = edge[1](edge[0][2](edge[0][1](pre)))
        x = x + scatter_mean(rel / (d + 1.0).unsqueeze(-1) * layer.coord(m), dst, x.shape[0])
        agg = scatter_sum(m, dst, h.shape[0]) / 8.0
        return layer.norm(h + layer.node(torch.cat([h, agg], -1))), x

    def run(fn: Any) -> tuple[Any, Any, Any, list[Any]]:
        h, x = h0.clone().requires_grad_(True), x0.clone().requires_grad_(True)
        layer.zero_grad()
        ho, xo = fn(h, x)
        (ho.square().sum() + xo.square().sum()).backward()
        return ho.detach(), xo.detach(), h.grad, [p.grad.clone() for p in layer.parameters() if p.grad is not None]

    forms = {"concat (shipped)": lambda h, x: layer(h, x, edges, attr), "split (rejected)": split}
    (ha, xa, ga, pa), (hb, xb, gb, pb) = (run(f) for f in forms.values())
    rel = max(float((p - q).abs().max() / p.abs().max().clamp(min=1e-12)) for p, q in zip(pa, pb, strict=True))
    print(f"max |dh| {float((ha - hb).abs().max()):.2e}  max |dx| {float((xa - xb).abs().max()):.2e}  "
          f"max |d grad h| {float((ga - gb).abs().max()):.2e}  max relative d grad(weights) {rel:.2e}")
    cpu: dict[str, list[float]] = {k: [] for k in forms}
    for _ in range(a.repeats):
        for name, fn in forms.items():
            t = time.process_time()
            for _ in range(5):
                run(fn)
            cpu[name].append((time.process_time() - t) / 5 * 1000)
    for name, ms in cpu.items():
        print(f"{name:18s} forward + backward CPU ms: {', '.join(f'{v:.1f}' for v in ms)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
