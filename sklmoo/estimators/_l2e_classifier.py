"""L2ESamplerClassifier: a Bayesian neural-network classifier sampled by SG-MCMC chains."""

import math
import pathlib

import numpy as np
import pandas as pd
import torch
from sklearn.base import ClassifierMixin
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import assert_all_finite, check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import column_or_1d
from skorch import NeuralNet
from skorch.dataset import unpack_data
from skorch.utils import to_tensor

from ..diagnostics import function_space_diagnostics
from ..metrics import entropy_decomposition
from ..metrics._recalibration import apply_temperature, fit_temperature
from ..nn import ChainEnsemble, LinearLogits, TrunkClassifier, member_factory
from ..samplers import SGMCMC_SAMPLERS, MetaSampler, SamplerOptimizer, make_sgmcmc
from ._guard import SklmooNetMixin, scale_advice
from ._linear_gate import (builds_linear, gate_rows, judge_task, linear_draw_proba,
                           task_parts)
from ._rows import batch_targets, take_rows
from ._validation import ValidationSplit
from ._weights import (check_partial_fit_class_weight, check_sample_weight,
                       check_weighted_classes, class_weights)

#: centre of the prior on the calibration temperature of the chains' average (underconfident)
TEMPERATURE_PRIOR_CENTER = 0.85

_SAMPLE_DTYPES = {"float32": torch.float32, "float16": torch.float16}
#: a chain is stuck when its draws' probabilities on the probe vary (mean standard deviation)
#: by less than this fraction of the spread between the chains' means, or less than the tolerance
STUCK_RATIO = 0.01
STUCK_TOLERANCE = 1e-7
_PROBE_SIZE = 256


def _load_meta_sampler(spec):
    if isinstance(spec, MetaSampler):
        # as a file's are checked when it is loaded: a NaN would show as the chains diverging
        bad = [name for name, value in spec.state_dict().items()
               if value.is_floating_point() and not torch.isfinite(value).all()]
        if bad:
            raise ValueError(f"meta_sampler has non-finite meta-parameters {bad}: retrain it or "
                             "load a saved one")
        return spec
    if isinstance(spec, str) and spec == "default":
        from ..meta import load_default_meta_sampler

        return load_default_meta_sampler()
    if isinstance(spec, (str, pathlib.Path)):
        return MetaSampler.load(spec)
    raise TypeError(f"meta_sampler must be 'default', a path to a .npz or a MetaSampler, got "
                    f"{spec!r}")


def _spec(sampler, meta_sampler):
    """How a message names a sampler (and its meta-sampler, for 'l2e')."""
    return f"sampler={sampler!r}" + (f", meta_sampler={meta_sampler!r}" if sampler == "l2e"
                                     else "")


def _same_spec(a, b):
    """Whether two ``meta_sampler`` values name the same meta-sampler (the same string or path,
    or the same object)."""
    if isinstance(a, (str, pathlib.Path)) and isinstance(b, (str, pathlib.Path)):
        return str(a) == str(b)
    return a is b


