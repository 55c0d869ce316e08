"""MTSGDMultiTaskClassifier: M particle networks fitted by MT-SGD, as a skorch/sklearn estimator."""

import warnings

import numpy as np
import pandas as pd
import torch
from sklearn.base import ClassifierMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils import check_random_state
from skorch import NeuralNet
from skorch.dataset import unpack_data
from skorch.utils import to_numpy, to_tensor

from ..metrics import entropy_decomposition
from ..nn import (METHODS, FunctionSpace, LeNetTrunk, MLPTrunk, MultiTaskParticleNet,
                  make_update_rules, member_factory, multitask_particle_step)
from ..samplers import LinearScalarization, PrecomputedKernel, RBFKernel
from ._guard import SklmooNetMixin
from ._targets import (as_2d_targets, decode_predictions, encode_targets, encode_with_classes,
                       missing_mask)


class MTSGDMultiTaskClassifier(SklmooNetMixin, ClassifierMixin, NeuralNet):
    """Multi-task classifier: an ensemble of particle networks fitted by MT-SGD.

    ``n_particles`` networks share nothing but the algorithm: each has its own trunk and one
    head per task. Every step, the T task posteriors' scores for the trunks are combined by
    MT-SGD (one simplex QP over the T tasks, Phan et al. 2022, Eq. 7) and each task's heads move
    by SVGD (Eq. 9), so the particles settle in the region that is likely under every task at
    once while the kernel's repulsion keeps them diverse. Predictions average the particles.

    A skorch ``NeuralNet``: callbacks, ``history``, ``device='cuda'``, ``save_params``,
    ``warm_start`` and ``set_params(module__...)`` work as in skorch. ``y`` follows
    :class:`~sklearn.multioutput.MultiOutputClassifier`: shape (n_samples, n_tasks), any labels
    per task (strings too), missing labels allowed. A 1-D ``y`` is one task (MT-SGD is then
    SVGD): ``predict`` returns 1-D labels, ``predict_proba`` an (n, n_classes) array and
    ``classes_`` an array, as for any scikit-learn classifier.

    Parameters
    ----------
    module : nn.Module class or instance, optional
        The trunk of one particle, mapping a batch to (batch, n_features) (give it an
        ``n_features_out`` attribute or let the estimator probe it). Default: an
        :class:`~sklmoo.nn.MLPTrunk` for tabular ``X`` and a :class:`~sklmoo.nn.LeNetTrunk`
        for images, given as (n, C, H, W) or flat with ``input_shape``. Its arguments are set
        with ``module__name=value``.
    n_particles : int, default=5
        Ensemble size M.
    method : {'mtsgd', 'moo_svgd', 'mgda', 'linear'}, default='mtsgd'
        Trunk update: MT-SGD; MOO-SVGD (per-particle MGDA weights, then SVGD); per-particle
        MGDA (independent particles); linear scalarisation (mean task gradient: an independent
        ensemble). Heads move by SVGD for the two kernel methods, by their own gradient otherwise.
    kernel : {'parameter', 'function'}, default='parameter'
        What the RBF kernel compares. ``'function'``: each particle's outputs on the mini-batch
        (the trunk's features for the trunk, each task's logits for its heads), with the
        repulsion pulled back to the parameters by autograd, as the MT-SGD authors' code and
        function-space particle methods do: the repulsion is then a real force (about 1 % of
        the drive at the default coefficients, 10-70 % at 10x; ``history`` records it).
        ``'parameter'``: the flattened parameters; with 10^4-10^5 weights and the median
        bandwidth its repulsion is ~0.1 % of the drive and the particles behave almost as an
        independent ensemble. Why 'parameter' is the default (``docs/benchmarks/
        multi_digits.md``, two regimes, 3 seeds): the averaged ensembles were underconfident in
        both, the extra diversity of the function kernel made them more so (NLL and ECE no
        better than an independent ensemble) at 3-4x the time per epoch, while the parameter
        kernel cost 1.4-1.8x and was within noise of the independent ensemble. Choose
        'function' when the ensemble itself is overconfident (a positive signed confidence -
        accuracy gap), where more diversity can help.
    smooth_drive : bool, default=False
        With ``kernel='function'``: whether the drive is the kernel-weighted average of all
        particles' scores (SVGD's form) or each particle's own score (the kernel then only sets
        the repulsion; MT-SGD's U is then the Gram matrix of the directions in L2 over the
        particles). The parameter kernel always smooths (it is then nearly the identity).
    bandwidth : 'median' or float, default='median'
        RBF kernel length scale (median heuristic by default) on parameters or outputs.
    repulsion : float, default=1e-3
        Coefficient c of the trunk kernel's repulsive term. The scores are gradients of the mean
        mini-batch loss, i.e. :math:`\\nabla\\log p / N`; exact MT-SGD on
        :math:`\\log p = -N\\,\\text{mean loss}` would be ``c = 1/N``. The default is of the order
        of the official experiments' trunk value (0.0015).
    head_repulsion : float, default=1e-2
        The same for the heads' SVGD.
    warmup_epochs : int, default=0
        Epochs at the start during which particle i follows its own fixed task weights, spread
        over the simplex (as the authors' code does in its first epoch), before the rule of
        ``method`` takes over; heads follow their gradients meanwhile.
    input_shape : tuple of int, optional
        Shape of one sample when images are passed flat, e.g. ``(1, 12, 12)``.
    missing_label : scalar, optional
        A label value meaning "unlabelled" in addition to NaN / None; such entries are left out
        of their task's loss.
    random_state : int, RandomState instance or None
        Seeds particle initialisation and mini-batch order.
    optimizer, lr, max_epochs, batch_size, train_split, verbose, device, callbacks, **kwargs
        As in skorch's ``NeuralNet`` (defaults: Adam, 1e-3, 20 epochs, batches of 64, no
        internal validation split, silent).

    Attributes
    ----------
    classes_ : ndarray, or list of ndarray
        The labels (one array per task for a 2-D ``y``).
    task_names_ : list of str
        The target DataFrame's column names (a Series' name), else ``task_0``, ...
    n_features_in_ : int
    module_ : MultiTaskParticleNet
        The fitted particles.
    history : skorch History
        Per batch, ``task_weights`` holds the trunk rule's task weights (the QP solution) and
        ``trunk_repulsion`` / ``head_repulsion`` the repulsion / drive norm ratios; per epoch,
        their means and ``task_weights_std`` (the spread of the weights over the batches). A
        ``UserWarning`` says when the repulsion outweighs the drive in an epoch.

    Examples
    --------
    >>> from sklmoo import MTSGDMultiTaskClassifier
    >>> from sklmoo.datasets import make_multi_digits
    >>> X, y = make_multi_digits(300, random_state=0, return_X_y=True)
    >>> clf = MTSGDMultiTaskClassifier(n_particles=3, max_epochs=2, random_state=0)
    >>> clf = clf.fit(X, y)
    >>> [p.shape for p in clf.predict_proba(X[:4])]
    [(4, 10), (4, 10)]
    >>> clf.predict(X[:4]).shape
    (4, 2)
    """

    def __init__(self, module=None, *, n_particles=5, method="mtsgd", kernel="parameter",
                 smooth_drive=False, bandwidth="median", repulsion=1e-3, head_repulsion=1e-2,
                 warmup_epochs=0, input_shape=None, missing_label=None,
                 random_state=None, criterion=torch.nn.CrossEntropyLoss,
                 optimizer=torch.optim.Adam, lr=1e-3, max_epochs=20, batch_size=64,
                 train_split=None, verbose=0, **kwargs):
        super().__init__(module, criterion=criterion, optimizer=optimizer, lr=lr,
                         max_epochs=max_epochs, batch_size=batch_size, train_split=train_split,
                         verbose=verbose, **kwargs)
        self.n_particles = n_particles
        self.method = method
        self.kernel = kernel
        self.smooth_drive = smooth_drive
        self.warmup_epochs = warmup_epochs
        self.bandwidth = bandwidth
        self.repulsion = repulsion
        self.head_repulsion = head_repulsion
        self.input_shape = input_shape
        self.missing_label = missing_label
        self.random_state = random_state

    # -- scikit-learn boundary -------------------------------------------------------------

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        tags.non_deterministic = False
        return tags

    _member_kind = "particle"

    def _check_params(self):
        self._check_device_available()
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if self.kernel not in ("function", "parameter"):
            raise ValueError(f"kernel must be 'function' or 'parameter', got {self.kernel!r}")
        if not isinstance(self.smooth_drive, (bool, np.bool_)):
            raise ValueError(f"smooth_drive must be True or False, got {self.smooth_drive!r}")
        for name, low in (("warmup_epochs", 0), ("n_particles", 1), ("max_epochs", 0)):
            self._check_int(name, low=low)
        if self.batch_size != -1:
            self._check_int("batch_size")
        for name in ("repulsion", "head_repulsion"):
            self._check_number(name)
        if not (isinstance(self.bandwidth, str) and self.bandwidth == "median"):
            try:
                self._check_number("bandwidth", strict=True)
            except ValueError:
                raise ValueError(f"bandwidth must be 'median' or a finite positive number, "
                                 f"got {self.bandwidth!r}") from None

    def _prepare(self, X, y):
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y "
                             "is None")
        self._check_params()
        X = self._validate_X(X, reset=True)
        y, self.single_task_ = self._as_task_columns(y)
        codes, classes, self.task_names_ = encode_targets(y, X.shape[0], self.missing_label)
        self.n_tasks_ = len(classes)
        self.classes_ = classes[0] if self.single_task_ else classes
        self.seed_ = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        return X, codes

    @staticmethod
    def _as_task_columns(y):
        """A 1-D target (array, list, Series) becomes one task column; returns (y, single)."""
        if isinstance(y, pd.Series):
            return y.to_frame(name=str(y.name) if y.name is not None else "task_0"), True
        if isinstance(y, pd.DataFrame):
            return y, False
        arr = np.asarray(y, dtype=object) if not hasattr(y, "dtype") else np.asarray(y)
        if arr.ndim == 1:
            return arr.reshape(-1, 1), True
        return y, False

    def _task_classes(self):
        """The classes as a list with one array per task, whatever the target's form."""
        return [self.classes_] if self.single_task_ else self.classes_

    def fit(self, X, y, **fit_params):
        """Fit the particles on ``X`` and the multi-task target ``y`` (n_samples, n_tasks).

        Validates and label-encodes the data (the network's heads are sized from the classes),
        leaves out samples without a label in any task, then runs skorch's training loop.
        With ``warm_start=True`` on a fitted estimator the particles continue; ``y`` must then
        have the same tasks and classes (otherwise a ``ValueError``, and the fitted model is
        kept).

        Divergence stops the fit with a ``FloatingPointError`` naming the epoch (and the
        particle): a non-finite loss, score or parameter, or an epoch's mean training loss
        above 1000 times that of the fit's first mini-batch, whatever the optimiser. An
        interrupted fit re-raises ``KeyboardInterrupt``. Either way the estimator is then not
        fitted.

        Returns
        -------
        self
        """
        if self.warm_start and self.__sklearn_is_fitted__():
            # continue the particles: the data must fit the network they were fitted on
            X, codes = self._encode_continuation(X, y)
            self._initialize_rules()
        else:
            self.fitted_ = False
            X, codes = self._prepare(X, y)
            self.initialize()
        self.fitted_ = False
        self._run_epochs(*self._labelled_rows(X, codes), **fit_params)
        self.fitted_ = True
        return self

    def _encode_continuation(self, X, y):
        self._check_params()
        X = self._validate_X(X, reset=False)
        y, single = self._as_task_columns(y)
        try:
            codes, classes, _ = encode_targets(y, X.shape[0], self.missing_label)
        except ValueError as exc:
            raise ValueError(f"cannot continue the particles: {exc}") from exc
        fitted = self._task_classes()
        if single != self.single_task_ or len(classes) != self.n_tasks_ or not all(
                np.array_equal(a, b) for a, b in zip(classes, fitted)):
            raise ValueError(
                "cannot continue the particles: they were fitted on classes "
                f"{[c.tolist() for c in fitted]}; this y has "
                f"{[c.tolist() for c in classes]}. Set warm_start=False to start new particles")
        return X, codes

    @staticmethod
    def _labelled_rows(X, codes):
        """Samples without a label in any task contribute to no loss: leave them out, so that
        no mini-batch is empty of labels."""
        keep = (codes >= 0).any(axis=1)
        if not keep.any():
            raise ValueError("y has no labelled sample in any task")
        return (X, codes) if keep.all() else (X[keep], codes[keep])

    def partial_fit(self, X, y, classes=None, **fit_params):
        """Train ``max_epochs`` more epochs on ``(X, y)``, keeping the particles.

        The first call sizes the network from its labels (every class must appear in it);
        later calls must use labels seen then. ``classes`` is accepted for scikit-learn
        compatibility and ignored.

        Returns
        -------
        self
        """
        if self.__sklearn_is_fitted__():
            self._check_params()
            X = self._validate_X(X, reset=False)
            codes = encode_with_classes(self._as_task_columns(y)[0], X.shape[0],
                                        self._task_classes(), self.task_names_,
                                        self.missing_label)
            self._initialize_rules()
        else:
            X, codes = self._prepare(X, y)
            self.initialize()
        self.fitted_ = False
        self._run_epochs(*self._labelled_rows(X, codes), **fit_params)
        self.fitted_ = True
        return self

    # -- skorch hooks --------------------------------------------------------------------------

    def initialize_module(self):
        """Build the M-particle network from the trunk and the classes seen in ``fit``."""
        if not hasattr(self, "classes_"):
            raise NotFittedError("the network is sized from the data: call fit")
        self.fitted_ = False          # new weights: whatever was fitted before is gone
        kwargs = self.get_params_for("module")
        shape = self.input_shape_
        if self.module is None:
            if len(shape) == 3:
                factory = member_factory(LeNetTrunk, in_channels=shape[0], height=shape[1],
                                         width=shape[2], **kwargs)
            else:
                factory = member_factory(MLPTrunk, n_features=int(np.prod(shape)), **kwargs)
        else:
            factory = member_factory(self.module, **kwargs)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed_)
            self.module_ = MultiTaskParticleNet(factory, self.n_particles,
                                                [len(c) for c in self._task_classes()],
                                                input_shape=shape)
        return self

    def initialize(self):
        """skorch's initialisation, plus the update rules built from the hyperparameters."""
        super().initialize()
        self._initialize_rules()
        return self

    def _initialize_rules(self):
        """The trunk and head rules (``rules_``) and the warm-up rules (``warmup_rules_``):
        built from the hyperparameters once per initialisation / fit, not every batch."""
        if self.kernel == "function":
            trunk_kernel, head_kernel = PrecomputedKernel(), PrecomputedKernel()
        else:
            trunk_kernel = head_kernel = RBFKernel(self.bandwidth)
        self.rules_ = make_update_rules(self.method, trunk_kernel, self.repulsion,
                                        self.head_repulsion, head_kernel=head_kernel)
        m, t = self.n_particles, self.n_tasks_
        # particle i's task weights, spread over the simplex (one-hot corners first)
        grid = (np.arange(m)[:, None] + np.arange(t)[None, :] * max(1, m // t)) % m
        weights = 1.0 + np.cos(2 * np.pi * grid / m)
        weights = np.where(weights.sum(1, keepdims=True) > 0, weights, 1.0)
        self.warmup_rules_ = (LinearScalarization(weights / weights.sum(1, keepdims=True)),
                              LinearScalarization())
        return self

    def _task_losses(self, y_pred, y_true):
        """Per task, each particle's mean loss over the task's labelled samples -> (M,) or None."""
        y_true = to_tensor(y_true, device=self.device).long()
        losses = []
        for t, logits in enumerate(y_pred):                       # logits (B, M, C)
            target = y_true[:, t]
            labelled = target >= 0
            if not labelled.any():
                losses.append(None)
                continue
            per = self.criterion_(logits[labelled].transpose(1, 2),
                                  target[labelled][:, None].expand(-1, logits.shape[1]))
            losses.append(per.mean(dim=0))
        return losses

    @staticmethod
    def _mean_loss(task_losses):
        return torch.stack([x.mean() for x in task_losses if x is not None]).mean()

    def get_loss(self, y_pred, y_true, X=None, training=False):
        """Mean over tasks and particles of the masked cross-entropy."""
        return self._mean_loss(self._task_losses(y_pred, y_true))

    def train_step_single(self, batch, **fit_params):
        """One MT-SGD step: per-task scores by autograd, directions written into ``.grad``."""
        self._set_training(True)
        Xi, yi = unpack_data(batch)
        features, y_pred = self.module_.forward_with_features(to_tensor(Xi, device=self.device))
        losses = self._task_losses(y_pred, yi)
        loss = self._mean_loss(losses)
        epoch = len(self.history)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"non-finite training loss ({float(loss)}) in epoch {epoch};"
                                     " lower lr or check X for extreme values")
        warming_up = epoch <= self.warmup_epochs
        trunk_rule, head_rule = self.warmup_rules_ if warming_up else self.rules_
        function_space = None
        if self.kernel == "function" and not warming_up and self.method in ("mtsgd", "moo_svgd"):
            function_space = FunctionSpace(features, y_pred, self.bandwidth, self.smooth_drive)
        try:
            info = multitask_particle_step(
                self.module_, [None if x is None else x.sum() for x in losses],
                trunk_rule, head_rule, function_space)
        except FloatingPointError as exc:
            raise FloatingPointError(f"sampler diverged in epoch {epoch}: {exc}") from exc
        self.history.record_batch("task_weights", to_numpy(info.weights).tolist())
        self.history.record_batch("trunk_repulsion", info.trunk_repulsion_ratio)
        self.history.record_batch("head_repulsion", info.head_repulsion_ratio)
        return {"loss": loss.detach(), "y_pred": y_pred}

    def _guarded_tensors(self):
        return dict(self.module_.named_parameters())

    def on_epoch_end(self, net, **kwargs):
        """Detect divergence (defined in :meth:`fit`); summarise the epoch's repulsion / drive
        ratios and task weights, and warn when the repulsion dominates."""
        self._check_divergence()
        batches = [b for b in self.history[-1, "batches"] if "task_weights" in b]
        if batches:
            weights = np.array([b["task_weights"] for b in batches], dtype=float)
            self.history.record("task_weights_mean", weights.mean(0).tolist())
            self.history.record("task_weights_std", weights.std(0).tolist())
            for part in ("trunk", "head"):
                ratios = [b[f"{part}_repulsion"] for b in batches
                          if b.get(f"{part}_repulsion") is not None]
                mean = float(np.mean(ratios)) if ratios else None
                self.history.record(f"{part}_repulsion", mean)
                if mean is not None and mean > 1.0:
                    warnings.warn(f"the {part} repulsion outweighs the drive in epoch "
                                  f"{len(self.history)} (norm ratio {mean:.2f}): the particles "
                                  f"mostly push each other apart; lower "
                                  f"{'repulsion' if part == 'trunk' else 'head_repulsion'}",
                                  UserWarning, stacklevel=2)
        super().on_epoch_end(net, **kwargs)

    # -- predictions ---------------------------------------------------------------------------

    def _member_logits(self, X):
        self.check_is_fitted()
        X = self._validate_X(X, reset=False)
        outs = [[] for _ in range(self.n_tasks_)]
        for batch_out in self.forward_iter(X, training=False):
            for t, logits in enumerate(batch_out):
                outs[t].append(logits)
        return [torch.cat(o) for o in outs]                          # each (n, M, C)

    def _members_per_task(self, X):
        return [to_numpy(torch.softmax(lg.float(), dim=-1).transpose(0, 1))
                for lg in self._member_logits(X)]

    def _single(self, per_task):
        return per_task[0] if self.single_task_ else per_task

    def predict_proba_members(self, X):
        """Class probabilities of every particle: list of T arrays (M, n_samples, n_classes_t)
        (one array for a 1-D ``y``)."""
        return self._single(self._members_per_task(X))

    def predict_proba(self, X):
        """Ensemble class probabilities (average over particles): list of T arrays
        (n_samples, n_classes_t), columns in ``classes_[t]`` order (one array for a 1-D
        ``y``)."""
        return self._single([p.mean(axis=0) for p in self._members_per_task(X)])

    def _predict_codes(self, X):
        return np.column_stack([p.mean(axis=0).argmax(axis=1)
                                for p in self._members_per_task(X)])

    def predict(self, X):
        """Most probable label of each task -> (n_samples, n_tasks), original labels
        ((n_samples,) for a 1-D ``y``)."""
        labels = decode_predictions(self._predict_codes(X), self._task_classes())
        return labels[:, 0] if self.single_task_ else labels

    def predict_uncertainty(self, X):
        """Per-sample, per-task predictive entropy split (nats).

        Returns
        -------
        dict with ``'total'``, ``'aleatoric'`` and ``'epistemic'`` arrays (n_samples, n_tasks)
        ((n_samples,) for a 1-D ``y``):
        total entropy of the ensemble average = expected member entropy (aleatoric) + mutual
        information between label and particle (epistemic).
        """
        parts = [entropy_decomposition(p) for p in self._members_per_task(X)]
        out = {name: np.column_stack([part[i] for part in parts])
               for i, name in enumerate(("total", "aleatoric", "epistemic"))}
        return {k: v[:, 0] for k, v in out.items()} if self.single_task_ else out

    def score(self, X, y, sample_weight=None):
        """Mean over tasks of the accuracy on each task's labelled samples.

        (scikit-learn's ``accuracy_score`` rejects multiclass-multioutput targets.) A label not
        seen in fit counts as a wrong prediction; tasks without any labelled sample in ``y``
        are left out of the mean.
        """
        pred = decode_predictions(self._predict_codes(X), self._task_classes())
        arr, _ = as_2d_targets(self._as_task_columns(y)[0], len(pred))
        if arr.shape[1] != self.n_tasks_:
            raise ValueError(f"y has {arr.shape[1]} task columns but the estimator was fitted "
                             f"on {self.n_tasks_} tasks")
        w = np.ones(len(pred)) if sample_weight is None else np.asarray(sample_weight, float)
        accs = []
        for t in range(self.n_tasks_):
            lab = ~missing_mask(arr[:, t], self.missing_label)
            if lab.any() and w[lab].sum() > 0:
                hits = np.array([a == b for a, b in zip(arr[lab, t].tolist(),
                                                        pred[lab, t].tolist())], dtype=float)
                accs.append(np.average(hits, weights=w[lab]))
        if not accs:
            raise ValueError("y has no labelled sample in any task")
        return float(np.mean(accs))
