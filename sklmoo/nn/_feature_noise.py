"""An input-dependent noise scale fitted on fixed networks' last features (no sklearn here)."""

import torch
from torch.nn import functional as F

#: rows per block when the information matrix is accumulated
_BLOCK = 4096


def fit_feature_noise(features, sq_residuals, raw_offset, coef=1.0, rest=0.0, weight=None,
                      penalty=1e-3, min_std=1e-3, max_iter=30, tol=1e-4, init=None):
    r"""Per member ``a``, the linear map of its features that sets its noise scale.

    Member a predicts its target with mean :math:`\mu_a(x)` and variance

    .. math:: v_a(x) = c\,\sigma_a(x)^2 + r_a(x), \qquad
              \sigma_a(x) = \mathrm{softplus}(s_a + w_a^\top h_a(x) + b_a) + \sigma_{\min},

    where :math:`h_a(x)` are its (fixed) last features, :math:`s_a` its constant noise
    parameter (``raw_offset``), :math:`c` and :math:`r_a(x)` what an output map adds (1 and 0
    without one). Returns the :math:`(w_a, b_a)` that minimise the weighted mean Gaussian
    negative log-likelihood of the residuals plus :math:`\tfrac{\lambda}{2}\lVert w_a\rVert^2`,
    by Fisher scoring (Newton's method with the expected information, always positive) with a
    backtracking line search, every member at once. Starts from :math:`w = 0, b = 0` (the
    constant noise; or ``init``) and never ends above its objective there. The information
    features' products are taken in float32, the rest in float64.

    Parameters
    ----------
    features : tensor of shape (M, n, F)
    sq_residuals : tensor of shape (M, n)
        :math:`(y - \mu_a(x))^2` per member and row.
    raw_offset : tensor of shape (M,)
        :math:`s_a`.
    coef : float, default=1.0
    rest : float or tensor of shape (M, n), default=0.0
    weight : tensor of shape (n,), optional
        Row weights (default: equal).
    penalty : float, default=1e-3
        :math:`\lambda`, on the mean loss (the bias is not penalised).
    min_std : float, default=1e-3
    max_iter : int, default=30
    tol : float, default=1e-4
        Stop when no member's objective falls by more than this in an iteration, or would
        in a full step by its quadratic model.
    init : (weight, bias), optional
        Where to start (another penalty's solution, say); default zeros.

    Returns
    -------
    weight : tensor of shape (M, F)
    bias : tensor of shape (M,)
        In float64; zeros when the fit would not be finite.

    Examples
    --------
    >>> import torch
    >>> from sklmoo.nn import fit_feature_noise
    >>> g = torch.Generator().manual_seed(0)
    >>> h = torch.rand(1, 4000, 1, generator=g, dtype=torch.float64)     # one member, one feature
    >>> noise = 0.1 + h[..., 0]                                           # std grows with h
    >>> r2 = (noise * torch.randn(1, 4000, generator=g, dtype=torch.float64)) ** 2
    >>> w, b = fit_feature_noise(h, r2, torch.zeros(1), penalty=0.0)
    >>> bool(w[0, 0] > 1.0)                                               # noise rises with h
    True
    """
    dtype = torch.float64
    M, n, d = features.shape
    device = features.device
    # the features (the one large array) stay as given, in float32 products; every per-row
    # quantity and the coefficients (weights, then the bias last) in float64
    h = features if features.dtype == torch.float32 else features.float()
    e2 = sq_residuals.to(dtype)
    w_rows = (torch.ones(n, dtype=dtype, device=device) if weight is None
              else torch.as_tensor(weight, dtype=dtype, device=device))
    w_rows = w_rows / w_rows.sum()
    rest = torch.as_tensor(rest, dtype=dtype, device=device)
    offset = torch.as_tensor(raw_offset, dtype=dtype, device=device).reshape(M, 1)
    ridge = torch.full((d + 1,), float(penalty), dtype=dtype, device=device)
    ridge[-1] = 0.0
    theta = torch.zeros(M, d + 1, dtype=dtype, device=device)
    zeros = (torch.zeros(M, d, dtype=dtype), torch.zeros(M, dtype=dtype))
    if float(coef) <= 0 or not (torch.isfinite(h).all() and torch.isfinite(e2).all()):
        return zeros

    def objective(th):
        z = offset + th[:, -1:] + torch.bmm(h, th[:, :-1].float()[:, :, None])[..., 0].to(dtype)
        sd = F.softplus(z) + min_std
        v = coef * sd ** 2 + rest
        loss = ((0.5 * torch.log(v) + 0.5 * e2 / v) * w_rows).sum(1)
        return loss + 0.5 * (ridge * th ** 2).sum(1), z, sd, v

    def information(info):
        """sum_i info_i [h_i, 1][h_i, 1]^T per member, in blocks of rows (no n x d copy)."""
        H = torch.zeros(M, d + 1, d + 1, dtype=dtype, device=device)
        for start in range(0, n, _BLOCK):
            hb, ib = h[:, start:start + _BLOCK], info[:, start:start + _BLOCK]
            weighted = hb * ib.float()[..., None]
            H[:, :d, :d] += torch.bmm(weighted.transpose(1, 2), hb).to(dtype)
            H[:, :d, d] += weighted.sum(1).to(dtype)
        H[:, d, :d] = H[:, :d, d]
        H[:, d, d] = info.sum(1)
        return H

    f, z, sd, v = objective(theta)
    if init is not None:
        start = torch.cat([torch.as_tensor(init[0], dtype=dtype).reshape(M, d),
                           torch.as_tensor(init[1], dtype=dtype).reshape(M, 1)], dim=1)
        start = start.to(device)
        better = (objective(start)[0] < f)[:, None]
        theta = torch.where(better, start, theta)
        f, z, sd, v = objective(theta)
    for _ in range(max_iter):
        dv = 2.0 * coef * sd * torch.sigmoid(z)                      # dv/dz
        grad_z = dv * (0.5 / v - 0.5 * e2 / v ** 2) * w_rows
        info_z = dv ** 2 / (2.0 * v ** 2) * w_rows                   # expected information
        grad = torch.cat([torch.bmm(grad_z.float()[:, None, :], h)[:, 0].to(dtype),
                          grad_z.sum(1, keepdim=True)], dim=1) + ridge * theta
        H = information(info_z)
        H = H + torch.diag(ridge + 1e-8 * H.diagonal(dim1=1, dim2=2).mean())
        # pinv where the information vanishes (noise scales pushed to their floor, where
        # the softplus is flat; a noise-free target does that): no step in those directions
        step = (torch.linalg.pinv(H, hermitian=True) @ grad[..., None])[..., 0]
        slope = (grad * step).sum(1)
        if not bool(slope.max() > 2 * tol):
            break                   # the Newton decrement: the fall a full step would bring
        t = torch.ones(M, 1, dtype=dtype, device=device)
        for _ in range(20):
            f_new, z_new, sd_new, v_new = objective(theta - t * step)
            ok = f_new <= f - 1e-4 * t[:, 0] * slope
            if bool(ok.all()):
                break
            t = torch.where(ok[:, None], t, 0.5 * t)
        ok = (f_new <= f)[:, None]
        theta = torch.where(ok, theta - t * step, theta)
        fall = (f - torch.where(ok[:, 0], f_new, f)).max()
        f, z, sd, v = objective(theta)
        if not bool(fall > tol):
            break
    if not bool(torch.isfinite(theta).all()):
        return zeros
    return theta[:, :-1].cpu(), theta[:, -1].cpu()