class L2ESamplerClassifier(SklmooNetMixin, ClassifierMixin, NeuralNet):
    """Bayesian neural-network classifier: SG-MCMC chains, by default with L2E's learned sampler.

    ``n_chains`` copies of the network run as independent chains, batched in one vectorised
    call. Each step applies one transition of the sampler to every chain's mean mini-batch
    cross-entropy gradient: L2E (Kim et al., ICML 2024), whose kinetic-energy gradients come
    from a meta-learned per-coordinate MLP (sklmoo ships one, meta-trained on digits-derived and
    synthetic tasks only), or the SGHMC / cyclical SGHMC baselines. After ``burn_in`` epochs,
    ``n_draws`` draws per chain are collected; predictions are the Bayesian model average over
    all draws of all chains. Above 1,024 training rows the default burn-in is Adam (not for
    'csgmcmc') on each chain's loss plus the prior's penalty until the validation loss stops
    improving, then the sampler runs up to 500 steps (``burn_in_method``).

    The target is the posterior :math:`p(\\theta|D) \\propto \\exp(-N\\,\\overline{\\ell}(\\theta)
    / T)\\,\\mathcal N(\\theta; 0, \\lambda^{-1} I)` (``T`` the temperature, ``λ`` the prior
    precision, ``N`` the training-set size). As a skorch ``NeuralNet`` the estimator takes
    callbacks, ``device``, ``warm_start`` and ``set_params(module__...)``; a pickled copy
    continues its chains exactly.

    Read more in the :ref:`User Guide <ug-estimators>`; how to set the sampler is in
    :ref:`ug-l2e`, how to read its convergence diagnostics in :ref:`ug-chain-diagnostics`.

    Parameters
    ----------
    module : nn.Module class or instance, default=None
        One chain's network, mapping a batch to (batch, n_classes) logits. None: an
        :class:`~sklmoo.nn.MLPTrunk` (two hidden layers of 64) for tabular ``X`` or a
        :class:`~sklmoo.nn.LeNetTrunk` for images, given as (n, C, H, W) or flat with
        ``input_shape``, each followed by a linear layer. ``module__name=value`` sets the
        arguments (of the trunk, for the defaults).
    sampler : {'l2e', 'sghmc', 'csgmcmc'}, default='l2e'
        The SG-MCMC transition: 'l2e' (the meta-learned sampler; its defaults need no
        step-size search), 'sghmc' (stochastic-gradient Hamiltonian Monte Carlo) or 'csgmcmc'
        (SGHMC with a cyclical cosine step size, alternating exploration and sampling).
    meta_sampler : 'default', path or MetaSampler, default='default'
        L2E's meta-parameters: the one sklmoo ships, a ``.npz`` file, or an object.
    n_chains : int, default=4
        Independent chains, each from its own initialisation; more explore more modes and
        give better diagnostics, at a proportional cost.
    max_epochs : int or 'auto', default='auto'
        Epochs per call to ``fit``. 'auto': about 500 sampler steps (20 to 500 epochs;
        ``max_epochs_`` holds the number chosen). The cost per step is the transition,
        whatever the batch, hence the budget in steps and the large default batch. With the
        Adam burn-in and a validation split, 'auto' runs Adam until the validation loss has
        not improved for 5 epochs (at most 500), then the sampling epochs; ``max_epochs_``
        counts the epochs run.
    burn_in : int, default=None
        Epochs discarded before collecting. None: half of ``max_epochs`` for 'l2e' and 'sghmc',
        none for 'csgmcmc' (its exploration phases play that role); with the Adam burn-in, all
        but the last epochs holding about max(``n_draws``, min(500, max(50, five epochs)))
        sampler steps (at least one epoch; at least half the epochs burn in), or with
        ``max_epochs='auto'`` and a validation split until the validation loss stops
        improving. A continued fit (``warm_start``, ``partial_fit``) does not burn in again.
    burn_in_method : {'auto', 'sampler', 'adam'}, default='auto'
        How burn-in moves the chains. 'sampler': the sampler's own transition.
        'adam': each chain minimises its mean loss plus the prior's penalty (weight decay
        ``prior_precision / N``) with Adam (learning rate 0.05 / ``n_features_in_`` within
        [1e-3, 5e-3]; 1e-3 above 50,000 training rows); the sampler then starts there
        (above 1,024 rows from Adam's averaged iterates; above 50,000 from the epoch of
        lowest validation loss). 'auto': 'adam' above 1,024
        training rows, except for 'csgmcmc'; 'sampler' otherwise or with no burn-in epoch
        (``burn_in_method_``);
        after 'adam', draws at evenly spaced steps.
    n_draws : int, default=20
        Draws collected per chain and fit call (fewer, with a warning, when the fit has
        fewer steps), at evenly spaced epoch ends after burn-in, or evenly spaced steps when
        there are fewer epoch ends; predictions average ``n_chains * n_draws_`` networks.
    step_size : float, default=None
        :math:`s` in the time step :math:`\\epsilon = \\sqrt{s / N}`. None: 1.0 for 'l2e' (its
        meta-training value: keep it), 0.03 for 'sghmc', 0.1 (the peak) for 'csgmcmc'; tune
        the last two on a validation split (:ref:`ug-l2e`).
    friction : float, default=None
        Friction :math:`a` (the momentum decays by :math:`\\epsilon a` per step). None: 0.1 for
        'l2e' (its meta-training value); :math:`0.1/\\epsilon` for 'sghmc' / 'csgmcmc'
        (momentum 0.9 per step at the peak step size).
    temperature : float, default=1.0
        1 samples the Bayesian posterior; below 1 a "cold" posterior ('sghmc', 'csgmcmc').
        'l2e' reads it through normalised features: it barely changes the draws
        (:ref:`ug-l2e`).
    prior_precision : float, default=1.0
        Precision :math:`\\lambda` of the isotropic Gaussian prior on all weights (:math:`\\lambda
        / N` is the equivalent weight decay on the mean loss).
    n_cycles : int, default=4
        Cycles of the cosine step-size schedule of 'csgmcmc'.
    n_data : int, default=None
        N in the sampler's update (the likelihood's weight). None: the training rows' total
        weight (their number without weights); a larger value sharpens the posterior
        (:ref:`ug-l2e`).
    sample_dtype : {'float32', 'float16'}, default='float32'
        Storage type of the collected draws (kept on the CPU).
    input_shape : tuple of int, default=None
        Shape of one sample when images are passed flat, e.g. ``(1, 8, 8)``.
    calibration : {'temperature'} or None, default='temperature'
        Recalibration of the model average on the validation rows: one temperature
        (``temperature_``), fitted by held-out negative log-likelihood with a log-normal prior
        centred at 0.85 (the draws' average tends to be underconfident; :ref:`ug-defaults`).
        ``predict_proba_samples`` and ``predict_uncertainty`` describe the uncalibrated
        draws.
    linear_gate : bool, default=True
        A Bayesian logistic regression stands in for the chains where its validation NLL is
        not higher (``networks_used_``; up to 300 linear parameters, from 30 labelled
        validation rows; :ref:`ug-linear-gate`).
    class_weight : dict, 'balanced' or None, default=None
        Weights of the labels, as in scikit-learn: ``{label: weight}`` or 'balanced'
        (``n_samples / (n_classes * np.bincount(y))``, counting ``sample_weight``); they
        multiply ``fit``'s ``sample_weight`` (:ref:`ug-weights`).
    random_state : int, RandomState instance or None, default=None
        Seeds the chains' initialisation, the validation split, the mini-batch order, the
        sampler's noise and a ``module``'s own randomness (dropout).
    criterion : torch loss class, default=torch.nn.CrossEntropyLoss
        The per-sample loss of one chain's logits.
    batch_size : int, default=128
        Rows per mini-batch (-1: all). The validation passes of a fit take batches of eight
        times as many rows (at most 4,096, never fewer than a training batch) unless
        ``iterator_valid__batch_size`` is given.
    train_split : callable or None, default=ValidationSplit()
        The internal validation split: 20 % of up to 10,000 rows, 2,000 rows up to 20,000
        and 10 % above (at least 5, none when fewer than 10 would remain), stratified and
        seeded by ``random_state``, held out to fit ``calibration`` (``valid_loss`` per
        epoch in ``history``). None: sample on every row, without calibration.
    verbose : int, default=0
        0: silent. Above 0: progress output per epoch (:ref:`ug-fitting`).
    **kwargs
        Further skorch ``NeuralNet`` arguments (``device``, ``callbacks``, ``warm_start``,
        ``module__*``, ...). skorch's ``optimizer`` and ``lr`` are not parameters here (the
        sampler moves the weights; ``step_size`` sets its step): passing them is an error at
        ``fit``.

    Attributes
    ----------
    classes_ : ndarray
        The labels seen in ``fit``.
    n_features_in_ : int
        Number of features seen in ``fit``.
    module_ : ChainEnsemble
        The chains and, in ``module_.samples``, the collected draws; :meth:`save_params`
        saves both with the temperature (the chains' momenta are the optimizer's state).
    n_draws_ : int
        Draws per chain collected so far (set to the loaded draws by :meth:`load_params`).
    networks_used_ : bool
        Whether the chains predict (``linear_gate``).
    convergence_ : dict or None
        Function-space diagnostics of the chains on a probe of the rows given to ``fit``,
        computed at the end of ``fit``: ``'rhat'``, ``'ess_bulk'`` and ``'diversity'`` (each
        None with fewer than 4 draws per chain) and ``'stuck_chains'``; None with fewer than 2
        draws per chain or after :meth:`load_params` (call :meth:`diagnose`). See
        :ref:`ug-chain-diagnostics`.
    temperature_ : float
        The fitted temperature (1 without calibration or validation rows).
    max_epochs_, n_train_, n_valid_ : int
        The epoch budget of the last fit; the rows sampled on and held out.
    burn_in_method_ : {'sampler', 'adam'}
        How the chains burned in (``burn_in_method`` resolved).
    fit_warnings_ : list of str
        The warnings of the last fit (kept when they were raised in a joblib worker too).
    history : skorch History
        Per epoch ``train_loss`` (mean over chains) and ``n_draws``.

    See Also
    --------
    MTSGDMultiTaskClassifier : An ensemble of particle networks fitted by MT-SGD.
    sklmoo.samplers.L2E : The sampler's transition, in pure PyTorch.

    Notes
    -----
    Divergence (non-finite values, naming the chains, or an epoch's mean training loss above
    1000 times the larger of 1 and the first mini-batch's) stops ``fit`` with a
    ``FloatingPointError`` naming the epoch, and so does an interrupted fit
    (``KeyboardInterrupt``, re-raised); the estimator is then not fitted.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from sklmoo import L2ESamplerClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = make_pipeline(StandardScaler(),
    ...                     L2ESamplerClassifier(max_epochs=30, n_draws=5, random_state=0))
    >>> clf = clf.fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 3)
    >>> clf[-1].predict_proba_samples(X[:2]).shape     # 4 chains x 5 draws
    (20, 2, 3)
    """

    def __init__(self, module=None, *, sampler="l2e", meta_sampler="default", n_chains=4,
                 max_epochs="auto", burn_in=None, burn_in_method="auto", n_draws=20, step_size=None, friction=None,
                 temperature=1.0, prior_precision=1.0, n_cycles=4, n_data=None,
                 sample_dtype="float32", input_shape=None, calibration="temperature",
                 linear_gate=True, class_weight=None, random_state=None, criterion=torch.nn.CrossEntropyLoss, batch_size=128,
                 train_split=ValidationSplit(), verbose=0, **kwargs):
        kwargs.setdefault("optimizer", SamplerOptimizer)
        super().__init__(module, criterion=criterion, max_epochs=max_epochs,
                         batch_size=batch_size, train_split=train_split, verbose=verbose,
                         **kwargs)
        self.sampler = sampler
        self.meta_sampler = meta_sampler
        self.n_chains = n_chains
        self.burn_in = burn_in
        self.burn_in_method = burn_in_method
        self.n_draws = n_draws
        self.step_size = step_size
        self.friction = friction
        self.temperature = temperature
        self.prior_precision = prior_precision
        self.n_cycles = n_cycles
        self.n_data = n_data
        self.sample_dtype = sample_dtype
        self.input_shape = input_shape
        self.calibration = calibration
        self.linear_gate = linear_gate
        self.class_weight = class_weight
        self.random_state = random_state

    #: ``max_epochs='auto'``: about this many sampler steps (see the class docstring)
    _auto_steps = 500

    #: ``burn_in_method='auto'``: Adam above this many training rows
    _adam_burn_in_rows = 1024
    #: after an Adam burn-in the sampler runs about ``_auto_steps`` steps, at most this many
    #: epochs (a small table's epochs are a few steps each) unless they hold fewer than
    #: ``_adam_min_sampling_steps`` steps (large batches)
    #: (scaling tables, 1,600 training rows, five tables and three seeds: 5 epochs, 65
    #: steps, gave the NLL of 10 epochs within 0.0012, chem97's within 0.004, in 0.3-0.5 s
    #: less, a third of the fit; 8,000 rows, three tables, two seeds: within 0.002, 15-37 %
    #: less time; from 12,800 training rows the 500 steps bind first, as before)
    _adam_sampling_epochs = 5
    _adam_min_sampling_steps = 50
    #: the Adam burn-in's learning rate (:meth:`_adam_lr`): ``_adam_burn_in_lr`` (torch's and
    #: scikit-learn's MLP default) on more than ``_adam_fast_rows`` training rows; up to
    #: them ``_adam_fast_lr`` times ``_adam_fast_columns`` over the input columns, within
    #: those two. Adam's steps are sign-like, so a step moves a first-layer unit by about
    #: the rate times the row's L1 norm, which grows with the columns. Scaling benchmark, 1e-3
    #: -> 5e-3: at 1,600 training rows the burn-in's epochs of 13 steps fell by a third
    #: (flights, 9 columns: 3.05 -> 1.77 times the five MLPs' fit time, origin 2.24 -> 1.42,
    #: ten seeds; NLL within 0.001 or lower), at 18,000 origin's NLL fell by 0.055; but
    #: chem97 (133 columns) rose by 0.007 at both sizes, Caravan (85, imbalanced-classes
    #: benchmark) by 0.007 (monotone in the rate from 1e-3 to 5e-3 on both); at 180,000
    #: mortgages rows 0.0004 (1,400 steps an epoch: 1e-3 converges in about ten epochs)
    _adam_burn_in_lr = 1e-3
    _adam_fast_lr = 5e-3
    _adam_fast_rows = 50_000
    _adam_fast_columns = 10

    #: with 'auto' epochs and a validation split, the Adam burn-in ends once the validation
    #: loss has not improved for this many epochs, or after the maximum
    _adam_burn_in_patience = 5
    _adam_burn_in_max_epochs = 500
    #: ... where an epoch improves on the best by more than this share of it
    _adam_burn_in_threshold = 1e-4
    #: on more than this many training rows the sampler starts from the burn-in epoch with
    #: the lowest validation loss (early stopping's restored best weights), not the last.
    #: Scaling benchmark, test NLL against five averaged MLPs at 180,000 training rows:
    #: mortgages +0.0001 -> -0.0006 (below them in every seed of three, one before),
    #: flights -0.0060 -> -0.0061, fertility +0.0001 -> +0.0003, origin -0.158 -> -0.157;
    #: but at 18,000 rows (three seeds, scratch runs) origin -0.080 -> -0.077, mortgages
    #: -0.0014 -> -0.0004, flights and fertility within 0.0003: hence large tables only
    _adam_burn_in_restore_rows = 50_000
    #: the Adam burn-in on more than ``_adam_burn_in_rows`` training rows averages the chains'
    #: weights over its steps with this decay (:meth:`SklmooNetMixin._start_average`): each
    #: burn-in epoch ends with the averages, which the validation loss judges and the sampler
    #: starts from
    _average_decay = 0.99

    #: ``linear_gate``: the logistic regression's posterior draws per chain (fixed, so that
    #: parameters saved with any ``n_draws`` load)
    _linear_draws_per_chain = 5

    _renamed_params = {"n_samples": "n_draws"}
    _auto_epoch_bounds = (20, 500)
    _calibrations = ("temperature",)

    # -- scikit-learn boundary -------------------------------------------------------------

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags

    _member_kind = "chain"

    def _get_param_names(self):
        # skorch's lr / optimizer do nothing here (the sampler moves the weights, step_size sets
        # its step): not parameters, so set_params / GridSearchCV refuse them instead of
        # silently ignoring them
        return [k for k in super()._get_param_names()
                if k not in ("lr", "optimizer") and not k.startswith("optimizer__")]

    def _check_params(self, load_meta=True):
        self._check_device_available()
        unused = [k for k in vars(self) if k.startswith("optimizer__")]
        if self.__dict__.get("lr", 0.01) != 0.01:
            unused.append("lr")
        if self.__dict__.get("optimizer", SamplerOptimizer) is not SamplerOptimizer:
            unused.append("optimizer")
        if unused:
            raise ValueError(f"{type(self).__name__} does not use {', '.join(unused)}: the "
                             "sampler moves the weights; set its step with step_size (and "
                             "friction, temperature)")
        if self.burn_in_method not in ("auto", "sampler", "adam"):
            raise ValueError(f"burn_in_method must be one of ('auto', 'sampler', 'adam'), got "
                             f"{self.burn_in_method!r}")
        if self.sampler not in SGMCMC_SAMPLERS:
            raise ValueError(f"sampler must be one of {SGMCMC_SAMPLERS}, got {self.sampler!r}")
        if self.sample_dtype not in _SAMPLE_DTYPES:
            raise ValueError(f"sample_dtype must be one of {tuple(_SAMPLE_DTYPES)}, got "
                             f"{self.sample_dtype!r}")
        for name in ("n_chains", "n_draws", "n_cycles"):
            self._check_int(name)
        self._check_default_params()
        self._check_int("burn_in", low=0, allow_none=True)
        self._check_int("n_data", allow_none=True)
        if self.batch_size != -1:
            self._check_int("batch_size")
        self._check_number("step_size", strict=True, allow_none=True)
        self._check_number("friction", allow_none=True)
        for name in ("temperature", "prior_precision"):
            self._check_number(name)
        if (self.burn_in is not None and not isinstance(self.max_epochs, str)
                and self.burn_in >= self.max_epochs):
            raise ValueError(f"burn_in={self.burn_in} leaves none of the max_epochs="
                             f"{self.max_epochs} epochs to collect samples")
        if self.sampler == "l2e" and load_meta:
            return _load_meta_sampler(self.meta_sampler)
        return None

    def _validation_targets(self, y, n_samples):
        return self._encode_y(y, n_samples, classes=self.classes_)[0]

    @staticmethod
    def _observed(codes):
        # one task whose every label is given
        return np.ones(np.shape(codes), dtype=bool)

    def _encode_y(self, y, n_samples, classes=None):
        """Integer codes of ``y`` and the label set: that of ``y``, or ``classes`` (every
        label of ``y`` must be among them; a mini-batch may lack some)."""
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y "
                             "is None")
        values = np.asarray(y)
        if values.dtype.kind in "fc":
            # before type_of_target, which casts NaN / inf to int (a RuntimeWarning), as
            # scikit-learn's classifiers check y
            assert_all_finite(values, input_name="y")
        elif values.dtype == object and pd.isna(values).any():
            raise ValueError("y contains missing labels (None, NaN or pd.NA): "
                             f"{type(self).__name__} fits one task and needs every label; "
                             "drop those rows (MTSGDMultiTaskClassifier leaves missing labels "
                             "out of their task's loss)")
        check_classification_targets(y)
        y = column_or_1d(y, warn=True)
        if len(y) != n_samples:
            raise ValueError(f"X has {n_samples} samples but y has {len(y)}")
        if classes is None:
            encoder = LabelEncoder().fit(y)
            if len(encoder.classes_) < 2:
                raise ValueError(f"y has only 1 class ({encoder.classes_[0]!r}): a classifier "
                                 "needs samples of at least 2 classes")
            return encoder.transform(y).astype(np.int64), encoder.classes_
        classes = np.unique(column_or_1d(classes))
        if len(classes) < 2:
            raise ValueError(f"classes must hold at least 2 labels, got {classes.tolist()}")
        unknown = np.setdiff1d(np.unique(y), classes)
        if len(unknown):
            raise ValueError(f"y has labels {unknown.tolist()} that are not in classes "
                             f"{classes.tolist()}")
        return np.searchsorted(classes, y).astype(np.int64), classes

    def fit(self, X, y=None, sample_weight=None, **fit_params):
        """Run the chains on ``(X, y)`` and collect their samples.

        With ``warm_start=True`` on a fitted estimator (same features and classes), the chains
        continue without burn-in and ``n_draws`` more draws per chain are added, as they do
        from a checkpoint that skorch's ``LoadInitState`` loads as the fit begins (one saved
        before burn-in ended gets the whole fit, burn-in first); otherwise
        new chains start.

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
            Weight of each row in the sampler's likelihood, the validation split and the
            calibration (an integer weight acts like repeated rows, zero removes the row);
            see :ref:`ug-weights`. None: equal weights.
        **fit_params
            Passed to skorch's training loop.

        Returns
        -------
        self
        """
        continuing = bool(self.warm_start and self.__sklearn_is_fitted__())
        return self._fit(X, y, continuing, fit_params, sample_weight=sample_weight,
                         every_class=True)

    def partial_fit(self, X, y=None, classes=None, sample_weight=None, **fit_params):
        """Continue the chains for ``max_epochs`` epochs and collect ``n_draws`` more draws
        per chain (a first call fits from scratch).

        Parameters
        ----------
        X, y : array-like
            One chunk of a stream; later chunks may lack some classes.
        classes : array-like, optional
            The full label set, as in scikit-learn: on the first call it fixes ``classes_``
            (default: the labels of the first ``y``); on later calls it must equal it.
        sample_weight : array-like of shape (n_samples,), default=None
            Weight of each row of this chunk; None: every row counts once. (A
            ``class_weight='balanced'`` is refused here, as by scikit-learn's ``partial_fit``:
            give a ``{label: weight}`` dict.)

        Returns
        -------
        self
        """
        check_partial_fit_class_weight(self.class_weight)
        return self._fit(X, y, self.__sklearn_is_fitted__(), fit_params, classes=classes,
                         sample_weight=sample_weight)

    def _fit(self, X, y, continuing, fit_params, classes=None, sample_weight=None,
             every_class=False):
        X, y = self._dataset_targets(X, y)
        if not continuing:
            # a new fit replaces the fitted model whether or not it succeeds: the parameters
            # may already have changed (set_params), so the old model no longer matches them
            self.fitted_ = False
        # a continuation samples with the meta-parameters its chains were started with (a
        # pickled copy continues exactly, whether or not the file is still there)
        kept_meta = continuing and "_chain_meta" in self.__dict__
        meta = self._check_params(load_meta=not kept_meta)
        if continuing:
            # checked before anything changes: a refused continuation keeps the fitted model
            started = self.__dict__.get("_chain_spec", (self.sampler, self.meta_sampler))
            if (started[0] != self.sampler
                    or (self.sampler == "l2e" and not _same_spec(started[1],
                                                                 self.meta_sampler))):
                raise ValueError(
                    f"cannot continue the chains: they were sampled with {_spec(*started)}; "
                    f"this call has {_spec(self.sampler, self.meta_sampler)}. Set "
                    "warm_start=False (or call fit) to start new chains")
            self._check_continued_layout("chains")
            stored = self.module_.samples.dtype
            if stored != _SAMPLE_DTYPES[self.sample_dtype]:
                raise ValueError(f"cannot continue the chains: their draws are stored as "
                                 f"{str(stored).replace('torch.', '')}; sample_dtype is now "
                                 f"{self.sample_dtype!r}. Set warm_start=False (or call fit) "
                                 "to start new chains")
            X = self._validate_X(X, reset=False)
            if classes is not None and not np.array_equal(np.unique(column_or_1d(classes)),
                                                          self.classes_):
                raise ValueError(f"classes={np.unique(column_or_1d(classes)).tolist()} differs "
                                 f"from the classes of the first call, "
                                 f"{self.classes_.tolist()}")
            try:
                codes, _ = self._encode_y(y, X.shape[0], classes=self.classes_)
            except ValueError as exc:
                raise ValueError(f"cannot continue the chains: {exc} they were fitted on. Set "
                                 "warm_start=False (or call fit) to start new chains") from exc
            if every_class and len(np.unique(codes)) < len(self.classes_):
                # a warm start is a fit: the classes of the first (as the MT-SGD classifier
                # and scikit-learn's MLPClassifier require); a partial_fit chunk may lack some
                raise ValueError(
                    f"cannot continue the chains: they were fitted on classes "
                    f"{self.classes_.tolist()}; this y has "
                    f"{self.classes_[np.unique(codes)].tolist()}. Set warm_start=False to "
                    "start new chains, or use partial_fit for a chunk without some classes")
            self._check_epoch_rows(len(codes))
            if self.module_.n_chains != self.n_chains:
                raise ValueError(
                    f"cannot continue the chains: they were fitted with {self.module_.n_chains} "
                    f"chains; this call has n_chains={self.n_chains}. Set warm_start=False (or "
                    "call fit) to start new chains")
            weight = self._row_weights(codes, sample_weight)
            if every_class:
                # ... and its weights keep two of them
                check_weighted_classes(codes, weight, [self.classes_])
            self.fitted_ = False
        else:
            self.fitted_ = False
            X = self._validate_X(X, reset=True)
            codes, self.classes_ = self._encode_y(y, X.shape[0], classes=classes)
            weight = self._row_weights(codes, sample_weight)
            if classes is None:
                # with the classes given (partial_fit), a chunk may hold or weigh one of them
                check_weighted_classes(codes, weight, [self.classes_])
        if not (weight > 0).all():
            # a zero weight removes a row
            X, codes, weight = (take_rows(X, weight > 0), codes[weight > 0],
                                weight[weight > 0])
        if not continuing:
            self.seed_ = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
            self.initialize()
        self._refuse_restoring_callbacks()
        self._start_fit_warnings()
        observed = self._observed(codes)[:, None]
        try:
            dataset_train, dataset_valid = self._split_rows(X, codes, weight[:, None],
                                                            observed, **fit_params)
            n_train = len(dataset_train)
            data_weight = self._data_weight(dataset_train, weight[:, None], observed)
            if not (continuing and hasattr(self, "burn_in_method_")):
                # a continued fit does not burn in: the chains' burn-in stays the one they had
                self.burn_in_method_ = self._resolve_burn_in_method(n_train)
            epochs = self._resolve_epochs(n_train)
            steps_per_epoch = self._batches_per_epoch
            if not continuing and self.burn_in is not None and self.burn_in >= epochs:
                raise ValueError(f"burn_in={self.burn_in} leaves none of the {epochs} epochs "
                                 f"of max_epochs={self.max_epochs!r} to collect samples")
            if kept_meta:
                meta = self._chain_meta
            elif meta is not None:
                meta = {k: v.detach().clone() for k, v in meta.weights().items()}
            self.optimizer_.set_sampler(self._make_sampler(meta, data_weight,
                                                           epochs * steps_per_epoch))
            if not continuing:
                self._chain_meta, self._chain_spec = meta, (self.sampler, self.meta_sampler)
            self.optimizer_.param_groups[0]["sampler_step"] = 0
            burn = self._burn_in_epochs(continuing, steps_per_epoch)
            if self.burn_in_method == "auto" and burn == 0 and not continuing:
                # no burn-in epoch (max_epochs=1, burn_in=0): the chains sample from their
                # initialisation, as with the sampler's burn-in, and say so
                self.burn_in_method_ = "sampler"
            if self.burn_in_method == "adam" and burn == 0 and not continuing:
                why = (f"the default for {self.sampler!r}" if self.burn_in is None
                       else "burn_in=0")
                self._warn(f"burn_in_method='adam' runs no Adam step in this fit: its burn-in "
                           f"is 0 epochs ({why}); pass burn_in=k for k epochs of Adam before "
                           "sampling")
            self._adaptive_burn_in = None
            if (self.burn_in_method_ == "adam" and burn > 0 and self.burn_in is None
                    and isinstance(self.max_epochs, str) and dataset_valid is not None):
                # Adam until the validation loss stops improving, then the sampling epochs
                sampling = self.max_epochs_ - burn
                burn = self._adam_burn_in_max_epochs
                self.max_epochs_ = burn + sampling
                self._adaptive_burn_in = {"sampling": sampling, "epochs": epochs,
                                          "best": np.inf, "misses": 0, "stop_after": None,
                                          "restore": n_train > self._adam_burn_in_restore_rows}
            self._warmup_plan = (
                burn * steps_per_epoch if self.burn_in_method_ == "adam" else 0,
                dict(lr=self._adam_lr(n_train),
                     weight_decay=self.optimizer_.sampler.weight_decay))
            self.optimizer_.set_warmup(self._warmup_plan[0], **self._warmup_plan[1])
            self._collect_at = (set() if self._adaptive_burn_in is not None
                                else self._collection_steps(burn, steps_per_epoch))
            self._start_average(self.burn_in_method_ == "adam" and burn > 0
                                and n_train > self._adam_burn_in_rows)
        except ValueError:
            # a continued fit refused before sampling (its validation set, a sampler setting
            # that leaves it nothing to sample) keeps the chains and their draws
            self.fitted_ = continuing
            raise
        self._collected = 0
        linear = self._linear_model()
        if linear is not None:
            # every fit samples the chains and judges them again
            linear.set_gate([1.0])
        try:
            self._run_epochs(X, codes, (dataset_train, dataset_valid), **fit_params)
        finally:
            # the buffers the sampler reuses from step to step are not kept between fits
            release = getattr(self.optimizer_.sampler, "release_scratch", None)
            if release is not None:
                release()
        self.n_draws_ = len(self.module_.samples)
        self._report_draws(steps_per_epoch, continuing or self.burn_in is not None)
        self.convergence_ = self._probe_convergence(X)
        self.n_train_ = n_train
        self.n_valid_ = 0 if dataset_valid is None else len(dataset_valid)
        valid = (self._subset_rows(dataset_valid, X, codes, weight)
                 if self.calibration is not None or linear is not None else None)
        self.temperature_ = 1.0
        # the model average on the validation rows, computed once for the temperature and
        # the linear gate (every draw of every chain predicts every row)
        bma = (np.concatenate([p.mean(axis=0) for p in self._row_batches(valid[0])])
               if valid is not None and len(valid[0]) else None)
        if self.calibration is not None and bma is not None:
            self.temperature_ = fit_temperature(bma, valid[1],
                                                prior_center=TEMPERATURE_PRIOR_CENTER,
                                                sample_weight=valid[2])
        self._store_recalibration(self.temperature_)
        self._gate_networks(X, codes, weight, dataset_train, dataset_valid, valid, bma)
        self.fitted_ = True
        return self

    def _linear_model(self):
        linear = getattr(getattr(self, "module_", None), "linear", None)
        return linear if isinstance(linear, LinearLogits) else None

    def _gate_networks(self, X, codes, weight, train, valid, rows, bma):
        """``linear_gate``: a Bayesian logistic regression of the training rows against the
        recalibrated model average (``bma``: its uncalibrated probabilities) on the validation
        rows ``rows`` ((X, codes, weight), None without a split;
        :func:`~._linear_gate.judge_task`); where its weighted NLL is not
        higher, its draws, refitted on every row, stand in for the chains'
        (``networks_used_`` False, temperature 1)."""
        self.networks_used_ = True
        linear = self._linear_model()
        parts = (None if linear is None or not self.linear_gate or bma is None
                 else gate_rows(X, codes, weight, train, valid, rows))
        if parts is None:
            return

        def networks():
            return apply_temperature(bma, self.temperature_)

        if judge_task(linear, 0, task_parts(parts, 0), networks, len(self.classes_),
                      self.n_chains * self._linear_draws_per_chain, [self.seed_, 0],
                      max(self.batch_size, 256)):
            linear.set_gate([0.0])
            self.networks_used_ = False
            self.temperature_ = 1.0
            self._store_recalibration(self.temperature_)

    def _row_weights(self, codes, sample_weight):
        """(n,) weight of every row: ``sample_weight`` (checked) times its label's
        ``class_weight``."""
        row = check_sample_weight(sample_weight, len(codes))
        weight = row * class_weights(self.class_weight, codes, [self.classes_], row)[:, 0]
        if not (weight > 0).any():
            raise ValueError("every row has a zero weight (sample_weight times class_weight): "
                             "there is nothing to fit")
        return self._check_weights(weight, np.ones(len(weight), dtype=bool))

    def _refuse_restoring_callbacks(self):
        """An early-stopping or checkpoint callback that restores the best epoch's module
        would roll the chains and their draws back, silently dropping every draw collected
        after it."""
        from skorch.callbacks import Checkpoint, EarlyStopping

        restoring = [(name, cb) for name, cb in self.callbacks_
                     if isinstance(cb, (EarlyStopping, Checkpoint))
                     and getattr(cb, "load_best", False)]
        if restoring:
            name, cb = restoring[0]
            then = ("sampling then stops early and keeps every draw"
                    if isinstance(cb, EarlyStopping) else "the checkpoints are still written")
            raise ValueError(f"callback {name!r} restores the best epoch's weights "
                             "(load_best=True): for SG-MCMC chains that would also drop every "
                             f"draw collected after that epoch. Use load_best=False: {then}")

    def _make_sampler(self, meta, n_train, n_steps):
        n = self.n_data or n_train
        if meta is not None:               # the meta-parameters, name -> tensor
            meta = {k: v.to(self.device) for k, v in meta.items()}
        return make_sgmcmc(self.sampler, n_data=n, step_size=self.step_size,
                           friction=self.friction, temperature=self.temperature,
                           weight_decay=self.prior_precision / n, meta=meta, n_steps=n_steps,
                           n_cycles=self.n_cycles, batch_dims=1)

    def _first_draw_epoch(self, steps_per_epoch):
        """The epoch of the first planned draw, as text for a message."""
        if not self._collect_at:        # an adaptive Adam burn-in that was stopped
            return f"{len(self.history) + 1} or later (the Adam burn-in had not ended)"
        return str(min(self._collect_at) // max(1, steps_per_epoch) + 1)

    def _report_draws(self, steps_per_epoch, fixed_burn_in):
        """After the epochs: refuse a fit without any draw, and say so when this call
        collected fewer than ``n_draws``, naming why (the plan held fewer candidate steps,
        early stopping ended the fit, or the training iterator gave fewer batches)."""
        planned, collected = len(self._collect_at), self._collected
        if collected == planned and self.n_draws_ > 0:
            if 0 < planned < self.n_draws:
                self._warn_fewer_draws(fixed_burn_in)
            return
        if self._stopped_early() or not self._collect_at:
            why, fix = ("early stopping ended the fit", "lower burn_in or raise the "
                        "early-stopping patience")
        else:
            why, fix = (f"the training iterator gave fewer batches than {steps_per_epoch} "
                        "an epoch (the training rows over batch_size)", "check the iterator")
        if self.n_draws_ == 0:
            raise ValueError(f"training stopped after {len(self.history)} epochs, before any "
                             f"draw was collected (the first was planned in epoch "
                             f"{self._first_draw_epoch(steps_per_epoch)}): {why}; the "
                             f"estimator is not fitted: {fix}")
        self._warn(f"collected {collected} of the {planned} draws per chain planned "
                   f"(n_draws={self.n_draws}): {why}")

    def _resolve_burn_in_method(self, n_train):
        if self.burn_in_method == "auto":
            # cyclical SG-MCMC burns in by its exploration phases
            return ("adam" if n_train > self._adam_burn_in_rows and self.sampler != "csgmcmc"
                    else "sampler")
        return self.burn_in_method

    def _burn_in_epochs(self, continuing, steps_per_epoch):
        """Epochs of this call before sampling (see ``burn_in``)."""
        epochs = self.max_epochs_
        if continuing:
            return 0
        if self.burn_in is not None:
            return self.burn_in
        if self.sampler == "csgmcmc":
            return 0
        if self.burn_in_method_ == "adam":
            # the chains start sampling near a mode: about _auto_steps sampler steps, but at
            # most _adam_sampling_epochs epochs unless that is fewer than
            # _adam_min_sampling_steps steps, and at least a step per draw asked for (at
            # least one epoch); at least half of the epochs burn in
            target = max(self.n_draws,
                         min(self._auto_steps, max(self._adam_min_sampling_steps,
                                                   self._adam_sampling_epochs * steps_per_epoch)))
            sampling = max(1, math.ceil(target / steps_per_epoch))
            return max(epochs // 2, epochs - sampling)
        return epochs // 2

    def _adam_lr(self, n_train):
        """The Adam burn-in's learning rate for ``n_train`` training rows (see
        ``_adam_fast_lr``)."""
        if n_train > self._adam_fast_rows:
            return self._adam_burn_in_lr
        rate = self._adam_fast_lr * self._adam_fast_columns / max(1, self.n_features_in_)
        return float(np.clip(rate, self._adam_burn_in_lr, self._adam_fast_lr))

    def _collection_steps(self, burn, steps_per_epoch):
        """Sampler steps of this call (0-based) after which a draw is collected (at most one
        per candidate step; ``_collect_kind`` names the candidates)."""
        epochs = self.max_epochs_
        if self.sampler == "csgmcmc":
            self._collect_kind = "steps in the sampling phases"
            # any step of a sampling phase (cycles can be shorter than an epoch)
            sampling = self.optimizer_.sampler.is_sampling
            candidates = np.array([s for s in range(burn * steps_per_epoch,
                                                    epochs * steps_per_epoch) if sampling(s)])
            if len(candidates) == 0:
                raise ValueError(f"no step after burn-in lies in a sampling phase of the "
                                 f"{self.n_cycles} cycles: raise max_epochs or lower n_cycles")
        elif self.burn_in_method_ == "adam":
            # any step of the sampling epochs (a large table's are few and long)
            self._collect_kind = "sampler steps"
            candidates = np.arange(burn * steps_per_epoch, epochs * steps_per_epoch)
        else:
            after = " after burn-in" if burn else ""          # a continued fit: none
            self._collect_kind = "epoch ends" + after
            candidates = np.arange(burn + 1, epochs + 1) * steps_per_epoch - 1
            if len(candidates) < self.n_draws:
                # fewer epoch ends than draws asked for: any sampler step after burn-in
                self._collect_kind = "sampler steps" + after
                candidates = np.arange(burn * steps_per_epoch, epochs * steps_per_epoch)
        n = min(self.n_draws, len(candidates))
        # evenly spaced, ending at the last candidate
        index = len(candidates) - 1 - (np.arange(n) * len(candidates)) // n
        return set(int(s) for s in candidates[index])

    def _warn_fewer_draws(self, fixed_burn_in):
        """The fit collects fewer draws than ``n_draws``: one per candidate step (an epoch
        end, a sampling step) at most; say so, and what gives more."""
        k, where = len(self._collect_at), self._collect_kind
        advice = "raise max_epochs or lower n_draws"
        if self.burn_in_method_ == "adam" and self.sampler != "csgmcmc" and not fixed_burn_in:
            # after an automatic Adam burn-in the sampling phase does not grow with max_epochs
            advice = "lower n_draws or batch_size, or set burn_in"
        elif not where.startswith("epoch ends"):
            advice = "raise max_epochs, lower batch_size or lower n_draws"   # more steps
        if k == 1:
            where = where.replace("ends", "end").replace("steps", "step")
        self._warn(f"n_draws={self.n_draws} asks for more draws than this fit's {k} {where}: "
                   f"{k} per chain {'was' if k == 1 else 'were'} collected ({advice})")

    def _probe_convergence(self, X):
        """``convergence_`` on a probe of the rows given to ``fit``; a ``ConvergenceWarning`` only
        for a stuck chain (every draw predicting the same probabilities). Chains of a neural
        network settle in different modes, so a function-space R-hat above 1.1 is the rule
        rather than a fault: it is reported in ``convergence_``, not warned about."""
        if self.n_draws_ < 2:
            return None
        rng = np.random.default_rng(self.seed_)
        probe = X[rng.choice(len(X), size=min(_PROBE_SIZE, len(X)), replace=False)]
        draws = self._proba_draws(probe, chains=True)          # (chains, draws, n, C)
        within = draws.std(axis=1).mean(axis=(1, 2))           # per chain
        between = draws.mean(axis=1).std(axis=0).mean() if len(draws) > 1 else 0.0
        stuck = [int(c) for c in np.flatnonzero(within < max(STUCK_RATIO * between,
                                                              STUCK_TOLERANCE))]
        summary = {"rhat": None, "ess_bulk": None, "diversity": None, "stuck_chains": stuck}
        if self.n_draws_ >= 4:
            report = function_space_diagnostics(draws)
            summary.update({k: report[k] for k in ("rhat", "ess_bulk", "diversity")})
        if stuck:
            rhat = ("" if summary["rhat"] is None
                    else f", function-space R-hat {summary['rhat']:.3g}")
            advice = scale_advice(X)
            scale = f"; {advice}" if advice else ""
            self._warn(f"chain(s) {stuck} are stuck: their draws barely differ on {len(probe)} "
                       f"training inputs while the chains disagree{rhat} (the sampler is not "
                       f"moving; raise step_size or check the data's scale){scale}; see "
                       "diagnose(X)", ConvergenceWarning)
        return summary

    # -- skorch hooks --------------------------------------------------------------------------

    def initialize_module(self):
        """Build ``n_chains`` networks sized from the data seen in ``fit`` (no draws yet)."""
        if not hasattr(self, "classes_"):
            raise NotFittedError(
                "the network is sized from the data: call fit. To restore parameters saved "
                "with save_params, fit an estimator with the same parameters on data with the "
                "same features and classes (max_epochs=1 is enough), then call load_params; or "
                "pickle / joblib the whole estimator")
        self.fitted_ = False          # new weights: whatever was fitted before is gone
        kwargs = self.get_params_for("module")
        shape, n_classes = self.input_shape_, len(self.classes_)
        if self.module is None:
            trunk = self._default_trunk_factory()

            def make():
                return TrunkClassifier(trunk(), n_classes)
        else:
            make = member_factory(self.module, **kwargs)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed_)
            probe = make()
            with torch.no_grad():
                # eval mode: a BatchNorm layer cannot normalise a single training sample
                out = probe.eval()(torch.zeros(1, *shape))
            if out.shape != (1, n_classes):
                raise ValueError(f"module maps one sample to an output of shape "
                                 f"{tuple(out.shape[1:])}; y has {n_classes} classes, so it must "
                                 f"output ({n_classes},) logits")
            # weights, gradients, momentum, running gradient means, and the stored draws
            self._check_member_memory(
                "n_chains", self.n_chains, probe, copies=10 + self.n_draws,
                held=f"its state and gradients 10 times, n_draws={self.n_draws} stored draws",
                lower="n_chains or n_draws")
            self.module_ = ChainEnsemble(make, self.n_chains, input_shape=shape,
                                         sample_dtype=_SAMPLE_DTYPES[self.sample_dtype])
        if self.linear_gate and builds_linear(n_classes, shape):
            # its draws stand in for the chains' where it is judged not worse (linear_gate)
            self.module_.linear = LinearLogits(
                int(np.prod(shape)), self.n_chains * self._linear_draws_per_chain, [n_classes])
        self._register_recalibration(1)
        return self

    def initialize_optimizer(self, *args, **kwargs):
        """The sampler's state (momentum, running means, noise generator) lives in a
        :class:`~sklmoo.samplers.SamplerOptimizer`; the sampler itself is set by ``fit``."""
        self.optimizer_ = SamplerOptimizer(self.module_.chains.named_member_parameters(),
                                           sampler=None, seed=self.seed_)
        return self

    def _chain_losses(self, y_pred, y_true, weight=None):
        """Every chain's weighted mean cross-entropy over the batch: (batch, chains, classes)
        -> (chains,) (``weight``: the batch's normalised row weights, None: unweighted)."""
        target = to_tensor(y_true, device=self.device).long()
        per = self.criterion_(y_pred.transpose(1, 2), target[:, None].expand(-1, y_pred.shape[1]))
        if weight is not None:
            per = per * to_tensor(weight, device=self.device)[:, None]
        return per.mean(dim=0)

    def get_loss(self, y_pred, y_true, X=None, training=False):
        """Mean over chains of each chain's weighted mean cross-entropy."""
        return self._chain_losses(y_pred, *batch_targets(y_true)).mean()

    def train_step_single(self, batch, **fit_params):
        """Every chain's mean-loss gradient, by one backward pass of the summed chain losses."""
        self._set_training(True)
        Xi, yi = unpack_data(batch)
        y_pred = self.infer(Xi, **fit_params)
        losses = self._chain_losses(y_pred, *batch_targets(yi))
        # one read of the chains' summed loss, the sum the backward pass then takes; only a
        # sum that is not finite (an overflow of finite losses, or a chain's NaN / inf) is
        # looked at chain by chain
        total = losses.sum()
        bad = ([] if math.isfinite(total.item())
               else torch.nonzero(~torch.isfinite(losses)).flatten().tolist())
        if bad:
            raise FloatingPointError(f"chain(s) {bad} diverged in epoch {len(self.history)}: "
                                     "non-finite training loss; lower step_size")
        total.backward()
        return {"loss": losses.mean().detach(), "y_pred": y_pred}

    def train_step(self, batch, **fit_params):
        """One sampler transition of all chains (the sampler runs as the optimizer's step)."""
        try:
            step = super().train_step(batch, **fit_params)
        except FloatingPointError as exc:
            if "epoch" in str(exc):
                raise
            raise FloatingPointError(f"sampler diverged in epoch {len(self.history)}: "
                                     f"{exc}") from exc
        if self.optimizer_.param_groups[0]["sampler_step"] - 1 in self._collect_at:
            self.module_.collect()
            self._collected += 1
        return step

    def __setattr__(self, name, value):
        # a MetaSampler given as meta_sampler is a parameter (which sampler to use), not a
        # torch component of the net: skorch refuses modules set outside its initialize_*
        if name == "meta_sampler":
            object.__setattr__(self, name, value)
            return
        super().__setattr__(name, value)

    def _reads_weight_scale(self):
        """The chains sample a posterior whose data count is the total weight (``n_data``)."""
        return True

    def _average_moves(self):
        """The parameter average follows the Adam burn-in's steps only."""
        return self.optimizer_.warmup is not None

    def _guarded_tensors(self):
        return self.module_.chain_tensors()

    def _after_load_params(self):
        """Loading ``f_params`` (the chains and their draws) also sets ``n_draws_`` to the
        loaded draws, ``temperature_`` to the saved one and ``convergence_`` to None (it was
        computed for other draws: call :meth:`diagnose`). Loaded as a fit begins (skorch's
        ``LoadInitState``), the chains go on as a warm-start continuation
        (:meth:`_resume_loaded_chains`); the fit sets the fitted attributes when it ends."""
        if self._fit_split is not None and not self._completed_epochs:
            self._resume_loaded_chains()
            return
        if len(self.module_.samples) == 0:
            raise ValueError("the loaded parameters hold no draws (saved before burn-in ended?): "
                             "there is nothing to predict with; the estimator is unchanged")
        self.n_draws_ = len(self.module_.samples)
        self.convergence_ = None
        self.temperature_ = float(self._loaded_recalibration()[0])
        linear = self._linear_model()
        self.networks_used_ = linear is None or not linear._closed
        self.fitted_ = self.n_draws_ > 0

    def _resume_loaded_chains(self):
        """A checkpoint loaded as the fit begins (skorch's ``LoadInitState``) brings the
        chains, their draws and the sampler's state (momentum, running means), but also its
        step count, past every step this fit planned to collect at, and its step size. The
        fit takes this estimator's step size and, when the checkpoint holds draws, continues
        the chains as ``warm_start`` does, without burn-in, adding ``n_draws`` draws over its
        epochs (an adaptive Adam burn-in's fit: over the epochs 'auto' resolved); a checkpoint
        saved before its burn-in ended (no draw) gets this fit's whole plan, burn-in first,
        from the loaded weights."""
        group = self.optimizer_.param_groups[0]
        group["sampler_step"] = 0
        group["lr"] = getattr(self.optimizer_.sampler, "step_size", None)
        if len(self.module_.samples) == 0:
            self.optimizer_.set_warmup(self._warmup_plan[0], **self._warmup_plan[1])
            return
        self.optimizer_.set_warmup(0)
        self._average = None
        adaptive = self._adaptive_burn_in
        if adaptive is not None:
            # the loop was planned for the longest burn-in: it ends after these epochs
            adaptive["stop_after"] = self.max_epochs_ = adaptive["epochs"]
        self._collect_at = self._collection_steps(0, self._batches_per_epoch)

    def on_epoch_begin(self, net, **kwargs):
        """During an adaptive Adam burn-in, decide from the last epoch's validation loss
        whether it ends; end the loop once the sampling epochs after it are done."""
        adaptive = getattr(self, "_adaptive_burn_in", None)
        done = getattr(self, "_completed_epochs", 0)            # this fit's, before this one
        if adaptive is not None and done > 0:
            if adaptive["stop_after"] is None:
                self._adaptive_burn_in_check(adaptive, done)
            elif done >= adaptive["stop_after"]:
                raise KeyboardInterrupt    # skorch ends its loop; every epoch has run
        super().on_epoch_begin(net, **kwargs)

    def _adaptive_burn_in_check(self, adaptive, done):
        """Count an Adam epoch whose validation loss did not improve on the best by a
        relative ``_adam_burn_in_threshold``; after ``_adam_burn_in_patience`` of them in a
        row (or at the maximum) the sampler takes over for the sampling epochs, and the
        draws' steps are fixed."""
        loss = float(self.history[-1, "valid_loss"])
        if loss < adaptive["best"] * (1 - self._adam_burn_in_threshold):  # >= 0: an NLL
            adaptive["best"], adaptive["misses"] = loss, 0
            if adaptive["restore"]:
                adaptive["best_weights"] = [p.detach().clone()
                                            for p in self._optimized_parameters()]
        else:
            adaptive["misses"] += 1
        if (adaptive["misses"] < self._adam_burn_in_patience
                and done < self._adam_burn_in_max_epochs):
            return
        best = adaptive.pop("best_weights", None)
        if best is not None:
            with torch.no_grad():
                for p, b in zip(self._optimized_parameters(), best):
                    p.copy_(b)
        self.optimizer_.set_warmup(0)                     # the sampler from the next step
        adaptive["stop_after"] = self.max_epochs_ = done + adaptive["sampling"]
        self._collect_at = self._collection_steps(done, self._batches_per_epoch)

    def on_epoch_end(self, net, **kwargs):
        """Detect divergence and record the number of draws collected so far."""
        self._check_divergence()
        self.history.record("n_draws", len(self.module_.samples))
        super().on_epoch_end(net, **kwargs)

    # -- predictions ---------------------------------------------------------------------------

    def _proba_batches(self, X, chains=False):
        """Class probabilities of every draw, one batch of rows at a time: yields float64
        arrays (n_chains, n_draws, batch, n_classes); the logistic regression's draws where
        it stands in for the chains (``networks_used_`` False), unless ``chains``."""
        # in float64: float32 rounding would make a row's prediction depend on the batch
        self.module_.eval()
        size = max(self.batch_size, 256)
        linear = self._linear_model()
        if not chains and linear is not None and linear._closed:
            for start in range(0, len(X), size):
                p = linear_draw_proba(linear, 0, X[start:start + size])
                yield p.reshape(self.n_chains, -1, *p.shape[1:])
            return
        with torch.no_grad():
            draws = {k: v.double() if v.is_floating_point() else v
                     for k, v in self.module_.prepared_draws().items()}
            for start in range(0, len(X), size):
                # one batch converted at a time: no float64 copy of the whole X
                xb = torch.as_tensor(np.asarray(X[start:start + size], dtype=np.float64),
                                     device=self.device)
                out = torch.softmax(self.module_.forward_samples(xb, draws).double(), dim=-1)
                yield out.cpu().transpose(0, 1).numpy()

    def _proba_draws(self, X, chains=False):
        """Class probabilities of every draw: (n_chains, n_draws, n_samples, n_classes)."""
        return np.concatenate(list(self._proba_batches(X, chains)), axis=2)

    def _row_batches(self, X):
        """One batch's (n_chains * n_draws, batch, n_classes) probabilities at a time."""
        for p in self._proba_batches(X):
            yield p.reshape(-1, *p.shape[2:])

    def _checked_draws(self, X):
        self.check_is_fitted()
        return self._proba_draws(self._validate_X(X, reset=False))

    def predict_proba_samples(self, X):
        """Class probabilities under every collected draw of every chain, not recalibrated
        (:meth:`predict_proba` applies ``temperature_`` to their mean); the logistic
        regression's draws where it stands in for the chains (``networks_used_`` False).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Inputs, with the features seen in ``fit``.

        Returns
        -------
        ndarray of shape (n_chains * n_draws, n_samples, n_classes)
            Chain-major: chain 0's draws first (``n_draws_`` per chain; five of the logistic
            regression where it stands in for the chains).
        """
        p = self._checked_draws(X)
        return p.reshape(-1, *p.shape[2:])

    def predict_proba(self, X):
        """Bayesian model average: the mean class probabilities over all draws, recalibrated
        by ``temperature_`` (``calibration``; 1 with ``calibration=None``), (n_samples,
        n_classes), columns in ``classes_`` order.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Inputs, with the features seen in ``fit``.

        Returns
        -------
        ndarray of shape (n_samples, n_classes), float64
        """
        temperature = getattr(self, "temperature_", 1.0)
        (proba,) = self._reduce_rows(
            X, lambda p: (apply_temperature(p.mean(axis=0), temperature),))
        return proba

    def predict(self, X):
        """The class with the highest model-averaged probability.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Inputs, with the features seen in ``fit``.

        Returns
        -------
        ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        proba = self.predict_proba(X)
        return self.classes_[proba.argmax(axis=1)]

    def score(self, X, y, sample_weight=None):
        """Accuracy of :meth:`predict` on ``(X, y)``; a label never seen in fit counts as a
        wrong prediction.

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
        from sklearn.metrics import accuracy_score

        return float(accuracy_score(column_or_1d(y), self.predict(X),
                                    sample_weight=sample_weight))

    def predict_uncertainty(self, X):
        """Per-sample predictive entropy split (nats).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Inputs, with the features seen in ``fit``.

        Returns
        -------
        uncertainty : dict of str to ndarray of shape (n_samples,)
            ``'total'``, ``'aleatoric'`` and ``'epistemic'``: the entropy of the model average
            = the draws' expected entropy (aleatoric) + the mutual information between label
            and parameters (epistemic).
        """
        parts = self._reduce_rows(X, entropy_decomposition)
        return dict(zip(("total", "aleatoric", "epistemic"), parts))

    def diagnose(self, X):
        """Convergence of the chains judged on their predictions for ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Inputs, with the features seen in ``fit``.

        Returns
        -------
        dict
            See :func:`sklmoo.diagnostics.function_space_diagnostics`: ``'rhat'`` (largest
            rank-normalised split-R-hat over samples and classes; above 1.1 the chains disagree),
            ``'ess_bulk'`` (smallest bulk ESS), the per-output arrays, and ``'diversity'``
            (mean pairwise KL between the draws' predictions).

        Raises
        ------
        ValueError
            With fewer than 4 draws per chain (split-R-hat halves each chain).
        """
        self.check_is_fitted()
        return function_space_diagnostics(
            self._proba_draws(self._validate_X(X, reset=False), chains=True))
