"""MTSGDRegressor: M particle networks with Gaussian heads fitted by MT-SGD, every output a task."""

import math
from fnmatch import fnmatch

import numpy as np
import torch
from sklearn.base import RegressorMixin

from ..metrics._recalibration import fit_variance_scale
from ..metrics._validation import float_targets
from ..nn import KernelMean, LinearMean, StackedGaussianHead, fit_feature_noise
from ..nn._evidence import fit_evidence_ridge
from ..nn._kernel_mean import fit_kernel_mean, refit_kernel_mean
from ._mtsgd_base import MTSGDNetBase
from ._rows import RowData, take_rows
from ._targets import regression_targets
from ._validation import ValidationSplit
from ._weights import check_sample_weight


#: the noise scales learn this many times faster than the rest of the network (see the class
#: docstring); names of their parameters in the module
NOISE_LR_FACTOR = 10.0
#: a variance factor below 1 fitted on the validation rows is applied only beyond this many
#: standard errors of its logarithm (see ``calibration`` in the class docstring)
NARROWING_MARGIN = 2.0
_NOISE_PARAMS = ("heads.*.raw_scale", "heads.*.scale.*")
#: with ``mean_function='linear'`` the networks work in units of the linear model's residual
#: standard deviation, but never below this fraction of the target's: on an (almost) exactly
#: linear target they would otherwise chase float32 rounding, their drive vanishing under the
#: repulsion (a default fit on breast_cancer's features with the target 2 x0 + x1 warned from
#: epoch 330 with a floor of 0.01, not with 0.05; every panel table's residual scale is above)
RESIDUAL_SCALE_FLOOR = 0.05
#: ``mean_function='linear'`` is used up to this many (flattened) input features; above, the
#: networks fit alone: BayesianRidge's weight covariance and the module's copy of it are
#: d x d per output (8 MB per output at 1,000 features, 800 MB at 10,000)
LINEAR_MEAN_MAX_FEATURES = 1000
#: ``mean_function='auto'`` takes the kernel (Gaussian-process) mean function up to this many
#: rows and flattened features, else the linear one: from a few hundred rows on the networks
#: over the linear model match the GP (docs/benchmarks/panel), exact GP inference is cubic in
#: the rows, and each training step evaluates the kernel against every training row
KERNEL_MEAN_MAX_ROWS = 1000
KERNEL_MEAN_MAX_FEATURES = 100
#: with the kernel mean function the networks are kept only when their validation NLL beats
#: the GP's alone by more than this many standard errors of the paired per-row difference
GATE_MARGIN = 2.0
#: ... and only when the output has at least this many validation rows (fewer cannot show it)
GATE_MIN_ROWS = 30
#: when a gate closes, the GP is refitted on every row with its kernel chosen again (a
#: cross-validation) up to this many rows; above, the training rows' choice is kept and only
#: its hyperparameters are refitted, from their optimum (the choice costs about 3x the
#: refit: 13 s against 4 s on 1,000 rows x 10 features)
RESELECT_MAX_ROWS = 500
#: heteroscedastic='auto': an input-dependent noise is fitted (:meth:`_fit_noise_maps`) only
#: with at least this many validation rows, which judge it ...
NOISE_MIN_VALID_ROWS = 300
#: ... on at most this many training rows (a seeded draw), judged on at most this many
#: validation rows: the map has a network's last features plus one coefficients per
#: particle, and the features of these rows are held in memory (M x rows x features: 13 MB
#: for five 64-unit networks). On the scaling page's four tables at 20,000 rows, 10,000
#: against 20,000 rows: test NLL within +-0.003, the fit's peak memory 60 against 85 MB
#: (33 MB without a map)
NOISE_FIT_MAX_ROWS = 10000
#: ... with these ridge penalties on its weights (on the mean loss per row); the one with
#: the lowest recalibrated validation NLL is kept if it beats the constant noise
#: (``_noise_map_wins``)
NOISE_PENALTIES = (1e-4, 1e-3, 1e-2)
#: ... and only on networks with at most this many last features: the solver's cost grows
#: with their cube (2,048 features: 131 s on 2,000 rows, against 1.2 s for the fit)
NOISE_MAP_MAX_FEATURES = 256
_MEAN_FUNCTIONS = ("auto", "kernel", "linear")


