"""MT-SGD / SVGD / MOO-SVGD / MGDA directions against independent references."""

import subprocess
import sys

import numpy as np
import pytest
import torch

from _references import reference_gram as _reference_gram
from _references import reference_svgd as _reference_svgd
from sklmoo.samplers import (MGDA, MOOSVGD, MTSGD, SVGD, LinearScalarization,
                             LogDensityRBFKernel, RBFKernel, min_norm_weights, scores_of)


def _problem(seed, m=6, d=3, k=3):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, d, generator=g, dtype=torch.float64)
    s = torch.randn(k, m, d, generator=g, dtype=torch.float64)
    return x, s


def _rbf(sigma2):
    def kern(a, b):
        return torch.exp(-((a - b) ** 2).sum() / (2 * sigma2))
    return kern


@pytest.mark.parametrize("seed,c,bandwidth", [(0, 1.0, "median"), (1, 0.3, "median"),
                                              (2, 1.0, 0.7), (3, 2.5, 1.9)])
def test_gram_matches_autograd_reference(seed, c, bandwidth):
    x, s = _problem(seed)
    _, info = MTSGD(kernel=RBFKernel(bandwidth), repulsion=c).direction(x, s)
    ref = _reference_gram(x, s, _rbf(info.sigma2), c)
    torch.testing.assert_close(info.gram, ref, rtol=1e-10, atol=1e-12)


def test_median_bandwidth_is_the_documented_heuristic():
    x, _ = _problem(0, m=7)
    sq = torch.cdist(x, x) ** 2
    vals = sq[torch.triu(torch.ones(7, 7, dtype=torch.bool), 1)]
    expected = vals.median() / (2 * np.log(8))
    assert float(RBFKernel().evaluate(x)[2]) == pytest.approx(float(expected), rel=1e-10)


def test_gram_is_symmetric_psd_and_lemma1_holds_on_random_problems():
    for seed in range(20):
        m = 2 + seed % 7
        x, s = _problem(seed, m=m, d=1 + seed % 4, k=2 + seed % 4)
        c = [1.0, 0.1, 3.0][seed % 3]
        _, info = MTSGD(repulsion=c).direction(x, s)
        u = _reference_gram(x, s, _rbf(info.sigma2), c)
        assert torch.allclose(info.gram, info.gram.T)
        assert float(torch.linalg.eigvalsh(info.gram).min()) >= -1e-10 * float(info.gram.diag().max())
        # Lemma 1: <phi*, phi_i> >= ||phi*||^2 for every target i (inner products from the
        # independent reference Gram matrix)
        w = info.weights
        norm2 = w @ u @ w
        assert ((u @ w) >= norm2 - 1e-9 * max(1.0, float(norm2))).all()


def test_direction_is_weighted_sum_of_per_target_svgd_directions():
    x, s = _problem(4, m=8, d=2, k=3)
    phi, info = MTSGD(repulsion=0.7).direction(x, s)
    per_target = torch.stack([_reference_svgd(x, s[k], _rbf(info.sigma2), 0.7) for k in range(3)])
    torch.testing.assert_close(phi, torch.einsum("k,kmd->md", info.weights, per_target))


def test_svgd_matches_reference_and_single_target_mtsgd():
    x, s = _problem(5, m=9, d=4, k=1)
    phi, info = SVGD().direction(x, s[0])
    torch.testing.assert_close(phi, _reference_svgd(x, s[0], _rbf(info.sigma2), 1.0))
    torch.testing.assert_close(MTSGD().direction(x, s)[0], phi)
    assert info.weights.tolist() == [1.0]
    with pytest.raises(ValueError, match="one target"):
        SVGD().direction(x, torch.randn(2, 9, 4, dtype=torch.float64))


