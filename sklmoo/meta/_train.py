"""Meta-training of the L2E meta-sampler with antithetic ES (the paper's Algorithm 1)."""

import copy
import json
import math
import pathlib
import pickle
import signal
import sys
import time
import warnings

import numpy as np
import torch

from .. import __version__
from .._io import (ArchiveTooLargeError, DirectoryInUseError, DirectoryLock, atomic_write,
                   atomic_write_text, backed_by_storage, check_torch_archive, read_json,
                   remove_stale_temporaries, tensor_bytes, tensors_in)
from ..samplers import MetaSampler
from ..samplers._l2e import GRADIENT_DECAYS
from ._es import antithetic_es_gradient
from ._inner import bma_meta_loss, ce_meta_loss, make_l2e, run_chains
from ._tasks import TaskDistribution

PRETRAINED = pathlib.Path(__file__).parent / "pretrained" / "l2e_default.npz"
#: what a run writes in its directory: the checkpoint (the run's record) and the files derived
#: from it
OUTPUTS = ("checkpoint.pt", "l2e_meta.npz", "l2e_meta.json", "curve.json")
_STATE_KEYS = ("phi", "optimizer", "step", "curve", "config", "rng", "generator")
#: keys a checkpoint may lack: checkpoints of earlier versions do not hold them
_OPTIONAL_KEYS = ("torch_rng", "sklmoo_version")
#: what a checkpoint may hold beyond the trainer's tensors: the pickled structure (slack) and
#: one meta-loss curve entry per outer step (about 60 bytes each)
_CHECKPOINT_SLACK = 2 ** 20
_CURVE_ENTRY_BYTES = 1024


def load_default_meta_sampler():
    """The meta-sampler sklmoo trained and ships (see its card: ``.card``).

    Examples
    --------
    >>> from sklmoo.meta import load_default_meta_sampler
    >>> meta = load_default_meta_sampler()
    >>> "config" in meta.card                      # how it was trained
    True
    """
    if not PRETRAINED.exists():
        raise FileNotFoundError(f"no shipped meta-sampler at {PRETRAINED}")
    return MetaSampler.load(PRETRAINED)


#: the largest seed a meta-training run takes (numpy's and torch's generators take it)
MAX_SEED = 2 ** 63 - 1


