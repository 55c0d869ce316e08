"""What every sklmoo estimator shares around skorch: input validation, seeded mini-batch order,
per-sample losses, divergence detection and "fitted only after a complete fit"."""

import contextlib
import math
import os
import warnings

import numpy as np
import pandas as pd
import torch
from torch.utils.data import Subset
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import validate_data

from .._io import atomic_files
from ..samplers._optim import FUSED_ADAM_DEVICES, ParameterAverage, SamplerOptimizer
from ._progress import ProgressLog
from ._rows import (DatasetRows, RowBatches, RowData, as_dataset_rows, cast_on_read, max_abs,
                    row_source, take_rows)
from ._saved_params import check_files, checked_loads, files_to_load, restore, snapshot
from ._targets import are_default_names
from ._validation import ValidationSplit, user_stacklevel
from ._weights import check_data_weight, normalised

#: an epoch's mean training loss above this multiple of the first batch's (or of 1) = divergence
DIVERGENCE_FACTOR = 1e3
#: a diverged fit on features beyond this magnitude names X's scale as the likely cause
LARGE_FEATURE_MAGNITUDE = 1e3
#: ... and a fit on features all within this magnitude is told so: networks at their default
#: learning rate learn little from them (1,000 rows of three standard-normal features scaled
#: by 0.01, largest value 0.04: the MT-SGD classifier's test accuracy 0.958 -> 0.882; at 0.11,
#: 0.944; the regressor with its linear mean function, three particles: R^2 on its 1,500
#: training rows 0.986 -> 0.436)
SMALL_FEATURE_MAGNITUDE = 0.1


def _same_label(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    try:
        # numbers: up to float32's rounding (a float32 tensor of the same targets)
        return bool(np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=1e-6,
                                atol=0.0, equal_nan=True))
    except (TypeError, ValueError):                      # labels that are not numbers
        return bool(np.all(a == b))


def _check_given_targets(dataset, y, probe=32):
    """``ValueError`` when ``dataset``'s items are ``(x, y)`` pairs whose targets differ from
    the ``y`` given with it (on the first ``probe`` rows): the given ``y`` would be trained on
    and the items' ignored. The same targets (e.g. given again for the validation split's
    stratification, as skorch users do) pass."""
    try:
        n = len(dataset)
    except TypeError:
        return
    labels = y.to_numpy() if hasattr(y, "to_numpy") else np.asarray(y)
    for i in range(min(probe, n, len(labels))):
        item = dataset[i]
        if not (isinstance(item, (tuple, list)) and len(item) >= 2):
            return                                      # inputs only: y is the targets
        own = item[1].detach().cpu().numpy() if torch.is_tensor(item[1]) else item[1]
        if not _same_label(own, labels[i]):
            raise ValueError(
                f"X is a Dataset of (x, y) items whose targets differ from the y given with "
                f"it (row {i}: {np.asarray(own).tolist()!r} in the item, "
                f"{np.asarray(labels[i]).tolist()!r} in y), and the given y would be trained "
                "on: pass y=None to train on the items' targets, or a Dataset whose items "
                "are the inputs only")


def _non_numeric_columns(X):
    """The names of a DataFrame's columns that are neither numbers nor booleans (categorical,
    string, object), [] for anything else."""
    dtypes = getattr(X, "dtypes", None)
    if dtypes is None or not hasattr(X, "columns"):
        return []
    return [str(name) for name, dtype in dtypes.items()
            if not (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype))]


def scale_advice(X):
    """What to tell a user whose fit failed or stalled when ``X`` holds values beyond
    :data:`LARGE_FEATURE_MAGNITUDE`, or only values within :data:`SMALL_FEATURE_MAGNITUDE`
    ("" otherwise): the networks expect features of order one."""
    magnitude = max_abs(X)
    if SMALL_FEATURE_MAGNITUDE <= magnitude <= LARGE_FEATURE_MAGNITUDE:
        return ""
    return (f"X holds values up to {magnitude:.3g} in magnitude: standardise the features "
            "(e.g. StandardScaler in a pipeline)")


#: optimizers that get torch's fused implementation by default (see get_params_for_optimizer)
_FUSABLE = (torch.optim.Adam, torch.optim.AdamW)
#: optimizers whose step needs no closure (train_step calls them without skorch's)
_CLOSURE_FREE = (torch.optim.Adam, torch.optim.AdamW, torch.optim.SGD, SamplerOptimizer)


def _package_version():
    from .. import __version__

    return __version__


