"""Predictive uncertainty of an ensemble: total = aleatoric + epistemic."""

import numpy as np

from ._validation import row_sum_tolerance


def check_member_proba(member_proba, min_members=1):
    """Validate ensemble members' class probabilities (n_members, n_samples, n_classes):
    finite, in [0, 1], rows summing to 1 -> float64 array."""
    try:
        raw = np.asarray(member_proba)
        p = raw.astype(np.float64)
    except ValueError:                 # numpy's "inhomogeneous shape", or entries not numbers
        raise ValueError("member_proba must be an array of numbers (n_members, n_samples, "
                         "n_classes): these members, samples or classes differ in length or "
                         "hold something else") from None
    if p.ndim != 3:
        raise ValueError(f"member_proba must be (n_members, n_samples, n_classes), got {p.shape}")
    if p.size == 0:
        raise ValueError(f"member_proba is empty (shape {p.shape})")
    if p.shape[0] < min_members:
        raise ValueError(f"need at least {min_members} ensemble members, got {p.shape[0]}")
    if not np.isfinite(p).all():
        raise ValueError("member_proba contains NaN or inf")
    if (p < -1e-12).any() or (p > 1 + 1e-12).any():
        raise ValueError("member_proba has values outside [0, 1]")
    deviation = np.abs(p.sum(axis=-1) - 1.0).max()
    if deviation > row_sum_tolerance(raw.dtype):
        raise ValueError(f"member_proba rows must sum to 1 over classes (largest deviation "
                         f"{deviation:.3g})")
    return np.clip(p, 0.0, 1.0)


def check_eps(eps, allowed="a number in (0, 1)"):
    """``ValueError`` unless ``eps`` (the floor under a probability before its log) is a
    number in (0, 1): 0 gives log(0) (NaN), 1 or more floors every probability. ``allowed``
    is what the message says the metric takes."""
    if (isinstance(eps, (bool, str)) or not isinstance(eps, (int, float, np.floating))
            or not 0 < eps < 1):
        raise ValueError(f"eps must be {allowed}, got {eps!r}")


def entropy_decomposition(member_proba, *, eps=1e-12):
    r"""Split the predictive entropy of an ensemble into aleatoric and epistemic parts.

    For members' class probabilities :math:`p_m(\cdot|x)`, with :math:`\bar p = \frac1M\sum_m p_m`:
    total :math:`H[\bar p]`, aleatoric :math:`\frac1M\sum_m H[p_m]` (expected entropy) and
    epistemic :math:`H[\bar p] - \frac1M\sum_m H[p_m]`, the mutual information between the label
    and the member (non-negative by concavity of entropy). In nats.

    Parameters
    ----------
    member_proba : array-like of shape (n_members, n_samples, n_classes)

    Returns
    -------
    total, aleatoric, epistemic : ndarray of shape (n_samples,)

    Examples
    --------
    >>> import numpy as np
    >>> from sklmoo.metrics import entropy_decomposition
    >>> agree = np.array([[[0.5, 0.5]], [[0.5, 0.5]]])    # members agree: all aleatoric
    >>> disagree = np.array([[[1.0, 0.0]], [[0.0, 1.0]]])  # confident, opposite: all epistemic
    >>> [np.round(v, 3).tolist() for v in entropy_decomposition(agree)]
    [[0.693], [0.693], [0.0]]
    >>> [np.round(v, 3).tolist() for v in entropy_decomposition(disagree)]
    [[0.693], [0.0], [0.693]]
    """
    check_eps(eps)
    p = check_member_proba(member_proba)

    def entropy(q):
        return -(q * np.log(np.clip(q, eps, None))).sum(axis=-1)

    total = entropy(p.mean(axis=0))
    aleatoric = entropy(p).mean(axis=0)
    return total, aleatoric, np.clip(total - aleatoric, 0.0, None)
