"""MTSGDMultiTaskClassifier: M particle networks fitted by MT-SGD, as a skorch/sklearn estimator."""

import numpy as np
import torch
from sklearn.base import ClassifierMixin

from ..metrics import entropy_decomposition
from ..metrics._validation import check_label_kinds
from ..metrics._recalibration import apply_temperature, fit_temperature, pool_log_linear
from ..nn import LinearLogits
from ._linear_gate import builds_linear, gate_rows, judge_task, task_parts
from ._mtsgd_base import MTSGDNetBase
from ._validation import ValidationSplit
from ._weights import check_weighted_classes, class_weights
from ._targets import (as_2d_targets, as_task_columns, check_missing_label, decode_predictions,
                       default_names, encode_targets, encode_with_classes, missing_mask,
                       task_column)

#: standard deviation of the Gaussian prior on the log of each task's calibration temperature.
#: Tighter than the 0.5 of the other recalibrations: the test-optimal log temperatures of this
#: estimator's pool had a median magnitude of 0.20 on the real-data panel when it was set,
#: and a temperature fitted on a few dozen validation rows strays further than that
#: (Multi-Digits, 60 rows per task, in the run that set this value: 1.93 fitted against 1.47
#: optimal on the test images); see ``calibration``.
TEMPERATURE_PRIOR_SCALE = 0.25


