"""MTSGDMultiTaskClassifier: M particle networks fitted by MT-SGD, as a skorch/sklearn estimator."""

import numpy as np
import torch
from sklearn.base import ClassifierMixin

from ..metrics import entropy_decomposition
from ..metrics._recalibration import apply_temperature, fit_temperature, pool_log_linear
from ._mtsgd_base import MTSGDNetBase
from ._validation import ValidationSplit
from ._targets import (as_2d_targets, as_task_columns, decode_predictions, encode_targets,
                       encode_with_classes, missing_mask)

#: standard deviation of the Gaussian prior on the log of each task's calibration temperature.
#: Tighter than the 0.5 of the other recalibrations: the test-optimal log temperatures of this
#: estimator's pool have a median magnitude of 0.20 on the real-data panel, and a temperature
#: fitted on a few dozen validation rows strays further than that (Multi-Digits, 60 rows per
#: task: 1.93 fitted against 1.47 optimal on the test images); see ``calibration``.
TEMPERATURE_PRIOR_SCALE = 0.25


class MTSGDMultiTaskClassifier(ClassifierMixin, MTSGDNetBase):
    """Multi-task classifier: an ensemble of particle networks fitted by MT-SGD.

    ``n_particles`` networks share nothing but the algorithm: each has its own trunk and one
    head per task. Every step, the T task posteriors' scores for the trunks are combined by
    MT-SGD (one simplex QP over the T tasks, Phan et al. 2022, Eq. 7) and each task's heads move
    by SVGD (Eq. 9), so the particles settle in the region that is likely under every task at
    once while the kernel's repulsion keeps them diverse. Predictions pool the particles (by
    default log-linearly, then recalibrated; see ``calibration``).

    A skorch ``NeuralNet``: callbacks, ``history``, ``device='cuda'``, ``save_params``,
    ``warm_start`` and ``set_params(module__...)`` work as in skorch (``load_params`` into an
    estimator fitted on data of the same shape, e.g. with ``max_epochs=1``). ``y`` follows
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
        both, the extra diversity of the function kernel gave no better NLL or ECE than an
        independent ensemble at about 3x the time per epoch, while the parameter kernel cost
        1.4-1.6x, tied the independent ensemble's NLL and separated rotated test images
        slightly better. Choose
        'function' when the ensemble itself is overconfident (a positive signed confidence -
        accuracy gap), where more diversity can help.
    smooth_drive : bool, default=False
        Whether each particle's drive is the kernel-weighted average of all particles' scores
        (SVGD's form, the paper's exact MT-SGD) or its own score (the kernel then only sets the
        repulsion; MT-SGD's U is then the Gram matrix of the directions in L2 over the
        particles), for the trunks and the heads, with either kernel. With the median
        bandwidth every other particle weighs about 1/(M+1) of a particle's own score in the
        smoothed drive: the particles partly follow each other's gradients (on the unequal-task
        problems of ``docs/benchmarks/unequal_tasks.md`` the mean NLL stayed within 0.006 of
        the independent ensemble's, single seeds moved by up to 0.03 either way).
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
    task_normalization : {'none', 'l2', 'loss', 'loss+'}, default='l2'
        How each particle's per-task trunk gradient is rescaled before the trunk rule weighs
        the tasks (:func:`~sklmoo.samplers.normalize_task_scores`): ``'l2'`` to unit norm (the
        MT-SGD authors' training script), ``'loss'`` / ``'loss+'`` divided by the task's loss
        (resp. loss times norm; Sener & Koltun 2018). With ``'none'`` (the paper's equations)
        the min-norm weights favour the task whose gradient is small (the easy, converged one)
        and starve a hard task. Heads are never rescaled.
    normalize_drive : bool, default=False
        With a ``task_normalization``: True moves the trunks along the rescaled gradients (the
        authors' script); False (default) takes only the task weights from them and moves along
        the unscaled gradients, so a task that is fitted -- or overfitted, e.g. one with few
        labels -- stops driving the trunk. The defaults were chosen on three problems of unequal
        difficulty (``docs/benchmarks/unequal_tasks.md``, user guide "Tasks of unequal
        difficulty").
    input_shape : tuple of int, optional
        Shape of one sample when images are passed flat, e.g. ``(1, 12, 12)``.
    missing_label : scalar, optional
        A label value meaning "unlabelled" in addition to NaN / None; such entries are left out
        of their task's loss.
    calibration : {'logit_temperature', 'temperature'} or None, default='logit_temperature'
        Post-hoc recalibration on the validation rows ("pool, then calibrate"): one
        temperature per task, fitted by held-out negative log-likelihood (``temperature_``).
        'logit_temperature' pools the particles log-linearly -- the softmax of their averaged
        logits -- and tempers that; 'temperature' tempers the particles' averaged
        probabilities (the map of scikit-learn's ``CalibratedClassifierCV(method=
        'temperature')``); None returns the averaged probabilities. The log-linear pool is
        the default because, tempered, it had the lower test NLL where the particles overfit
        (Multi-Digits with 300 images: 0.324 against 0.351, lower in every seed;
        ``docs/benchmarks/recalibration.md``) and a lower median ECE on the real-data panel
        (5.26 against 5.31 %); with 3000 images the two were within 0.003. Each temperature
        has a log-normal prior centred at 1 with scale 0.25 (``TEMPERATURE_PRIOR_SCALE``):
        with 60 validation images per task the looser 0.5 left Multi-Digits' pooled
        ensemble 1.2 points underconfident on the mean of three seeds (0.0 now), and the
        panel's tables did not move. ``predict_proba``
        returns the calibrated probabilities and ``predict`` their most probable labels (the
        log-linear pool can move the argmax of the plain average where particles disagree; a
        temperature never moves it); ``predict_proba_members`` and ``predict_uncertainty``
        describe the uncalibrated particles. Without a validation split the temperatures
        stay 1 and ``predict_proba`` is the particles' average.
    prior_precision : float, default=0.0
        Precision of an isotropic Gaussian prior on every weight, applied as weight decay
        ``prior_precision / n_train`` on the mean loss (strong on 20 rows, negligible on
        100,000; ``optimizer__weight_decay`` overrides it). Off by default for the classifier:
        with the real-data panel's protocol (``benchmarks/bench_panel.py``, commit eaa2929
        against the next) 1.0 gave a higher NLL on 6 of 10 tables and a higher ECE on all 10,
        and with Adam -- which rescales the decay like any
        gradient -- it shrank the CNN of a 300-image Multi-Digits fit to chance in 1 of 3
        seeds. Early stopping on the validation split is the classifier's regulariser.
    random_state : int, RandomState instance or None
        Seeds particle initialisation, the validation split and mini-batch order.
    max_epochs : int or 'auto', default='auto'
        Epochs per call to ``fit``. 'auto': enough epochs for about 1000 optimiser steps
        (at least 10, at most 500 epochs; ``max_epochs_`` holds the number chosen), so that a
        150-row table gets as many updates as a 10,000-row one; early stopping usually ends
        the fit sooner. With early stopping on the validation split (the default) the fit
        may run on to three times that budget, at most 500 epochs, while the validation loss
        still improves (``max_epochs_`` holds the extended budget; the patience stays a fifth
        of the unextended one): on 3,000 Multi-Digits images the fixed budget (27 epochs)
        ended every seed's fit while it still improved, at a test NLL of 0.127; extended
        (81 epochs), 0.084, at 2.9 times the fit time
        (``docs/benchmarks/auto_budget.md``). The panel's tables give the same NLL to three
        decimals either way.
    train_split : callable or None, default=ValidationSplit()
        skorch's internal validation split: by default
        :class:`~sklmoo.estimators.ValidationSplit` holds out 20 % of the rows (at least 5,
        none when fewer than 10 would remain), stratified by the labels and seeded by
        ``random_state``. The validation loss (negative log-likelihood of the particles'
        averaged probabilities, before recalibration) drives the default ``early_stopping``
        callback, which stops after a fifth of the budget without improvement and restores
        the best epoch's particles, and the rows fit ``calibration``. None: train on every
        row, for ``max_epochs_`` epochs, without
        calibration.
    optimizer, lr, batch_size, verbose, device, callbacks, **kwargs
        As in skorch's ``NeuralNet`` (defaults: Adam, 1e-3, batches of 64, silent;
        ``verbose=1`` prints a line per epoch). ``callbacks__early_stopping=None`` turns early
        stopping off, ``callbacks__early_stopping__patience=50`` changes it.

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
        ``UserWarning`` says when the repulsion outweighs the drive in an epoch. With a
        validation split, ``valid_loss`` per epoch and ``best_epoch``.
    temperature_ : ndarray of shape (n_tasks,)
        The fitted temperatures (above 1: the pooled probabilities were overconfident and are
        softened; below 1: underconfident and sharpened).
    max_epochs_ : int
        The epoch budget of the last fit (``max_epochs``, or the one 'auto' chose, extended
        when early stopping is on).
    n_train_, n_valid_ : int
        Rows trained on and held out for validation in the last fit.
    fit_warnings_ : list of str
        The warnings of the last fit (also kept when they were raised in a joblib worker).

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
                 calibration="logit_temperature", prior_precision=0.0,
                 random_state=None, criterion=torch.nn.CrossEntropyLoss,
                 optimizer=torch.optim.Adam, lr=1e-3, max_epochs="auto", batch_size=64,
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
        self.random_state = random_state

    _calibrations = ("logit_temperature", "temperature")
    _recalibration_attribute = "temperature_"

    # -- targets ---------------------------------------------------------------------------------

    def _prepare_targets(self, y, n_samples, classes=None):
        y, self.single_task_ = as_task_columns(y)
        if classes is None:
            codes, classes, self.task_names_ = encode_targets(y, n_samples, self.missing_label)
        else:
            classes = self._given_classes(classes, self.single_task_)
            arr, names = as_2d_targets(y, n_samples)
            self.task_names_ = names or [f"task_{t}" for t in range(arr.shape[1])]
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

    def _fit_calibration(self, X_valid, codes_valid):
        """``temperature_``: one temperature per task on the pooled probabilities of the
        validation rows; 'logit_temperature' pools the particles log-linearly first. A task
        without calibration or labelled validation rows keeps temperature 1 on the averaged
        probabilities."""
        self._ensure_pool_buffer()
        self.temperature_ = np.ones(self.n_tasks_)
        with torch.no_grad():
            self.module_.recalibration_pool.zero_()
        if X_valid is not None and len(X_valid):
            codes_valid = np.asarray(codes_valid)
            outs = self._valid_outputs(X_valid)
            for t, logits in enumerate(outs):
                if not (codes_valid[:, t] >= 0).any():
                    continue
                with torch.no_grad():
                    self.module_.recalibration_pool[t] = float(
                        self.calibration == "logit_temperature")
                self.temperature_[t] = fit_temperature(self._pool(logits, t), codes_valid[:, t],
                                                       prior_scale=TEMPERATURE_PRIOR_SCALE)
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
        seen in fit counts as a wrong prediction; tasks without any labelled sample in ``y``
        are left out of the mean.

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
        arr, _ = as_2d_targets(as_task_columns(y)[0], len(pred))
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
            lab = ~missing_mask(arr[:, t], self.missing_label)
            if lab.any() and w[lab].sum() > 0:
                hits = np.array([a == b for a, b in zip(arr[lab, t].tolist(),
                                                        pred[lab, t].tolist())], dtype=float)
                accs.append(np.average(hits, weights=w[lab]))
        if not accs:
            raise ValueError("y has no labelled sample in any task")
        return float(np.mean(accs))


def _pool_of_older_files(module, state_dict, prefix, *args):
    """Parameters saved before the pooling was recorded were fitted on averaged probabilities."""
    state_dict.setdefault(prefix + "recalibration_pool",
                          torch.zeros_like(module.recalibration_pool))