class MTSGDRegressor(RegressorMixin, MTSGDNetBase):
    """Multi-output regressor: an ensemble of particle networks fitted by MT-SGD.

    ``n_particles`` networks, each a trunk with one Gaussian head per output (a mean and a
    learned noise scale). Every output is a task: each step MT-SGD combines the outputs' scores
    for the trunks (one simplex QP over the outputs, Phan et al. 2022, Eq. 7) and each output's
    heads move by SVGD, as in the paper's SARCOS experiment. The networks fit what a GP or
    Bayesian linear model leaves over (``mean_function``). Predictions average the particles;
    the predictive variance is their mean noise variance (aleatoric) plus the variance of their
    means and the mean function's latent variance (epistemic), so ``predict(X, return_std=True)``
    works as in
    :class:`~sklearn.gaussian_process.GaussianProcessRegressor`.

    ``y`` has shape (n_samples,) or (n_samples, n_outputs), array or DataFrame (column names
    kept as ``task_names_``); NaN is a missing target, left out of its output's loss. As a
    skorch ``NeuralNet`` it takes callbacks, ``device``, ``warm_start`` and
    ``set_params(module__...)``.

    Read more in the :ref:`User Guide <ug-estimators>`; what the defaults rest on is in
    :ref:`ug-defaults` and :ref:`ug-mtsgd-regression`.

    Parameters
    ----------
    module : nn.Module class or instance, default=None
        The trunk of one particle. None: an :class:`~sklmoo.nn.MLPTrunk` (64-64 ReLU units;
        ``module__hidden_units=(256, 256)`` etc.), or a :class:`~sklmoo.nn.LeNetTrunk` for
        images, as in :class:`MTSGDMultiTaskClassifier`.
    n_particles : int, default=5
        Ensemble size M; the cost per epoch grows linearly with it.
    method : {'mtsgd', 'moo_svgd', 'mgda', 'linear'}, default='mtsgd'
        Trunk update rule, as in :class:`MTSGDMultiTaskClassifier`. 'linear' (an independent
        ensemble on the mean of the outputs' losses) favours the outputs that are easiest to
        fit; 'mgda' balances the outputs as well as 'mtsgd' and needs no kernel
        (:ref:`ug-when-to-use`).
    kernel : {'auto', 'function', 'parameter'}, default='auto'
        What the RBF kernel compares: each particle's trunk features and per-output (mean,
        scale) on the mini-batch, or the flattened parameters (faster, worse on some
        small tables). 'auto': 'function' up to 8,192 rows and 64 particles, else
        'parameter' (``kernel_``); :ref:`ug-mtsgd-regression`.
    smooth_drive, bandwidth, repulsion, head_repulsion, warmup_epochs, input_shape
        As in :class:`MTSGDMultiTaskClassifier`.
    task_normalization : {'none', 'l2'}, default='none'
        As in :class:`MTSGDMultiTaskClassifier` (the loss-based ones are not offered: a
        Gaussian NLL can be negative); the default is the paper's.
    normalize_drive : bool, default=False
        As in :class:`MTSGDMultiTaskClassifier`.
    heteroscedastic : {'auto', True, False}, default='auto'
        False: one learned noise scale per output and particle. True: the heads also predict
        a per-sample noise scale, trained with the networks. 'auto': trained as False; then,
        with at least 300 validation rows, a noise scale linear in the networks' last
        features is fitted on the training rows and kept for an output if it lowers the
        recalibrated validation NLL (``heteroscedastic_``; :ref:`ug-defaults`).
    normalize_y : bool, default=True
        Standardise every output for training (predictions come back in the original units),
        so that outputs on different scales weigh alike and the default ``lr`` suits any
        units.
    calibration : {'variance'} or None, default='variance'
        Recalibration on the validation rows: one factor per output on the predictive variance
        (``variance_scale_``), fitted by held-out Gaussian negative log-likelihood; one below
        1 is applied only beyond two standard errors of its logarithm (those rows also chose
        the early-stopping epoch). ``predict(X, return_std=True)`` and
        ``predict_uncertainty`` include it, ``predict_members`` does not. Without a
        validation split the factors stay 1. See :ref:`ug-defaults`.
    prior_precision : float, default=1.0
        Precision of an isotropic Gaussian prior on every weight, applied as weight decay
        ``prior_precision / N``, N the training rows' total weight (``optimizer__weight_decay``
        overrides it); see :ref:`ug-mtsgd`.
    mean_function : {'auto', 'kernel', 'linear'} or None, default='auto'
        What the networks build on. 'kernel': per output, a Gaussian process (constant +
        linear + RBF kernel on the standardised inputs, the RBF part kept only when a
        cross-validation on the training rows favours it) is fitted on the training rows;
        the networks learn its residuals, and after training they are kept for an output
        only if the validation rows show the pooled prediction beating the GP's alone by
        more than two standard errors (at least 30 validation rows; without a validation
        split, never); otherwise that output's GP is refitted on every row and predicts
        alone (``networks_used_``). 'linear': one :class:`~sklearn.linear_model.BayesianRidge`
        per output, fitted on all rows, under every particle (up to 1,000 flattened input
        features), its networks gated likewise against a ridge of the training rows (kept
        below 30 validation rows). The latent
        posterior variance of either is counted as epistemic. 'auto': 'kernel' up to 1,000
        rows and 100 features, else 'linear'. None: the networks fit the standardised targets
        alone. A continued fit keeps the mean function of the fit it continues. See
        :ref:`ug-mtsgd-regression`.
    random_state : int, RandomState instance or None, default=None
        Seeds the particles' initialisation, the validation split, the mini-batch order and
        what a ``module`` draws from torch's generators while it trains (e.g. dropout; the
        caller's generators are left as they were).
    criterion : torch loss class, default=torch.nn.GaussianNLLLoss
        Called per sample as ``criterion(mean, target, variance)``.
    optimizer : torch optimizer class, default=torch.optim.Adam
        Moves the particles along the update rule's directions. ``torch.optim.Adam`` and
        ``AdamW`` run torch's fused implementation on CPU and CUDA devices unless
        ``optimizer__fused``, ``optimizer__foreach`` or ``optimizer__differentiable=True`` is
        given.
    lr : float, default=1e-2
        The optimizer's learning rate (the noise scales learn at 10 times it, in their own
        parameter group unless ``optimizer__param_groups`` is set). Try 1e-3 on tables of tens
        of rows (:ref:`ug-mtsgd-regression`).
    max_epochs : int or 'auto', default='auto'
        As in :class:`MTSGDMultiTaskClassifier`: about 1000 optimiser steps, extended to at
        most three times that while the validation loss improves (on large tables up to 100
        epochs, or that extended budget when it is longer); ``max_epochs_`` holds the
        budget. When ``history[-1, 'best_epoch']`` is the last epoch, the budget ended the
        fit: pass a larger integer.
    batch_size : int or 'auto', default='auto'
        Rows per mini-batch (-1: all). 'auto': 64 up to 8,192 training rows; above, about a
        25th of them, a power of two of at most 1,024 (``batch_size_``), at the ``lr``
        given (the classifier scales its rate with the batch; the regressor's is already
        at the edge of stability there). With 'auto' and more than 16 batches an epoch,
        the validation passes and the fitted model use the particles' weights averaged over
        the fit's steps (:ref:`ug-scale`). The validation passes of a fit take
        batches of eight times as many rows (at most 4,096, never fewer than a training
        batch) unless ``iterator_valid__batch_size`` is given.
    train_split : callable or None, default=ValidationSplit(fraction=0.2)
        20 % of the rows at any size (the classifiers: less of a large table,
        :ref:`ug-scale`); otherwise as in :class:`MTSGDMultiTaskClassifier` (not stratified):
        the held-out rows drive early stopping with restore-best (their loss is the Gaussian
        negative log-likelihood of the pooled prediction; patience 30 epochs, fewer above 16
        batches an epoch: :ref:`ug-defaults`) and fit ``calibration`` and the noise map of
        ``heteroscedastic='auto'``.
    verbose : int, default=0
        0: silent. Above 0: progress output per epoch (:ref:`ug-fitting`).
    **kwargs
        Further skorch ``NeuralNet`` arguments: ``device``, ``callbacks``, ``warm_start``,
        ``module__*``, ``optimizer__*``, ``callbacks__*`` (``callbacks__early_stopping=None``
        turns early stopping off, ``callbacks__early_stopping__patience`` changes it).

    Attributes
    ----------
    n_outputs_ : int
        Number of outputs of ``y``.
    task_names_ : list of str
        The target DataFrame's column names (a Series' name), else ``output_0``, ...
    y_mean_, y_scale_ : ndarray of shape (n_outputs,)
        The standardisation of the outputs (0 and 1 with ``normalize_y=False``), kept in the
        module too (:meth:`save_params` saves it with the network).
    n_features_in_ : int
        Number of features seen in ``fit``.
    module_ : MultiTaskParticleNet
        The fitted particles (one :class:`~sklmoo.nn.StackedGaussianHead` per output) and the
        mean function (``module_.output_map``: a :class:`~sklmoo.nn.KernelMean`, a
        :class:`~sklmoo.nn.LinearMean`, or None); :meth:`save_params` saves them with the
        variance factors.
    history : skorch History
        As in :class:`MTSGDMultiTaskClassifier`: the QP's per-output weights and the
        repulsion / drive ratios.
    mean_function_ : {'kernel', 'linear'} or None
        The mean function of the last new fit ('auto' resolved).
    kernel_ : {'function', 'parameter'}
        The kernel of the last fit (``kernel`` resolved).
    networks_used_ : ndarray of shape (n_outputs,), dtype=bool
        Per output, whether the networks add to the mean function's prediction (False: the
        mean function predicts alone, see ``mean_function``).
    heteroscedastic_ : ndarray of shape (n_outputs,), dtype=bool
        Per output, whether the predicted noise depends on the input.
    variance_scale_ : ndarray of shape (n_outputs,)
        The applied factors on the predictive variance (above 1: the intervals were too
        narrow).
    batch_size_ : int
        ``batch_size`` resolved in the last fit (its training batches unless
        ``iterator_train__batch_size`` is given).
    max_epochs_ : int
        The epoch budget of the last fit.
    n_train_, n_valid_ : int
        Rows trained on and held out for validation in the last fit.
    fit_warnings_ : list of str
        The warnings of the last fit (kept when they were raised in a joblib worker too).

    See Also
    --------
    MTSGDMultiTaskClassifier : The same particles with classification heads.
    sklearn.gaussian_process.GaussianProcessRegressor : ``predict(X, return_std=True)``.

    Examples
    --------
    >>> from sklearn.datasets import load_linnerud
    >>> from sklmoo import MTSGDRegressor
    >>> X, y = load_linnerud(return_X_y=True)              # 3 outputs
    >>> reg = MTSGDRegressor(n_particles=3, max_epochs=20, random_state=0).fit(X, y)
    >>> mean, std = reg.predict(X[:4], return_std=True)
    >>> mean.shape, std.shape, bool((std > 0).all())
    ((4, 3), (4, 3), True)
    >>> reg.predict_members(X[:4]).shape                    # (particles, samples, outputs)
    (3, 4, 3)
    """

    _task_normalizations = ("none", "l2")
    #: early stopping waits 30 epochs for the validation loss to improve (see ``lr``)
    _default_patience = "auto"
    _small_table_patience = 30
    #: ... and 20 on large tables: their validation NLL improves in small, noisy steps (200,000
    #: birthdays rows: NLL -0.314 with 10, stopped at epoch 51; -0.338 with 20, best epoch 98)
    _auto_large_patience = 20
    #: ... for at least this many epochs (the extended budget when longer) but not the
    #: classifiers' 500: its validation NLL jumps by
    #: 0.05 from epoch to epoch there, and the best of more epochs is a luckier draw, not a
    #: better model (200,000 birthdays rows: best epoch 131 of 151, test NLL -0.309, against
    #: -0.338 from the best of the first 100)
    _auto_large_epochs = 100
    #: the batch 'auto' chooses, at the lr given: the regressor's 1e-2, scaled by the square
    #: root of the batch as the classifier's, is 0.04 at 1,024 rows, where the fit on 200,000
    #: birthdays rows stopped improving after its first epoch (user guide)
    _scale_lr_with_batch = False
    #: the classifier's parameter average, but from epochs of more than
    #: ``_average_min_batches`` 'auto' batches (about 1,300 rows) instead of large tables only:
    #: the scaling page's four regression tables, every cell and seed, test NLL lower in 20 of
    #: 27 fits (user guide); the panel's small tables (at most 10 batches an epoch) fit the
    #: last iterate, as before
    _average_decay = 0.99
    _average_min_batches = 16

    def _averages_weights(self):
        # batches the fit chose (not ``batch_size`` or ``iterator_train__batch_size`` given)
        return (getattr(self, "_auto_batches", False)
                and getattr(self, "_batches_per_epoch", 0) > self._average_min_batches)

    #: ... or fewer when an epoch is more than 16 batches of a given ``batch_size`` (no
    #: average): about this many optimiser steps, at least 10 epochs (2,000-row tables in
    #: batches of 64: 20; at 30, the fits on cps1988, birthdays and wvs ran 30 epochs past
    #: their best, epochs 22, 11 and 1, without improving)
    _small_table_patience_steps = 480
    #: ... about this many, at least ``_averaged_min_patience`` epochs, when the fit averages
    #: its weights (:meth:`_averages_weights`), whose validation loss is smoother. 240 steps
    #: and 10 epochs against 480: on the four scaling tables at 1,500, 2,000 and 3,000 rows
    #: (three seeds) the same best epoch in 31 of 36 fits and a better one in the other five,
    #: at 0.34-0.99 of the time; 120 steps and 5 epochs against 240 and 10: at 1,500 to
    #: 5,000 rows the same test NLL in most fits (user guide), at about 0.7 of the time
    _averaged_patience_steps = 120
    _averaged_min_patience = 5

    def _auto_patience(self, budget):
        if getattr(self, "_large_table", False):
            return self._auto_large_patience
        per_epoch = getattr(self, "_batches_per_epoch", 1)
        steps, low = ((self._averaged_patience_steps, self._averaged_min_patience)
                      if self._averages_weights() else (self._small_table_patience_steps, 10))
        return int(np.clip(math.ceil(steps / per_epoch), low, self._small_table_patience))

    def __init__(self, module=None, *, n_particles=5, method="mtsgd", kernel="auto",
                 smooth_drive=False, bandwidth="median", repulsion=1e-3, head_repulsion=1e-2,
                 warmup_epochs=0, task_normalization="none", normalize_drive=False,
                 heteroscedastic="auto",
                 normalize_y=True, input_shape=None,
                 calibration="variance", prior_precision=1.0, mean_function="auto",
                 random_state=None, criterion=torch.nn.GaussianNLLLoss,
                 optimizer=torch.optim.Adam, lr=1e-2, max_epochs="auto", batch_size="auto",
                 train_split=ValidationSplit(fraction=0.2), verbose=0, **kwargs):
        super().__init__(module, criterion=criterion, optimizer=optimizer, lr=lr,
                         max_epochs=max_epochs, batch_size=batch_size, train_split=train_split,
                         verbose=verbose, **kwargs)
        self.n_particles = n_particles
        self.method = method
        self.kernel = kernel
        self.smooth_drive = smooth_drive
        self.warmup_epochs = warmup_epochs
        self.task_normalization = task_normalization
        self.normalize_drive = normalize_drive
        self.bandwidth = bandwidth
        self.repulsion = repulsion
        self.head_repulsion = head_repulsion
        self.heteroscedastic = heteroscedastic
        self.normalize_y = normalize_y
        self.input_shape = input_shape
        self.calibration = calibration
        self.prior_precision = prior_precision
        self.mean_function = mean_function
        self.random_state = random_state

    _calibrations = ("variance",)
    _recalibration_attribute = "variance_scale_"

    def initialize_module(self):
        """The particle network, with the targets' standardisation (``y_mean_``,
        ``y_scale_``) in a buffer of its own, so that ``save_params`` / ``load_params`` keep
        the units the network predicts in."""
        super().initialize_module()
        moments = np.stack([self.y_mean_, self.y_scale_])
        self.module_.register_buffer("target_moments",
                                     torch.as_tensor(moments, dtype=torch.float64))
        return self

    def _after_load_params(self):
        """Loading ``f_params`` also restores the targets' standardisation and, with the
        kernel mean function, which outputs the networks add to (its gates)."""
        super()._after_load_params()
        self.y_mean_, self.y_scale_ = self.module_.target_moments.detach().cpu().numpy().copy()
        mean = self.module_.output_map
        if isinstance(mean, (KernelMean, LinearMean)):
            self.networks_used_ = mean.gate.cpu().numpy() > 0
        self.heteroscedastic_ = self._noise_by_input()

    def _check_params(self):
        super()._check_params()
        if not isinstance(self.normalize_y, (bool, np.bool_)):
            raise ValueError(f"normalize_y must be True or False, got {self.normalize_y!r}")
        if not (isinstance(self.heteroscedastic, (bool, np.bool_))
                or (isinstance(self.heteroscedastic, str) and self.heteroscedastic == "auto")):
            raise ValueError(f"heteroscedastic must be True, False or 'auto', got "
                             f"{self.heteroscedastic!r}")
        if self.mean_function is not None and not (isinstance(self.mean_function, str)
                                                   and self.mean_function in _MEAN_FUNCTIONS):
            raise ValueError(f"mean_function must be 'auto', 'kernel', 'linear' or None, "
                             f"got {self.mean_function!r}")

    def get_params_for_optimizer(self, prefix, named_parameters):
        """skorch's optimizer arguments, with the noise-scale parameters in their own group at
        ``NOISE_LR_FACTOR`` times the learning rate (unless ``optimizer__param_groups`` is
        given): with Adam a parameter moves at most ~lr per step, and the log noise scale has
        to travel from the standardised targets' scale (1) to the residuals' (often 0.05), which
        at lr 1e-3 would take thousands of steps and leave the intervals too wide."""
        named = list(named_parameters)
        args, kwargs = super().get_params_for_optimizer(prefix, named)
        if prefix != "optimizer" or "param_groups" in self.get_params_for(prefix):
            return args, kwargs
        noise = {id(p) for n, p in named if any(fnmatch(n, pat) for pat in _NOISE_PARAMS)}
        groups = []
        for group in args[0]:
            rest = [p for p in group["params"] if id(p) not in noise]
            scales = [p for p in group["params"] if id(p) in noise]
            if rest:
                groups.append({**group, "params": rest})
            if scales:
                groups.append({**group, "params": scales,
                               "lr": group.get("lr", kwargs["lr"]) * NOISE_LR_FACTOR})
        return (groups,), kwargs

    # -- targets ---------------------------------------------------------------------------------

    @classmethod
    def _get_class_level_metadata_request_values(cls, method_name, method=None,
                                                 ignore_params=None):
        # skorch's NeuralNet declares its partial_fit's ``classes`` unused for metadata
        # routing; this partial_fit has no ``classes``, which scikit-learn would refuse
        if method_name == "partial_fit" and method is None:
            def method(self, X, y, classes=None, sample_weight=None):
                """``partial_fit``'s routable parameters, with skorch's ``classes``."""
        return super()._get_class_level_metadata_request_values(
            method_name, method=method, ignore_params=ignore_params)

    def _check_same_classes(self, classes):
        raise ValueError("classes is for classifiers; a regressor's partial_fit takes none")

    def _prepare_targets(self, y, n_samples, classes=None, row_weight=None):
        if classes is not None:
            self._check_same_classes(classes)
        arr, self.single_task_, self.task_names_ = regression_targets(y, n_samples)
        self.n_tasks_ = self.n_outputs_ = arr.shape[1]
        used = ~np.isnan(arr).all(axis=1)
        if row_weight is not None:
            used &= row_weight > 0
        self.mean_function_ = self._resolve_mean_function(int(used.sum()))
        if row_weight is not None:
            counted = (~np.isnan(arr[row_weight > 0])).sum(axis=0)
            for name, count in zip(self.task_names_, counted):
                if count < 2:
                    raise ValueError(f"output {name!r} has {count} sample(s) with a value and "
                                     "a non-zero sample_weight; every output needs at least two")
        if self.normalize_y:
            # over the rows the fit uses (a zero weight removes a row), weighted; in units
            # of each output's largest magnitude: sums and squares of targets near the
            # float64 limit (beyond ~1e154) would overflow
            used = arr if row_weight is None else arr[row_weight > 0]
            magnitude = np.nanmax(np.abs(used), axis=0)
            unit = used / magnitude
            if row_weight is None or np.all(row_weight == row_weight[0]):
                self.y_mean_ = np.nanmean(unit, axis=0) * magnitude
                self.y_scale_ = np.nanstd(unit, axis=0) * magnitude
            else:
                self.y_mean_, self.y_scale_ = _weighted_moments(
                    unit, row_weight[row_weight > 0])
                self.y_mean_, self.y_scale_ = (self.y_mean_ * magnitude,
                                               self.y_scale_ * magnitude)
        else:
            self.y_mean_, self.y_scale_ = np.zeros(arr.shape[1]), np.ones(arr.shape[1])
        return self._standardise(arr)

    def _standardise(self, arr):
        with np.errstate(over="ignore", invalid="ignore"):
            out = (arr / self.y_scale_ - self.y_mean_ / self.y_scale_).astype(np.float32)
        if not np.isfinite(out[~np.isnan(arr)]).all():
            raise ValueError("y does not fit the network's float32 arithmetic after "
                             f"{'standardisation' if self.normalize_y else 'no scaling'} "
                             "(|value| beyond 3.4e38); "
                             + ("use normalize_y=True" if not self.normalize_y else
                                "rescale the targets"))
        return out

    def _continuation_targets(self, y, n_samples, partial):
        try:
            arr, single, _ = regression_targets(y, n_samples)
        except ValueError as exc:
            if partial:
                raise
            raise ValueError(f"cannot continue the particles: {exc}") from exc
        if arr.shape[1] != self.n_outputs_ or single != self.single_task_:
            raise ValueError(f"cannot continue the particles: they were fitted on "
                             f"{self.n_outputs_} output(s); this y has {arr.shape[1]}. Set "
                             "warm_start=False to start new particles")
        fitted_with = self.mean_function_
        if self.mean_function not in ("auto", fitted_with):
            fitted = "None" if fitted_with is None else repr(fitted_with)
            raise ValueError(
                f"cannot continue the particles: they were fitted with mean_function="
                f"{fitted} and this estimator now has mean_function="
                f"{self.mean_function!r}; set it back, or "
                + ("fit anew" if partial else "set warm_start=False")
                + " to start new particles")
        built = self._heads_mode()
        if built is not None and built != _head_mode(self.heteroscedastic):
            raise ValueError(
                f"cannot continue the particles: their heads were built for heteroscedastic="
                f"{built!r} and this estimator now has heteroscedastic="
                f"{self.heteroscedastic!r}; set it back, or "
                + ("fit anew" if partial else "set warm_start=False")
                + " to start new particles")
        # the standardisation of the first fit stays: the heads were trained in its units
        return self._standardise(arr)

    def _validation_targets(self, y, n_samples):
        arr, _, _ = regression_targets(y, n_samples, check_spread=False)
        if arr.shape[1] != self.n_outputs_:
            raise ValueError(f"its y has {arr.shape[1]} output(s); the fit's has "
                             f"{self.n_outputs_}")
        return self._standardise(arr)

    @staticmethod
    def _observed(targets):
        return targets == targets                                   # not NaN

    def _head_widths(self):
        return [1] * self.n_outputs_

    def _head_factory(self):
        mode = self.heteroscedastic

        def gaussian_head(n_particles, n_features, _width):
            if isinstance(mode, str):
                return StackedGaussianHead(n_particles, n_features, noise_map=True)
            return StackedGaussianHead(n_particles, n_features, heteroscedastic=bool(mode))
        return gaussian_head

    def _resolve_mean_function(self, n_rows):
        """The mean function a new fit on ``n_rows`` rows gets: ``mean_function``, with
        'auto' the kernel one up to ``KERNEL_MEAN_MAX_ROWS`` rows and
        ``KERNEL_MEAN_MAX_FEATURES`` features, else the linear one; the linear one only up to
        ``LINEAR_MEAN_MAX_FEATURES`` flattened features (above: None)."""
        d = int(np.prod(self.input_shape_))
        choice = self.mean_function
        if choice == "auto":
            choice = ("kernel" if n_rows <= KERNEL_MEAN_MAX_ROWS
                      and d <= KERNEL_MEAN_MAX_FEATURES else "linear")
        if choice == "linear" and d > LINEAR_MEAN_MAX_FEATURES:
            choice = None
        return choice

    def _output_map(self):
        d = int(np.prod(self.input_shape_))
        kind = getattr(self, "mean_function_", None)
        if kind == "linear":
            return LinearMean(d, self.n_outputs_)
        if kind == "kernel":
            return KernelMean(d, self.n_outputs_)
        return None

    def _fit_mean_function(self, X, targets, row_weight, train=None, valid=None):
        """A new fit's mean function. Linear: per output, a :class:`BayesianRidge` (evidence-
        tuned prior and noise precisions) on every row's observed, standardised target with
        its weight, the validation rows included: its evidence needs no held-out rows, and a
        small table needs every row. Kernel: per output, a Gaussian process
        (:func:`~sklmoo.nn._kernel_mean.fit_kernel_mean`) on the training rows only, so that
        the validation rows can judge what the networks add (:meth:`_after_epochs`). A
        continued fit keeps the one it started with."""
        mean = self.module_.output_map
        self._new_mean_function = mean is not None and not bool(mean.fitted)
        if not self._new_mean_function:
            return
        if isinstance(mean, KernelMean):
            # the training rows: all of X unless the split held some out (a validation set
            # of other rows holds none of X's)
            held_out = valid is not None and hasattr(train, "indices")
            rows = (np.asarray(train.indices, dtype=np.int64) if held_out
                    else np.arange(len(X)))
            self._first_kernel_fits = self._kernel_fits(X, targets, row_weight, rows)
            mean.set(self._first_kernel_fits, scale_floor=RESIDUAL_SCALE_FLOOR)
            return
        fits, self._linear_noise = self._linear_fits(X, targets, row_weight)
        mean.set(*fits)
        # the networks' gate (:meth:`_set_gates`) compares them with a linear model that has
        # not seen the validation rows: the training rows' own (a validation set of other rows
        # was never in X)
        self._first_linear_fits = None
        if valid is not None and len(valid) >= GATE_MIN_ROWS:
            if getattr(valid, "validation_rows", None) is not None:
                self._first_linear_fits = fits, self._linear_noise
            elif hasattr(train, "indices"):
                rows = np.zeros(len(X), dtype=bool)
                rows[np.asarray(train.indices, dtype=np.int64)] = True
                self._first_linear_fits = self._linear_fits(X, targets, row_weight, rows)

    def _linear_fits(self, X, targets, row_weight, rows=None):
        """``(LinearMean.set's arguments, noise)``: per output, a :class:`BayesianRidge` fit
        on its observed, weighted targets of the rows ``rows`` (a mask; None: all); its
        residual scale floored at ``RESIDUAL_SCALE_FLOOR`` of the target's spread for the
        networks, and unfloored (``noise``, (T,)) for the ridge predicting alone."""
        d, T = int(np.prod(X.shape[1:])), self.n_outputs_
        weight, bias = np.zeros((T, d)), np.zeros(T)
        scale, center, covariance = np.ones(T), np.zeros((T, d)), np.zeros((T, d, d))
        noise = np.ones(T)
        for t in range(T):
            observed = ~np.isnan(targets[:, t]) & (True if rows is None else rows)
            if observed.sum() >= 2:
                # BayesianRidge's fit, from statistics streamed over X (no float64 copy)
                linear = fit_evidence_ridge(X, targets[:, t], observed, row_weight[:, t])
                weight[t], bias[t] = linear.coef, linear.intercept
                center[t], covariance[t] = linear.center, linear.sigma
                # the floor is a fraction of the target's spread (1 when standardised)
                spread = float(np.std(targets[observed, t])) or 1.0
                noise[t] = np.sqrt(1.0 / linear.alpha)
                scale[t] = max(noise[t], RESIDUAL_SCALE_FLOOR * spread)
        return (weight, bias, scale, center, covariance), noise

    def _start_training(self):
        # a continued fit trains with the constant noise; its noise maps are fitted again after
        # (reset only now: a continuation refused for its validation set keeps them)
        self._reset_noise_maps()
        # outputs whose mean function predicts alone (a continued fit keeps its gates), read
        # once here rather than from the module at every step
        gate = getattr(self.module_.output_map, "gate", None)
        self._switched_off = (None if gate is None
                              else (gate.detach().cpu().numpy() == 0).tolist())
        if self._switched_off and any(self._switched_off):
            # only a continued fit starts with a closed gate
            off = [n for n, gone in zip(self.task_names_, self._switched_off) if gone]
            self._warn(f"output(s) {off} predict with their mean function alone "
                       "(networks_used_ False after the earlier fit), and a continued fit "
                       "keeps the mean function and its gates: these rows change none of "
                       "their predictions; fit with warm_start=False to fit them on these "
                       "rows")

    def _stepped_losses(self, losses):
        """The output losses the particle step follows: an output whose gate is closed (a
        continued fit) is left out while another is trained, as an output without a target
        in the batch is. Its loss no longer depends on the networks, and MT-SGD's min-norm
        task weights would otherwise give it the trunk's whole weight: the others' scores
        drop out and the trunks move by the repulsion alone."""
        off = getattr(self, "_switched_off", None)
        if not off or not any(off) or all(off):
            return losses
        return [None if gone else loss for gone, loss in zip(off, losses)]

    def _fit_epochs(self, *args, **kwargs):
        try:
            return super()._fit_epochs(*args, **kwargs)
        finally:
            # the training rows' fits serve :meth:`_after_epochs` only, also after a failure
            for name in ("_first_kernel_fits", "_first_linear_fits", "_linear_noise"):
                self.__dict__.pop(name, None)

    def _kernel_fits(self, X, targets, row_weight, rows, tasks=None, first=None):
        """One :class:`KernelFit` per output on ``rows`` (its observed, weighted targets;
        None for an output with fewer than two), for the outputs in ``tasks`` (all: None);
        with ``first`` (a fit per output), above ``RESELECT_MAX_ROWS`` rows that output's
        model refitted (:func:`refit_kernel_mean`) instead of chosen again."""
        X2 = np.asarray(X).reshape(len(X), -1)
        fits = []
        for t in range(self.n_outputs_):
            if tasks is not None and t not in tasks:
                fits.append(None)
                continue
            sel = rows[~np.isnan(targets[rows, t]) & (row_weight[rows, t] > 0)]
            if len(sel) < 2:
                fits.append(None)
            elif first is not None and first[t] is not None and len(sel) > RESELECT_MAX_ROWS:
                fits.append(refit_kernel_mean(first[t], X2[sel], targets[sel, t],
                                              row_weight[sel, t]))
            else:
                fits.append(fit_kernel_mean(X2[sel], targets[sel, t], row_weight[sel, t],
                                            random_state=self.seed_))
        return fits

    def _networks_ignored(self):
        # a new kernel mean function with fewer than GATE_MIN_ROWS validation rows (or none):
        # every gate will close (:meth:`_after_epochs`)
        if self._fit_split is None:
            return False
        valid = self._fit_split[1]
        return ((valid is None or len(valid) < GATE_MIN_ROWS)
                and isinstance(self.module_.output_map, KernelMean)
                and getattr(self, "_new_mean_function", False))

    def _after_epochs(self, X, targets, weight, train, valid):
        """After training: the kernel mean function's gates (:meth:`_set_gates`), the noise
        maps (:meth:`_fit_noise_maps`), then the linear mean function's gates, which judge the
        networks with their noise maps (an output whose gate closes loses its map)."""
        self._set_gates(X, targets, weight, valid)
        self._fit_noise_maps(X, targets, weight, train, valid)
        mean = self.module_.output_map
        if isinstance(mean, LinearMean) and getattr(self, "_new_mean_function", False):
            self._set_linear_gates(X, targets, weight, valid)
            for head, used in zip(self._noise_heads(), self.networks_used_):
                if not used:
                    head.set_noise_map()
            self.heteroscedastic_ = self._noise_by_input()

    def _set_gates(self, X, targets, weight, valid):
        """With a new mean function: per output, the networks keep adding to it only if the
        pooled prediction's validation NLL beats the mean function's alone by more than
        ``GATE_MARGIN`` standard errors (paired over at least ``GATE_MIN_ROWS`` rows;
        ``networks_used_``). Kernel: the GP of the training rows judged, a closed gate's GP
        refitted on every row; without validation rows every gate closes. Linear: after the
        noise maps (:meth:`_set_linear_gates`)."""
        mean = self.module_.output_map
        T = self.n_outputs_
        self.networks_used_ = np.ones(T, dtype=bool)
        if isinstance(mean, LinearMean):
            # a new one's gates are set after the noise maps (:meth:`_after_epochs`)
            self.networks_used_ = mean.gate.cpu().numpy() > 0
            return
        # the training rows' GP fits (:meth:`_fit_mean_function`), needed only here
        first = getattr(self, "_first_kernel_fits", None)
        if not isinstance(mean, KernelMean) or not getattr(self, "_new_mean_function", False):
            if isinstance(mean, KernelMean):
                self.networks_used_ = mean.gate.cpu().numpy() > 0
            return
        if valid is None:
            # no validation rows (too few to split, or train_split=None): nothing shows that
            # the networks help, and the GP was fitted on every row
            self.networks_used_[:] = False
            mean.set_gate(np.zeros(T))
            return
        X_valid, t_valid, w_valid = self._subset_rows(valid, X, targets, weight)
        off = self._closed_gates(self._gate_outputs(mean, X_valid, 1.0),
                                 self._gate_outputs(mean, X_valid, 0.0), t_valid, w_valid)
        self.networks_used_[off] = False
        if off:
            # up to RESELECT_MAX_ROWS rows the kernel is chosen again too (on a small table
            # the validation rows are a large share of the evidence); above, the training
            # rows' choice is refitted
            mean.set(self._kernel_fits(X, targets, weight, np.arange(len(X)), tasks=set(off),
                                       first=first),
                     scale_floor=RESIDUAL_SCALE_FLOOR)
        mean.set_gate(self.networks_used_.astype(float))

    def _set_linear_gates(self, X, targets, weight, valid):
        """:meth:`_set_gates` for a new linear mean function: the networks (with their noise
        maps) against the training rows' Bayesian ridge, put in place of the every-row one
        for the comparison (that one predicts), each recalibrated on the validation rows as
        ``calibration`` would, so that a variance off by a constant factor counts against
        neither. An output with fewer than ``GATE_MIN_ROWS`` observed validation rows keeps
        its networks, and so does every output without such a split (none, too few rows, or a
        custom split returning neither index subsets nor a validation set of other rows).
        A closed output predicts with the ridge's own residual scale."""
        first = getattr(self, "_first_linear_fits", None)
        if first is None:
            return
        (fits, noise), mean = first, self.module_.output_map
        X_valid, t_valid, w_valid = self._subset_rows(valid, X, targets, weight)
        kept = {name: buffer.clone() for name, buffer in mean.state_dict().items()}
        try:
            mean.set(*fits)
            networks = self._gate_outputs(mean, X_valid, 1.0)
            # the ridge predicting alone: its own residual scale, without the networks' floor
            with torch.no_grad():
                mean.scale.copy_(torch.as_tensor(noise, dtype=mean.scale.dtype))
            alone = self._gate_outputs(mean, X_valid, 0.0)
        finally:
            mean.load_state_dict(kept)
        off = self._closed_gates(networks, alone, t_valid, w_valid,
                                 recalibrate=self.calibration is not None,
                                 few_rows_close=False)
        gate = np.ones(self.n_outputs_)
        gate[off] = 0.0
        mean.set_gate(gate)
        with torch.no_grad():
            for t in off:
                mean.scale[t] = float(self._linear_noise[t])
        self.networks_used_ = gate > 0

    def _gate_outputs(self, mean, X_valid, gate):
        """The network's outputs on ``X_valid`` with every output's gate at ``gate``."""
        mean.set_gate(np.full(self.n_outputs_, gate))
        return self._valid_outputs(X_valid)

    def _closed_gates(self, networks, alone, t_valid, w_valid, recalibrate=False,
                      few_rows_close=True):
        """The outputs whose networks (``networks``: the validation outputs with the gates
        open) do not show a pooled NLL below the mean function's alone (``alone``: closed) by
        more than ``GATE_MARGIN`` standard errors of the paired per-row difference; an output
        with fewer than ``GATE_MIN_ROWS`` such rows is among them with ``few_rows_close``.
        With ``recalibrate``, each NLL after the rows' own variance factor."""
        off = []
        for t in range(self.n_outputs_):
            rows = ~np.isnan(t_valid[:, t]) & (w_valid[:, t] > 0)
            if rows.sum() < GATE_MIN_ROWS:
                if few_rows_close:
                    off.append(t)
                continue
            w = w_valid[rows, t] / w_valid[rows, t].mean()
            losses = []
            for out in (networks, alone):
                out = out[t][torch.as_tensor(rows)].double()
                losses.append(_recalibrated_nll(out[..., 0].T, out[..., 1].T ** 2,
                                                t_valid[rows, t], w_valid[rows, t],
                                                recalibrate))
            diff = w * (losses[0] - losses[1])
            se = diff.std(ddof=1) / np.sqrt(rows.sum())
            if not diff.mean() + GATE_MARGIN * se < 0:
                off.append(t)
        return off

    def _heads_mode(self):
        """What the module's Gaussian heads were built for (True, False or 'auto'), or None
        without them."""
        heads = list(getattr(getattr(self, "module_", None), "heads", []))
        if not heads or not all(isinstance(h, StackedGaussianHead) for h in heads):
            return None
        return _head_mode(heads[0])

    def _noise_by_input(self):
        """Per output, whether the fitted heads' noise depends on the input
        (``heteroscedastic_``): not where the mean function predicts alone."""
        by_input = np.array([bool(h.heteroscedastic or h.noise_map_active)
                             for h in self.module_.heads])
        return by_input & np.asarray(getattr(self, "networks_used_", True), dtype=bool)

    def _noise_heads(self):
        """The heads that carry a noise map (heteroscedastic='auto'), one per output, or []."""
        return list(self.module_.heads) if self._heads_mode() == "auto" else []

    def _reset_noise_maps(self):
        for head in self._noise_heads():
            head.set_noise_map()
        if hasattr(self, "heteroscedastic_"):
            self.heteroscedastic_ = self._noise_by_input()

    def _fit_noise_maps(self, X, targets, weight, train, valid):
        """heteroscedastic='auto': per output, a noise scale linear in the networks' last
        features (:func:`~sklmoo.nn.fit_feature_noise`, the networks fixed) fitted on up to
        ``NOISE_FIT_MAX_ROWS`` training rows for each of ``NOISE_PENALTIES``; the best by
        recalibrated validation NLL is kept when it beats the constant noise
        (:func:`_noise_map_wins`, on at most as many validation rows; ``heteroscedastic_``).
        Needs ``NOISE_MIN_VALID_ROWS`` validation rows."""
        T = self.n_outputs_
        heads = self._noise_heads()
        self.heteroscedastic_ = self._noise_by_input()
        width = int(heads[0].noise_weight.shape[1]) if heads else 0
        if (not heads or width > NOISE_MAP_MAX_FEATURES or valid is None or train is None
                or len(valid) < NOISE_MIN_VALID_ROWS):
            return
        parts = self._noise_map_rows(X, targets, weight, train, valid, width)
        if parts is None:
            return
        fit_rows, valid_rows = parts
        (h_fit, out_fit), (h_val, out_val) = (self._valid_outputs(part[0], features=True)
                                              for part in (fit_rows, valid_rows))
        mean_map = self.module_.output_map
        for t, head in enumerate(heads):
            if not getattr(self, "networks_used_", np.ones(T, dtype=bool))[t]:
                continue
            coef = 1.0 if mean_map is None else mean_map.variance_coefficient(t)
            sel_f, mu_f, rest_f, y_f, w_f = self._noise_terms(head, coef, out_fit[t],
                                                              *fit_rows[1:], t)
            sel_v, mu_v, rest_v, y_v, w_v = self._noise_terms(head, coef, out_val[t],
                                                              *valid_rows[1:], t)
            if len(y_f) < 2 or len(y_v) < NOISE_MIN_VALID_ROWS // 2:
                continue
            raw0 = head.raw_scale.detach().to("cpu", torch.float64)[:, 0]
            h_f, h_v = (h if bool(sel.all()) else h[:, sel]
                        for h, sel in ((h_fit, sel_f), (h_val, sel_v)))
            losses, maps = [], []
            w_map = torch.zeros(h_val.shape[0], h_val.shape[2], dtype=torch.float64)
            b_map = torch.zeros(h_val.shape[0], dtype=torch.float64)
            # the constant noise first, then the penalties from the largest, each fit starting
            # from the last one's solution
            for penalty in (None,) + tuple(sorted(NOISE_PENALTIES, reverse=True)):
                if penalty is not None:
                    w_map, b_map = fit_feature_noise(
                        h_f, (y_f - mu_f) ** 2, raw0, coef, rest_f, weight=w_f,
                        penalty=penalty, min_std=head.min_std, init=(w_map, b_map))
                # the map's range on the rows it was fitted on bounds it elsewhere
                low, high = _aminmax(_linear_map(h_f, w_map, b_map))
                raw = raw0[:, None] + _linear_map(h_v, w_map, b_map).clamp(low, high)
                sd = torch.nn.functional.softplus(raw) + head.min_std
                losses.append(_recalibrated_nll(mu_v, coef * sd ** 2 + rest_v, y_v.numpy(),
                                                w_v.numpy(), self.calibration is not None))
                maps.append((w_map, b_map, low, high))
            w = (w_v / w_v.mean()).numpy()
            best = 1 + int(np.argmin([np.mean(w * loss) for loss in losses[1:]]))
            if _noise_map_wins(losses[best] - losses[0], w):
                head.set_noise_map(*maps[best])
                self.heteroscedastic_[t] = True

    def _noise_map_rows(self, X, targets, weight, train, valid, width):
        """``(fit_rows, valid_rows)``, each ``(X, targets, weight)`` of at most
        ``_at_most`` rows (a draw seeded by the fit's seed): the training rows, an index
        subset of X's or all of them beside a validation set of other rows (skorch's
        ``predefined_split``), and the validation rows; None when the split is of another
        kind."""
        own = getattr(valid, "validation_rows", None)
        if hasattr(train, "indices"):
            fit_index = np.asarray(train.indices, dtype=np.int64)
        elif own is not None and isinstance(train, RowData) and len(train) == len(X):
            fit_index = np.arange(len(X))
        else:
            return None
        if own is not None:
            source, valid_index = own, np.arange(len(own[0]))
        elif hasattr(valid, "indices"):
            source, valid_index = (X, targets, weight), np.asarray(valid.indices, dtype=np.int64)
        else:
            return None
        rng = np.random.RandomState(self.seed_)
        fit_rows = _at_most(fit_index, rng, width)        # drawn first, then the validation's
        valid_rows = _at_most(valid_index, rng, width)
        return (tuple(take_rows(a, fit_rows) for a in (X, targets, weight)),
                tuple(take_rows(a, valid_rows) for a in source))

    @staticmethod
    def _noise_terms(head, coef, outputs, targets, weight, t):
        """Output t's rows with an observed target and a positive weight: their mask (n,),
        the particles' means (M, n), the variance the output map adds to their
        ``coef * sigma^2`` (M, n), the targets and the weights (n,), float64."""
        sel = torch.as_tensor(~np.isnan(targets[:, t]) & (weight[:, t] > 0))
        out = outputs[sel].double()                                    # (n, M, C)
        mean, std = out[..., 0].T, out[..., 1].T
        sigma = (torch.nn.functional.softplus(head.raw_scale.detach().cpu().double())
                 + head.min_std)                                       # (M, 1)
        rest = (std ** 2 - coef * sigma ** 2).clamp_min(0.0)
        y = torch.as_tensor(targets[sel.numpy(), t], dtype=torch.float64)
        w = torch.as_tensor(weight[sel.numpy(), t], dtype=torch.float64)
        return sel, mean, rest, y, w

    def _member_losses(self, outputs, target):
        """(b, M) Gaussian negative log-likelihood of every particle's (mean, scale)."""
        mean, std = outputs[..., 0], outputs[..., 1]
        return self.criterion_(mean, target[:, None].expand_as(mean), std ** 2)

    @staticmethod
    def _pooled_nll(outputs, target):
        """(b,) Gaussian negative log-likelihood of the particles' pooled prediction (mean and
        total variance, as ``predict(X, return_std=True)``), in standardised units."""
        mean, var = _pooled_moments(outputs[..., 0].double().T, outputs[..., 1].double().T ** 2)
        return 0.5 * (torch.log(2 * np.pi * var) + (target.double() - mean) ** 2 / var)

    def _fit_calibration(self, X_valid, targets_valid, weight=None):
        """``variance_scale_``: one factor per output on the predictive variance, fitted on
        the validation rows (1 without calibration or validation rows)."""
        self.variance_scale_ = np.ones(self.n_outputs_)
        if X_valid is not None and len(X_valid):
            outputs = self._valid_outputs(X_valid)
            means, stds = self._batch_moments(outputs, standardised=True)
            mean = means.mean(axis=0)
            std = np.sqrt(sum(self._variance_parts(means, stds, self._linear_variance(outputs))))
            targets_valid = np.asarray(targets_valid, dtype=np.float64)
            for t in range(self.n_outputs_):
                self.variance_scale_[t] = fit_variance_scale(
                    targets_valid[:, t], mean[:, t], std[:, t],
                    narrowing_margin=NARROWING_MARGIN,
                    sample_weight=None if weight is None else weight[:, t])
            # an output whose networks were switched off has its mean function fitted on every
            # row, the validation rows included: they cannot calibrate it
            self.variance_scale_[~getattr(self, "networks_used_", True)] = 1.0
        self._store_recalibration(self.variance_scale_)

    def _scaled_variance(self, variance):
        scale = getattr(self, "variance_scale_", None)
        return variance if scale is None else variance * scale

    # -- predictions ---------------------------------------------------------------------------

    def _member_moments(self, X):
        """Per-particle means and standard deviations in the original units, (M, n, T) each."""
        outputs = self._member_outputs(X)
        means, stds = self._batch_moments(outputs)
        # each particle's noise: without the linear mean function's (shared) weight variance
        noise = np.maximum((stds / self.y_scale_) ** 2 - self._linear_variance(outputs), 0.0)
        return means, np.sqrt(noise) * self.y_scale_

    def _batch_moments(self, outputs, standardised=False):
        """Per-task (n, M, 2) head outputs -> particle means and stds (M, n, T), in original
        units (or in the standardised ones the network works in)."""
        outs = [o.detach().to("cpu", torch.float64).numpy() for o in outputs]
        stacked = np.stack(outs, axis=-1).transpose(1, 0, 3, 2)      # (M, n, T, 2)
        if standardised:
            return stacked[..., 0], stacked[..., 1]
        return (stacked[..., 0] * self.y_scale_ + self.y_mean_, stacked[..., 1] * self.y_scale_)

    def _ensemble_moments(self, X):
        """Ensemble mean (original units) and the aleatoric and epistemic variances in
        standardised units ((n, T) each), streamed over rows: squaring in original units would
        overflow for targets beyond ~1e154."""
        def reduce(out):
            means, stds = self._batch_moments(out, standardised=True)
            parts = self._variance_parts(means, stds, self._linear_variance(out))
            result = (means.mean(axis=0) * self.y_scale_ + self.y_mean_,
                      *(self._scaled_variance(v) for v in parts))
            if not all(np.isfinite(r).all() for r in result):
                raise ValueError("the predictive mean or variance is not finite: X holds "
                                 "values too far beyond the training data for the networks "
                                 "(float32) to evaluate; rescale X")
            return result

        return self._reduce_rows(X, reduce)

    def _original_variance(self, variance):
        with np.errstate(over="ignore"):
            out = variance * self.y_scale_ ** 2
        if not np.isfinite(out).all():
            raise ValueError("the predictive variance in the units of y exceeds the float64 "
                             "range (targets beyond ~1e154): use predict(X, return_std=True), "
                             "or rescale y")
        return out

    def _shaped(self, a):
        return a[..., 0] if self.single_task_ else a

    @staticmethod
    def _linear_variance(outputs):
        """(n, T) variance of the linear mean function's prediction, standardised units (the
        square of the third output channel when ``mean_function='linear'``, else 0)."""
        if outputs[0].shape[-1] < 3:
            return 0.0
        return np.stack([o[:, 0, 2].detach().to("cpu", torch.float64).numpy() ** 2
                         for o in outputs], axis=-1)

    @staticmethod
    def _variance_parts(means, stds, linear=0.0):
        """(aleatoric, epistemic) variance of the ensemble from the particles' moments: their
        mean noise variance and the variance of their means (law of total variance). The
        linear mean function's variance ``linear``, part of every particle's, is uncertainty
        about its weights: it moves from the first to the second."""
        aleatoric = np.maximum((stds ** 2).mean(axis=0) - linear, 0.0)
        return aleatoric, means.var(axis=0) + linear

    def predict(self, X, return_std=False):
        """Ensemble mean, shaped like ``y`` ((n_samples,) or (n_samples, n_outputs)).

        Parameters
        ----------
        X : array-like
        return_std : bool, default=False
            Also return the predictive standard deviation, :math:`\\sqrt{\\text{aleatoric} +
            \\text{epistemic}}` (:meth:`predict_uncertainty`).

        Returns
        -------
        mean : ndarray
        std : ndarray, only with ``return_std=True``
        """
        mean, aleatoric, epistemic = self._ensemble_moments(X)
        if not return_std:
            return self._shaped(mean)
        return self._shaped(mean), self._shaped(np.sqrt(aleatoric + epistemic) * self.y_scale_)

    def partial_fit(self, X, y=None, sample_weight=None, **fit_params):
        """Train ``max_epochs`` more epochs on ``(X, y)``, keeping the particles.

        The first call fits new particles (and the linear mean function, see
        ``mean_function``); later calls continue them, in the first call's standardisation, and
        must have the same outputs.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            One chunk of training inputs, with the features of the first call.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Its targets (NaN: missing).
        sample_weight : array-like of shape (n_samples,), default=None
            Weight of each row of this chunk, for every output; None: every row counts once.
        **fit_params
            Passed to skorch's training loop.

        Returns
        -------
        self
        """
        # here only for its signature and docstring: MTSGDNetBase.partial_fit's ``classes``
        # is for the classifier (given to a regressor it still raises a ValueError)
        return super().partial_fit(X, y, sample_weight=sample_weight, **fit_params)

    @property
    def predict_proba(self):
        # skorch's NeuralNet defines it; a regressor has none (hasattr() is then False, so
        # scikit-learn never takes this estimator for a classifier)
        raise AttributeError(f"{type(self).__name__} has no predict_proba: use "
                             "predict(X, return_std=True) for the predictive distribution")

    def predict_members(self, X, return_std=False):
        """Every particle's predictive mean (and noise standard deviation with
        ``return_std=True``): arrays of shape (n_particles, n_samples) or
        (n_particles, n_samples, n_outputs).

        Parameters
        ----------
        X : array-like
            Inputs, with the features seen in ``fit``.
        return_std : bool, default=False
            Also return each particle's noise standard deviation (without the calibration
            factor, and without the linear mean function's weight variance, which
            :meth:`predict_uncertainty` counts as epistemic: with ``mean_function='linear'``
            the members' noise and spread do not add up to ``predict``'s variance).

        Returns
        -------
        means : ndarray
        stds : ndarray, only with ``return_std=True``
        """
        means, stds = self._member_moments(X)
        return (self._shaped(means), self._shaped(stds)) if return_std else self._shaped(means)

    def predict_uncertainty(self, X):
        """Per-sample, per-output split of the predictive variance (original units squared).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Inputs, with the features seen in ``fit``.

        Returns
        -------
        uncertainty : dict of str to ndarray of shape (n_samples,) or (n_samples, n_outputs)
            ``'total'``, ``'aleatoric'`` and ``'epistemic'``, shaped like ``y``: total =
            aleatoric (the particles' mean noise variance) + epistemic (the variance of the
            particles' means, plus the mean function's latent variance: the GP's or the
            linear model's), the law of total variance over the ensemble. Both
            parts include the fitted ``variance_scale_``.
        """
        _, aleatoric, epistemic = (self._original_variance(v) if i else v
                                   for i, v in enumerate(self._ensemble_moments(X)))
        return {"total": self._shaped(aleatoric + epistemic),
                "aleatoric": self._shaped(aleatoric), "epistemic": self._shaped(epistemic)}

    def score(self, X, y, sample_weight=None):
        """:math:`R^2` of the ensemble mean, averaged uniformly over the outputs (scikit-learn's
        multi-output default). Missing targets (NaN) are left out of their output's
        :math:`R^2`; a DataFrame ``y`` is matched to the fit's columns by name, as in
        ``fit``.

        Parameters
        ----------
        X : array-like
            Inputs.
        y : array-like
            True labels / targets.
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        float
        """
        pred = self.predict(X)
        y = self._match_target_columns(y)
        arr = float_targets(y)
        if (arr.shape != pred.shape and arr.ndim + pred.ndim == 3 and len(arr) == len(pred)
                and arr.size == pred.size):
            arr = arr.reshape(pred.shape)        # (n,) against (n, 1), or the other way round
        if arr.shape != pred.shape:
            raise ValueError(f"y has shape {arr.shape} but the predictions have {pred.shape}")
        if np.isinf(arr).any():
            raise ValueError("y holds inf: R^2 is undefined for infinite targets")
        arr, pred = arr.reshape(len(arr), -1), pred.reshape(len(pred), -1)
        w = None if sample_weight is None else check_sample_weight(sample_weight, len(arr))
        scores = []
        for t in range(arr.shape[1]):
            rows = ~np.isnan(arr[:, t])
            if rows.sum() >= 2 and (w is None or w[rows].sum() > 0):
                scores.append(_r2_scale_free(arr[rows, t], pred[rows, t],
                                             None if w is None else w[rows]))
        if not scores:
            raise ValueError("y has no output with two or more observed values (of positive "
                             "weight)")
        return float(np.mean(scores))