class SklmooNetMixin:
    """Divergence (any of: a non-finite loss or parameter; an epoch's mean training loss above
    ``DIVERGENCE_FACTOR`` times the loss of the fit's first mini-batch, or 1) raises ``FloatingPointError`` naming
    the epoch (and the particle / chain); an interrupted fit raises ``KeyboardInterrupt``
    (skorch would swallow it and return a half-trained net). Either way the estimator stays
    not fitted. A stop by skorch's ``EarlyStopping`` callback is a completed fit.

    The estimator calls :meth:`_run_epochs` instead of ``NeuralNet.partial_fit`` and names its
    members in ``_member_kind`` ('particle', 'chain').
    """

    _member_kind = "member"

    # -- skorch's bookkeeping, kept out of __init__ -----------------------------------------------
    # skorch's NeuralNet.__init__ sets history_, initialized_ and virtual_params_, which are no
    # parameters (scikit-learn's check_no_attributes_set_in_init): their initial values live
    # on the class, and the virtual parameters in a private attribute, until a fit sets them

    history_ = None
    initialized_ = False

    def __init__(self, *args, **kwargs):
        # skorch lets __init__ set torch components (a module instance: ``module=MyNet()``)
        # while the net has no ``initialized_``; the class default above hides that state
        self.__dict__["_constructing"] = True
        try:
            super().__init__(*args, **kwargs)
        finally:
            del self.__dict__["_constructing"]
        for name in ("history_", "initialized_"):
            if vars(self).get(name, None) is getattr(type(self), name):
                del self.__dict__[name]

    def __setattr__(self, name, attr):
        if self.__dict__.get("_constructing"):
            object.__setattr__(self, name, attr)       # skorch's own path while constructing
        else:
            super().__setattr__(name, attr)

    def __getstate__(self):
        state = super().__getstate__()
        state["_sklmoo_version"] = _package_version()
        return state

    def __setstate__(self, state):
        written = state.get("_sklmoo_version", "0.1.0.dev0 or earlier")
        try:
            super().__setstate__(state)
        except Exception as exc:  # whatever skorch / torch raise on a state they cannot read
            raise ValueError(f"cannot restore this {type(self).__name__}: it was pickled by "
                             f"sklmoo {written}, this is sklmoo {_package_version()} "
                             f"({type(exc).__name__}: {exc}); refit it with this version"
                             ) from exc

    @property
    def virtual_params_(self):
        state = self.__dict__
        if "_virtual_params" not in state:     # also a pickle of an earlier version
            state["_virtual_params"] = state.pop("virtual_params_", {})
        return state["_virtual_params"]

    @virtual_params_.setter
    def virtual_params_(self, value):
        self.__dict__.pop("virtual_params_", None)
        self.__dict__["_virtual_params"] = value

    # -- scikit-learn's parameters and repr --------------------------------------------------

    def get_default_callbacks(self):
        """skorch's, with ``print_log`` a :class:`~sklmoo.estimators._progress.ProgressLog`:
        with ``verbose=1`` one short row per epoch (epoch / budget, losses, seconds), with
        ``verbose=2`` every column of ``history``."""
        return [(name, ProgressLog() if name == "print_log" else cb)
                for name, cb in super().get_default_callbacks()]

    def _get_param_names(self):
        # skorch lists every public attribute set in __init__; its bookkeeping is no parameter
        return [k for k in super()._get_param_names() if not k.startswith("_")]

    def get_params(self, deep=True):
        """The parameters a user sets: the constructor's, skorch's (``lr``, ``batch_size``,
        ``callbacks``, ``device``, ...) and any ``module__*`` / ``optimizer__*`` /
        ``iterator_train__*`` / ``callbacks__*`` given. skorch's default callbacks' own
        settings (``callbacks__print_log__floatfmt``, ...) are left out unless set; they can
        still be set with ``set_params``.

        Parameters
        ----------
        deep : bool, default=True
            Also return the parameters of sub-objects (callbacks the user gave).

        Returns
        -------
        dict
        """
        params = super().get_params(deep=deep)
        defaults = {name for name, _ in self.get_default_callbacks()}
        given = vars(self)
        return {k: given.get(k, v) if k.startswith("callbacks__") else v
                for k, v in params.items()
                if not (k.startswith("callbacks__") and k.split("__")[1] in defaults
                        and k not in given)}

    def set_params(self, **params):
        """Set the estimator's parameters (skorch's ``set_params``).

        On the MT-SGD estimators, a learning rate set on a fitted estimator (``lr``,
        ``optimizer__lr``, ``optimizer__param_groups__<i>__lr``) is the rate its next continued
        fit (``partial_fit``, ``warm_start=True``) trains at, as a new fit would (the
        regressor's noise-scale parameters at their multiple of it); ``optimizer__lr`` stays
        among the parameters (``get_params``, ``clone``), as before a fit. Callbacks set on a
        fitted estimator (``callbacks``, or one replaced as ``callbacks__<name>``) are the ones
        its next continued fit runs.

        When setting them fails (a ``module__*`` parameter the module does not take is found
        when a fitted estimator rebuilds its network), the estimator is left exactly as it
        was, fitted or not, as scikit-learn's ``set_params`` changes nothing on an invalid
        parameter.

        Parameters
        ----------
        **params : dict
            Estimator parameters.

        Returns
        -------
        self : estimator
        """
        saved = dict(vars(self))
        try:
            super().set_params(**params)
            if getattr(self, "initialized_", False) and any(
                    key == "callbacks" or (key.startswith("callbacks__") and key.count("__") == 1)
                    for key in params):
                # skorch initialises the callbacks before it stores a new list (or a callback
                # replaced by name): a continued fit would run the old ones
                self._initialize_callbacks()
            self._after_set_params(params)
        except BaseException:
            vars(self).clear()
            vars(self).update(saved)
            raise
        return self

    def _after_set_params(self, params):
        """What an estimator does after skorch has set ``params`` (nothing here)."""

    def _param_defaults(self):
        import inspect

        from skorch import NeuralNet

        defaults = {}
        for init in (NeuralNet.__init__, type(self).__init__):
            for name, p in inspect.signature(init).parameters.items():
                if p.default is not inspect.Parameter.empty:
                    defaults[name] = p.default
        return defaults

    def __repr__(self):
        """scikit-learn's style: the class name and the parameters that differ from their
        defaults, e.g. ``L2ESamplerClassifier(n_chains=7)``."""
        defaults = self._param_defaults()

        def same(value, default):
            if value is default:
                return True
            try:
                return type(value) is type(default) and bool(value == default)
            except (TypeError, ValueError):
                return False

        def short(value):
            if isinstance(value, type) or callable(value) and hasattr(value, "__qualname__"):
                return getattr(value, "__qualname__", repr(value))
            text = repr(value)
            return text if "\n" not in text and len(text) <= 60 else type(value).__name__ + "(...)"

        changed = [(k, v) for k, v in sorted(self.get_params(deep=False).items())
                   if k not in defaults or not same(v, defaults[k])]
        return f"{type(self).__name__}({', '.join(f'{k}={short(v)}' for k, v in changed)})"

    def _check_int(self, name, low=1, allow_none=False):
        """``ValueError`` unless the parameter ``name`` is an integer >= ``low`` (or None)."""
        value = getattr(self, name)
        if value is None and allow_none:
            return
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")

    def _check_number(self, name, strict=False, allow_none=False):
        """``ValueError`` unless the parameter ``name`` is a finite number >= 0 (> 0 when
        ``strict``), or None when allowed."""
        value = getattr(self, name)
        if value is None and allow_none:
            return
        if (isinstance(value, bool) or not isinstance(value, (int, float, np.number))
                or not np.isfinite(value) or value < 0 or (strict and value == 0)):
            kind = "positive" if strict else "non-negative"
            raise ValueError(f"{name} must be a finite {kind} number, got {value!r}")

    def check_is_fitted(self, attributes=None, *args, **kwargs):
        """Raise ``NotFittedError`` unless a fit has completed with the current module; and
        the ``ValueError`` of a fit when ``device`` (set since) cannot be used."""
        if not self.__sklearn_is_fitted__():
            if getattr(self, "_fit_split", None) is not None:
                # called from inside the training loop (skorch's EpochScoring / BatchScoring
                # score with predict / predict_proba)
                raise NotFittedError(
                    f"{type(self).__name__} is being fitted: its predictions exist once the "
                    "fit has ended (the calibration is fitted after training), so a callback "
                    "cannot score them during the fit (skorch's EpochScoring / BatchScoring); "
                    "history[:, 'valid_loss'] holds every epoch's validation NLL; score the "
                    "fitted estimator instead")
            raise NotFittedError(f"This {type(self).__name__} instance is not fitted yet: call "
                                 "fit with appropriate arguments first")
        self._check_device_available()

    def _validate_X(self, X, reset):
        """Finite float32 ``X`` of any rank; on ``reset`` also the shape of one sample
        (``input_shape`` when images come flat)."""
        if cast_on_read(X):
            # a memory map of float64 (or other numbers): checked finite now, as an array is,
            # then read and cast a batch at a time, never copied whole (DatasetRows); an
            # array without column names, as scikit-learn's validate_data would say
            if not reset and getattr(self, "feature_names_in_", None) is not None:
                warnings.warn(f"X does not have valid feature names, but "
                              f"{type(self).__name__} was fitted with feature names",
                              UserWarning)
            X = DatasetRows(X if reset else self._as_fit_layout(X))
        if isinstance(X, (torch.utils.data.Dataset, DatasetRows)):
            # a torch Dataset stays where it is: its rows are read a batch at a time, and
            # checked then (DatasetRows)
            X = as_dataset_rows(X)
            n_features = int(np.prod(X.shape[1:]))
            if reset:
                self.n_features_in_ = n_features
                self.__dict__.pop("feature_names_in_", None)
            elif n_features != getattr(self, "n_features_in_", n_features):
                raise ValueError(f"X has {n_features} features, but {type(self).__name__} is "
                                 f"expecting {self.n_features_in_} features as input.")
        else:
            if not reset:
                X = self._as_fit_layout(X)
            # a read-only array (pandas' to_numpy(), joblib's and np.load's memory maps) is
            # not copied: batches are gathered from it with NumPy (RowData)
            try:
                X = validate_data(self, X, reset=reset, allow_nd=True, dtype=np.float32)
            except (ValueError, TypeError) as exc:
                columns = _non_numeric_columns(X)
                if not columns:
                    raise
                raise ValueError(
                    f"X has non-numeric column(s) {columns}: encode them first (e.g. "
                    "OneHotEncoder or OrdinalEncoder in a ColumnTransformer, or "
                    "pandas.get_dummies); the networks take numbers") from exc
        if reset:
            shape = X.shape[1:]
            if self.input_shape is not None:
                shape = self.input_shape
                if (isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__")
                        or not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool)
                                   and s > 0 for s in shape) or len(shape) == 0):
                    raise ValueError(f"input_shape must be a tuple of positive integers, the "
                                     f"shape of one sample such as (1, 8, 8), got {shape!r}")
                shape = tuple(int(s) for s in shape)
                if int(np.prod(shape)) != int(np.prod(X.shape[1:])):
                    raise ValueError(f"input_shape {shape} does not match the "
                                     f"{int(np.prod(X.shape[1:]))} features of X")
            self.input_shape_ = tuple(shape)
        return X

    def _check_continued_layout(self, what):
        """``ValueError`` when ``input_shape`` was set since the fit to another shape than the
        one its networks were built for (``input_shape_``): a continued fit would ignore it.
        ``what``: 'particles' or 'chains', for the message."""
        if self.input_shape is not None and tuple(self.input_shape) != self.input_shape_:
            raise ValueError(f"cannot continue the {what}: their networks were built for "
                             f"samples of shape {self.input_shape_}; input_shape is now "
                             f"{tuple(self.input_shape)!r}. Set warm_start=False (or call fit) "
                             f"to start new {what}")

    def _as_fit_layout(self, X):
        """``X`` after a fit: samples of the fitted shape (``input_shape_``) or flat rows of
        its size are taken, in the layout the fit saw (scikit-learn's check then compares
        ``n_features_in_``); any other sample shape is a ``ValueError`` naming both shapes
        (scikit-learn's check compares only the second dimension, an image's channels)."""
        shape = getattr(self, "input_shape_", None)
        given = getattr(X, "shape", None)
        if shape is None or given is None or len(given) < 2:
            return X
        given, size = tuple(given[1:]), int(np.prod(shape))
        if len(shape) == 1:
            if len(given) > 1:
                raise ValueError(f"X has samples of shape {given}, but {type(self).__name__} "
                                 f"was fitted on 2-D X (n_samples, {shape[0]})")
            return X
        flat_fit = self.n_features_in_ == size and tuple(shape) != (size,)
        if given == tuple(shape):
            return np.asarray(X).reshape(len(X), size) if flat_fit else X
        if given == (size,):
            return X if flat_fit else np.asarray(X).reshape(len(X), *shape)
        raise ValueError(f"X has samples of shape {given}, but {type(self).__name__} was fitted "
                         f"on samples of shape {tuple(shape)} (or flat rows of {size} values)")

    def _dataset_targets(self, X, y):
        """``(X, y)`` for a fit: with ``y=None`` and a torch ``Dataset`` of ``(x, y)`` items
        (skorch's convention), every item's ``y`` (read once; the inputs stay in the dataset).
        Without y and without such a dataset: scikit-learn's ``ValueError``."""
        if y is not None:
            if isinstance(X, torch.utils.data.Dataset):
                _check_given_targets(X, y)
            return X, y
        if isinstance(X, (torch.utils.data.Dataset, DatasetRows)):
            X = as_dataset_rows(X)
            return X, X.targets()
        raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is "
                         "None")

    def _default_trunk_factory(self):
        """A factory of the default network body for the data seen in fit: a LeNet-style CNN
        for images (one sample of shape (C, H, W)), else an MLP; ``module__*`` go to it."""
        from ..nn import LeNetTrunk, MLPTrunk, member_factory

        shape, kwargs = self.input_shape_, self.get_params_for("module")
        if len(shape) == 3:
            return member_factory(LeNetTrunk, in_channels=shape[0], height=shape[1],
                                  width=shape[2], **kwargs)
        return member_factory(MLPTrunk, n_features=int(np.prod(shape)), **kwargs)

    def get_params_for_optimizer(self, prefix, named_parameters):
        """skorch's optimizer arguments; torch's Adam and AdamW get ``fused=True`` (one kernel
        for all parameters instead of several operations per parameter tensor: the same
        update up to rounding) on a CUDA device or, from torch 2.4, a CPU unless
        ``optimizer__fused``, ``optimizer__foreach`` or ``optimizer__differentiable=True`` is
        given."""
        args, kwargs = super().get_params_for_optimizer(prefix, named_parameters)
        if (prefix == "optimizer" and getattr(self, "optimizer", None) in _FUSABLE
                and "fused" not in kwargs and "foreach" not in kwargs
                and not kwargs.get("differentiable", False)       # fused refuses it
                and torch.device(self.device).type in FUSED_ADAM_DEVICES):
            kwargs["fused"] = True
        return args, kwargs

    def initialize_criterion(self):
        """Per-sample losses: each member's loss is its own mean over the batch, and missing
        labels can be masked."""
        super().initialize_criterion()
        if hasattr(self.criterion_, "reduction"):
            self.criterion_.reduction = "none"
        return self

    def get_dataset(self, X, y=None):
        """The rows as a :class:`~sklmoo.estimators._rows.RowData` (batches are gathered a
        whole batch at a time; targets carry unit weights), unless ``X`` is a torch
        ``Dataset`` or a ``dataset`` other than skorch's default is set."""
        from skorch.dataset import Dataset as SkorchDataset

        if isinstance(X, torch.utils.data.Dataset) or self.dataset is not SkorchDataset \
                or self.get_params_for("dataset"):
            return super().get_dataset(X, y)
        if y is None:
            return RowData(X)
        y = np.asarray(y)
        return RowData(X, y, np.ones(y.shape, dtype=np.float32))

    #: a fit's validation passes go in batches of this many training batches, at most
    #: ``_valid_batch_max`` rows (unless ``iterator_valid__batch_size`` is given)
    _valid_batch_factor = 8
    _valid_batch_max = 4096

    #: iterator_* settings the in-memory batches honour (any other one: skorch's DataLoader)
    _ROW_BATCH_KEYS = frozenset({"batch_size", "shuffle", "generator", "drop_last"})

    def get_iterator(self, dataset, training=False):
        """Shuffle training batches by default, in an order seeded by ``random_state`` and the
        epoch (a new order every epoch, the same for the same seed). Every iterator gets a
        generator of its own: without one a DataLoader draws its workers' base seed from the
        global torch RNG, and fitting or predicting would change the user's random stream.
        Rows held in memory are served by :class:`~sklmoo.estimators._rows.RowBatches`
        (one gather per batch) unless ``iterator_train`` / ``iterator_valid`` or their
        settings ask for a ``DataLoader``'s features (workers, a ``collate_fn``, ...)."""
        from torch.utils.data import DataLoader

        prefix = "iterator_train" if training else "iterator_valid"
        defaults = {}
        if training and f"{prefix}__shuffle" not in vars(self):
            defaults["shuffle"] = True
        if f"{prefix}__generator" not in vars(self):
            defaults["generator"] = torch.Generator().manual_seed(
                self.seed_ + len(self.history) if training else 0)
        kwargs = {**defaults, **self.get_params_for(prefix)}
        if (not training and self._fit_split is not None
                and f"{prefix}__batch_size" not in vars(self)):
            kwargs["batch_size"] = self._valid_batch_rows()
        kwargs.setdefault("batch_size", self._batch_rows())
        if kwargs["batch_size"] == -1:
            kwargs["batch_size"] = len(dataset)
        iterator = self.iterator_train if training else self.iterator_valid
        if (iterator is DataLoader and row_source(dataset) is not None
                and set(kwargs) <= self._ROW_BATCH_KEYS):
            return RowBatches(dataset, **kwargs)
        return iterator(dataset, **kwargs)

    def _reduce_rows(self, X, reduce):
        """Stream a prediction over batches of rows: ``reduce`` maps one batch of the
        estimator's member outputs (:meth:`_row_batches`) to a tuple of arrays with the rows
        first; the batches' results are concatenated, so memory is bounded by the batch, not
        by n."""
        self.check_is_fitted()
        X = self._validate_X(X, reset=False)
        n, outs, start = len(X), None, 0
        for batch in self._row_batches(X):
            parts = reduce(batch)
            if outs is None:
                # written in place, batch after batch: no list of per-batch results whose small
                # long-lived blocks would pin the freed batch temporaries in the heap
                outs = tuple(np.empty((n, *np.shape(p)[1:]), dtype=np.asarray(p).dtype)
                             for p in parts)
            stop = start + len(parts[0])
            for out, part in zip(outs, parts):
                out[start:stop] = part
            start = stop
        return outs

    def __sklearn_is_fitted__(self):
        return bool(getattr(self, "fitted_", False))

    def train_step(self, batch, **fit_params):
        """skorch's training step. With torch optimizers that take no closure (Adam, AdamW,
        SGD) and no callback listening to ``on_grad_computed``, the same three calls without
        skorch's closure and step accumulator around them: zero the gradients, compute the
        step (:meth:`train_step_single`), let each optimizer step (a mini-batch's step costs
        about a millisecond; that wrapping was a tenth of it). Then the fit's parameter
        average, when it keeps one, moves (:meth:`_start_average`)."""
        optimizers = [getattr(self, name + "_") for name in self._optimizers]
        averaged = getattr(self, "_average", None) is not None and self._average_moves()
        if not (all(type(o) in _CLOSURE_FREE for o in optimizers)
                and not self._grad_computed_listeners()):
            step = super().train_step(batch, **fit_params)
        else:
            self._zero_grad_optimizer()
            step = self.train_step_single(batch, **fit_params)
            for optimizer in optimizers:
                optimizer.step()
        if averaged:
            self._average.update()
            if not self._average_moves():
                # the averaged steps ended inside an epoch: the next step starts from the average
                self._average.swap()
                self._average = None
                self._averaged_in = False
        return step

    # -- the parameter average of a fit (Polyak averaging) ---------------------------------

    #: the decay of a fit's parameter average (see :meth:`_start_average`); None: no average
    _average_decay = None

    def _start_average(self, on):
        """With ``on`` and an ``_average_decay``, the fit keeps an exponential moving average
        of the optimiser's parameters (:class:`~sklmoo.samplers.ParameterAverage`) over its
        steps that :meth:`_average_moves` allows; each such training epoch ends with the
        averaged weights in the module, which the validation pass, the callbacks (early
        stopping's best weights) and the fitted model see, and the next one continues from the
        last iterate while the average still moves (else the averaged weights stay; when the
        moving steps end inside an epoch, the step that ends them leaves the averages in
        place). An average that no step has moved is never swapped in."""
        self._average = None
        self._averaged_in = False
        if on and self._average_decay is not None:
            self._average = ParameterAverage(self._optimized_parameters(), self._average_decay)

    def _optimized_parameters(self):
        """The tensors the optimiser moves, group after group."""
        return [p for group in self.optimizer_.param_groups for p in group["params"]]

    def _average_moves(self):
        """Whether the next optimiser step moves the parameter average (every step here)."""
        return True

    def run_single_epoch(self, iterator, training, prefix, step_fn, **fit_params):
        """skorch's epoch, with the parameter average's swaps (:meth:`_start_average`)."""
        average = getattr(self, "_average", None)
        if training and average is not None and self._averaged_in:
            self._averaged_in = False
            if self._average_moves():
                average.swap()                        # the last iterate goes on
            else:
                self._average = average = None        # the averaged weights stay
        super().run_single_epoch(iterator, training, prefix, step_fn, **fit_params)
        average = getattr(self, "_average", None)
        if training and average is not None and average.n_updates > 0:
            average.swap()
            self._averaged_in = True

    def _grad_computed_listeners(self):
        """Whether this net or one of its callbacks does something ``on_grad_computed``."""
        from skorch.callbacks import Callback
        from skorch.net import NeuralNet

        return (type(self).on_grad_computed is not NeuralNet.on_grad_computed
                or any(type(cb).on_grad_computed is not Callback.on_grad_computed
                       for _, cb in self.callbacks_))

    def _set_training(self, training=True):
        """skorch's train / eval switch, skipped when every module and criterion is already in
        that mode (it is called for every batch; walking the modules to set the flag again
        costs more than checking it)."""
        for name in self._modules + self._criteria:
            module = getattr(self, name + "_", None)
            if isinstance(module, torch.nn.Module) and any(
                    m.training != training for m in module.modules()):
                return super()._set_training(training)
        return None

    def _guarded_tensors(self):
        """``{name: tensor with the members on axis 0}`` checked after every epoch."""
        return {n: p for n, p in self.module_.named_parameters()}

    def _check_member_memory(self, name, n_members, member, copies, held="", lower=None):
        """``ValueError`` before any allocation when ``n_members`` networks like ``member``,
        each held ``copies`` times (``held``: what the copies are, e.g. weights, gradients,
        optimiser state, stored draws), would not fit in the device's memory: a typo such as
        ``n_particles=10**7`` must not run the machine out of memory. The message says to
        lower ``lower`` (default: ``name``)."""
        n_params = sum(p.numel() for p in member.parameters())
        need = float(n_members) * n_params * copies * 4
        total = self._device_memory()
        if need > total:
            held = f", each held {copies} times ({held})," if held else ""
            raise ValueError(f"{name}={n_members} networks of {n_params} parameters{held} would "
                             f"need about {need / 2 ** 30:.3g} GiB, more than the "
                             f"{total / 2 ** 30:.3g} GiB of memory of "
                             f"{self._torch_device().type}: lower {lower or name}")

    def _torch_device(self):
        return torch.device(str(self.device) if self.device is not None else "cpu")

    def _device_memory(self):
        """Bytes of memory of the estimator's device (a GPU's, or the machine's RAM)."""
        device = self._torch_device()
        if device.type == "cuda":
            return torch.cuda.get_device_properties(device.index or 0).total_memory
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")

    def _check_device_available(self):
        """Fail at the start of fit, with a message, when the device cannot be used."""
        device = str(self.device) if self.device is not None else "cpu"
        try:
            kind = torch.device(device).type
        except (RuntimeError, ValueError, TypeError):
            raise ValueError(f"device must name a torch device such as 'cpu', 'cuda' or "
                             f"'cuda:0', got {self.device!r}") from None
        if kind == "meta":
            # tensors there have shapes but no values: predictions would be whatever memory held
            raise ValueError("device='meta' holds no values (tensor shapes only), so nothing "
                             "can be fitted or predicted there: use 'cpu' or 'cuda'")
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"device={device!r} but CUDA is not available on this machine "
                             "(torch.cuda.is_available() is False): use device='cpu', or install "
                             "a CUDA build of PyTorch on a machine with a GPU")
        if device.startswith("cuda:"):
            index = int(device.split(":")[1])
            if index >= torch.cuda.device_count():
                raise ValueError(f"device={device!r} but only {torch.cuda.device_count()} CUDA "
                                 "device(s) are visible")

    def _run_epochs(self, X, y, split, **fit_params):
        """skorch's training loop over the training and validation datasets ``split`` (as
        :meth:`_split_rows` made them), within the guards of this class."""
        from skorch import NeuralNet

        self._fit_split = split
        self._epoch_offset = len(self.history) if self.initialized_ else 0
        self._completed_epochs = 0
        # a torch Dataset's items are not read once more for it; an array read through
        # DatasetRows (a memory map of another dtype) is, a chunk at a time
        readable = not isinstance(X, DatasetRows) or isinstance(X.dataset, np.ndarray)
        if self._epoch_offset == 0 and readable:
            # a fit that starts: networks on features far from order one can fit much worse
            # than on standardised ones without failing (a linear-mean regressor on features
            # up to 3e3: test RMSE 7.6 times BayesianRidge's; up to 3e5: 1,200 times)
            advice = scale_advice(X)
            if advice:
                self._warn(f"{advice}; the networks expect features of order one and can "
                           "fit far worse on these without any error")
        self._first_loss = None
        try:
            with self._seeded_training():
                NeuralNet.partial_fit(self, X, y, epochs=self.max_epochs_, **fit_params)
        except FloatingPointError as exc:
            advice = scale_advice(X)
            if advice:
                # the likeliest cause, named: the networks expect features of order one
                raise FloatingPointError(f"{exc}. {advice}") from exc
            raise
        finally:
            self._fit_split = None
            # the module keeps what the last epoch left (the averages, or what early stopping
            # restored); the average does not outlive the fit
            self._average = None
        # epochs that reached their end (history also holds an epoch interrupted midway)
        done = self._completed_epochs
        if done < self.max_epochs_ and not self._stopped_early():
            raise KeyboardInterrupt(f"fit was interrupted after {done} of {self.max_epochs_} "
                                    "epochs; the estimator is not fitted")

    @contextlib.contextmanager
    def _seeded_training(self):
        """torch's global random number generators, within the training loop, seeded from
        ``random_state`` and the epochs already run (what a module's own randomness draws
        from, e.g. dropout: the same seed gives the same fit, and a continued fit new
        draws), and given back to the caller as they were."""
        seed = getattr(self, "seed_", None)
        if seed is None:
            yield
            return
        cuda = str(self.device).startswith("cuda") and torch.cuda.is_available()
        devices = list(range(torch.cuda.device_count())) if cuda else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed((int(seed) * 1_000_003 + self._epoch_offset) % (2 ** 63))
            yield

    def notify(self, method_name, **cb_kwargs):
        """skorch's callback dispatch; counts the epochs of a fit that reach their end (before
        the callbacks run: early stopping ends the loop from ``on_epoch_end``)."""
        if method_name == "on_epoch_end":
            self._completed_epochs = getattr(self, "_completed_epochs", 0) + 1
        out = super().notify(method_name, **cb_kwargs)
        if method_name == "on_epoch_end":
            self._trim_batch_records()
        return out

    #: skorch's history keeps a record per batch (``history[i, 'batches']``, 200-400 bytes
    #: each in memory and as JSON): the last epochs' records are kept, whole epochs, up to this
    #: many batches; earlier epochs keep their epoch-level entries and their last batch's
    #: record (skorch's Checkpoint names its files by it). An L2E fit on 200,000 rows (1,400
    #: batches an epoch, 330 epochs) held 460,000 of them, about 100 MB; the bound keeps a
    #: saved history (``f_history``) within what ``load_params`` reads back
    _max_batch_records = 20_000

    def _trim_batch_records(self):
        """Cut the batch lists of the epochs before the last ones that hold up to
        ``_max_batch_records`` batches to their last record (once the callbacks of the epoch
        have read it)."""
        epochs = list(self.history)                  # the epochs' own dicts
        kept = len(epochs[-1].get("batches", ())) if epochs else 0
        for epoch in reversed(epochs[:-1]):
            batches = epoch.get("batches", ())
            if len(batches) <= 1:
                return                    # cut earlier, and every epoch before it
            kept += len(batches)
            if kept > self._max_batch_records:
                epoch["batches"] = batches[-1:]

    def _stopped_early(self):
        """Whether an early-stopping callback ended the loop (skorch's EarlyStopping raises
        KeyboardInterrupt too)."""
        from skorch.callbacks import EarlyStopping

        # RestoreBestEarlyStopping resolves patience='auto' into patience_ at the start of a fit
        return any(isinstance(cb, EarlyStopping)
                   and cb.misses_ >= getattr(cb, "patience_", cb.patience)
                   for _, cb in getattr(self, "callbacks_", []))

    # -- budgets, the validation split and warnings --------------------------------------------

    #: ``max_epochs='auto'``: epochs for this many optimiser steps, within the bounds below
    _auto_steps = 1000
    _auto_epoch_bounds = (10, 500)
    #: with 'auto' and early stopping on a validation split, the fit may run this many times
    #: the epochs above while the validation loss keeps improving (the patience stays an
    #: eighth of the unextended budget)
    _auto_extension = 1
    #: patience='auto': this share of the (unextended) epoch budget, at least 5 epochs. An
    #: eighth, where it was a fifth: the real-data panel's ten classification tables, three
    #: seeds, gave the same test NLL in 29 of 30 fits and a lower one in the other; the
    #: scaling tables at 500-3,000 rows the same NLL in 53 of 60 fits, in 0.73-0.87 of the
    #: time (user guide, the MT-SGD ``max_epochs`` entry)
    _patience_share = 8

    #: the calibration values this estimator offers (besides None: off)
    _calibrations = ()

    #: parameters of earlier versions and their new names (passing the old name is an error
    #: that says so)
    _renamed_params = {}

    def _check_default_params(self):
        """The parameters every estimator shares for its budget and its validation split:
        ``max_epochs`` (an integer >= 1 or 'auto'), ``calibration`` and a
        :class:`~sklmoo.estimators.ValidationSplit`'s settings."""
        if not (isinstance(self.max_epochs, str) and self.max_epochs == "auto"):
            self._check_int("max_epochs")
        if self.calibration is not None and self.calibration not in self._calibrations:
            raise ValueError(f"calibration must be one of {self._calibrations} or None, "
                             f"got {self.calibration!r}")
        if isinstance(self.train_split, ValidationSplit):
            self.train_split.check()
        elif self.train_split is not None and not callable(self.train_split):
            raise ValueError("train_split must be a ValidationSplit, None (no validation) or a "
                             "callable (dataset, y) -> (train subset, validation subset or "
                             f"None), got {self.train_split!r}")
        if (isinstance(self.verbose, bool) or not isinstance(self.verbose, (int, np.integer))
                or self.verbose < 0):
            raise ValueError(f"verbose must be an integer >= 0, got {self.verbose!r}")
        renamed = [(old, new) for old, new in self._renamed_params.items() if old in vars(self)]
        if renamed:
            raise TypeError(f"{type(self).__name__} has no parameter {renamed[0][0]!r}: it was "
                            f"renamed {renamed[0][1]!r}")

    def _resolve_epochs(self, n_train, early_stopping=False):
        """``max_epochs_``: ``max_epochs``, or with 'auto' the epochs that give about
        ``_auto_steps`` optimiser steps on ``n_train`` rows, within ``_auto_epoch_bounds``,
        times ``_auto_extension`` (at most the upper bound) when ``early_stopping`` (a
        validation split and an early-stopping callback) will end the fit once the validation
        loss stops improving.
        ``_patience_epochs``: the budget the early-stopping patience is a share of (the
        unextended one, :meth:`_auto_patience`); ``_batches_per_epoch``: the optimiser steps
        of an epoch. With 'auto' batches on more than ``_auto_batch_large`` rows, early
        stopping may run to ``_auto_large_epochs`` with a patience of
        ``_auto_large_patience``."""
        per_epoch = self._batches_per_epoch = self._epoch_batches(n_train)
        if isinstance(self.max_epochs, str):
            low, high = self._auto_epoch_bounds
            base = int(np.clip(math.ceil(self._auto_steps / per_epoch), low, high))
            self._patience_epochs = base
            self.max_epochs_ = (max(base, min(base * self._auto_extension, high))
                                if early_stopping else base)
            if early_stopping and getattr(self, "_large_table", False):
                # a large table in large batches: a few hundred steps per epoch, and
                # improvement that takes tens of epochs (160,000 flights rows: 71 epochs, NLL
                # 0.2217, against 17 epochs and 0.2297 with the small-table budget)
                self.max_epochs_ = max(self.max_epochs_, min(self._auto_large_epochs, high))
        else:
            self.max_epochs_ = self._patience_epochs = int(self.max_epochs)
        return self.max_epochs_

    def _epoch_batches(self, n_train, rows=None):
        """The optimiser steps of an epoch over ``n_train`` rows in batches of ``rows``
        (default :meth:`_batch_rows`; ``iterator_train__batch_size`` when given): one per
        batch, the last (partial) one left out with ``iterator_train__drop_last=True``, which
        needs the rows to fill a batch. A custom ``iterator_train`` is taken to batch the
        same way."""
        settings = self.get_params_for("iterator_train")
        rows = settings.get("batch_size", self._batch_rows() if rows is None else rows)
        batch = n_train if rows == -1 else rows
        if settings.get("drop_last", False):
            if n_train < batch:
                raise ValueError(f"iterator_train__drop_last=True drops every batch: the "
                                 f"{n_train} training rows do not fill one batch of {batch}; "
                                 "lower batch_size")
            return n_train // batch
        return math.ceil(n_train / max(1, min(batch, n_train)))

    def _check_epoch_rows(self, n_rows):
        """Refuse, before a fit changes anything, ``n_rows`` rows that
        ``iterator_train__drop_last=True`` would drop whole (the training rows are at most
        these; :meth:`_epoch_batches` checks them again after the validation split). 'auto'
        batches are ``_auto_batch`` rows up to ``_auto_batch_large`` rows, a 25th above."""
        self._epoch_batches(n_rows, self._auto_batch if isinstance(self.batch_size, str)
                            else self.batch_size)

    def _auto_patience(self, budget):
        """Early stopping's patience='auto' for an epoch ``budget`` (``_patience_epochs``): a
        ``_patience_share`` of it, at least 5 epochs; ``_auto_large_patience`` on a large
        table in 'auto' batches."""
        if getattr(self, "_large_table", False) and isinstance(self.max_epochs, str):
            return self._auto_large_patience
        return max(5, math.ceil(budget / self._patience_share))

    #: ``batch_size='auto'``: this many rows per batch up to ``_auto_batch_large`` training rows;
    #: above, about one batch per ``_auto_batch_share`` of them (a power of two, at most
    #: ``_auto_batch_max``), with the learning rate scaled by the square root of the batch's
    #: growth (as for Adam: Malladi et al. 2022), so that large tables take fewer, larger steps
    _auto_batch = 64
    _auto_batch_large = 8192
    _auto_batch_share = 25
    _auto_batch_max = 1024
    #: ... and whether the learning rate grows with it (False: the ``lr`` given at any batch)
    _scale_lr_with_batch = True
    #: ... and with early stopping there, up to this many epochs, with this patience. With
    #: the MT-SGD estimators' parameter average the validation loss of an under-fitted table
    #: improves smoothly for hundreds of epochs (20,000 origin rows: 285 epochs, 2.3 times the
    #: five MLPs' fit time, test NLL 0.838; at 150 epochs 0.852, 1.1 times, against the MLPs'
    #: 0.895); without it 200,000 origin rows improved until epoch 233 (user guide)
    _auto_large_epochs = 150
    _auto_large_patience = 10

    def _valid_batch_rows(self):
        """Rows per batch of a fit's validation passes (no gradients kept: fewer, larger
        batches than training's)."""
        rows = self._batch_rows()
        return max(rows, min(self._valid_batch_factor * rows, self._valid_batch_max))

    def _batch_rows(self):
        """Rows per batch: ``batch_size``, or the one resolved for the last fit when it is
        'auto' (``_auto_batch`` before any)."""
        if isinstance(self.batch_size, str):
            return getattr(self, "batch_size_", self._auto_batch)
        return self.batch_size

    def _resolve_batch(self, n_train):
        """``batch_size_`` for a fit on ``n_train`` rows (see ``_auto_batch``) and the factor on
        the learning rate that goes with it (1 unless 'auto' chose a larger batch)."""
        # batches this fit chooses itself: 'auto', and no ``iterator_train__batch_size``
        self._auto_batches = (isinstance(self.batch_size, str)
                              and "batch_size" not in self.get_params_for("iterator_train"))
        # a large table in 'auto' batches (its epochs are hundreds of steps); a training batch
        # given by ``iterator_train__batch_size`` is the user's, trained as a given
        # ``batch_size`` is: no large-table budget, no rate scaled for a batch it is not
        self._large_table = self._auto_batches and n_train > self._auto_batch_large
        if not isinstance(self.batch_size, str):
            self.batch_size_ = self.batch_size
            return 1.0
        batch = self._auto_batch
        if n_train > self._auto_batch_large:
            batch = int(np.clip(2 ** round(math.log2(n_train / self._auto_batch_share)),
                                self._auto_batch, self._auto_batch_max))
        # batch_size resolved: the validation and prediction batches follow it
        self.batch_size_ = batch
        scaled = self._scale_lr_with_batch and self._auto_batches
        return math.sqrt(batch / self._auto_batch) if scaled else 1.0

    _fit_split = None

    def get_split_datasets(self, X, y=None, **fit_params):
        """skorch's split; a :class:`~sklmoo.estimators.ValidationSplit` without its own
        ``random_state`` is seeded by the estimator's. Inside a fit, the split that fit made
        (:meth:`_split_rows`)."""
        if self._fit_split is not None:
            return self._fit_split
        return self._split_dataset(self.get_dataset(X, y), y, **fit_params)

    def _split_dataset(self, dataset, y, weight=None, **fit_params):
        """``train_split`` applied to ``dataset``: a ValidationSplit gets the estimator's seed
        and the rows' weights; a custom split's empty part is named at once (it would fail
        much later: an empty mini-batch, a mean over no rows)."""
        if isinstance(self.train_split, ValidationSplit):
            return self.train_split(dataset, y, seed=self.seed_, weight=weight)
        if not self.train_split:
            return dataset, None
        train, valid = self.train_split(dataset, y, **fit_params)
        if len(train) == 0:
            raise ValueError(f"train_split={self.train_split!r} returned no training rows")
        if valid is not None and len(valid) == 0:
            raise ValueError(f"train_split={self.train_split!r} returned an empty validation "
                             "set: return None as its validation part for a fit without one")
        return train, valid

    def _split_rows(self, X, targets, weight, observed, **fit_params):
        """The fit's training and validation datasets of ``X``, ``targets`` and their
        weights (n, T) (ones: unweighted): the split is weighted (see ``ValidationSplit``),
        and within each part the weights are divided by their mean over its observed
        targets, so that each part's losses are weighted means on an unweighted fit's
        scale."""
        dataset = self.get_dataset(X, targets)
        if not isinstance(dataset, RowData):
            if not np.all(weight == 1):
                raise ValueError("sample_weight and class_weight need the estimator's own "
                                 f"dataset; this fit uses dataset={self.dataset!r}")
            return self._split_dataset(dataset, targets, **fit_params)
        weight = normalised(weight, observed)
        dataset = dataset.with_weight(weight.astype(np.float32).reshape(np.shape(targets)))
        train, valid = self._split_dataset(dataset, targets, weight=weight.mean(axis=1),
                                           **fit_params)
        source = None if valid is None else row_source(valid)
        if valid is not None and (source is None or source[0] is not dataset):
            # rows other than the fit's: skorch's predefined_split(Dataset(X_valid, y_valid))
            return train, self._validation_dataset(valid)
        parts = [row_source(p) for p in (train, valid) if p is not None]
        if valid is None or any(p is None or p[1] is None for p in parts):
            return train, valid
        for _, index in parts:
            weight = normalised(weight, observed, index.numpy())
        base = dataset.with_weight(weight.astype(np.float32).reshape(np.shape(targets)))
        return tuple(Subset(base, part.indices) for part in (train, valid))

    def _validation_dataset(self, valid):
        """A validation set of other rows than the fit's (skorch's ``predefined_split``,
        a ``Subset`` of another dataset), read once: its inputs checked as ``predict``
        checks them, its target columns matched to the fit's by name, its targets encoded
        as the fit's (:meth:`_validation_targets`), weighted by ``class_weight`` and
        normalised as a held-out part is (:meth:`_split_rows`); rows without a target are
        left out. A :class:`RowData` that also holds them (``validation_rows``, read by
        :meth:`_subset_rows`). A problem with it is a ``ValueError`` that names it."""
        try:
            X_valid, y_valid = _validation_arrays(valid)
            X_valid = self._validate_X(X_valid, reset=False)
            targets = self._validation_targets(self._match_target_columns(y_valid),
                                               len(X_valid))
            observed = np.asarray(self._observed(targets)).reshape(len(targets), -1)
            weight = np.asarray(self._row_weights(targets, None), dtype=np.float64)
            weight = np.broadcast_to(weight.reshape(len(targets), -1), observed.shape)
            keep = (observed & (weight > 0)).any(axis=1)
            if not keep.any():
                raise ValueError("it has no row with a target (and a non-zero class weight)")
        except ValueError as exc:
            raise ValueError(f"the validation set that train_split returned: {exc}") from exc
        if not keep.all():
            X_valid, targets, weight, observed = (take_rows(X_valid, keep), targets[keep],
                                                  weight[keep], observed[keep])
        # the loss reads the normalised weights, calibration the weights themselves, as for
        # a part held out by index
        rows = RowData(X_valid, targets, normalised(weight, observed).astype(np.float32)
                       .reshape(np.shape(targets)))
        rows.validation_rows = (X_valid, targets, weight.reshape(np.shape(targets)))
        return rows

    def _validation_targets(self, y, n_samples):
        """``y`` of a validation set of other rows, encoded as the fit's targets."""
        raise NotImplementedError

    def _match_target_columns(self, y):
        """A DataFrame ``y`` of several columns in the order of the fit's named targets
        (``task_names_``), the same columns in another order reordered; other names are an
        error. Any other ``y`` (and a fit on unnamed columns) is read by position."""
        names = [str(n) for n in getattr(self, "task_names_", None) or []]
        columns = getattr(y, "columns", None)
        if columns is None or len(names) < 2 or len(columns) != len(names):
            return y
        columns = [str(c) for c in columns]
        unnamed = are_default_names(names)
        if columns == names or unnamed:
            return y
        if sorted(columns) != sorted(names):
            raise ValueError(f"y's columns {columns} are not the fit's {names}")
        return y.iloc[:, [columns.index(n) for n in names]]

    @staticmethod
    def _subset_rows(subset, *arrays):
        """The rows of ``arrays`` that a validation subset holds (None without one); for a
        validation set of other rows (:meth:`_validation_dataset`), its own, shaped as
        ``arrays``."""
        if subset is None:
            return None
        own = getattr(subset, "validation_rows", None)
        if own is not None:
            return tuple(mine if i == 0 else np.reshape(mine, (len(mine),) + np.shape(a)[1:])
                         for i, (mine, a) in enumerate(zip(own, arrays)))
        indices = getattr(subset, "indices", None)
        if indices is None or getattr(subset, "dataset", None) is None:
            raise TypeError("train_split must return index subsets of the dataset (as skorch's "
                            "ValidSplit and sklmoo's ValidationSplit do) for calibration; set "
                            "calibration=None with this train_split")
        indices = np.asarray(indices, dtype=np.int64)
        return tuple(take_rows(a, indices) for a in arrays)

    @staticmethod
    def _row_mean_weights(weight, observed):
        """Each row's mean weight over its observed targets, (n,)."""
        w, seen = np.asarray(weight), np.asarray(observed)
        w, seen = w.reshape(len(w), -1), seen.reshape(len(seen), -1)
        return (w * seen).sum(axis=1) / np.maximum(seen.sum(axis=1), 1)

    def _check_weights(self, weight, observed):
        """``weight`` (n, T) after checking that the rows it keeps have a mean weight the
        fit's arithmetic can take (:func:`~sklmoo.estimators._weights.check_data_weight`)."""
        per_row = self._row_mean_weights(weight, observed)
        kept = per_row[per_row > 0]
        self._weight_warning = None
        if len(kept):
            class_weight = getattr(self, "class_weight", None) is not None
            check_data_weight(kept, "sample_weight and class_weight" if class_weight
                              else "sample_weight")
            mean = float(kept.mean())
            if mean < self._light_weight and self._reads_weight_scale():
                # e.g. weights normalised to sum to 1: a fit on as much data as one row (given
                # when the fit's warnings start, so that fit_warnings_ keeps it)
                self._weight_warning = (
                    f"sample_weight averages {mean:.3g} per row: a weight counts as that many "
                    f"observations (as in scikit-learn), so this fit sees as much data as "
                    f"{float(kept.sum()):.3g} rows and its prior weighs that much more; for "
                    "relative weights, rescale them to average 1 "
                    "(sample_weight / sample_weight.mean())")
        return weight

    #: a mean weight per row below this gets a warning where the weights' scale matters
    _light_weight = 0.1

    def _reads_weight_scale(self):
        """Whether this fit depends on the weights' scale, not only on their ratios (a prior
        that the total weight counters: ``prior_precision`` above 0)."""
        return getattr(self, "prior_precision", 1.0) > 0

    @classmethod
    def _data_weight(cls, train, weight, observed):
        """The amount of data the likelihood counts (the N of ``N * mean loss``): the sum
        over the training rows of each row's mean weight over its observed targets (the
        number of training rows when unweighted)."""
        source = row_source(train)
        if source is None:
            return float(len(train))
        per_row = cls._row_mean_weights(weight, observed)
        return float(per_row.sum() if source[1] is None else per_row[source[1].numpy()].sum())

    # the fitted recalibration (temperatures / variance scales) is a buffer of the module, so
    # that save_params / load_params and restore-best carry it with the weights

    def _register_recalibration(self, size):
        self.module_.register_buffer("recalibration", torch.ones(size, dtype=torch.float64))

    def _store_recalibration(self, values):
        with torch.no_grad():
            self.module_.recalibration.copy_(torch.as_tensor(np.atleast_1d(values),
                                                             dtype=torch.float64))

    def _loaded_recalibration(self):
        return self.module_.recalibration.detach().cpu().numpy().copy()

    def _before_load_params(self):
        """What a fitted module needs before a state dict is loaded into it (nothing here)."""

    def save_params(self, f_params=None, f_optimizer=None, f_criterion=None, f_history=None,
                    use_safetensors=False, **kwargs):
        """Write the fitted network to files: its state, the optimizer's and the history.

        The files hold the network, not the whole estimator: :meth:`load_params` reads them
        into an estimator fitted on data with the same features and targets. To keep the whole
        fitted estimator in one file, pickle it (``pickle`` / ``joblib.dump``).

        Parameters
        ----------
        f_params : str, path or file-like, default=None
            The module's state: the members' weights and the fitted state the estimator keeps
            in its module (see its Attributes). None: not saved.
        f_optimizer : str, path or file-like, default=None
            The optimizer's state, which a continued fit needs. None: not saved.
        f_criterion : str, path or file-like, default=None
            The loss module's state. None: not saved.
        f_history : str, path or file-like, default=None
            ``history`` as JSON. None: not saved.
        use_safetensors : bool, default=False
            Write with ``safetensors`` instead of ``torch.save`` (tensors only: not the
            optimizer).
        **kwargs
            ``f_<name>`` saves a further module, criterion or optimizer set as ``<name>_``.

        Notes
        -----
        Each file given as a path is written atomically: to a temporary in its directory,
        renamed over the path once complete, so a write that fails (a full disk, an
        interruption) leaves the previous file in place (a symbolic link's target is
        replaced; a device such as ``os.devnull`` is written directly). A path that is a
        directory, or one file named twice, is refused before anything is written. A file
        object is written as it is.

        An estimator that is not fitted (never fitted, or its last fit diverged or was
        interrupted, or ``set_params`` replaced its network) raises ``NotFittedError``; a
        callback during a fit (skorch's ``Checkpoint``) saves the fit in progress.
        """
        if self._fit_split is None and not self.__sklearn_is_fitted__():
            raise NotFittedError(f"This {type(self).__name__} instance is not fitted: there is "
                                 "no fitted network to save (a fit that diverged or was "
                                 "interrupted, or set_params(module__...), leaves none); fit "
                                 "it first")
        files = dict(kwargs, f_params=f_params, f_optimizer=f_optimizer,
                     f_criterion=f_criterion, f_history=f_history)
        paths = {key: f for key, f in files.items()
                 if key.startswith("f_") and isinstance(f, (str, os.PathLike))}
        with atomic_files(paths) as temporaries:
            return super().save_params(use_safetensors=use_safetensors,
                                       **{**files, **temporaries})

    def load_params(self, f_params=None, f_optimizer=None, f_criterion=None, f_history=None,
                    checkpoint=None, use_safetensors=False, **kwargs):
        """Read files written by :meth:`save_params` into this fitted estimator.

        The network is sized from the data, so fit the estimator first on data with the same
        features and targets (``clone(est).set_params(max_epochs=1).fit(X, y)`` is enough),
        then load. Loading ``f_params`` (or a ``checkpoint``) restores the weights and the
        fitted state kept in the module (see the Attributes); when the files do not match the
        estimator, it raises and the estimator keeps its fitted network.

        Loading is checked before anything is read: every ``torch.save`` file (a path or a
        file object, put back where it was) must be a zip archive whose members declare
        about the size of the state it replaces, not more, and match their checksums
        (CRC-32), and ``f_history`` a JSON list of
        at most 16 MB of epochs a later fit can read (numbers for their losses and durations,
        a list of batch records). A device or a FIFO is never read. The loaded parameters
        must then have the module's keys and shapes,
        each backed by data in the file, finite values and positive recalibration factors;
        otherwise nothing is copied.

        Parameters
        ----------
        f_params, f_optimizer, f_criterion, f_history : str, path or file-like, default=None
            The files :meth:`save_params` wrote; None: that part is not loaded.
        checkpoint : skorch.callbacks.Checkpoint, default=None
            Load the files a ``Checkpoint`` callback wrote (an ``f_*`` given as well wins).
        use_safetensors : bool, default=False
            True for files written with ``use_safetensors=True``.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Naming the file and the problem; the estimator is then exactly as before the call
            (its fitted network, optimiser state and history).
        OSError
            If a file cannot be opened or is not a regular file (a device or a FIFO, never
            read); the estimator is unchanged.
        """
        if checkpoint is not None and not self.initialized_:
            self.initialize()           # skorch does, to format the checkpoint's file names
        files = files_to_load(self, checkpoint, dict(
            f_params=f_params, f_optimizer=f_optimizer, f_criterion=f_criterion,
            f_history=f_history, **kwargs))
        check_files(self, files, use_safetensors)
        module = getattr(self, "module_", None)
        if isinstance(module, torch.nn.Module):
            self._before_load_params()
        saved = snapshot(self)
        source = files.get("f_params", files.get("f_module"))
        try:
            with (checked_loads(module, source) if isinstance(module, torch.nn.Module)
                  and source is not None else contextlib.nullcontext()):
                try:
                    super().load_params(f_params=f_params, f_optimizer=f_optimizer,
                                        f_criterion=f_criterion, f_history=f_history,
                                        checkpoint=checkpoint,
                                        use_safetensors=use_safetensors, **kwargs)
                except RuntimeError as exc:     # torch's reader on a corrupted archive
                    names = ", ".join(str(f) for f in files.values())
                    raise ValueError(f"cannot load {names}: {exc}") from exc
                except KeyError as exc:
                    # an optimiser's load_state_dict reading a state of another kind (the
                    # parameters' file, another optimiser's)
                    names = ", ".join(f"{key}={source}" for key, source in files.items())
                    raise ValueError(f"cannot load {names}: a file does not hold the state "
                                     f"it is loaded as (missing {exc})") from exc
            if source is not None:
                # checks what was loaded before it sets any fitted attribute
                self._after_load_params()
        except BaseException:
            # torch copies the matching tensors before it reports a mismatch, skorch replaces
            # the history first: put everything back so that a failed load changes nothing
            restore(self, saved)
            raise
        return self

    def _start_fit_warnings(self):
        self.fit_warnings_ = []
        message = self.__dict__.pop("_weight_warning", None)
        if message:
            self._warn(message)

    def _warn(self, message, category=UserWarning):
        """Warn once, attributed to the user's call, and keep the message in
        ``fit_warnings_`` (warnings raised in joblib workers are otherwise lost)."""
        if not hasattr(self, "fit_warnings_"):
            self.fit_warnings_ = []
        self.fit_warnings_.append(f"{category.__name__}: {message}")
        warnings.warn(message, category, stacklevel=user_stacklevel())

    def _check_divergence(self):
        epoch = len(self.history)
        guarded = self._guarded_tensors()
        with torch.no_grad():
            # a finite sum of each tensor means finite entries (one NaN or inf makes it NaN or
            # inf); only when a sum is not finite (or overflowed) are the members looked at
            sums = [value.sum() for value in guarded.values()]
            suspect = bool(sums) and not torch.isfinite(torch.stack(sums)).all()
        for name, value in guarded.items() if suspect else ():
            finite = torch.isfinite(value.detach().reshape(value.shape[0], -1)).all(dim=1)
            if not finite.all():
                bad = torch.nonzero(~finite).flatten().tolist()
                raise FloatingPointError(f"{self._member_kind}(s) {bad} diverged in epoch "
                                         f"{epoch}: non-finite parameters in {name!r}")
        # the epoch's train_loss is recorded by a callback after this hook: average the batches
        batches = [b for b in self.history[-1, "batches"] if "train_loss" in b]
        if not batches:
            return
        sizes = np.array([b.get("train_batch_size", 1) for b in batches], dtype=float)
        loss = float(np.average([float(b["train_loss"]) for b in batches], weights=sizes))
        if not np.isfinite(loss):
            raise FloatingPointError(f"non-finite training loss in epoch {epoch}")
        if self._first_loss is None:
            # the loss before any update of this fit: its first mini-batch
            self._first_loss = float(batches[0]["train_loss"])
        if loss > DIVERGENCE_FACTOR * max(self._first_loss, 1.0):
            raise FloatingPointError(f"training diverged in epoch {epoch}: mean training loss "
                                     f"{loss:.4g} against {self._first_loss:.4g} at the start; "
                                     "lower the step size / learning rate")


def _validation_arrays(valid):
    """``(X, y)`` of a validation dataset of other rows: a skorch ``Dataset``'s own ``X`` and
    ``y`` (or those rows of them, for a ``Subset`` of one; pandas objects by position), or
    any other dataset's items read as ``(x, y)`` pairs."""
    from skorch.dataset import Dataset as SkorchDataset

    base, index = valid, None
    if isinstance(valid, Subset) and isinstance(valid.dataset, SkorchDataset):
        base, index = valid.dataset, np.asarray(valid.indices, dtype=np.int64)
    if isinstance(base, SkorchDataset):
        if base.y is None:
            raise ValueError("it has no targets (a skorch Dataset with y=None): pass "
                             "Dataset(X_valid, y_valid)")
        if index is None:
            return base.X, base.y
        return tuple(a.iloc[index] if hasattr(a, "iloc") else np.asarray(a)[index]
                     for a in (base.X, base.y))
    rows = as_dataset_rows(valid)
    return rows, rows.targets()