def warm_start(meta, kappa_momentum=5.0, kappa_gradient=20.0, n_iter=400, seed=0):
    """Fit the MLP by regression to a hand-designed sampler before ES: ``alpha = 0`` and
    ``beta = kappa_momentum * r_hat - kappa_gradient * m_hat(0.9)`` on standard-normal features
    (normalised momentum plus a normalised gradient average), so that the first inner loops
    already move the parameters; ES then reshapes it.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.meta import warm_start
    >>> from sklmoo.samplers import MetaSampler
    >>> meta = warm_start(MetaSampler(), n_iter=50)
    >>> meta(torch.zeros(3, 9)).shape
    torch.Size([3, 2])
    """
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(meta.parameters(), lr=3e-3)
    i_m09 = 3 + GRADIENT_DECAYS.index(0.9)
    for _ in range(n_iter):
        x = torch.randn(4096, 9, generator=gen)
        target = torch.stack([torch.zeros(len(x)),
                              kappa_momentum * x[:, 2] - kappa_gradient * x[:, i_m09]], dim=1)
        loss = ((meta(x) - target) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return meta


def chain_group_losses(task, weights, chain_seeds, init_seed, batch_seed, config):
    """Meta-losses of the chains with meta-parameters ``weights`` (a weights dict whose tensors
    have one leading row per chain, :meth:`MetaSampler.unflatten`) on ``task``: one unit of an
    outer step's work, run in this process or on a Dask worker.

    Every chain draws its sampler noise from its own seed, the network initialisation and the
    mini-batch order come from seeds shared by the outer step: a chain's loss therefore does
    not depend on which chains are batched with it (up to float rounding), so the meta-sampler
    is the same however the pairs are split over workers.
    """
    sampler = make_l2e(weights, task, config["step_size"], config["temperature"])
    noise = [torch.Generator().manual_seed(int(s)) for s in chain_seeds]
    logp = run_chains(task, sampler, len(chain_seeds), config["inner_steps"],
                      batch_size=config["batch_size"], n_samples=config["n_samples"],
                      generator=torch.Generator().manual_seed(int(batch_seed)),
                      noise_generators=noise, init_seed=init_seed)
    return (bma_meta_loss if config["meta_loss"] == "bma" else ce_meta_loss)(logp)


class MetaTrainer:
    """State and loop of L2E meta-training; checkpointable and resumable.

    Parameters
    ----------
    tasks : TaskDistribution
    inner_steps : int, default=600
    n_pairs : int, default=4
        Antithetic pairs per outer step (2 x n_pairs chains run batched).
    sigma : float, default=0.01
    lr : float, default=0.01
    clip : float, default=1.0
        Gradient-norm clip of the ES estimate.
    meta_loss : {'bma', 'ce'}, default='bma'
    step_size, temperature : float
        Inner-loop sampler settings.
    seed : int, default=0
        Seeds every draw of the run (0 to 2**63 - 1); construction also seeds torch's global
        generator with it, so that a resumed run continues the same stream.
    client : dask.distributed.Client, optional
        Evaluate the antithetic pairs of every outer step on the cluster's workers (each job
        runs ``pairs_per_job`` pairs). Every chain has its own noise stream and all chains of
        a step share the initialisation and mini-batches, so the meta-sampler is the same as
        a local run with the same seed up to float rounding, however the pairs are split.
    pairs_per_job : int, optional
        Pairs per unit of work: default all pairs in one batched call locally, one pair per
        job with a ``client``.

    Examples
    --------
    >>> from sklmoo.meta import MetaTrainer
    >>> trainer = MetaTrainer(inner_steps=20, n_pairs=2, seed=0)
    >>> step, meta_loss, task_name = trainer.outer_step()
    >>> step, meta_loss > 0
    (1, True)
    """

    def __init__(self, tasks=None, *, inner_steps=600, n_pairs=4, sigma=0.01, lr=0.01, clip=1.0,
                 meta_loss="bma", step_size=1.0, temperature=1.0, batch_size=128, n_samples=10,
                 seed=0, warm=True, client=None, pairs_per_job=None):
        if (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
                or not 0 <= seed <= MAX_SEED):
            raise ValueError(f"seed must be an integer from 0 to 2**63 - 1, got {seed!r}")
        seed = int(seed)
        self.tasks = tasks or TaskDistribution()
        self.config = dict(inner_steps=inner_steps, n_pairs=n_pairs, sigma=sigma, lr=lr,
                           clip=clip, meta_loss=meta_loss, step_size=step_size,
                           temperature=temperature, batch_size=batch_size, n_samples=n_samples,
                           seed=seed, warm_start=warm)
        if meta_loss not in ("bma", "ce"):
            raise ValueError(f"meta_loss must be 'bma' or 'ce', got {meta_loss!r}")
        for name in ("inner_steps", "n_pairs", "batch_size", "n_samples"):
            value = self.config[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name, low_ok in (("sigma", False), ("lr", False), ("clip", False),
                             ("step_size", False), ("temperature", True)):
            value = self.config[name]
            if not (np.isfinite(value) and (value > 0 or (low_ok and value == 0))):
                kind = "non-negative" if low_ok else "positive"
                raise ValueError(f"{name} must be a finite {kind} number, got {value!r}")
        if pairs_per_job is not None and (isinstance(pairs_per_job, bool) or not isinstance(
                pairs_per_job, int) or pairs_per_job < 1):
            raise ValueError(f"pairs_per_job must be a positive integer, got {pairs_per_job!r}")
        self.client = client
        self.pairs_per_job = pairs_per_job
        torch.manual_seed(seed)
        self.meta = MetaSampler()
        if warm:
            warm_start(self.meta, seed=seed)
        self.phi = self.meta.flat_parameters().detach().clone().requires_grad_(True)
        self.optimizer = torch.optim.Adam([self.phi], lr=lr)
        self.step = 0
        self.curve = []          # (step, mean meta-loss of the perturbed pairs, task name)
        self.rng = np.random.default_rng(seed)
        self.generator = torch.Generator().manual_seed(seed)

    def _losses(self, task, batch_phi):
        """Losses of the 2P perturbed meta-parameters (P "+" rows, then P "-" rows), computed
        in jobs of ``pairs_per_job`` pairs, locally or on ``client``'s workers."""
        cfg = self.config
        n_pairs = len(batch_phi) // 2
        seeds = self.rng.integers(0, 2 ** 62, size=2 + len(batch_phi))
        init_seed, batch_seed, chain_seeds = int(seeds[0]), int(seeds[1]), seeds[2:]
        per_job = self.pairs_per_job or (1 if self.client is not None else n_pairs)
        jobs = []
        for start in range(0, n_pairs, per_job):
            pairs = list(range(start, min(start + per_job, n_pairs)))
            rows = pairs + [n_pairs + i for i in pairs]
            weights = self.meta.unflatten(batch_phi[rows].detach().clone())
            jobs.append((rows, (task, weights, chain_seeds[rows].tolist(), init_seed,
                                batch_seed, dict(cfg))))
        if self.client is None:
            results = [chain_group_losses(*args) for _, args in jobs]
        else:
            futures = [self.client.submit(chain_group_losses, *args, pure=False)
                       for _, args in jobs]
            results = self.client.gather(futures)
        losses = torch.empty(len(batch_phi), dtype=batch_phi.dtype)
        for (rows, _), loss in zip(jobs, results):
            losses[rows] = torch.as_tensor(loss, dtype=batch_phi.dtype)
        return losses

    def outer_step(self):
        """Sample a task, estimate the meta-gradient by ES and take one Adam step."""
        task = self.tasks.sample(self.rng)
        grad, losses = antithetic_es_gradient(
            lambda b: self._losses(task, b), self.phi.detach(), sigma=self.config["sigma"],
            n_pairs=self.config["n_pairs"], generator=self.generator)
        norm = float(grad.norm())
        if norm > self.config["clip"]:
            grad = grad * (self.config["clip"] / norm)
        self.optimizer.zero_grad()
        self.phi.grad = grad
        self.optimizer.step()
        self.step += 1
        finite = losses[torch.isfinite(losses)]
        self.curve.append((self.step, float(finite.mean()), task.name))
        return self.curve[-1]

    def meta_sampler(self):
        """The current meta-parameters as a :class:`MetaSampler` with its card.

        Leaves torch's global random state untouched (building the module would otherwise
        draw its throw-away initial weights from it and change the rest of the run)."""
        with torch.random.fork_rng(devices=[]):
            meta = MetaSampler(card=self.card())
        return meta.load_weights({k: v.detach() for k, v in
                                  self.meta.unflatten(self.phi.detach()).items()})

    def card(self):
        # a copy: a card edited by its reader must not change the run's settings
        return {"sklmoo_version": __version__, "config": dict(self.config),
                "task_distribution": self.tasks.describe(), "outer_steps": self.step,
                "meta_loss_curve": [[s, round(v, 5)] for s, v, _ in self.curve],
                "seed": self.config["seed"], "torch_version": torch.__version__}

    def state_dict(self):
        """Everything a resumed run needs to continue exactly as an uninterrupted one: the
        meta-parameters, Adam's state, the task and ES random states, and torch's global random
        state (the inner networks are initialised from it)."""
        return {"phi": self.phi.detach().clone(),
                "optimizer": copy.deepcopy(self.optimizer.state_dict()),
                "step": self.step, "curve": list(self.curve), "config": dict(self.config),
                "rng": copy.deepcopy(self.rng.bit_generator.state),
                "generator": self.generator.get_state(),
                "torch_rng": torch.get_rng_state(), "sklmoo_version": __version__}

    def load_state_dict(self, state):
        """Restore a :meth:`state_dict`; its config must equal this trainer's.

        ``state`` is copied, not aliased: it stays as it was while this trainer goes on
        (torch's ``Optimizer.load_state_dict`` keeps the tensors it is given, and Adam updates
        them in place).

        Raises
        ------
        ValueError
            If ``state`` is not a meta-training state of this trainer's shape and settings.
        """
        if not isinstance(state, dict) or not isinstance(state.get("config"), dict):
            raise ValueError(f"not a meta-training state: expected a dict with {_STATE_KEYS}")
        missing = [k for k in _STATE_KEYS if k not in state]
        if missing:
            raise ValueError(f"the meta-training state lacks {missing}")
        unknown = sorted(map(str, set(state) - set(_STATE_KEYS) - set(_OPTIONAL_KEYS)))
        if unknown:
            raise ValueError(f"the meta-training state holds unknown keys {unknown} (a state "
                             f"of this trainer holds {list(_STATE_KEYS + _OPTIONAL_KEYS)})")
        forged = sum(not backed_by_storage(t) for t in tensors_in(state))
        if forged:
            raise ValueError(f"{forged} tensor(s) of the state claim more elements than their "
                             "data holds (views with zero or overlapping strides)")
        changed = {k: (state["config"].get(k), v) for k, v in self.config.items()
                   if state["config"].get(k) != v}
        if changed:
            raise ValueError("the checkpoint was made with other settings (checkpoint, now): "
                             + ", ".join(f"{k}: {a!r} != {b!r}" for k, (a, b) in
                                         sorted(changed.items())))
        phi, step, curve = state["phi"], state["step"], state["curve"]
        if not (isinstance(phi, torch.Tensor) and phi.shape == self.phi.shape
                and phi.dtype == self.phi.dtype):
            raise ValueError(f"phi must be a {self.phi.dtype} tensor of shape "
                             f"{tuple(self.phi.shape)}, got {phi!r:.80}")
        if not torch.isfinite(phi).all():
            raise ValueError("the meta-parameters phi hold NaN or inf")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0 or not (
                isinstance(curve, list) and len(curve) == step):
            raise ValueError(f"the state's step ({step!r}) and meta-loss curve (one entry per "
                             "step) disagree")
        _check_optimizer_state(state["optimizer"])
        try:
            self.optimizer.load_state_dict(copy.deepcopy(state["optimizer"]))
            self.rng.bit_generator.state = copy.deepcopy(state["rng"])
            self.generator.set_state(state["generator"])
            if "torch_rng" in state:
                torch.set_rng_state(state["torch_rng"])
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise ValueError(f"the optimiser or random state is malformed "
                             f"({type(exc).__name__}: {exc})") from None
        with torch.no_grad():
            self.phi.copy_(phi)
        self.step, self.curve = step, list(curve)


def _check_optimizer_state(state):
    """``ValueError`` unless an Adam state dict holds finite moments (the second ones
    non-negative) and finite positive learning rates: a state that would turn phi into NaN at
    the first step is refused before any training."""
    try:
        groups, moments = state["param_groups"], state["state"]
        rates = [group["lr"] for group in groups]
        tensors = [(name, value) for entry in moments.values()
                   for name, value in entry.items() if isinstance(value, torch.Tensor)]
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"the optimiser state is malformed ({type(exc).__name__}: {exc})"
                         ) from None
    if not all(isinstance(lr, (int, float)) and not isinstance(lr, bool) and math.isfinite(lr)
               and lr > 0 for lr in rates):
        raise ValueError(f"the optimiser's learning rates {rates} are not finite positive numbers")
    for name, value in tensors:
        if value.is_floating_point() and not torch.isfinite(value).all():
            raise ValueError(f"the optimiser's {name} holds NaN or inf")
        if name == "exp_avg_sq" and (value < 0).any():
            raise ValueError("the optimiser's exp_avg_sq (second moments) holds negative values")


def _parse(argv):
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m sklmoo.meta.train",
        description="Meta-train an L2E meta-sampler with antithetic ES on CPU-sized tasks. "
                    "Writes OUT/checkpoint.pt, OUT/l2e_meta.npz (+ .json card) and "
                    "OUT/curve.json, each atomically; SIGINT / SIGTERM save the last completed "
                    "outer step and exit; --resume continues exactly. One run at a time owns "
                    "OUT (a lock on OUT/.lock).")
    parser.add_argument("--out", required=True, help="output directory (not empty)")
    parser.add_argument("--outer-steps", type=int, default=1000)
    parser.add_argument("--inner-steps", type=int, default=600)
    parser.add_argument("--n-pairs", type=int, default=4)
    parser.add_argument("--sigma", type=float, default=0.01)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--meta-loss", choices=["bma", "ce"], default="bma")
    parser.add_argument("--step-size", type=float, default=1.0)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint-every", type=int, default=25)
    parser.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads here and, with --scheduler, on every worker")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="evaluate the ES pairs on a Dask cluster, e.g. tcp://host:8786 "
                             "(start one with `dask scheduler` and `dask worker ADDRESS`)")
    parser.add_argument("--pairs-per-job", type=int, default=None,
                        help="ES pairs per unit of work (default: all locally, 1 on a cluster)")
    args = parser.parse_args(argv)
    if not args.out:
        parser.error("--out must name a directory, got ''")
    if args.pairs_per_job is not None and args.pairs_per_job < 1:
        parser.error(f"--pairs-per-job must be at least 1, got {args.pairs_per_job}")
    for name in ("outer_steps", "inner_steps", "n_pairs", "checkpoint_every", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got "
                         f"{getattr(args, name)}")
    for name in ("sigma", "lr", "step_size"):
        value = getattr(args, name)
        if not (math.isfinite(value) and value > 0):
            parser.error(f"--{name.replace('_', '-')} must be a finite positive number, got "
                         f"{value}")
    if not 0 <= args.seed <= MAX_SEED:
        parser.error(f"--seed must be an integer from 0 to 2**63 - 1, got {args.seed}")
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        parser.error(f"--temperature must be a finite non-negative number, got "
                     f"{args.temperature}")
    return parser, args


