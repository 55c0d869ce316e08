"""Cost per optimiser step of a whole default fit, against a bare batched torch loop over the
same networks (issue 33's yardstick).

A default ``MTSGDMultiTaskClassifier`` fit on 1,000 x 10 (a noisy linear boundary): its wall
time divided by the optimiser steps it took (validation passes, callbacks, early stopping and
the final calibration included). The baseline is a bare loop over the same five networks
(``MLPTrunk`` 64-64 and a linear head, evaluated in one ``vmap`` / ``functional_call``),
Adam at 1e-3, batches of 64 sliced from tensors in memory, no validation. Both run in this
process, one thread, interleaved ``--repeats`` times; the ratio is what the issue bounds
(1.5x).

Run: ``python benchmarks/bench_step_cost.py [--repeats 3]`` (about a minute); prints the
table.
"""

import argparse
import time
import warnings

import numpy as np
import torch
from torch.func import functional_call, stack_module_state, vmap

from sklmoo import MTSGDMultiTaskClassifier
from sklmoo.nn import MLPTrunk

N, D, M, BATCH = 1000, 10, 5, 64


def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D)).astype(np.float32)
    return X, (X[:, 0] + 0.5 * rng.normal(size=N) > 0).astype(int)


def bare_step_seconds(X, y, steps):
    torch.manual_seed(0)
    nets = [torch.nn.Sequential(MLPTrunk(D), torch.nn.Linear(64, 2)) for _ in range(M)]
    params, buffers = stack_module_state(nets)
    params = {k: v.detach().requires_grad_() for k, v in params.items()}
    skeleton = nets[0]
    optimizer = torch.optim.Adam(params.values(), lr=1e-3)
    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)

    def one(p, b, x):
        return functional_call(skeleton, (p, b), (x,))

    generator, done = torch.Generator().manual_seed(0), 0
    start = time.perf_counter()
    while done < steps:
        order = torch.randperm(N, generator=generator)
        for s in range(0, N, BATCH):
            index = order[s:s + BATCH]
            out = vmap(one, in_dims=(0, 0, None))(params, buffers, Xt[index])   # (M, b, 2)
            loss = torch.nn.functional.cross_entropy(out.reshape(-1, 2), yt[index].repeat(M))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            done += 1
            if done == steps:
                break
    return (time.perf_counter() - start) / steps


def estimator_step_seconds(X, y):
    clf = MTSGDMultiTaskClassifier(random_state=0)
    start = time.perf_counter()
    clf.fit(X, y)
    seconds = time.perf_counter() - start
    steps = sum(epoch["train_batch_count"] for epoch in clf.history)
    return seconds / steps, steps, len(clf.history)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    X, y = data()
    print("| repeat | bare loop ms / step | default fit ms / step | steps (epochs) | ratio |")
    print("|---|---|---|---|---|")
    ratios = []
    for r in range(args.repeats):
        bare = bare_step_seconds(X, y, 800)
        fit, steps, epochs = estimator_step_seconds(X, y)
        ratios.append(fit / bare)
        print(f"| {r} | {1e3 * bare:.2f} | {1e3 * fit:.2f} | {steps} ({epochs}) | "
              f"{fit / bare:.2f} |")
    print(f"\nmedian ratio {np.median(ratios):.2f}")


if __name__ == "__main__":
    main()
