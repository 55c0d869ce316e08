"""Cost per optimiser step of a whole default fit, against bare batched torch loops over the
same networks (issue 33's yardstick).

A default ``MTSGDMultiTaskClassifier`` fit (a noisy linear boundary in 10 features; one task,
and two tasks for the QP's share): its wall time divided by the optimiser steps it took
(validation passes, callbacks, early stopping and the final calibration included), at 1,000
rows (batches of 64) and 20,000 rows (``batch_size='auto'``: 512). Bare loops over the
same five networks (``MLPTrunk`` 64-64 and one linear head per task), Adam at 1e-3, batches
of the fit's size sliced from tensors in memory, no validation, one cross-entropy per task:

* ``vmap``: the networks evaluated in one ``vmap`` / ``functional_call`` (the loop the issue
  measured against);
* ``bmm``: the same networks as one batched matrix product per layer, what the estimators'
  own forward does for plain dense networks (so the fairest denominator);
* ``per-task`` (two tasks only): the ``bmm`` loop with each task's gradient taken by its own
  backward pass and the gradients summed: the least any method that reads every task's
  gradient separately pays (MT-SGD's QP, MGDA, PCGrad), where the other loops take one
  backward pass of the summed loss.

All in this process, one thread, interleaved ``--repeats`` times; the table gives medians.

Run: ``python benchmarks/bench_step_cost.py [--repeats 3]`` (about three minutes). Writes
``docs/benchmarks/step_cost.md`` and ``step_cost.json``.

``--function-kernel [--fk-rows N]`` measures default ``MTSGDRegressor`` fits (the
function-space kernel) with the repulsion pulled back by batched products or by autograd
(:func:`function_kernel_main`), and replaces that section of the page.

``--l2e [--baseline PATH]`` measures a default ``L2ESamplerClassifier`` fit instead (one task,
1,000 and 20,000 rows): milliseconds and minor page faults per sampler step, each fit in a
fresh process after a 300-row warm-up fit (a user's first fit; the allocator's state depends
on what the process did before), against the same in the source tree at ``PATH`` (e.g. a
``git worktree`` of an older commit). It replaces the L2E section of the page and keeps the
rest.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.func import functional_call, stack_module_state, vmap  # noqa: E402

from sklmoo import MTSGDMultiTaskClassifier  # noqa: E402
from sklmoo.nn import MLPTrunk, TrunkClassifier  # noqa: E402
from sklmoo.nn._trunks import dense_forward, dense_plan  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MD = os.path.join(ROOT, "docs", "benchmarks", "step_cost.md")
JSON = os.path.join(ROOT, "docs", "benchmarks", "step_cost.json")
D, M = 10, 5


def data(n, tasks=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D)).astype(np.float32)
    y = np.stack([(X[:, t] + 0.5 * rng.normal(size=n) > 0) for t in range(tasks)], 1)
    return X, y.astype(int)[:, 0] if tasks == 1 else y.astype(int)


def bare_step_seconds(X, y, steps, batch, forward="vmap", per_task=False):
    """Seconds per step of the bare loop (see the module docstring); ``per_task``: each
    task's gradient taken by its own backward pass, then summed."""
    torch.manual_seed(0)
    Y = y[:, None] if y.ndim == 1 else y
    tasks = Y.shape[1]
    nets = [TrunkClassifier(MLPTrunk(D), 2 * tasks) for _ in range(M)]
    params, buffers = stack_module_state(nets)
    params = {k: v.detach().requires_grad_() for k, v in params.items()}
    skeleton, plan = nets[0], dense_plan(nets[0])
    optimizer = torch.optim.Adam(params.values(), lr=1e-3)
    Xt, Yt = torch.as_tensor(X), torch.as_tensor(Y)

    def one(p, b, x):
        return functional_call(skeleton, (p, b), (x,))

    def evaluate(x):
        if forward == "vmap":
            return vmap(one, in_dims=(0, 0, None))(params, buffers, x)
        return dense_forward(plan, params, x, M)

    n, generator, done = len(X), torch.Generator().manual_seed(0), 0
    start = time.perf_counter()
    while done < steps:
        order = torch.randperm(n, generator=generator)
        for s in range(0, n, batch):
            index = order[s:s + batch]
            out = evaluate(Xt[index])                                     # (M, b, 2 T)
            target = Yt[index]
            losses = [torch.nn.functional.cross_entropy(
                out[..., 2 * t:2 * t + 2].reshape(-1, 2), target[:, t].repeat(M))
                for t in range(tasks)]
            optimizer.zero_grad()
            if per_task:
                leaves = list(params.values())
                grads = [torch.autograd.grad(loss, leaves, retain_graph=t < tasks - 1)
                         for t, loss in enumerate(losses)]
                for leaf, *parts in zip(leaves, *grads):
                    leaf.grad = torch.stack(parts).sum(0)
            else:
                sum(losses).backward()
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
    return seconds / steps, steps, len(clf.history), clf.batch_size_