def _at_most(rows, rng, width):
    """``rows``, or a sorted draw of ``NOISE_FIT_MAX_ROWS`` of them when there are more (fewer
    for networks wider than 64 features, so that the features held stay the same size)."""
    most = NOISE_FIT_MAX_ROWS * 64 // max(width, 64)
    return rows if len(rows) <= most else np.sort(rng.choice(rows, most, replace=False))


def _head_mode(value):
    """True, False or 'auto' from a ``heteroscedastic`` value or a built head."""
    if isinstance(value, StackedGaussianHead):
        return "auto" if value.noise_map else bool(value.heteroscedastic)
    return value if isinstance(value, str) else bool(value)


def _noise_map_wins(diff, weight):
    """Whether a noise map whose per-row validation NLL differs from the constant noise's by
    ``diff`` (n,) (rows weighted by ``weight``, mean 1) is kept: its weighted mean NLL is
    lower, and so is the mean of the differences clipped to their 1st-99th percentiles, by
    more than ``GATE_MARGIN`` standard errors (a few outlying rows decide the plain mean of a
    heavy-tailed difference, either way)."""
    if not np.average(diff, weights=weight) < 0:
        return False
    clipped = weight * np.clip(diff, *np.percentile(diff, [1, 99]))
    se = clipped.std(ddof=1) / np.sqrt(len(clipped))
    return bool(clipped.mean() + GATE_MARGIN * se < 0)


