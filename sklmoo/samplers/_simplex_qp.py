"""Min-norm points of convex hulls: ``min_{w in simplex} w^T U w`` for PSD Gram matrices U."""

import functools
import itertools

import numpy as np
import quadprog
import torch

_MAX_ENUMERATED_K = 8


def _check_gram(gram):
    if not torch.is_tensor(gram):
        gram = torch.as_tensor(np.asarray(gram, dtype=np.float64))
    if gram.ndim < 2 or gram.shape[-1] != gram.shape[-2]:
        raise ValueError(f"gram must be square (..., K, K), got shape {tuple(gram.shape)}")
    if gram.shape[-1] == 0:
        raise ValueError("gram must have at least one row (K >= 1)")
    if not torch.isfinite(gram).all():
        raise FloatingPointError(
            "gram contains NaN or inf: the scores (gradients of the log-densities) have diverged"
        )
    return gram


def _ridge(gram):
    # scale-aware ridge: singular U (collinear directions) still has a unique solution
    scale = torch.diagonal(gram, dim1=-2, dim2=-1).abs().amax(dim=-1).clamp_min(1e-30)
    rel = 1e-10 if gram.dtype == torch.float64 else 1e-6
    return (rel * scale)[..., None, None] * torch.eye(gram.shape[-1], dtype=gram.dtype,
                                                       device=gram.device)


def _closed_form_two(gram):
    a, b, c = gram[..., 0, 0], gram[..., 1, 1], gram[..., 0, 1]
    denom = a + b - 2.0 * c
    safe = denom > 1e-12 * (a.abs() + b.abs()).clamp_min(1e-30)
    w0 = torch.where(safe, (b - c) / torch.where(safe, denom, torch.ones_like(denom)),
                     torch.full_like(denom, 0.5))
    w0 = w0.clamp(0.0, 1.0)
    return torch.stack([w0, 1.0 - w0], dim=-1)


def _supports(k, device):
    masks = [m for r in range(1, k + 1) for m in itertools.combinations(range(k), r)]
    out = torch.zeros(len(masks), k, dtype=torch.bool, device=device)
    for i, m in enumerate(masks):
        out[i, list(m)] = True
    return out


def _face_enumeration(gram):
    """Exact batched solve by enumerating the simplex faces (K small).

    On a face S the minimiser of ``w^T U w`` subject to ``1^T w = 1`` is
    ``x / 1^T x`` with ``U_SS x = 1``, with value ``1 / 1^T x``. The global minimiser lies in
    the relative interior of one face, where it is that face's minimiser, so the best feasible
    face solution is the answer. All faces are solved in one batched linear solve, padding each
    face's system with the identity off its support.
    """
    k = gram.shape[-1]
    batch = gram.shape[:-2]
    g = (gram + _ridge(gram)).reshape(-1, k, k)                          # (B, K, K)
    masks = _supports(k, gram.device)                                    # (F, K)
    mf = masks.to(gram.dtype)
    outer = mf[:, :, None] * mf[:, None, :]
    eye = torch.eye(k, dtype=gram.dtype, device=gram.device)
    systems = g[:, None] * outer + (1.0 - mf)[:, :, None] * eye          # (B, F, K, K)
    rhs = mf.expand(g.shape[0], -1, -1)[..., None]                       # (B, F, K, 1)
    x = torch.linalg.solve(systems, rhs)[..., 0]                         # (B, F, K)
    total = x.sum(dim=-1)
    w = x / total[..., None]
    tol = 1e-9 if gram.dtype == torch.float64 else 1e-5
    feasible = (total > 0) & (w >= -tol).all(dim=-1) & torch.isfinite(w).all(dim=-1)
    value = torch.where(feasible, 1.0 / total, torch.full_like(total, float("inf")))
    best = value.argmin(dim=-1)
    w = w[torch.arange(g.shape[0], device=gram.device), best]
    return w.reshape(*batch, k)


def project_to_simplex(v):
    """Euclidean projection of the last axis of ``v`` onto the probability simplex.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import project_to_simplex
    >>> project_to_simplex(torch.tensor([0.5, 0.9, -1.0]))
    tensor([0.3000, 0.7000, 0.0000])
    """
    v = torch.as_tensor(v)
    if v.ndim == 0 or v.shape[-1] == 0:
        raise ValueError(f"v needs a non-empty last axis to project, got shape {tuple(v.shape)}")
    if not v.is_floating_point():
        v = v.to(torch.get_default_dtype())
    if not bool(torch.isfinite(v).all()):
        raise ValueError("v contains NaN or inf: it has no projection onto the simplex")
    return _project(v)