def l2e_child(rows):
    """One default L2E fit on ``rows`` rows after a warm-up fit, in this process: prints its
    seconds, sampler steps and minor page faults as JSON."""
    import resource

    from sklmoo import L2ESamplerClassifier

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    L2ESamplerClassifier(random_state=0, max_epochs=2).fit(*data(300))
    X, y = data(rows)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    clf = L2ESamplerClassifier(random_state=0).fit(X, y)
    seconds = time.perf_counter() - start
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    steps = sum(epoch["train_batch_count"] for epoch in clf.history)
    print(json.dumps(dict(seconds=seconds, steps=steps, faults=faults)))


def l2e_run(tree, rows):
    """:func:`l2e_child` in a fresh process importing sklmoo from ``tree``."""
    env = dict(os.environ, PYTHONPATH=tree)
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--l2e-child", str(rows)],
                         env=env, cwd="/tmp", capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def l2e_main(args):
    trees = {"this code": ROOT}
    if args.baseline:
        trees["baseline"] = os.path.abspath(args.baseline)
    results = []
    for rows in args.rows:
        runs = {name: [] for name in trees}
        for _ in range(args.repeats):                    # interleaved
            for name, tree in trees.items():
                runs[name].append(l2e_run(tree, rows))
        row = dict(rows=rows, steps=runs["this code"][0]["steps"])
        for name, rs in runs.items():
            row[name] = dict(ms=float(np.median([1e3 * r["seconds"] / r["steps"] for r in rs])),
                             faults=float(np.median([r["faults"] / r["steps"] for r in rs])),
                             commit=_commit(trees[name]))
        results.append(row)
        print(row, flush=True)
    saved = json.loads(open(JSON).read()) if os.path.exists(JSON) else {}
    saved["l2e"] = dict(repeats=args.repeats, results=results)
    write(saved)


def function_kernel_main(args):
    """``--function-kernel``: default ``MTSGDRegressor`` fits (the function-space kernel up to
    8,192 training rows) on ``--fk-rows`` rows of a non-linear target in 10 features, the
    repulsion pulled back by batched products (trunk and heads), the trunk's only, or by
    autograd's batched backward pass (both pull-backs switched off), interleaved in this
    process: milliseconds per optimiser step of the whole fit."""
    from sklmoo import MTSGDRegressor
    from sklmoo.nn import MultiTaskParticleNet

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    trunk, head = MultiTaskParticleNet.trunk_pullback, MultiTaskParticleNet.head_pullback
    routes = {"batched products": (trunk, head), "trunk only": (trunk, lambda *a: None),
              "autograd": (lambda *a: None, lambda *a: None)}
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.fk_rows, D)).astype(np.float32)
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.3 * rng.normal(size=args.fk_rows)
    MTSGDRegressor(random_state=0, max_epochs=1).fit(X[:300], y[:300])          # warm-up
    runs = {name: [] for name in routes}
    try:
        for _ in range(args.repeats):
            for name, (t, h) in routes.items():
                MultiTaskParticleNet.trunk_pullback, MultiTaskParticleNet.head_pullback = t, h
                start = time.perf_counter()
                est = MTSGDRegressor(random_state=0).fit(X, y)
                seconds = time.perf_counter() - start
                steps = sum(epoch["train_batch_count"] for epoch in est.history)
                runs[name].append(1e3 * seconds / steps)
    finally:
        MultiTaskParticleNet.trunk_pullback, MultiTaskParticleNet.head_pullback = trunk, head
    result = dict(rows=args.fk_rows, repeats=args.repeats, commit=_commit(ROOT),
                  ms={n: float(np.median(v)) for n, v in runs.items()},
                  best={n: float(np.min(v)) for n, v in runs.items()})
    print(result, flush=True)
    saved = json.loads(open(JSON).read()) if os.path.exists(JSON) else {}
    saved["function_kernel"] = result
    write(saved)


def _commit(tree):
    return subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip() or "unknown"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", type=int, nargs="+", default=[1000, 20000])
    parser.add_argument("--l2e", action="store_true")
    parser.add_argument("--baseline")
    parser.add_argument("--l2e-child", type=int)
    parser.add_argument("--function-kernel", action="store_true")
    parser.add_argument("--fk-rows", type=int, default=2000)
    args = parser.parse_args()
    if args.l2e_child:
        return l2e_child(args.l2e_child)
    if args.l2e:
        return l2e_main(args)
    if args.function_kernel:
        return function_kernel_main(args)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    MTSGDMultiTaskClassifier(random_state=0, max_epochs=1).fit(*data(200))    # imports, warm-up
    results = []
    for n in args.rows:
        for tasks in (1, 2):
            X, y = data(n, tasks)
            runs = []
            for _ in range(args.repeats):
                fit, steps, epochs, batch = estimator_step_seconds(X, y)
                bare = {f: bare_step_seconds(X, y, min(steps, 600), batch, f)
                        for f in ("vmap", "bmm")}
                if tasks > 1:
                    bare["per_task"] = bare_step_seconds(X, y, min(steps, 600), batch, "bmm",
                                                         per_task=True)
                runs.append(dict(fit=fit, steps=steps, epochs=epochs, batch=batch, **bare))
            row = dict(rows=n, tasks=tasks, batch=runs[0]["batch"], steps=runs[0]["steps"],
                       epochs=runs[0]["epochs"],
                       **{k: float(np.median([r[k] for r in runs]))
                          for k in ("fit", "vmap", "bmm")})
            row["ratio_vmap"] = float(np.median([r["fit"] / r["vmap"] for r in runs]))
            row["ratio_bmm"] = float(np.median([r["fit"] / r["bmm"] for r in runs]))
            if tasks > 1:
                row["per_task"] = float(np.median([r["per_task"] for r in runs]))
                row["ratio_per_task"] = float(np.median([r["fit"] / r["per_task"]
                                                         for r in runs]))
            results.append(row)
            print(row, flush=True)
    saved = json.loads(open(JSON).read()) if os.path.exists(JSON) else {}
    saved.update(commit=_commit(ROOT), repeats=args.repeats, results=results)
    write(saved)


