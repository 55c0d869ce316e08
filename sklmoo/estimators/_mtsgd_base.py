"""What the MT-SGD estimators share: particles with a trunk and per-task heads, the update rules
built from the hyperparameters, the masked per-task loss and the fitting / continuation loop.

The classifier and the regressor differ only in their targets (labels or values), their heads
(logits or a Gaussian mean and scale) and their per-sample loss; everything else is here once.
"""

import dataclasses
import math
import re

import numpy as np
import torch
from sklearn.exceptions import NotFittedError
from sklearn.utils import check_random_state
from skorch import NeuralNet
from skorch.dataset import unpack_data
from skorch.utils import to_tensor

from ..nn import (METHODS, FunctionSpace, MultiTaskParticleNet, StepInfo, make_update_rules,
                  member_factory, multitask_particle_step)
from ..samplers import (TASK_NORMALIZATIONS, LinearScalarization,
                        PrecomputedKernel, RBFKernel)
from ._guard import SklmooNetMixin
from ._rows import batch_targets, take_rows
from ._validation import RestoreBestEarlyStopping
from ._weights import check_partial_fit_class_weight, check_sample_weight

#: the fields of a step's StepInfo, in the order its stashed rows hold them
_STEP_FIELDS = tuple(field.name for field in dataclasses.fields(StepInfo))


