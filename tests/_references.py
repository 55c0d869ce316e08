"""Independent reference implementations the tests compare against (autograd, term by term)."""

import torch
from torch.func import grad, jacfwd, jacrev


def reference_gram(x, s, kern, c):
    """Eq. (4) term by term for the kernel function ``kern(a, b)``, every kernel derivative
    taken by autograd."""
    dk_da, dk_db = grad(kern, argnums=0), grad(kern, argnums=1)
    mixed = jacfwd(jacrev(kern, argnums=0), argnums=1)  # d^2 k / d a d b
    m, n_targets = x.shape[0], s.shape[0]
    u = torch.zeros(n_targets, n_targets, dtype=x.dtype)
    for a in range(m):
        for b in range(m):
            kab, ga, gb = kern(x[a], x[b]), dk_da(x[a], x[b]), dk_db(x[a], x[b])
            tr = torch.trace(mixed(x[a], x[b]))
            for i in range(n_targets):
                for j in range(n_targets):
                    u[i, j] += (kab * s[i, a] @ s[j, b] + c * s[i, a] @ gb + c * s[j, b] @ ga
                                + c * c * tr)
    return u / m**2


def reference_svgd(x, s, kern, c):
    """phi(x_b) = 1/M sum_a [k(x_a, x_b) s(x_a) + c grad_{x_a} k(x_a, x_b)], with autograd."""
    dk_da = grad(kern, argnums=0)
    m = x.shape[0]
    return torch.stack([sum(kern(x[a], x[b]) * s[a] + c * dk_da(x[a], x[b]) for a in range(m)) / m
                        for b in range(m)])