class MTSGDMultiTaskClassifier(ClassifierMixin, MTSGDNetBase):
    """Multi-task classifier: an ensemble of particle networks fitted by MT-SGD.

    ``n_particles`` networks, each a trunk with one head per task. Every step the T tasks'
    scores for the trunks are combined by MT-SGD (one simplex QP over the tasks, Phan et al.
    2022, Eq. 7) and each task's heads move by SVGD (Eq. 9): the particles move towards what is
    likely under every task while a kernel's repulsion keeps them apart. Predictions pool the
    particles, recalibrated on a held-out split (``calibration``).

    ``y`` follows :class:`~sklearn.multioutput.MultiOutputClassifier`: shape (n_samples,
    n_tasks), any labels per task (strings too), missing labels (NaN / None) allowed, column
    names kept as ``task_names_``. A 1-D ``y`` is one task (MT-SGD is then SVGD) and makes an
    ordinary scikit-learn classifier. As a skorch ``NeuralNet`` it takes callbacks, ``device``,
    ``warm_start`` and ``set_params(module__...)``.

    Read more in the :ref:`User Guide <ug-estimators>`; what the defaults rest on is in
    :ref:`ug-defaults` and :ref:`ug-mtsgd`.

    Parameters
    ----------
    module : nn.Module class or instance, default=None
        The trunk of one particle, mapping a batch to (batch, n_features) (give it an
        ``n_features_out`` attribute or let the estimator probe it). None: an
        :class:`~sklmoo.nn.MLPTrunk` for tabular ``X``, a :class:`~sklmoo.nn.LeNetTrunk` for
        images, given as (n, C, H, W) or flat with ``input_shape``. ``module__name=value`` sets
        its arguments.
    n_particles : int, default=5
        Ensemble size M; the cost per epoch grows linearly with it.
    method : {'mtsgd', 'moo_svgd', 'mgda', 'linear'}, default='mtsgd'
        Trunk update rule: MT-SGD; MOO-SVGD (per-particle MGDA weights, then SVGD); per-particle
        MGDA; or linear scalarisation (the mean task gradient: an independent ensemble, the
        baseline to compare with, see :ref:`ug-when-to-use`). Heads move by SVGD with 'mtsgd'
        and 'moo_svgd', by their own gradient otherwise.
    kernel : {'parameter', 'function', 'auto'}, default='parameter'
        What the RBF kernel compares: the flattened parameters (a weak repulsion: the particles
        behave almost as an independent ensemble) or each particle's outputs on the mini-batch
        (a real repulsion and more diversity, at a higher cost per epoch). Try 'function' when
        the ensemble itself is overconfident; see :ref:`ug-mtsgd`. 'auto': 'function' up to
        8,192 rows and 64 particles, else 'parameter' (the regressor's default; ``kernel_``).
    smooth_drive : bool, default=False
        False: each particle follows its own score and the kernel only sets the repulsion.
        True: each follows the kernel-weighted average of all particles' scores (SVGD's form,
        the paper's exact MT-SGD).
    bandwidth : 'median' or float, default='median'
        Length scale of the RBF kernel; 'median' is the median heuristic (:doc:`/math`).
    repulsion : float, default=1e-3
        Coefficient of the trunks' repulsive term. Lower it when the estimator warns that the
        repulsion outweighs the drive (``history`` records their ratio per epoch).
    head_repulsion : float, default=1e-2
        The same for the heads' SVGD.
    warmup_epochs : int, default=0
        Epochs at the start during which particle i follows its own fixed task weights, spread
        over the simplex (the authors' warm-up), before ``method`` takes over.
    task_normalization : {'none', 'l2', 'loss', 'loss+'}, default='l2'
        How each particle's per-task trunk gradient is rescaled before the task weights are
        solved: to unit norm ('l2', the authors' training script), divided by the task's loss
        ('loss') or by loss times norm ('loss+'), or not at all ('none', the paper's equations,
        which starve a hard task). See :ref:`ug-unequal-tasks`.
    normalize_drive : bool, default=False
        With a ``task_normalization``, whether the trunks also move along the rescaled
        gradients (True, the authors' script) or only take the task weights from them (False:
        a task that is fitted stops driving the trunk).
    input_shape : tuple of int, default=None
        Shape of one sample when images are passed flat, e.g. ``(1, 12, 12)``.
    missing_label : scalar, default=None
        A label value meaning "unlabelled", besides NaN / None; such entries are left out of
        their task's loss.
    calibration : {'logit_temperature', 'temperature'} or None, default='logit_temperature'
        Recalibration on the validation rows: one temperature per task (``temperature_``),
        fitted by held-out negative log-likelihood with a log-normal prior centred at 1.
        'logit_temperature' tempers the particles' log-linear pool (the softmax of their
        averaged logits), 'temperature' their averaged probabilities (as scikit-learn's
        ``CalibratedClassifierCV(method='temperature')``); None returns the averaged
        probabilities. ``predict_proba_members`` and ``predict_uncertainty`` describe the
        uncalibrated particles. Without a validation split the temperatures stay 1
        (:ref:`ug-defaults`).
    prior_precision : float, default=0.0
        Precision of an isotropic Gaussian prior on every weight, applied as weight decay
        ``prior_precision / N``, N the training rows' total weight (``optimizer__weight_decay``
        overrides it). Off by
        default: early stopping is the classifier's regulariser (:ref:`ug-mtsgd`).
    linear_gate : bool, default=True
        Per task, a Bayesian logistic regression stands in for the networks where its
        validation NLL is not higher (``networks_used_``; tasks of at most 300 linear
        parameters and 30 labelled validation rows; :ref:`ug-linear-gate`).
    class_weight : dict, 'balanced', list of these, or None, default=None
        Weights of the labels, as in scikit-learn: ``{label: weight}`` or 'balanced'
        (``n_samples / (n_classes * np.bincount(y))``, counting ``sample_weight``); for a
        2-D ``y``, 'balanced' or a list with one entry per task. They multiply ``fit``'s
        ``sample_weight`` (:ref:`ug-weights`).
    random_state : int, RandomState instance or None, default=None
        Seeds the particles' initialisation, the validation split, the mini-batch order and
        what a ``module`` draws from torch's generators while it trains (e.g. dropout; the
        caller's generators are left as they were).
    criterion : torch loss class, default=torch.nn.CrossEntropyLoss
        The per-sample loss of one particle's logits.
    optimizer : torch optimizer class, default=torch.optim.Adam
        Moves the particles along the update rule's directions. ``torch.optim.Adam`` and
        ``AdamW`` run torch's fused implementation on CPU and CUDA devices unless
        ``optimizer__fused``, ``optimizer__foreach`` or ``optimizer__differentiable=True`` is
        given.
    lr : float, default=1e-3
        The optimizer's learning rate.
    max_epochs : int or 'auto', default='auto'
        Epochs per call to ``fit``. 'auto': about 1000 optimiser steps (10 to 500 epochs),
        extended to at most three times that (and 500 epochs) while early stopping sees the
        validation loss improve; with ``batch_size='auto'`` on more than 8,192 training rows,
        up to 150 epochs (or the extended budget, when longer) with a patience of 10.
        ``max_epochs_`` holds the budget chosen. A ``history[-1, 'best_epoch']`` at the last
        epoch means the budget ended the fit.
    batch_size : int or 'auto', default='auto'
        Rows per mini-batch (-1: all). 'auto': 64 up to 8,192 training rows; above, about a
        25th of them, a power of two of at most 1,024 (``batch_size_``), with ``lr`` scaled
        by the square root of the batch's size over 64 (``lr`` is the rate at 64 rows).
        With 'auto' above 8,192 rows, the validation passes and the fitted model use the
        particles' weights averaged over the fit's steps (moving average, decay 0.99);
        training continues from the last step (:ref:`ug-scale`). Validation batches are
        eight times larger (at most 4,096 rows) unless ``iterator_valid__batch_size``.
    train_split : callable or None, default=ValidationSplit()
        The internal validation split: by default 20 % of up to 10,000 rows, 2,000 rows up
        to 20,000 and 10 % above (at least 5, none when fewer than 10 would
        remain), stratified and seeded by ``random_state``. Its loss drives the
        default ``early_stopping`` callback (restore-best; patience in :ref:`ug-mtsgd`) and
        its rows fit ``calibration`` and judge ``linear_gate``. None: train on every row for
        ``max_epochs_`` epochs, without calibration.
    verbose : int, default=0
        0: silent. Above 0: progress output per epoch (:ref:`ug-fitting`).
    **kwargs
        Further skorch ``NeuralNet`` arguments: ``device``, ``callbacks``, ``warm_start``,
        ``module__*``, ``optimizer__*``, ``callbacks__*`` (``callbacks__early_stopping=None``
        turns early stopping off, ``callbacks__early_stopping__patience=50`` changes it).

    Attributes
    ----------
    classes_ : ndarray, or list of ndarray
        The labels (one array per task for a 2-D ``y``), in ``y``'s dtype (integers where
        missing labels made them float).
    task_names_ : list of str
        The target DataFrame's column names (a Series' name), else ``task_0``, ...
    n_features_in_ : int
        Number of features seen in ``fit``.
    module_ : MultiTaskParticleNet
        The fitted particles; :meth:`save_params` saves them with the temperatures and how
        they pool the particles.
    history : skorch History
        Per batch, ``task_weights`` (the trunk rule's task weights) and ``trunk_repulsion`` /
        ``head_repulsion`` (repulsion / drive norm ratios); per epoch their means,
        ``task_weights_std``, and with a validation split ``valid_loss`` and ``best_epoch``.
    temperature_ : ndarray of shape (n_tasks,)
        The fitted temperatures (above 1: the pool was overconfident and is softened; below
        1: underconfident and sharpened).
    networks_used_ : ndarray of bool, shape (n_tasks,)
        Per task, whether its networks predict (``linear_gate``).
    kernel_ : {'function', 'parameter'}
        The kernel of the last fit (``kernel`` resolved).
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
    MTSGDRegressor : The same particles with Gaussian heads, for regression.
    L2ESamplerClassifier : A Bayesian network classifier sampled by SG-MCMC chains.

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
                 warmup_epochs=0, task_normalization="l2", normalize_drive=False,
                 input_shape=None,
                 missing_label=None,
                 calibration="logit_temperature", prior_precision=0.0, linear_gate=True,
                 class_weight=None, random_state=None, criterion=torch.nn.CrossEntropyLoss,
                 optimizer=torch.optim.Adam, lr=1e-3, max_epochs="auto", batch_size="auto",
                 train_split=ValidationSplit(), verbose=0, **kwargs):
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
        self.input_shape = input_shape
        self.missing_label = missing_label
        self.calibration = calibration
        self.prior_precision = prior_precision
        self.linear_gate = linear_gate
        self.class_weight = class_weight
        self.random_state = random_state

    _calibrations = ("logit_temperature", "temperature")
    _recalibration_attribute = "temperature_"

    def _check_params(self):
        super()._check_params()
        check_missing_label(self.missing_label)

    # -- targets ---------------------------------------------------------------------------------

    def _prepare_targets(self, y, n_samples, classes=None, row_weight=None):
        y, self.single_task_ = as_task_columns(y)
        if classes is None:
            codes, classes, self.task_names_ = encode_targets(y, n_samples, self.missing_label)
        else:
            classes = self._given_classes(classes, self.single_task_)
            for t, labels in enumerate(classes):
                if missing_mask(labels, self.missing_label).any():
                    raise ValueError(f"classes of task {t} hold NaN, None or the missing-label "
                                     f"marker (missing_label={self.missing_label!r}): "
                                     f"{labels.tolist()}; give the labels only")
            arr, names = as_2d_targets(y, n_samples)
            self.task_names_ = names or default_names(arr.shape[1])
            codes = encode_with_classes(y, n_samples, classes, self.task_names_,
                                        self.missing_label)
        self.n_tasks_ = len(classes)
        self.classes_ = classes[0] if self.single_task_ else classes
        return codes

    @staticmethod
    def _given_classes(classes, single_task):
        """``classes`` of ``partial_fit`` as one sorted label array per task."""
        per_task = [classes] if single_task else list(classes)
        out = [np.unique(np.asarray(c)) for c in per_task]
        for t, c in enumerate(out):
            if c.ndim != 1 or len(c) < 2:
                raise ValueError(f"classes must give at least 2 labels for every task; task {t} "
                                 f"has {c.tolist()}")
        return out

    def _check_same_classes(self, classes):
        given = self._given_classes(classes, self.single_task_)
        fitted = self._task_classes()
        if len(given) != len(fitted) or not all(
                np.array_equal(a, b) for a, b in zip(given, fitted)):
            raise ValueError(f"classes={[c.tolist() for c in given]} differs from the classes "
                             f"of the first call, {[c.tolist() for c in fitted]}")

    def _continuation_targets(self, y, n_samples, partial):
        y, single = as_task_columns(y)
        fitted = self._task_classes()
        if partial:
            return encode_with_classes(y, n_samples, fitted, self.task_names_,
                                       self.missing_label)
        try:
            codes, classes, _ = encode_targets(y, n_samples, self.missing_label)
        except ValueError as exc:
            raise ValueError(f"cannot continue the particles: {exc}") from exc
        if single != self.single_task_ or len(classes) != self.n_tasks_ or not all(
                np.array_equal(a, b) for a, b in zip(classes, fitted)):
            raise ValueError(
                "cannot continue the particles: they were fitted on classes "
                f"{[c.tolist() for c in fitted]}; this y has "
                f"{[c.tolist() for c in classes]}. Set warm_start=False to start new particles")
        return codes

    @staticmethod
    def _observed(codes):
        return codes >= 0

    def _reads_weight_scale(self):
        """Also with ``linear_gate``: its evidence-tuned logistic regression counts a weight as
        that many observations, as scikit-learn's does."""
        return bool(self.linear_gate) or super()._reads_weight_scale()

    def _task_classes(self):
        """The classes as a list with one array per task, whatever the target's form."""
        return [self.classes_] if self.single_task_ else self.classes_

    def _head_widths(self):
        return [len(c) for c in self._task_classes()]

    def _member_losses(self, logits, target):
        """(b, M) cross-entropy of every particle's logits (b, M, C) against labels (b,)."""
        return self.criterion_(logits.transpose(1, 2),
                               target.long()[:, None].expand(-1, logits.shape[1]))

    @staticmethod
    def _pooled_nll(logits, target):
        """(b,) negative log-likelihood of the particles' averaged probabilities."""
        logp = torch.logsumexp(torch.log_softmax(logits.double(), dim=-1), dim=1)
        logp = logp - np.log(logits.shape[1])
        return -logp.gather(1, target.long()[:, None])[:, 0]

    def initialize_module(self):
        """The particle network, plus a buffer that records per task how the fitted
        temperatures pool the particles (0: averaged probabilities, 1: averaged
        log-probabilities), so that ``save_params`` / ``load_params`` carry it with them."""
        super().initialize_module()
        self._ensure_pool_buffer()
        return self

    def _ensure_pool_buffer(self):
        """Register the pooling buffer (zeros: averaged probabilities) on a module that lacks
        it -- a new one, or one unpickled from a version before the pooling was recorded."""
        if not hasattr(self.module_, "recalibration_pool"):
            self.module_.register_buffer("recalibration_pool",
                                         torch.zeros(self.n_tasks_, dtype=torch.float64))
            self.module_.register_load_state_dict_pre_hook(_pool_of_older_files)

    def _before_load_params(self):
        """A module unpickled from an older version gets the pooling buffer, so that a file
        of this version (which holds it) loads."""
        self._ensure_pool_buffer()

    def _log_linear_pool(self, t):
        pool = getattr(getattr(self, "module_", None), "recalibration_pool", None)
        return pool is not None and bool(pool[t].item())

    def _target_weights(self, codes, row_weight):
        """The class weights of every target (``class_weight``), 1 when None."""
        return class_weights(self.class_weight, codes, self._task_classes(), row_weight,
                             self.task_names_)

    def _check_fit_weights(self, codes, weight):
        check_weighted_classes(codes, weight, self._task_classes(), self.task_names_)

    def _fit_calibration(self, X_valid, codes_valid, weight=None):
        """``temperature_``: one temperature per task on the pooled probabilities of the
        validation rows; 'logit_temperature' pools the particles log-linearly first. A task
        without calibration or labelled validation rows keeps temperature 1 on the averaged
        probabilities. Returns the particles' outputs on ``X_valid`` (None without rows),
        which the linear gate reads too."""
        self._ensure_pool_buffer()
        self.temperature_ = np.ones(self.n_tasks_)
        with torch.no_grad():
            self.module_.recalibration_pool.zero_()
        outs = None
        if X_valid is not None and len(X_valid):
            codes_valid = np.asarray(codes_valid)
            outs = self._valid_outputs(X_valid)
            for t, logits in enumerate(outs):
                if not (codes_valid[:, t] >= 0).any():
                    continue
                with torch.no_grad():
                    self.module_.recalibration_pool[t] = float(
                        self.calibration == "logit_temperature")
                self.temperature_[t] = fit_temperature(
                    self._pool(logits, t), codes_valid[:, t], prior_scale=TEMPERATURE_PRIOR_SCALE,
                    sample_weight=None if weight is None else weight[:, t])
        self._store_recalibration(self.temperature_)
        return outs

    # -- the linear model ------------------------------------------------------------------------

    def _linear_tasks(self):
        """Per task, whether ``linear_gate`` builds it a linear model."""
        return [bool(self.linear_gate) and builds_linear(len(c), self.input_shape_)
                for c in self._task_classes()]

    def _output_map(self):
        if not any(self._linear_tasks()):
            return None
        return LinearLogits(int(np.prod(self.input_shape_)), self.n_particles,
                            self._head_widths())

    def _judges_networks(self):
        return self._linear_map() is not None

    def _after_load_params(self):
        """Loading also restores which tasks' networks the linear model stands in for."""
        super()._after_load_params()
        linear = self._linear_map()
        self.networks_used_ = (np.ones(self.n_tasks_, dtype=bool) if linear is None
                               else linear.gate.cpu().numpy() > 0)

    def _linear_map(self):
        linear = getattr(getattr(self, "module_", None), "output_map", None)
        return linear if isinstance(linear, LinearLogits) else None

    def _start_training(self):
        # every fit trains the networks of every task: a continued fit's closed gates open
        # until the networks are judged again (:meth:`_gate_networks`)
        super()._start_training()
        linear = self._linear_map()
        if linear is not None:
            linear.set_gate(np.ones(self.n_tasks_))

    def _gate_networks(self, X, codes, weight, train, valid, rows, outputs=None):
        """``linear_gate``: per task, a Bayesian logistic regression of the training rows is
        compared with the recalibrated networks on the validation rows ``rows`` ((X, codes,
        weight), None without a split; :func:`~._linear_gate.judge_task`); where its weighted
        NLL is not higher, the task's gate closes (``networks_used_``): the model refitted on
        every row the fit saw stands in for the particles, its draws' average uncalibrated
        (temperature 1)."""
        self.networks_used_ = np.ones(self.n_tasks_, dtype=bool)
        linear = self._linear_map()
        parts = None if linear is None else gate_rows(X, codes, weight, train, valid, rows)
        if parts is None:
            return
        pooled = []

        def networks(t):
            if not pooled:
                # the particles' outputs calibration computed (without calibration, here)
                outs = outputs if outputs is not None else self._valid_outputs(parts[1][0])
                pooled.extend(self._pooled_proba(lg, u) for u, lg in enumerate(outs))
            return pooled[t]

        gate = np.ones(self.n_tasks_)
        for t, built in enumerate(self._linear_tasks()):
            if built and judge_task(linear, t, task_parts(parts, t), lambda: networks(t),
                                    len(self._task_classes()[t]), self.n_particles,
                                    [self.seed_, t], self._valid_batch_rows()):
                gate[t] = 0.0
                self.temperature_[t] = 1.0
                with torch.no_grad():
                    self.module_.recalibration_pool[t] = 0.0
        linear.set_gate(gate)
        self.networks_used_ = gate > 0
        self._store_recalibration(self.temperature_)

    def _pool(self, logits, t):
        """Task t's (b, M, C) particle logits -> (b, C) pooled probabilities, before the
        temperature: their average, or with 'logit_temperature' their log-linear pool."""
        if self._log_linear_pool(t):
            return pool_log_linear(
                torch.log_softmax(logits.double(), dim=-1).transpose(0, 1).cpu().numpy(),
                log=True)
        return self._member_proba(logits).mean(axis=0)

    def _pooled_proba(self, logits, t):
        """Task t's calibrated ensemble probabilities of one batch."""
        temperature = getattr(self, "temperature_", None)
        proba = self._pool(logits, t)
        return proba if temperature is None else apply_temperature(proba, temperature[t])

    # -- predictions ---------------------------------------------------------------------------

    @staticmethod
    def _member_proba(logits):
        """(b, M, C) logits -> (M, b, C) float64 probabilities."""
        return torch.softmax(logits.double(), dim=-1).transpose(0, 1).cpu().numpy()

    def _members_per_task(self, X):
        return [self._member_proba(lg) for lg in self._member_outputs(X)]

    def predict_proba_members(self, X):
        """Class probabilities of every particle: list of T arrays (M, n_samples, n_classes_t)
        (one array for a 1-D ``y``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Inputs, with the features seen in ``fit``.

        Returns
        -------
        list of ndarray, or ndarray for a 1-D ``y``
        """
        return self._single(self._members_per_task(X))

    def predict_proba(self, X):
        """Ensemble class probabilities (the particles' pool, recalibrated): list of T float64
        arrays (n_samples, n_classes_t), columns in ``classes_[t]`` order (one array for a 1-D
        ``y``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Inputs, with the features seen in ``fit``.

        Returns
        -------
        list of ndarray, or ndarray for a 1-D ``y``
        """
        return self._single(list(self._reduce_rows(
            X, lambda out: tuple(self._pooled_proba(lg, t) for t, lg in enumerate(out)))))

    def _predict_codes(self, X):
        (codes,) = self._reduce_rows(X, lambda out: (np.column_stack(
            [self._pool(lg, t).argmax(axis=1) for t, lg in enumerate(out)]),))
        return codes

    def predict(self, X):
        """Most probable label of each task -> (n_samples, n_tasks), original labels
        ((n_samples,) for a 1-D ``y``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Inputs, with the features seen in ``fit``.

        Returns
        -------
        ndarray of shape (n_samples, n_tasks) or (n_samples,)
        """
        labels = decode_predictions(self._predict_codes(X), self._task_classes())
        return labels[:, 0] if self.single_task_ else labels

    def predict_uncertainty(self, X):
        """Per-sample, per-task predictive entropy split (nats).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Inputs, with the features seen in ``fit``.

        Returns
        -------
        uncertainty : dict of str to ndarray of shape (n_samples, n_tasks) or (n_samples,)
            ``'total'``, ``'aleatoric'`` and ``'epistemic'`` (1-D for a 1-D ``y``): the
            entropy of the particles' average = the particles' expected entropy (aleatoric) +
            the mutual information between label and particle (epistemic).
        """
        def reduce(out):
            parts = [entropy_decomposition(self._member_proba(lg)) for lg in out]
            return tuple(np.column_stack([part[i] for part in parts]) for i in range(3))

        out = dict(zip(("total", "aleatoric", "epistemic"), self._reduce_rows(X, reduce)))
        return {k: v[:, 0] for k, v in out.items()} if self.single_task_ else out

    def score(self, X, y, sample_weight=None):
        """Mean over tasks of the accuracy on each task's labelled samples.

        (scikit-learn's ``accuracy_score`` rejects multiclass-multioutput targets.) A label not
        seen in fit counts as a wrong prediction, labels of another type (numbers for a fit
        on strings) are an error; tasks without any labelled sample in ``y`` are left out of
        the mean. A DataFrame ``y`` is matched to the fit's columns by name, as in ``fit``.

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
        pred = decode_predictions(self._predict_codes(X), self._task_classes())
        y = as_task_columns(self._match_target_columns(y))[0]
        arr, _ = as_2d_targets(y, len(pred))
        if arr.shape[1] != self.n_tasks_:
            raise ValueError(f"y has {arr.shape[1]} task columns but the estimator was fitted "
                             f"on {self.n_tasks_} tasks")
        if sample_weight is None:
            w = np.ones(len(pred))
        else:
            w = np.asarray(sample_weight, dtype=np.float64)
            if w.shape != (len(pred),):
                raise ValueError(f"sample_weight has shape {w.shape}; expected ({len(pred)},), "
                                 "one weight per sample of X")
            if not np.isfinite(w).all() or (w < 0).any():
                raise ValueError("sample_weight must be finite and non-negative")
        accs = []
        for t in range(self.n_tasks_):
            col = task_column(y, arr, t)
            lab = ~missing_mask(col, self.missing_label)
            if lab.any() and w[lab].sum() > 0:
                check_label_kinds(col[lab], self._task_classes()[t],
                                  f"task {self.task_names_[t]!r}: ", "the fitted classes_")
                hits = np.array([a == b for a, b in zip(col[lab].tolist(),
                                                        pred[lab, t].tolist())], dtype=float)
                accs.append(np.average(hits, weights=w[lab]))
        if not accs:
            raise ValueError("y has no labelled sample in any task" if sample_weight is None
                             else "y has no labelled sample of positive sample_weight in any "
                             "task")
        return float(np.mean(accs))


def _pool_of_older_files(module, state_dict, prefix, *args):
    """Parameters saved before the pooling was recorded were fitted on averaged probabilities."""
    state_dict.setdefault(prefix + "recalibration_pool",
                          torch.zeros_like(module.recalibration_pool))