def write(saved):
    """The page from the saved results (the MT-SGD table, and L2E's when measured)."""
    from sklmoo._io import atomic_write_text

    repeats = saved.get("repeats", 3)
    lines = ["# Step cost of a default fit", "",
             f"`python benchmarks/bench_step_cost.py --repeats {repeats}` (code "
             f"{saved['commit']}, torch {torch.__version__}, one thread; medians of {repeats} "
             "interleaved runs). Milliseconds per optimiser step; a fit's time includes its "
             "validation passes, callbacks, early stopping and calibration.", "",
             "| rows | tasks | batch | steps (epochs) | default fit | vmap loop | "
             "bmm loop | per-task loop | fit / vmap | fit / bmm | fit / per-task |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in saved["results"]:
        per_task = (f"{1e3 * r['per_task']:.2f} | " if "per_task" in r else "- | ")
        lines.append(f"| {r['rows']:,} | {r['tasks']} | {r['batch']} | {r['steps']} "
                     f"({r['epochs']}) | {1e3 * r['fit']:.2f} | {1e3 * r['vmap']:.2f} | "
                     f"{1e3 * r['bmm']:.2f} | {per_task}{r['ratio_vmap']:.2f}x | "
                     f"{r['ratio_bmm']:.2f}x | "
                     + (f"{r['ratio_per_task']:.2f}x |" if "ratio_per_task" in r else "- |"))
    if "l2e" in saved:
        l2e = saved["l2e"]
        names = list(l2e["results"][0].keys() - {"rows", "steps"})
        names.sort(key=lambda n: n != "this code")
        label = {n: f"{n} ({l2e['results'][0][n]['commit']})" for n in names}
        command = "python benchmarks/bench_step_cost.py --l2e" + (
            f" --repeats {l2e['repeats']}" if l2e["repeats"] != 3 else "") + (
            " --baseline PATH" if len(names) > 1 else "")
        lines += ["", "## L2E", "",
                  f"`{command}`: a default `L2ESamplerClassifier` fit, one task, each in a "
                  f"fresh process after a 300-row warm-up fit; medians of {l2e['repeats']} "
                  "interleaved runs. Milliseconds and minor page faults per sampler step.", "",
                  "| rows | steps | " + " | ".join(f"{label[n]}: ms | faults" for n in names)
                  + " |", "|---|---|" + "---|---|" * len(names)]
        for r in l2e["results"]:
            lines.append(f"| {r['rows']:,} | {r['steps']} | " + " | ".join(
                f"{r[n]['ms']:.2f} | {r[n]['faults']:.0f}" for n in names) + " |")
    if "function_kernel" in saved:
        fk = saved["function_kernel"]
        command = "python benchmarks/bench_step_cost.py --function-kernel" + (
            f" --repeats {fk['repeats']}" if fk["repeats"] != 3 else "") + (
            f" --fk-rows {fk['rows']}" if fk["rows"] != 2000 else "")
        base = fk["ms"]["autograd"]
        lines += ["", "## Function kernel (MTSGDRegressor)", "",
                  f"`{command}` (code {fk['commit']}): default `MTSGDRegressor` fits on "
                  f"{fk['rows']:,} rows of a non-linear target in {D} features, whose "
                  "function-space repulsion is pulled back to the parameters by batched "
                  "products (trunk and heads), by them for the trunk only, or by autograd's "
                  f"batched backward pass; interleaved, medians (best) of {fk['repeats']}. "
                  "Milliseconds per optimiser step of the whole fit.", "",
                  "| repulsion pulled back by | ms per step | best | / autograd |",
                  "|---|---|---|---|"]
        for name, ms in fk["ms"].items():
            lines.append(f"| {name} | {ms:.2f} | {fk['best'][name]:.2f} | {ms / base:.2f} |")
    atomic_write_text(MD, "\n".join(lines) + "\n")
    atomic_write_text(JSON, json.dumps(saved, indent=1))


if __name__ == "__main__":
    main()
