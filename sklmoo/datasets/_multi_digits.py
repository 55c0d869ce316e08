"""Multi-Digits: the CPU-sized analogue of Multi-MNIST built from scikit-learn's digits."""

import numpy as np
import pandas as pd
from sklearn.datasets import load_digits
from sklearn.utils import Bunch, check_random_state

TASK_NAMES = ["top_left", "bottom_right"]


def _source_split(n_images, test_fraction, split_seed, labels):
    # stratified by digit so both pools hold every class
    rng = np.random.RandomState(split_seed)
    test = np.zeros(n_images, dtype=bool)
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        rng.shuffle(idx)
        test[idx[: int(round(test_fraction * len(idx)))]] = True
    return np.flatnonzero(~test), np.flatnonzero(test)


def make_multi_digits(n_samples=2000, *, subset="train", canvas_size=12, test_fraction=0.3,
                      split_seed=0, random_state=None, return_X_y=False, as_frame=False):
    """Two 8x8 scikit-learn digits overlaid on one canvas: a two-task classification set.

    The CPU-sized analogue of Multi-MNIST (Sabour et al., 2017; the MT-SGD paper's Section
    4.2.1): one digit sits in the top-left corner, another in the bottom-right corner of a
    ``canvas_size`` x ``canvas_size`` image (the two overlap when the canvas is smaller than
    16), pixels combined by maximum and scaled to [0, 1]. Task ``top_left`` is the first
    digit's class, task ``bottom_right`` the second's.

    The 1797 source images are split once (stratified, by ``split_seed``) into a training pool
    and a test pool holding ``test_fraction`` of them; ``subset='train'`` draws both digits of
    every sample from the training pool and ``subset='test'`` from the test pool, so no source
    image appears in both, whatever ``random_state`` each call uses.

    Parameters
    ----------
    n_samples : int, default=2000
    subset : {'train', 'test'}, default='train'
    canvas_size : int, default=12
        Between 8 and 16.
    test_fraction : float, default=0.3
    split_seed : int, default=0
        Seed of the source-image split; keep it equal between the train and test calls.
    random_state : int, RandomState instance or None
        Seeds the pairing of source images.
    return_X_y : bool, default=False
        Return ``(X, y)`` instead of a Bunch.
    as_frame : bool, default=False
        ``X`` as a DataFrame of pixel columns and ``y`` as a DataFrame with columns
        ``top_left`` and ``bottom_right``.

    Returns
    -------
    Bunch with ``data`` (n, canvas_size**2), ``images`` (n, canvas_size, canvas_size),
    ``target`` (n, 2), ``target_names``, ``source_index`` (n, 2) into ``load_digits()``,
    ``frame`` (if ``as_frame``) and ``DESCR``; or ``(X, y)`` with ``return_X_y=True``.

    Examples
    --------
    >>> from sklmoo.datasets import make_multi_digits
    >>> X, y = make_multi_digits(100, random_state=0, return_X_y=True)
    >>> X.shape, y.shape
    ((100, 144), (100, 2))
    >>> train = make_multi_digits(50, subset="train", random_state=1)
    >>> test = make_multi_digits(50, subset="test", random_state=1)
    >>> bool(set(train.source_index.ravel()) & set(test.source_index.ravel()))
    False
    """
    if subset not in ("train", "test"):
        raise ValueError(f"subset must be 'train' or 'test', got {subset!r}")
    if (isinstance(canvas_size, bool) or not isinstance(canvas_size, (int, np.integer))
            or not 8 <= canvas_size <= 16):
        raise ValueError(f"canvas_size must be an integer between 8 and 16, got "
                         f"{canvas_size!r}")
    if (isinstance(test_fraction, bool) or not isinstance(test_fraction, (int, float, np.number))
            or not 0 < test_fraction < 1):
        raise ValueError(f"test_fraction must be a number in (0, 1), got {test_fraction!r}")
    if isinstance(split_seed, bool) or not isinstance(split_seed, (int, np.integer)):
        # None or a RandomState would draw another split on every call: the train and test
        # calls would share source images
        raise ValueError(f"split_seed must be an integer, the same for the train and test "
                         f"calls, got {split_seed!r}")
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
        raise ValueError(f"n_samples must be an integer >= 1, got {n_samples!r}")
    digits = load_digits()
    train_pool, test_pool = _source_split(len(digits.target), test_fraction, split_seed,
                                          digits.target)
    pool = train_pool if subset == "train" else test_pool
    if len(pool) == 0:
        raise ValueError(f"test_fraction={test_fraction} leaves no source digit in the "
                         f"{subset!r} pool: choose it further from 0 and 1")
    rng = check_random_state(random_state)
    src = np.column_stack([rng.choice(pool, n_samples), rng.choice(pool, n_samples)])
    s = int(canvas_size)
    canvas = np.zeros((n_samples, s, s))
    canvas[:, :8, :8] = digits.images[src[:, 0]] / 16.0
    canvas[:, s - 8:, s - 8:] = np.maximum(canvas[:, s - 8:, s - 8:],
                                           digits.images[src[:, 1]] / 16.0)
    data = canvas.reshape(n_samples, -1).astype(np.float32)
    target = digits.target[src]
    if as_frame:
        X = pd.DataFrame(data, columns=[f"pixel_{i}_{j}" for i in range(s) for j in range(s)])
        y = pd.DataFrame(target, columns=TASK_NAMES)
    else:
        X, y = data, target
    if return_X_y:
        return X, y
    bunch = Bunch(data=X, images=canvas.astype(np.float32), target=y,
                  target_names=list(TASK_NAMES), source_index=src,
                  DESCR=make_multi_digits.__doc__)
    if as_frame:
        bunch.frame = pd.concat([X, y], axis=1)
    return bunch