def _linear_map(h, weight, bias):
    """(M, n) ``h @ weight + bias`` per member, in float64 (h (M, n, F) float32)."""
    return torch.bmm(h, weight.float()[:, :, None])[..., 0].double() + bias.double()[:, None]


def _aminmax(values):
    """Per member (M, 1) minimum and maximum of (M, n) values."""
    return values.min(1, keepdim=True).values, values.max(1, keepdim=True).values


def _pooled_moments(means, variances):
    """The particles' pooled mean and total variance (n,) from their means and variances
    (M, n): the mean of the variances plus the variance of the means."""
    return means.mean(0), variances.mean(0) + means.var(0, unbiased=False)


def _recalibrated_nll(means, variances, y, weight, recalibrate=True):
    """(n,) Gaussian NLL of the particles' pooled prediction (means, variances (M, n)) after
    the validation rows' variance factor (as ``calibration='variance'`` fits it; none with
    ``recalibrate=False``)."""
    mean, var = (v.numpy() for v in _pooled_moments(means, variances))
    if recalibrate:
        var = var * fit_variance_scale(y, mean, np.sqrt(var),
                                       narrowing_margin=NARROWING_MARGIN, sample_weight=weight)
    return 0.5 * (np.log(2 * np.pi * var) + (y - mean) ** 2 / var)