def _project(v):
    """:func:`project_to_simplex` without the checks (inside the solver's iterations)."""
    k = v.shape[-1]
    u, _ = torch.sort(v, dim=-1, descending=True)
    css = u.cumsum(dim=-1) - 1.0
    ind = torch.arange(1, k + 1, dtype=v.dtype, device=v.device)
    cond = (u - css / ind) > 0
    rho = cond.to(v.dtype).cumsum(dim=-1).argmax(dim=-1, keepdim=True)
    theta = css.gather(-1, rho) / (rho + 1).to(v.dtype)
    return (v - theta).clamp_min(0.0)


def _projected_gradient(gram, n_iter=2000):
    """Accelerated projected gradient (FISTA); the robust fallback for any K."""
    k = gram.shape[-1]
    lip = 2.0 * gram.abs().sum(dim=-1).amax(dim=-1).clamp_min(1e-30)[..., None]
    w = torch.full(gram.shape[:-1], 1.0 / k, dtype=gram.dtype, device=gram.device)
    z, t = w, 1.0
    for _ in range(n_iter):
        grad = 2.0 * (gram @ z[..., None])[..., 0]
        w_next = _project(z - grad / lip)
        t_next = (1.0 + (1.0 + 4.0 * t * t) ** 0.5) / 2.0
        z = w_next + ((t - 1.0) / t_next) * (w_next - w)
        w, t = w_next, t_next
    return w


@functools.lru_cache(maxsize=16)
def _simplex_constraints(k):
    # quadprog's form: C^T w >= b, the first column an equality (1^T w = 1), then w >= 0
    return np.hstack([np.ones((k, 1)), np.eye(k)]), np.concatenate([[1.0], np.zeros(k)])


def _quadprog(gram):
    u = gram.detach().cpu().double().numpy()
    k = u.shape[0]
    scale = max(float(np.abs(np.diag(u)).max()), 1e-300)
    g = u / scale
    g.flat[:: k + 1] += 1e-10
    constraints, bounds = _simplex_constraints(k)
    w = quadprog.solve_qp(g, np.zeros(k), constraints, bounds, 1)[0]
    return torch.as_tensor(w, dtype=gram.dtype, device=gram.device)


def _to_simplex(w):
    w = w.clamp_min(0.0)
    return w / w.sum(dim=-1, keepdim=True)


def min_norm_weights(gram):
    r"""Solve :math:`\min_{w \in \Delta_K} w^\top U w` for one or a batch of Gram matrices.

    Parameters
    ----------
    gram : Tensor or array of shape (K, K) or (B, K, K)
        Symmetric positive semi-definite matrices (singular ones are fine).

    Returns
    -------
    weights : Tensor of shape (K,) or (B, K)
        Non-negative, summing to one, finite.

    Notes
    -----
    * K = 1: ``[1]``. K = 2: the closed form
      :math:`w_1 = \mathrm{clip}((U_{22}-U_{12})/(U_{11}+U_{22}-2U_{12}), 0, 1)`.
    * A single matrix with K > 2: quadprog on the scale-normalised matrix plus a ridge of
      :math:`10^{-10}`; if quadprog fails, exact face enumeration (K <= 8) or accelerated
      projected gradient.
    * A batch with K > 2 (MOO-SVGD and MGDA, one problem per particle): exact face enumeration in
      one batched linear solve (K <= 8), with no Python loop over the batch; above, each
      matrix as a single one.

    Raises
    ------
    FloatingPointError
        If ``gram`` holds NaN or inf.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.samplers import min_norm_weights
    >>> g = torch.tensor([[1.0, -1.0], [-1.0, 1.0]])  # opposite unit vectors
    >>> min_norm_weights(g)
    tensor([0.5000, 0.5000])
    """
    gram = _check_gram(gram)
    if not gram.is_floating_point():                      # integers: as a list is taken
        return min_norm_weights(gram.double())
    if gram.dtype in (torch.float16, torch.bfloat16):
        # solved in float32 (torch's linear solvers take no half precision), returned in it
        return min_norm_weights(gram.float()).to(gram.dtype)
    gram = 0.5 * gram + 0.5 * gram.transpose(-1, -2)      # no overflow near the float max
    k = gram.shape[-1]
    if k == 1:
        return torch.ones(gram.shape[:-1], dtype=gram.dtype, device=gram.device)
    if k == 2:
        return _closed_form_two(gram)
    if gram.ndim == 2:
        try:
            w = _quadprog(gram)
            if torch.isfinite(w).all():
                return _to_simplex(w)
        except ValueError:
            pass
    if k <= _MAX_ENUMERATED_K:
        w = _face_enumeration(gram)
        if torch.isfinite(w).all():
            return _to_simplex(w)
    elif gram.ndim == 3:
        # more tasks than enumeration covers: quadprog per matrix (projected gradient's 2,000
        # iterations ended up to 8 % above the minimum on badly scaled ten-task problems)
        return torch.stack([min_norm_weights(g) for g in gram])
    return _to_simplex(_projected_gradient(gram))