def test_single_particle_reduces_to_mgda():
    x, s = _problem(6, m=1, d=5, k=4)
    c = 0.8
    phi, info = MTSGD(repulsion=c).direction(x, s)
    scores = s[:, 0, :]
    # U = <s_i, s_j> + c^2 d / sigma^2 (a constant that leaves the simplex minimiser unchanged)
    const = c * c * 5 / info.sigma2
    torch.testing.assert_close(info.gram - const, scores @ scores.T)
    phi_mgda, info_mgda = MGDA().direction(x, s)
    torch.testing.assert_close(phi, phi_mgda, rtol=1e-6, atol=1e-8)
    torch.testing.assert_close(info.weights, info_mgda.weights[0], rtol=1e-5, atol=1e-6)


def test_large_bandwidth_limit_is_mean_score_gram():
    # sigma -> infinity: U_ij -> E_{a,b} <s_i(a), s_j(b)> (the paper's third case), with c = 1
    x, s = _problem(7, m=5, d=2, k=3)
    _, info = MTSGD(kernel=RBFKernel(1e4)).direction(x, s)
    mean = s.mean(dim=1)
    torch.testing.assert_close(info.gram, mean @ mean.T, rtol=1e-6, atol=1e-6)


def test_moo_svgd_and_mgda_solve_per_particle_problems():
    x, s = _problem(8, m=7, d=3, k=3)
    phi_mgda, info = MGDA().direction(x, s)
    phi_moo, info_moo = MOOSVGD(repulsion=0.5).direction(x, s)
    for m in range(7):
        w = min_norm_weights(s[:, m] @ s[:, m].T)
        torch.testing.assert_close(info.weights[m], w, rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(phi_mgda[m], w @ s[:, m], rtol=1e-5, atol=1e-7)
    # MOO-SVGD = one SVGD step on the per-particle MGDA directions
    ref = _reference_svgd(x, phi_mgda, _rbf(info_moo.sigma2), 0.5)
    torch.testing.assert_close(phi_moo, ref, rtol=1e-5, atol=1e-7)
    assert info_moo.weights.shape == (7, 3) and info_moo.gram.shape == (7, 3, 3)


def test_linear_scalarization_and_input_validation():
    x, s = _problem(9, m=4, d=2, k=2)
    phi, info = LinearScalarization(weights=[3.0, 1.0]).direction(x, s)
    torch.testing.assert_close(phi, 0.75 * s[0] + 0.25 * s[1])
    with pytest.raises(ValueError, match="non-negative"):
        LinearScalarization(weights=[1.0]).direction(x, s)
    with pytest.raises(ValueError, match=r"\(K, M, d\)"):
        MTSGD().direction(x, s[:, :3])
    bad = s.clone()
    bad[0, 0, 0] = float("inf")
    with pytest.raises(FloatingPointError, match="diverged"):
        MTSGD().direction(x, bad)
    for rule, k in ((MTSGD(), 2), (SVGD(), 1)):          # finite scores whose U overflows
        huge = s[:k].float() * 1e25
        with pytest.raises(FloatingPointError, match="diverged"):
            rule.direction(x.float(), huge)
    # one NaN among finite scores, in one target or several
    nan = s.clone()
    nan[1, 2, 1] = float("nan")
    for rule, scores in ((MTSGD(), nan), (SVGD(), nan[1:])):
        with pytest.raises(FloatingPointError, match="NaN or inf"):
            rule.direction(x, scores)


# --- kernel on the log-density values (objective space) ---------------------------------------

def _log_density_problem(seed, m=6, d=3):
    """Two smooth, non-quadratic log-densities and particles; values and scores by autograd."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, d, generator=g, dtype=torch.float64)
    mu = torch.randn(2, d, generator=g, dtype=torch.float64)

    def ell(z):  # (..., d) -> (..., 2)
        return torch.stack([-0.5 * ((z - mu[0]) ** 2).sum(-1) + torch.sin(z[..., 0]),
                            -torch.log1p(((z - mu[1]) ** 2).sum(-1))], dim=-1)

    targets = [lambda z: ell(z)[:, 0], lambda z: ell(z)[:, 1]]
    s, values = scores_of(targets, x, return_log_probs=True)
    return x, s, values, ell


def _log_density_rbf(ell, sigma2):
    """k(a, b) = exp(-|ell(a) - ell(b)|^2 / 2 sigma^2) as a function of the parameters."""
    def kern(a, b):
        return torch.exp(-((ell(a) - ell(b)) ** 2).sum() / (2 * sigma2))
    return kern


@pytest.mark.parametrize("seed,c,bandwidth", [(0, 1.0, "median"), (1, 0.4, 0.8), (2, 2.0, 3.0)])
def test_log_density_kernel_gram_and_directions_match_autograd(seed, c, bandwidth):
    x, s, values, ell = _log_density_problem(seed)
    kernel = LogDensityRBFKernel(bandwidth)
    phi, info = MTSGD(kernel=kernel, repulsion=c).direction(x, s, log_densities=values)
    kern = _log_density_rbf(ell, info.sigma2)
    ref_u = _reference_gram(x, s, kern, c)
    ref_phi = torch.stack([_reference_svgd(x, s[k], kern, c) for k in range(2)])
    torch.testing.assert_close(info.gram, ref_u, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(phi, torch.einsum("k,kmd->md", info.weights, ref_phi))
    # symmetric PSD and Lemma 1 for this kernel too
    assert float(torch.linalg.eigvalsh(info.gram).min()) >= -1e-10 * float(info.gram.diag().max())
    w = info.weights
    assert ((ref_u @ w) >= w @ ref_u @ w - 1e-10).all()
    # MOO-SVGD with the same kernel: one SVGD step on the per-particle MGDA directions
    phi_moo, info_moo = MOOSVGD(kernel=kernel, repulsion=c).direction(x, s, log_densities=values)
    combined = torch.einsum("mk,kmd->md", info_moo.weights, s)
    torch.testing.assert_close(phi_moo, _reference_svgd(x, combined, kern, c))


def test_log_density_kernel_with_identity_features_is_the_parameter_kernel():
    # log p_k(x) = x_k for k = 1..d: the log-density vector is x itself, the Jacobian the identity
    x, _ = _problem(11, m=7, d=3)
    s = torch.eye(3, dtype=torch.float64)[:, None, :].expand(3, 7, 3).contiguous()
    for bandwidth in ("median", 0.9):
        phi_ld, info_ld = MTSGD(kernel=LogDensityRBFKernel(bandwidth), repulsion=0.6).direction(
            x, s, log_densities=x.clone())
        phi, info = MTSGD(kernel=RBFKernel(bandwidth), repulsion=0.6).direction(x, s)
        torch.testing.assert_close(info_ld.gram, info.gram)
        torch.testing.assert_close(phi_ld, phi)


def test_log_density_kernel_needs_values_of_the_right_shape():
    x, s, values, _ = _log_density_problem(3)
    with pytest.raises(ValueError, match="log-density values"):
        MTSGD(kernel=LogDensityRBFKernel()).direction(x, s)
    with pytest.raises(ValueError, match=r"\(M, K\)"):
        MOOSVGD(kernel=LogDensityRBFKernel()).direction(x, s, log_densities=values.T)
    bad = values.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match="diverged"):
        MTSGD(kernel=LogDensityRBFKernel()).direction(x, s, log_densities=bad)


def test_samplers_layer_does_not_import_sklearn():
    code = "import sys, sklmoo.samplers; print(any(m.startswith(('sklearn', 'skorch')) for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- task normalisation (issue 19) ---------------------------------------------------------------

def _unit(s):
    return s / s.norm(dim=-1, keepdim=True)


@pytest.mark.parametrize("rule", [MTSGD(repulsion=0.5, task_normalization="l2"),
                                  MOOSVGD(repulsion=0.5, task_normalization="l2"),
                                  MGDA(task_normalization="l2")])
def test_l2_normalised_weights_ignore_a_task_loss_scale(rule):
    x, s = _problem(11, m=6, d=4, k=3)
    scaled = s.clone()
    scaled[1] *= 100.0                 # task 1's loss multiplied by 100
    phi, info = rule.direction(x, s)
    phi_scaled, info_scaled = rule.direction(x, scaled)
    torch.testing.assert_close(info_scaled.weights, info.weights, rtol=1e-6, atol=1e-8)
    torch.testing.assert_close(phi_scaled, phi, rtol=1e-6, atol=1e-8)
    # without the normalisation the scaled task's weight collapses
    plain = type(rule)() if isinstance(rule, MGDA) else type(rule)(repulsion=0.5)
    w_scaled = plain.direction(x, scaled)[1].weights
    assert float(w_scaled[..., 1].mean()) < 0.1


def test_normalised_mtsgd_is_mtsgd_on_the_normalised_scores_and_lemma1_holds():
    # what is sampled: exactly MT-SGD (U, weights, direction) on s_k / ||s_k|| per particle, so
    # the autograd reference Gram matrix and Lemma 1 hold for the rescaled Stein directions
    for seed in range(8):
        x, s = _problem(20 + seed, m=3 + seed % 4, d=2 + seed % 3, k=2 + seed % 3)
        c = [1.0, 0.2][seed % 2]
        phi, info = MTSGD(repulsion=c, task_normalization="l2").direction(x, s)
        phi_ref, info_ref = MTSGD(repulsion=c).direction(x, _unit(s))
        torch.testing.assert_close(phi, phi_ref)
        torch.testing.assert_close(info.weights, info_ref.weights)
        u = _reference_gram(x, _unit(s), _rbf(info.sigma2), c)
        torch.testing.assert_close(info.gram, u, rtol=1e-10, atol=1e-12)
        w = info.weights
        norm2 = w @ u @ w
        assert ((u @ w) >= norm2 - 1e-9 * max(1.0, float(norm2))).all()


def test_normalised_drive_with_one_task_is_svgd_or_gradient_descent_up_to_its_scale():
    x, s = _problem(30, m=7, d=3, k=1)
    # SVGD with each particle's score divided by its norm ('l2') or by its loss ('loss')
    phi, info = SVGD(repulsion=0.4, task_normalization="l2").direction(x, s[0])
    torch.testing.assert_close(phi, _reference_svgd(x, _unit(s[0]), _rbf(info.sigma2), 0.4))
    losses = torch.linspace(0.5, 3.0, 7, dtype=torch.float64)
    phi, info = MTSGD(repulsion=0.4, task_normalization="loss").direction(
        x, s, log_densities=-losses[:, None])
    torch.testing.assert_close(phi, _reference_svgd(x, s[0] / losses[:, None],
                                                    _rbf(info.sigma2), 0.4))
    # no kernel: normalised gradient descent, each particle along s / ||s||
    torch.testing.assert_close(MGDA(task_normalization="l2").direction(x, s)[0], _unit(s[0]))
    torch.testing.assert_close(
        LinearScalarization(task_normalization="loss+").direction(
            x, s, log_densities=-losses[:, None])[0], _unit(s[0]) / losses[:, None])


def test_normalize_task_scores_edge_cases_and_validation():
    from sklmoo.samplers import normalize_task_scores
    s = torch.tensor([[[0.0, 0.0], [3.0, 4.0]]])
    torch.testing.assert_close(normalize_task_scores(s, "l2"),
                               torch.tensor([[[0.0, 0.0], [0.6, 0.8]]]))   # zero stays zero
    assert normalize_task_scores(s, "none") is s
    with pytest.raises(ValueError, match="needs the losses"):
        normalize_task_scores(s, "loss")
    with pytest.raises(ValueError, match="non-negative"):
        normalize_task_scores(s, "loss", log_densities=torch.tensor([[1.0], [-1.0]]))
    # a loss of exactly 0 (a fitted task) leaves its score as it is
    torch.testing.assert_close(normalize_task_scores(s, "loss",
                                                     log_densities=torch.tensor([[0.0], [-2.0]])),
                               torch.tensor([[[0.0, 0.0], [1.5, 2.0]]]))
    with pytest.raises(ValueError, match=r"\(M, K\)"):
        normalize_task_scores(s, "loss+", log_densities=torch.tensor([-1.0, -1.0, -1.0]))
    with pytest.raises(ValueError, match="task_normalization must be one of"):
        MTSGD(task_normalization="max")
    with pytest.raises(ValueError, match="task_normalization must be one of"):
        MGDA(task_normalization=None)


def test_weights_only_normalisation_moves_along_the_unscaled_directions():
    # normalize_drive=False: the weights of the rescaled problem, the step along the raw scores
    x, s = _problem(40, m=6, d=3, k=3)
    s[0] *= 0.01                                  # a nearly fitted task
    for rule, plain in ((MTSGD(repulsion=0.3, task_normalization="l2", normalize_drive=False),
                         MTSGD(repulsion=0.3, task_normalization="l2")),
                        (MOOSVGD(repulsion=0.3, task_normalization="l2", normalize_drive=False),
                         MOOSVGD(repulsion=0.3, task_normalization="l2")),
                        (MGDA(task_normalization="l2", normalize_drive=False),
                         MGDA(task_normalization="l2"))):
        phi, info = rule.direction(x, s)
        _, info_norm = plain.direction(x, s)
        torch.testing.assert_close(info.weights, info_norm.weights)
        if isinstance(rule, MGDA):
            torch.testing.assert_close(phi, torch.einsum("mk,kmd->md", info.weights, s))
        elif isinstance(rule, MOOSVGD):
            combined = torch.einsum("mk,kmd->md", info.weights, s)
            torch.testing.assert_close(phi, _reference_svgd(x, combined, _rbf(info.sigma2), 0.3))
        else:
            per_target = torch.stack([_reference_svgd(x, s[k], _rbf(info.sigma2), 0.3)
                                      for k in range(3)])
            torch.testing.assert_close(phi, torch.einsum("k,kmd->md", info.weights, per_target))
    # one task: exactly SVGD / gradient descent (weight 1, nothing rescaled)
    x1, s1 = _problem(41, m=5, d=2, k=1)
    torch.testing.assert_close(
        SVGD(repulsion=0.5, task_normalization="l2", normalize_drive=False).direction(x1, s1)[0],
        SVGD(repulsion=0.5).direction(x1, s1)[0])
    torch.testing.assert_close(
        MGDA(task_normalization="l2", normalize_drive=False).direction(x1, s1)[0], s1[0])
    assert "normalize_drive=False" in repr(MTSGD(task_normalization="l2", normalize_drive=False))


@pytest.mark.parametrize("rule", [MTSGD, MOOSVGD])
def test_unsmoothed_drive_is_each_particles_own_combination_plus_svgd_repulsion(rule):
    """smooth_drive=False: every particle follows its own weighted scores; the kernel only adds
    SVGD's repulsion; for MT-SGD the weights minimise the L2-over-particles Gram matrix of those
    directions and Lemma 1 holds for it."""
    for seed in range(10):
        x, s = _problem(40 + seed, m=3 + seed % 5, d=1 + seed % 3, k=2 + seed % 3)
        c = [0.5, 0.0, 2.0][seed % 3]
        phi, info = rule(repulsion=c, smooth_drive=False).direction(x, s)
        # the repulsion alone: SVGD's direction at zero scores, from the independent reference
        repulsive = _reference_svgd(x, torch.zeros_like(s[0]), _rbf(info.sigma2), c)
        w = info.weights
        own = (torch.einsum("k,kmd->md", w, s) if w.ndim == 1
               else torch.einsum("mk,kmd->md", w, s))
        torch.testing.assert_close(phi, own + repulsive)
        if rule is MTSGD:
            directions = s + repulsive[None]                       # (K, M, d)
            u = torch.einsum("kmd,lmd->kl", directions, directions) / x.shape[0]
            # U up to the task-free trace constant: same minimiser, and Lemma 1
            diff = info.gram - u
            torch.testing.assert_close(diff, torch.full_like(diff, float(diff[0, 0])))
            norm2 = w @ u @ w
            assert ((u @ w) >= norm2 - 1e-9 * max(1.0, float(norm2))).all()


@pytest.mark.parametrize("smooth", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_one_target_direction_matches_the_reference_and_reports_its_parts(smooth, dtype):
    """The single-target path (SVGD; the trunk of a one-task network and every head, each step)
    against the independent reference, for (M, d) and (1, M, d) scores; its info holds weight
    1, the norms of the drive and the repulsion, and U on demand."""
    for seed in range(6):
        x, s = _problem(70 + seed, m=2 + seed, d=1 + seed % 4, k=1)
        x, s = x.to(dtype), s.to(dtype)
        c = [0.5, 0.0, 2.0][seed % 3]
        for scores in (s, s[0]):
            phi, info = SVGD(repulsion=c, smooth_drive=smooth).direction(x, scores)
            kern = _rbf(info.sigma2)
            repulsive = _reference_svgd(x, torch.zeros_like(s[0]), kern, c)
            drive = _reference_svgd(x, s[0], kern, 0.0) if smooth else s[0]
            tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else {}
            torch.testing.assert_close(phi, drive + repulsive, **tol)
            assert phi.dtype == dtype and float(info.weights) == 1.0
            torch.testing.assert_close(info.drive_norm, drive.norm(), **tol)
            torch.testing.assert_close(info.repulsion_norm, repulsive.norm(), **tol)
            if dtype == torch.float64 and smooth:
                torch.testing.assert_close(info.gram, _reference_gram(x, s, kern, c),
                                           rtol=1e-10, atol=1e-12)


def test_one_target_divergence_errors_name_the_cause():
    x, s = _problem(80, m=4, d=3, k=1)
    for smooth in (True, False):
        rule = SVGD(smooth_drive=smooth)
        for bad_value in (float("nan"), float("inf"), -float("inf")):
            bad = s.clone()
            bad[0, 2, 1] = bad_value
            with pytest.raises(FloatingPointError, match="NaN or inf"):
                rule.direction(x, bad)
        # finite float32 scores whose squared norm overflows
        with pytest.raises(FloatingPointError, match="overflows"):
            rule.direction(x.float(), s.float() * 1e25)
        rule.direction(x.float(), s.float() * 1e15)                    # large but fine
    with pytest.raises(ValueError, match=r"\(K, M, d\)"):
        SVGD().direction(x, s[:, :3])
    with pytest.raises(ValueError, match=r"\(K, M, d\)"):
        SVGD().direction(x, torch.tensor(1.0))


@pytest.mark.parametrize("rule", [SVGD(), MTSGD(), MOOSVGD()], ids=repr)
def test_non_finite_particles_are_named(rule):
    """A NaN or inf particle (finite scores) stops the step naming the particles, not a
    NaN direction and not the scores."""
    x = torch.randn(6, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    scores = -x[None] if isinstance(rule, SVGD) else torch.stack([-x, 1 - x])
    for bad in (float("nan"), float("inf")):
        y = x.clone()
        y[0, 0] = bad
        with pytest.raises(FloatingPointError, match="particles contain NaN or inf"):
            rule.direction(y, scores)


def test_rule_settings_that_give_nan_are_refused():
    with pytest.raises(ValueError, match="repulsion must be a finite number"):
        SVGD(repulsion=float("nan"))
    with pytest.raises(ValueError, match="repulsion must be a finite number"):
        MTSGD(repulsion=float("inf"))
    x = torch.randn(4, 2)
    with pytest.raises(ValueError, match="be finite"):
        LinearScalarization(weights=[float("inf"), 1.0]).direction(x, torch.stack([-x, -x]))


def test_empty_or_mixed_inputs_are_named():
    x = torch.randn(5, 2)
    with pytest.raises(ValueError, match="at least one target, particle"):
        SVGD().direction(torch.zeros(0, 2), torch.zeros(0, 2))
    with pytest.raises(ValueError, match="at least one target, particle"):
        MTSGD().direction(x, torch.zeros(0, 5, 2))
    with pytest.raises(TypeError, match="one dtype, got torch.float64 and torch.float32"):
        MTSGD().direction(x.double(), torch.stack([-x, 1 - x]))
    with pytest.raises(TypeError, match="floating point"):
        SVGD().direction(torch.arange(6).view(3, 2), -torch.arange(6).view(3, 2))