def _weighted_moments(arr, weight):
    """Per column of ``arr`` (n, T), the weighted mean and standard deviation of its observed
    (not NaN) entries."""
    mean, std = np.empty(arr.shape[1]), np.empty(arr.shape[1])
    for t in range(arr.shape[1]):
        rows = ~np.isnan(arr[:, t])
        mean[t] = np.average(arr[rows, t], weights=weight[rows])
        std[t] = np.sqrt(np.average((arr[rows, t] - mean[t]) ** 2, weights=weight[rows]))
    return mean, std


def _r2_scale_free(y, pred, weight=None):
    """:math:`R^2 = 1 - SS_{res} / SS_{tot}` (scikit-learn's ``r2_score``, 1 for a perfect
    prediction of a constant target, 0 for an imperfect one) with each sum of squares taken
    in units of its own largest term: squares of targets beyond ~1e154 overflow, and of
    targets below ~1e-154 underflow, into a NaN or a silent 0."""
    weight = np.ones(len(y)) if weight is None else np.asarray(weight, dtype=np.float64)
    scale = max(np.abs(y).max(), np.abs(pred).max())
    if np.isfinite(scale) and scale > 0:
        y, pred = y / scale, pred / scale
    deviation = y - np.average(y, weights=weight)
    residual = y - pred
    s_tot, s_res = np.abs(deviation).max(), np.abs(residual).max()
    if s_res == 0:
        return 1.0
    if s_tot == 0:
        return 0.0
    ratio = (np.sum(weight * (residual / s_res) ** 2)
             / np.sum(weight * (deviation / s_tot) ** 2))
    with np.errstate(over="ignore"):
        return float(1.0 - (s_res / s_tot) ** 2 * ratio)