class MTSGDNetBase(SklmooNetMixin, NeuralNet):
    """Base of the MT-SGD estimators (not public). Subclasses provide:

    * ``_prepare_targets(y, n_samples, classes, row_weight)`` -> the target array handed to
      skorch (and set
      ``n_tasks_``, ``task_names_``, ``single_task_`` and their own fitted attributes);
    * ``_continuation_targets(y, n_samples, partial)`` -> the same for a continued fit, raising
      ``ValueError("cannot continue the particles: ...")`` when ``y`` does not fit them;
    * ``_observed(targets)`` -> boolean (n, T) mask of present targets (numpy or torch);
    * ``_member_losses(outputs_t, target_t)`` -> (b, M) per-sample losses of task t;
    * ``_head_widths()`` and optionally ``_head_factory()`` for the network's heads.
    """

    #: 'auto' budgets: while early stopping on the validation split sees the loss improve, the
    #: fit may run up to three times the ~1000-step budget, at most 500 epochs (``max_epochs``)
    _auto_extension = 3
    #: the default early-stopping callback's patience ('auto': an eighth of the unextended
    #: budget, ``_patience_share``)
    _default_patience = "auto"

    _member_kind = "particle"
    #: the task_normalization values this estimator's losses allow
    _task_normalizations = TASK_NORMALIZATIONS

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        tags.non_deterministic = False
        return tags

    def _check_params(self):
        self._check_device_available()
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if self.kernel not in ("auto", "function", "parameter"):
            raise ValueError(f"kernel must be 'auto', 'function' or 'parameter', got "
                             f"{self.kernel!r}")
        if self.task_normalization not in self._task_normalizations:
            raise ValueError(f"task_normalization must be one of {self._task_normalizations}, "
                             f"got {self.task_normalization!r}")
        if not isinstance(self.normalize_drive, (bool, np.bool_)):
            raise ValueError(f"normalize_drive must be True or False, "
                             f"got {self.normalize_drive!r}")
        if not isinstance(self.smooth_drive, (bool, np.bool_)):
            raise ValueError(f"smooth_drive must be True or False, got {self.smooth_drive!r}")
        for name, low in (("warmup_epochs", 0), ("n_particles", 1)):
            self._check_int(name, low=low)
        self._check_default_params()
        self._check_number("lr", strict=True)
        self._check_number("prior_precision")
        if self.batch_size != -1 and not (isinstance(self.batch_size, str)
                                          and self.batch_size == "auto"):
            self._check_int("batch_size")
        for name in ("repulsion", "head_repulsion"):
            self._check_number(name)
        if not (isinstance(self.bandwidth, str) and self.bandwidth == "median"):
            try:
                self._check_number("bandwidth", strict=True)
            except ValueError:
                raise ValueError(f"bandwidth must be 'median' or a finite positive number, "
                                 f"got {self.bandwidth!r}") from None

    # -- fitting ---------------------------------------------------------------------------------

    def _prepare(self, X, y, classes=None, sample_weight=None):
        """Validate everything and set the data-dependent attributes of a new fit."""
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y "
                             "is None")
        self._check_params()
        X = self._validate_X(X, reset=True)
        row_weight = check_sample_weight(sample_weight, X.shape[0])
        targets = self._prepare_targets(y, X.shape[0], classes=classes, row_weight=row_weight)
        self.seed_ = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        return X, targets

    def _after_set_params(self, params):
        """A learning rate set on a fitted estimator is its next continued fit's (see
        :meth:`SklmooNetMixin.set_params`)."""
        groups = getattr(getattr(self, "optimizer_", None), "param_groups", None)
        if not groups:
            return
        if "optimizer__lr" in params:        # skorch's setter only writes it into the groups
            self.__dict__["optimizer__lr"] = params["optimizer__lr"]
        if "lr" in params or "optimizer__lr" in params:
            # without groups of its own the rate skorch's setter wrote into every group
            built = self._group_rates() or [group["lr"] for group in groups]
            for group, rate in zip(groups, built):
                group["lr"] = group["lr_at_auto_batch"] = rate
        for key, value in params.items():
            match = re.fullmatch(r"optimizer__param_groups__(\d+)__lr", key)
            if match and int(match[1]) < len(groups):
                groups[int(match[1])]["lr_at_auto_batch"] = value

    def _group_rates(self):
        """Each parameter group's learning rate as a new optimizer would get it from the
        estimator's parameters (``lr``, ``optimizer__lr``, ``optimizer__param_groups``, an
        estimator's own groups); None when these groups are not the optimizer's (an
        ``initialize_optimizer`` of the user's)."""
        groups = self.optimizer_.param_groups
        (built,), kwargs = self.get_params_for_optimizer(
            "optimizer", self.get_all_learnable_params())
        if len(built) != len(groups) or any(len(a["params"]) != len(b["params"])
                                            for a, b in zip(built, groups)):
            return None
        return [group.get("lr", kwargs.get("lr", self.lr)) for group in built]

    def _validation_targets(self, y, n_samples):
        return self._continuation_targets(y, n_samples, partial=True)

    def _continue(self, X, y, partial):
        self._check_params()
        if self.module_.n_particles != self.n_particles:
            raise ValueError(f"cannot continue the particles: they were fitted with "
                             f"{self.module_.n_particles} particles; n_particles is now "
                             f"{self.n_particles}. Set warm_start=False (or call fit) to start "
                             "new particles")
        self._check_continued_layout("particles")
        X = self._validate_X(X, reset=False)
        return X, self._continuation_targets(self._match_target_columns(y), X.shape[0], partial)

    def fit(self, X, y=None, sample_weight=None, **fit_params):
        """Fit the particles on ``X`` and the target ``y`` (n_samples,) or (n_samples, n_tasks).

        Validates the data (the network's heads are sized from it), leaves out samples without
        any target, then runs skorch's training loop. With ``warm_start=True`` on a fitted
        estimator the particles continue; ``y`` must then have the same tasks (otherwise a
        ``ValueError``, and the fitted model is kept).

        Divergence stops the fit with a ``FloatingPointError`` naming the epoch (and the
        particle): a non-finite loss, score or parameter, or an epoch's mean training loss
        above 1000 times that of the fit's first mini-batch, whatever the optimiser. An
        interrupted fit re-raises ``KeyboardInterrupt``. Either way the estimator is then not
        fitted.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W), or Dataset
            Training inputs (array, DataFrame, memory map; images as (n, C, H, W) or flat
            with ``input_shape``), or a torch ``Dataset`` whose items are ``(x, y)``: its rows
            are read a batch at a time, never copied whole.
        y : array-like, default=None
            Targets (see the class description); None only with a ``Dataset`` of
            ``(x, y)`` items, whose ``y`` are then read once.
        sample_weight : array-like of shape (n_samples,), default=None
            Weight of each row in the training and validation losses, the validation split
            and the calibration (an integer weight acts like repeated rows, zero removes the
            row), for every task of a 2-D ``y``; see :ref:`ug-weights`. None: equal weights.
        **fit_params
            Passed to skorch's training loop.

        Returns
        -------
        self
        """
        X, y = self._dataset_targets(X, y)
        if self.warm_start and self.__sklearn_is_fitted__():
            X, targets = self._continue(X, y, partial=False)
            weight = self._row_weights(targets, sample_weight)
            # a warm start is a fit: its weights keep two classes a task (partial_fit's chunks
            # may weigh one)
            self._check_fit_weights(targets, weight)
            self._initialize_rules()
        else:
            self.fitted_ = False
            X, targets = self._prepare(X, y, sample_weight=sample_weight)
            weight = self._row_weights(targets, sample_weight)
            self._check_fit_weights(targets, weight)
            self.initialize()
        return self._fit_epochs(X, targets, weight, fit_params)

    def partial_fit(self, X, y=None, classes=None, sample_weight=None, **fit_params):
        """Train ``max_epochs`` more epochs on ``(X, y)``, keeping the particles.

        The first call fits new particles, sized from its targets; later calls continue them
        and must have the same tasks, with labels among those of the first call (a chunk may
        lack some classes).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            One chunk of training inputs.
        y : array-like of shape (n_samples,) or (n_samples, n_tasks)
            Its labels.
        classes : array-like, or list of array-like (one per task), default=None
            The full label set, as in scikit-learn (one array per task, as
            ``MultiOutputClassifier.partial_fit`` takes them): on the first call it fixes
            ``classes_`` (default: the labels of the first ``y``); on later calls it must
            equal it.
        sample_weight : array-like of shape (n_samples,), default=None
            Weight of each row of this chunk; None: every row counts once. (A
            ``class_weight='balanced'`` is refused here, as by scikit-learn's ``partial_fit``:
            give a ``{label: weight}`` dict.)
        **fit_params
            Passed to skorch's training loop.

        Returns
        -------
        self
        """
        check_partial_fit_class_weight(getattr(self, "class_weight", None))
        X, y = self._dataset_targets(X, y)
        if self.__sklearn_is_fitted__():
            if classes is not None:
                self._check_same_classes(classes)
            X, targets = self._continue(X, y, partial=True)
            weight = self._row_weights(targets, sample_weight)
            self._initialize_rules()
        else:
            X, targets = self._prepare(X, y, classes=classes, sample_weight=sample_weight)
            weight = self._row_weights(targets, sample_weight)
            if classes is None:
                # with the classes given, a chunk may hold (or weigh) one class of them
                self._check_fit_weights(targets, weight)
            self.initialize()
        return self._fit_epochs(X, targets, weight, fit_params)

    def _row_weights(self, targets, sample_weight):
        """(n, T) weights of the targets: ``sample_weight`` (checked) for every task, times
        the class weights of a classifier (:meth:`_target_weights`)."""
        row = check_sample_weight(sample_weight, len(targets))
        return self._check_weights(row[:, None] * self._target_weights(targets, row),
                                   self._observed(targets))

    def _check_fit_weights(self, targets, weight):
        """Checks of a fit's weights (n, T) beyond their range, fresh or warm-started (the
        classifier: every task keeps two classes)."""

    def _target_weights(self, targets, row_weight):
        """Per-target factors on top of the row weights (the classifier's class weights)."""
        return np.ones(np.shape(targets))

    def _fit_epochs(self, X, targets, weight, fit_params):
        self._check_epoch_rows(len(targets))
        # a continued fit refused before training (its validation set) keeps the model
        continuing = self.__sklearn_is_fitted__()
        self.fitted_ = False
        self._start_fit_warnings()
        observed = np.asarray(self._observed(targets))
        # samples without any (weighted) target contribute to no loss: leave them out, so
        # that no mini-batch is empty of targets (and a zero weight removes a row)
        keep = (observed & (weight > 0)).any(axis=1)
        if not keep.any():
            raise ValueError("y has no observed target with a non-zero weight in any task"
                             if observed.any() else "y has no observed target in any task")
        if not keep.all():
            X, targets, weight, observed = (take_rows(X, keep), targets[keep], weight[keep],
                                            observed[keep])
        try:
            train, valid = self._split_rows(X, targets, weight, observed, **fit_params)
        except ValueError:
            self.fitted_ = continuing
            raise
        self._start_training()
        n_train = len(train)
        data_weight = self._data_weight(train, weight, observed)
        self._fit_mean_function(X, targets, weight, train=train, valid=valid)
        stopping = valid is not None and any(
            isinstance(cb, RestoreBestEarlyStopping) for _, cb in self.callbacks_)
        lr_factor = self._resolve_batch(n_train)
        self._resolve_kernel(n_train)
        self._resolve_epochs(n_train, early_stopping=stopping)
        last_epoch = len(self.history) + self.max_epochs_
        if self.warmup_epochs >= last_epoch and self.method != "linear":
            self._warn(f"warmup_epochs={self.warmup_epochs} covers every epoch of this fit (up "
                       f"to epoch {last_epoch}): no step uses method={self.method!r}, each "
                       "particle follows its fixed task weights throughout; lower "
                       "warmup_epochs or raise max_epochs")
        for group in self.optimizer_.param_groups:
            # the rate for this fit's batch: each group's lr is its rate at ``_auto_batch`` rows,
            # kept in the group (a rate set since: :meth:`set_params`), so that a continued
            # fit does not scale it twice
            group["lr"] = group.setdefault("lr_at_auto_batch", group["lr"]) * lr_factor
        if "optimizer__weight_decay" not in vars(self):
            # a N(0, 1/prior_precision) prior on every weight, as weight decay on the mean loss
            for group in self.optimizer_.param_groups:
                group["weight_decay"] = float(self.prior_precision) / data_weight
        # skorch callbacks that count batches (ProgressBar) read the batch size from
        # get_params(): while the epochs run, the one 'auto' chose is the iterators' own
        shown = [f"{p}__batch_size" for p in ("iterator_train", "iterator_valid")
                 if isinstance(self.batch_size, str) and f"{p}__batch_size" not in vars(self)]
        for name in shown:
            setattr(self, name, self._valid_batch_rows() if name.startswith("iterator_valid")
                    else self.batch_size_)
        self._start_average(self._averages_weights())
        try:
            self._run_epochs(X, targets, (train, valid), **fit_params)
        finally:
            for name in shown:
                delattr(self, name)
            # an interrupted epoch's diagnostics never reach history; none outlive the fit
            self._step_stash = {}
        self.n_train_, self.n_valid_ = n_train, 0 if valid is None else len(valid)
        self._after_epochs(X, targets, weight, train, valid)
        rows = (self._subset_rows(valid, X, targets, weight)
                if self.calibration is not None or self._judges_networks() else None)
        outputs = self._fit_calibration(*((rows if self.calibration is not None else None)
                                          or (None, None, None)))
        self._gate_networks(X, targets, weight, train, valid, rows, outputs)
        self.fitted_ = True
        return self

    #: with 'auto' batches on more than ``_auto_batch_large`` training rows, each epoch ends
    #: with the particles' weights averaged over the fit's steps with this decay (Polyak
    #: averaging, :meth:`SklmooNetMixin._start_average`); the next epoch's steps continue from
    #: the last iterate (the regressor: :meth:`_averages_weights`). Scaling benchmark from 20,000
    #: rows: test NLL lower in 17 of 19 classifier fits (origin -0.023 to -0.040 at 20,000
    #: rows); at 2,000 rows mixed (scratch runs: chem97 +0.006 to +0.009, flights -0.004 to
    #: -0.008), hence large tables only
    _average_decay = 0.99

    def _averages_weights(self):
        """Whether this fit keeps the parameter average (``_average_decay``): with 'auto'
        batches on a large table (``_resolve_batch``)."""
        return getattr(self, "_large_table", False)

    def _valid_outputs(self, X, features=False):
        """Per-task particle outputs (n, M, ...) on the rows ``X`` (validation rows, for
        calibration), on the CPU; with ``features``, ``(features, outputs)``: also the
        networks' last features (M, n, F), float32."""
        self._set_training(False)
        feats, outs = None, []
        with torch.no_grad():
            for start in range(0, len(X), 1024):
                xb = to_tensor(X[start:start + 1024], device=self.device)
                if not features:
                    outs.append(tuple(o.detach().cpu() for o in self.infer(xb)))
                    continue
                h, out = self.module_.forward_with_features(xb)
                if feats is None:        # filled in place: no second copy of the features
                    feats = torch.empty(h.shape[0], len(X), h.shape[2], dtype=torch.float32)
                feats[:, start:start + h.shape[1]] = h.detach().cpu()
                outs.append(tuple(o.detach().cpu() for o in out))
        outs = [torch.cat(col) for col in zip(*outs)]
        return (feats, outs) if features else outs

    def get_default_callbacks(self):
        """skorch's, plus ``early_stopping``: a
        :class:`~sklmoo.estimators.RestoreBestEarlyStopping` on the validation loss (inactive
        without a validation split; ``callbacks__early_stopping=None`` turns it off,
        ``callbacks__early_stopping__patience=20`` sets it)."""
        return [*super().get_default_callbacks(),
                ("early_stopping", RestoreBestEarlyStopping(patience=self._default_patience))]

    def validation_step(self, batch, **fit_params):
        """The validation loss is the negative log-likelihood of the particles' pooled
        prediction before recalibration (the classifier: their averaged probabilities; the
        regressor: the mean and total variance), weighted mean over the tasks' observed
        samples."""
        self._set_training(False)
        Xi, yi = unpack_data(batch)
        yi, wi = batch_targets(yi)
        with torch.no_grad():
            y_pred = self.infer(Xi, **fit_params)
            y_true = to_tensor(yi, device=self.device)
            observed = self._observed(y_true)
            losses = []
            for t, out in enumerate(y_pred):
                rows = observed[:, t]
                if rows.any():
                    nll = self._pooled_nll(out[rows], y_true[rows, t])
                    if wi is not None:
                        nll = nll * to_tensor(wi, device=self.device)[rows, t].double()
                    losses.append(nll.mean())
            loss = torch.stack(losses).mean()
        return {"loss": loss, "y_pred": y_pred}

    # -- skorch hooks --------------------------------------------------------------------------

    def _head_factory(self):
        return None

    def _output_map(self):
        """The network's ``output_map`` (None: none); see the regressor's mean function."""
        return None

    def _start_training(self):
        """Called once the rows are split, before the fit changes anything of the model (a
        continuation refused before this point keeps it whole; no-op here)."""

    def _stepped_losses(self, losses):
        """The task losses (a list, None for a task without a target in the batch) that the
        particle step follows: all of them here."""
        return losses

    def _fit_mean_function(self, X, targets, weight, train=None, valid=None):
        """Fit the prior mean function of a new fit on its rows ``X``, ``targets`` with their
        (n, T) ``weight`` (every row with a target; ``train`` / ``valid``: the split's
        subsets, valid None without one; no-op here)."""

    def _after_epochs(self, X, targets, weight, train, valid):
        """After training, before calibration (no-op here; the regressor's kernel mean
        function decides there whether the networks add to it)."""

    def _judges_networks(self):
        """Whether :meth:`_gate_networks` needs the validation rows (no here)."""
        return False

    def _gate_networks(self, X, targets, weight, train, valid, rows, outputs=None):
        """After calibration, with the validation rows ``rows`` ((X, targets, weight) or
        None) and the networks' outputs on them that calibration computed (None: none):
        the classifier's linear model may stand in for a task's networks (no-op here)."""

    def initialize_module(self):
        """Build the M-particle network from the trunk and the targets seen in ``fit``."""
        if not hasattr(self, "n_tasks_"):
            raise NotFittedError(
                "the network is sized from the data: call fit. To restore parameters saved "
                "with save_params, fit an estimator with the same parameters on data with the "
                "same features and targets (max_epochs=1 is enough), then call load_params; or "
                "pickle / joblib the whole estimator")
        self.fitted_ = False          # new weights: whatever was fitted before is gone
        shape = self.input_shape_
        if self.module is None:
            factory = self._default_trunk_factory()
        else:
            factory = member_factory(self.module, **self.get_params_for("module"))
        with torch.random.fork_rng(devices=[]):
            # weights, gradients, Adam's two moments and the copies made while stacking
            self._check_member_memory("n_particles", self.n_particles, factory(), copies=6)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed_)
            self.module_ = MultiTaskParticleNet(factory, self.n_particles, self._head_widths(),
                                                input_shape=shape,
                                                head_factory=self._head_factory(),
                                                output_map=self._output_map())
        if not self.module_.trunk.member_parameters():
            raise ValueError(
                "the network's trunk has no parameters (module__hidden_units=() or a "
                "parameter-free module): MT-SGD moves the particles' shared trunk along the "
                "direction common to the tasks and each task's head on its own, so it needs "
                "a trunk to train; give it at least one hidden layer (for heads directly on X, "
                "a linear model, or L2ESamplerClassifier, fits them)")
        self._register_recalibration(self.n_tasks_)
        return self

    def _after_load_params(self):
        """Loading ``f_params`` also restores the fitted calibration (``temperature_`` /
        ``variance_scale_``, a buffer of the module)."""
        setattr(self, self._recalibration_attribute, self._loaded_recalibration())

    def initialize(self):
        """skorch's initialisation, plus the update rules built from the hyperparameters."""
        super().initialize()
        self._initialize_rules()
        return self

    #: ``kernel='auto'``: the function-space kernel up to this many training rows, the
    #: parameter kernel above (a function-space repulsion costs about M backward passes per
    #: trunk and head, each step; see the user guide)
    _auto_function_kernel_rows = 8192
    #: ... and with at most this many particles: its pairwise terms grow as the square of
    #: ``n_particles`` (M x M cotangents of each particle's outputs on the batch; 200 particles
    #: of the default 64-64 regressor on a 120-row table took 3.0 GB against 0.5 GB with the
    #: parameter kernel)
    _auto_function_kernel_particles = 64
    #: the function kernel's pairwise terms held about this many times at once (cotangents,
    #: their products and the pulled-back sums; 200 particles: 4.5)
    _function_kernel_copies = 5

    def _kernel_kind(self):
        """'function' or 'parameter': ``kernel``, or what 'auto' chose for this fit
        (``kernel_``; 'function' before any)."""
        if self.kernel == "auto":
            return getattr(self, "kernel_", "function")
        return self.kernel

    def _resolve_kernel(self, n_train):
        """``kernel_`` for a fit on ``n_train`` rows, and the rules rebuilt when it changed."""
        before = self._kernel_kind()
        self.kernel_ = (self.kernel if self.kernel != "auto" else
                        "function" if (n_train <= self._auto_function_kernel_rows and
                                       self.n_particles <= self._auto_function_kernel_particles)
                        else "parameter")
        if self.kernel_ != before:
            self._initialize_rules()

    def _check_function_kernel_memory(self, features, outputs):
        """``ValueError`` before the function kernel's pairwise terms are allocated when they
        would not fit in the device's memory: M x M cotangents of every particle's features
        and outputs on the batch, held about ``_function_kernel_copies`` times."""
        m = features.shape[0]
        per_particle = features[0].numel() + sum(o.numel() // m for o in outputs)
        need = float(m) * m * per_particle * 4 * self._function_kernel_copies
        if need < 2 ** 30:
            return                   # the default 5 particles: well under a MB; no system call
        total = self._device_memory()
        if need > total:
            raise ValueError(f"kernel='function' with n_particles={m} needs about "
                             f"{need / 2 ** 30:.3g} GiB per step for its pairwise terms (they "
                             f"grow as n_particles squared times the batch), more than the "
                             f"{total / 2 ** 30:.3g} GiB of memory of this device: lower "
                             "n_particles or batch_size, or use kernel='parameter'")

    def _initialize_rules(self):
        """The trunk and head rules (``rules_``) and the warm-up rules (``warmup_rules_``):
        built from the hyperparameters once per initialisation / fit, not every batch."""
        if self._kernel_kind() == "function":
            trunk_kernel, head_kernel = PrecomputedKernel(), PrecomputedKernel()
        else:
            trunk_kernel = head_kernel = RBFKernel(self.bandwidth)
        self.rules_ = make_update_rules(self.method, trunk_kernel, self.repulsion,
                                        self.head_repulsion, head_kernel=head_kernel,
                                        task_normalization=self.task_normalization,
                                        normalize_drive=self.normalize_drive,
                                        smooth_drive=self.smooth_drive)
        m, t = self.n_particles, self.n_tasks_
        # particle i's task weights, spread over the simplex (one-hot corners first)
        grid = (np.arange(m)[:, None] + np.arange(t)[None, :] * max(1, m // t)) % m
        weights = 1.0 + np.cos(2 * np.pi * grid / m)
        weights = np.where(weights.sum(1, keepdims=True) > 0, weights, 1.0)
        self.warmup_rules_ = (LinearScalarization(weights / weights.sum(1, keepdims=True)),
                              LinearScalarization())
        return self

    def _task_losses(self, y_pred, y_true, weight=None):
        """Per task, each particle's weighted mean loss over the task's observed samples ->
        (M,) or None (``weight``: the batch's (B, T) normalised weights, None: unweighted)."""
        # which labels are observed, read where the batch comes from (the data loader's CPU
        # tensors): no wait for the device
        seen = self._observed(to_tensor(y_true, device="cpu"))
        every = bool(seen.all())               # the usual batch: no row to pick out per task
        y_true = to_tensor(y_true, device=self.device)
        observed = None if every else seen.to(y_true.device)
        if weight is not None:
            weight = to_tensor(weight, device=self.device)
        losses = []
        for t, out in enumerate(y_pred):                             # out (B, M, ...)
            if every:
                per = self._member_losses(out, y_true[:, t])         # (B, M)
                if weight is not None:
                    per = per * weight[:, t, None]
            elif not seen[:, t].any():
                losses.append(None)
                continue
            else:
                rows = observed[:, t]
                per = self._member_losses(out[rows], y_true[rows, t])    # (b, M)
                if weight is not None:
                    per = per * weight[rows, t, None]
            losses.append(per.mean(dim=0))
        return losses

    @staticmethod
    def _mean_loss(task_losses):
        present = [x for x in task_losses if x is not None]
        if len(present) == 1:
            return present[0].mean()
        return torch.stack([x.mean() for x in present]).mean()

    def get_loss(self, y_pred, y_true, X=None, training=False):
        """Mean over tasks and particles of the masked, weighted per-sample loss."""
        return self._mean_loss(self._task_losses(y_pred, *batch_targets(y_true)))

    def train_step_single(self, batch, **fit_params):
        """One MT-SGD step: per-task scores by autograd, directions written into ``.grad``."""
        self._set_training(True)
        Xi, yi = unpack_data(batch)
        Xi = to_tensor(Xi, device=self.device)
        features, y_pred = self.module_.forward_with_features(Xi)
        losses = self._task_losses(y_pred, *batch_targets(yi))
        with torch.no_grad():                   # reported, not differentiated
            loss = self._mean_loss(losses)
        epoch = len(self.history)
        if not math.isfinite(loss.item()):      # one read (torch.isfinite: four operations more)
            raise FloatingPointError(f"non-finite training loss ({loss.item()}) in epoch {epoch};"
                                     " lower lr or check X for extreme values")
        warming_up = epoch <= self.warmup_epochs
        trunk_rule, head_rule = self.warmup_rules_ if warming_up else self.rules_
        function_space = None
        if (self._kernel_kind() == "function" and not warming_up
                and self.method in ("mtsgd", "moo_svgd")):
            self._check_function_kernel_memory(features, y_pred)
            function_space = FunctionSpace(features, y_pred, self.bandwidth, self.smooth_drive,
                                           inputs=Xi)
        try:
            info = multitask_particle_step(
                self.module_, self._stepped_losses(losses),
                trunk_rule, head_rule, function_space)
        except FloatingPointError as exc:
            raise FloatingPointError(f"sampler diverged in epoch {epoch}: {exc}") from exc
        self._stash_step(info)
        return {"loss": loss.detach(), "y_pred": y_pred}

    def _stash_step(self, info):
        """Keep this step's :class:`~sklmoo.nn.StepInfo` for this batch's history, written at
        the end of the epoch (one read from the device then, no wait now): its values are
        copied into a row of a buffer that lives for the epoch, so that no small tensor of a
        step outlives the step (kept until the epoch's end, they went with about 0.37 MB of
        free heap per step that glibc did not reuse in a million-row fit: the fit-memory
        benchmark page)."""
        values = [(name, getattr(info, name)) for name in _STEP_FIELDS]
        layout = tuple((name, None if v is None else tuple(v.shape)) for name, v in values)
        with torch.no_grad():
            present = [v.reshape(-1) for _, v in values if v is not None]
            if not present:
                return
            # copied into a float64 buffer: float32 -> float64 is exact, the same values
            self._stash_row(layout, torch.cat(present))

    def _stash_row(self, layout, row):
        stash = self.__dict__.setdefault("_step_stash", {})
        buffer, steps = stash.get(layout, (None, []))
        if buffer is None or len(steps) == len(buffer):
            grown = row.new_empty((max(getattr(self, "_batches_per_epoch", 1), 2 * len(steps)),
                                   row.numel()), dtype=torch.float64)
            if steps:
                grown[:len(steps)].copy_(buffer[:len(steps)])
            buffer = grown
        buffer[len(steps)].copy_(row)
        steps.append(len(self.history[-1]["batches"]) - 1)          # this batch's index
        stash[layout] = (buffer, steps)

    def _record_steps(self):
        """Write the epoch's :class:`~sklmoo.nn.StepInfo` into its batches of ``history``
        (``task_weights``, ``trunk_repulsion``, ``trunk_drive_norm``, ... as floats): one copy
        from the device per epoch instead of several waits per step."""
        stash, self._step_stash = self.__dict__.get("_step_stash", {}), {}
        batches = self.history[-1]["batches"]
        for layout, (buffer, steps) in stash.items():
            flat = buffer[:len(steps)].cpu().numpy()
            for row, b in zip(flat, steps):
                record, offset = {}, 0
                for field, shape in layout:
                    value = None
                    if shape is not None:
                        size = math.prod(shape)
                        value = row[offset:offset + size].reshape(shape).tolist()
                        offset += size
                    record[self._step_history_keys.get(field, field)] = value
                batches[b].update(record)

    #: the history names of :class:`~sklmoo.nn.StepInfo`'s fields (the others: as they are)
    _step_history_keys = {"weights": "task_weights", "trunk_repulsion_ratio": "trunk_repulsion",
                          "head_repulsion_ratio": "head_repulsion"}

    def _guarded_tensors(self):
        return dict(self.module_.named_parameters())

    def _networks_ignored(self):
        """True while this fit trains networks whose output its predictions will ignore (no
        advice about them is then of use)."""
        return False

    def on_epoch_end(self, net, **kwargs):
        """Detect divergence (defined in :meth:`fit`); summarise the epoch's repulsion / drive
        ratios and task weights, and warn when the repulsion outweighs the drive's scale (the
        largest epoch-mean drive norm so far): a drive that has shrunk because the task is
        fitted raises the ratio above 1 without anything for a user to change."""
        self._record_steps()
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
                norms = [(b[f"{part}_drive_norm"], b[f"{part}_repulsion_norm"]) for b in batches
                         if b.get(f"{part}_drive_norm") is not None
                         and b.get(f"{part}_repulsion_norm") is not None]
                if not norms:
                    continue
                drive, repulsive = np.mean(norms, axis=0)
                self.history.record(f"{part}_drive_norm", float(drive))
                peak = max([float(drive)] + [e.get(f"{part}_drive_norm") or 0.0
                                             for e in self.history[:-1]])
                if repulsive > peak and not self._networks_ignored():
                    self._warn(f"the {part} repulsion outweighs the drive in epoch "
                               f"{len(self.history)} (norm {repulsive:.3g}, largest drive "
                               f"{peak:.3g}): the particles mostly push each other apart; "
                               f"lower {'repulsion' if part == 'trunk' else 'head_repulsion'}")
        super().on_epoch_end(net, **kwargs)

    # -- predictions ---------------------------------------------------------------------------

    def _row_batches(self, X):
        """One batch's per-task particle outputs (list of T tensors (b, M, ...)) at a time."""
        for out in self.forward_iter(X, training=False):
            yield list(out)

    def _member_outputs(self, X):
        """Every particle's outputs per task: list of T tensors (n, M, ...) (every particle
        for every row: only for the methods that return them)."""
        outs = self._reduce_rows(X, lambda out: tuple(o.detach().cpu().numpy() for o in out))
        return [torch.from_numpy(o) for o in outs]

    def _single(self, per_task):
        return per_task[0] if self.single_task_ else per_task