class _Stop(Exception):
    """Raised by the SIGTERM handler (SIGINT raises KeyboardInterrupt)."""


def _write_outputs(out, state, meta, curve):
    """The checkpoint first (the run's record), then the files derived from it."""
    atomic_write(out / "checkpoint.pt", lambda f: torch.save(state, f))
    _write_derived(out, meta, curve)


def _write_derived(out, meta, curve):
    meta.save(out / "l2e_meta")
    atomic_write_text(out / "curve.json", json.dumps(curve))


def _derived_match(out, state):
    """Whether ``l2e_meta.npz``, its card and ``curve.json`` hold the step of ``state``."""
    expected_curve = json.dumps(state["curve"])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")      # an unreadable card is a mismatch here
            meta = MetaSampler.load(out / "l2e_meta.npz")
        # what this run wrote is json.dumps(curve): a larger file cannot match, it is not read
        curve = read_json(out / "curve.json", 2 * len(expected_curve) + 4096)
    except (OSError, ValueError, Warning):
        return False
    return (meta.card.get("outer_steps") == state["step"]
            and torch.equal(meta.flat_parameters().detach(), state["phi"].float())
            and curve == json.loads(expected_curve))


def _own_out(parser, out):
    """Create ``out`` if needed and lock it for this process (:class:`DirectoryLock`)."""
    if out.exists() and not out.is_dir():
        parser.error(f"--out {out} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        return DirectoryLock(out).acquire()
    except DirectoryInUseError as exc:
        holder = f"pid {exc.pid}" if exc.pid is not None else "pid unknown"
        parser.error(f"--out {out} is in use by another meta-training run ({holder}): wait "
                     "for it to finish or choose another --out")
    except (OSError, ValueError) as exc:        # ValueError: a NUL byte in the path
        parser.error(f"--out {out}: cannot create or write this directory "
                     f"({getattr(exc, 'strerror', None) or exc})")


def _first_line(exc):
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _checkpoint_limit(outer_steps):
    """The bytes a checkpoint of a run of ``outer_steps`` may declare: twice its tensors (the
    meta-parameters, Adam's two moments of them, the two random states), one curve entry per
    outer step, and slack for the pickled structure."""
    with torch.random.fork_rng(devices=[]):     # the throw-away module draws from it
        phi = MetaSampler().flat_parameters().detach()
    tensors = 3 * tensor_bytes(phi) + tensor_bytes([torch.Generator().get_state(),
                                                    torch.get_rng_state()])
    return 2 * tensors + _CURVE_ENTRY_BYTES * outer_steps + _CHECKPOINT_SLACK


def _load_checkpoint(parser, ckpt, limit):
    """``torch.load`` with ``weights_only=True``: a checkpoint holds only tensors, numbers,
    strings, lists, tuples and dicts, so nothing in a run directory can run code on
    ``--resume``; before it, the archive's declared sizes are checked against ``limit``
    (:func:`_checkpoint_limit`), so that a small file cannot inflate to GBs. Every failure is a
    usage error naming the file."""
    try:
        check_torch_archive(ckpt, limit)
    except ArchiveTooLargeError as exc:
        parser.error(f"--resume: {exc}")
    except ValueError as exc:
        parser.error(f"--resume: cannot read the checkpoint {ckpt}: it is truncated or not a "
                     f"checkpoint ({exc})")
    except OSError as exc:
        parser.error(f"--resume: cannot read the checkpoint {ckpt} ({exc})")
    try:
        return torch.load(ckpt, weights_only=True)
    except pickle.UnpicklingError as exc:
        if "Weights only load failed" in str(exc):
            unsupported = [line.strip() for line in str(exc).splitlines()
                           if "global" in line.lower()]  # the torch line naming the object
            parser.error(f"--resume: refusing to load {ckpt}: it holds objects other than "
                         "tensors, numbers, strings, lists and dicts (unpickling them could run "
                         "code), so this trainer did not write it"
                         + (f" ({unsupported[0]})" if unsupported else ""))
        parser.error(f"--resume: cannot read the checkpoint {ckpt}: it is truncated or not a "
                     f"checkpoint ({type(exc).__name__}: {_first_line(exc)})")
    except Exception as exc:  # zip, EOF and I/O errors of a truncated or foreign file
        parser.error(f"--resume: cannot read the checkpoint {ckpt}: it is truncated or not a "
                     f"checkpoint ({type(exc).__name__}: {_first_line(exc)})")


def _written_by(state):
    """`` (written by sklmoo X; this is sklmoo Y)`` when the checkpoint ``state`` records the
    version that wrote it and it is another, else ``''``."""
    version = state.get("sklmoo_version") if isinstance(state, dict) else None
    if not isinstance(version, str) or version == __version__:
        return ""
    return f" (written by sklmoo {version}; this is sklmoo {__version__})"


def main(argv=None):
    """The command line: ``python -m sklmoo.meta.train --out DIR ...`` (see ``--help``).

    Exit status 0 when the run is complete, 130 when SIGINT / SIGTERM stopped it (after saving
    the last completed outer step), 2 for invalid arguments, an unusable ``--out``, a
    directory another run owns, or a conflicting or unreadable ``--resume``.

    The run directory ``DIR`` is owned by this process for the whole run (a lock on
    ``DIR/.lock``, released by the kernel however the process ends). Its files:

    * ``checkpoint.pt``, the run's record, written first at every save;
    * ``l2e_meta.npz`` + ``l2e_meta.json`` (the card) and ``curve.json``, derived from the
      checkpoint and written after it.

    Each file is replaced atomically, so a reader never sees a half-written file. A process
    killed between the writes (SIGKILL, power loss; SIGINT and SIGTERM finish the writes)
    leaves the derived files one save behind the checkpoint, and may leave the temporary of
    the write it was in: the next start removes such temporaries of dead writers, and
    ``--resume`` compares the derived files with the checkpoint and rewrites them from it
    when they differ, so after any start the directory holds one consistent step. (Writing
    several files atomically as one would need a directory swap that readers follow; the
    checkpoint already holds everything the other files are made from.)
    """
    from tqdm import tqdm

    parser, args = _parse(argv)
    out = pathlib.Path(args.out)
    ckpt = out / "checkpoint.pt"
    if args.resume and not ckpt.is_file():      # before creating anything
        parser.error(f"--resume: no checkpoint at {ckpt}")
    lock = _own_out(parser, out)
    client = None
    try:
        # nobody else writes in `out` now: a temporary there is a dead writer's
        removed = remove_stale_temporaries(out, OUTPUTS)
        if removed:
            print(f"removed temporaries of an interrupted run: "
                  f"{', '.join(p.name for p in removed)}", file=sys.stderr)
        if not args.resume and ckpt.exists():
            parser.error(f"{ckpt} exists: pass --resume to continue that run, or choose "
                         "another --out")
        torch.set_num_threads(args.threads)
        if args.scheduler is not None:
            try:
                from dask.distributed import Client
            except ImportError:
                parser.error("--scheduler needs dask.distributed: pip install "
                             "'dask[distributed]'")
            try:
                client = Client(args.scheduler, timeout="10s")
            except (OSError, TimeoutError) as exc:
                parser.error(f"--scheduler: cannot reach a Dask scheduler at "
                             f"{args.scheduler} ({exc})")
            client.run(torch.set_num_threads, args.threads)
        return _train(parser, args, argv, out, client, tqdm)
    finally:
        if client is not None:
            client.close()
        lock.release()


def _train(parser, args, argv, out, client, tqdm):
    ckpt = out / "checkpoint.pt"
    # a checkpoint is checked and read before the trainer is built: a bad one is refused at once
    state = (_load_checkpoint(parser, ckpt, _checkpoint_limit(args.outer_steps))
             if args.resume else None)
    trainer = MetaTrainer(inner_steps=args.inner_steps, n_pairs=args.n_pairs, sigma=args.sigma,
                          lr=args.lr, meta_loss=args.meta_loss, step_size=args.step_size,
                          temperature=args.temperature, seed=args.seed, client=client,
                          pairs_per_job=args.pairs_per_job)
    if args.resume:
        try:
            trainer.load_state_dict(state)
        except ValueError as exc:
            parser.error(f"--resume: {ckpt}{_written_by(state)}: {exc}")
        if trainer.step > args.outer_steps:
            parser.error(f"--resume: {ckpt} is at outer step {trainer.step}, beyond "
                         f"--outer-steps {args.outer_steps}: pass --outer-steps "
                         f"{trainer.step} or more to continue it")
    command = "python -m sklmoo.meta.train " + " ".join(
        argv if argv is not None else sys.argv[1:])
    start = time.time()

    def snapshot():
        meta = trainer.meta_sampler()
        meta.card["command"] = command
        meta.card["wall_seconds_this_run"] = round(time.time() - start, 1)
        return trainer.state_dict(), meta, list(trainer.curve)

    last = snapshot()                       # the state after the last completed outer step
    if args.resume and not _derived_match(out, last[0]):
        _write_derived(out, *last[1:])      # killed between the writes of the last save
    written = trainer.step if args.resume else None     # the outer step the files hold

    def on_term(signum, frame):
        raise _Stop()

    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, on_term),
                signal.SIGINT: signal.getsignal(signal.SIGINT)}
    bar = tqdm(total=args.outer_steps, initial=trainer.step, desc="meta-training")
    try:
        while trainer.step < args.outer_steps:
            try:
                step, loss, name = trainer.outer_step()
                why = (None if torch.isfinite(trainer.phi).all()
                       else "the meta-parameters are not finite")
            except FloatingPointError as exc:      # every antithetic pair's inner chains diverged
                step, why = trainer.step + 1, str(exc)
            if why is not None:
                # nothing of this step is written; the last finite one is (with
                # --checkpoint-every above 1 it may not have been yet)
                bar.close()
                if last[0]["step"] != written:
                    _write_outputs(out, *last)
                raise SystemExit(f"meta-training diverged at outer step {step}: {why}; {out} "
                                 f"holds outer step {last[0]['step']}, the last finite one. "
                                 "--resume would replay the same draws with the same settings: "
                                 "start a new run (another directory) with a lower --lr, "
                                 "--sigma or --step-size")
            last = snapshot()
            bar.update(1)
            bar.set_postfix(meta_loss=f"{loss:.3f}", task=name[:24])
            if step % args.checkpoint_every == 0 or step == args.outer_steps:
                _write_outputs(out, *last)
                written = step
    except (KeyboardInterrupt, _Stop):
        # no second interrupt while the last completed step is written
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _write_outputs(out, *last)
        bar.close()
        print(f"\nstopped: saved outer step {last[0]['step']} to {out}; continue with --resume",
              file=sys.stderr)
        raise SystemExit(130)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    bar.close()
    return trainer
