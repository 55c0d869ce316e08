"""The regressor's kernel (Gaussian-process) mean function: its posterior against scikit-learn's
GaussianProcessRegressor with the same kernel (the independent reference), the choice of the
RBF part, the module's forward and state checks, and the estimator's default on small tables
against the baselines a user would use."""

import numpy as np
import pytest
import torch
from scipy.stats import trim_mean
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, DotProduct, WhiteKernel
from sklearn.linear_model import BayesianRidge
from sklearn.model_selection import train_test_split

from sklmoo import MTSGDRegressor
from sklmoo.metrics import gaussian_nll
from sklmoo.nn import KernelMean
from sklmoo.nn._kernel_mean import (KernelMixture, components, fit_kernel_mean,
                                    fit_kernel_regression, kernel_predict, refit_kernel_mean,
                                    stacking_weight)


def _table(n, d=3, nonlinear=True, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * [1.0, 5.0, 0.2][:d] + 3.0
    z = (X - 3.0) / [1.0, 5.0, 0.2][:d]
    if nonlinear:
        signal = np.sin(2 * z[:, 0]) + (z[:, 1] ** 2 if d > 1 else 0.0)
    else:
        signal = z @ [1.0, -0.5, 0.3][:d]
    return X, 10.0 * signal + 50.0 + rng.normal(scale=1.5, size=n)


def _sklearn_gp(fit):
    """scikit-learn's GP with the fitted hyperparameters held fixed, on the same standardised
    inputs and target."""
    d = fit.train_x.shape[1]
    log = fit.log_params
    fixed = "fixed"
    kernel = (ConstantKernel(1.0, fixed)
              + ConstantKernel(np.exp(log[d + 1]) / d, fixed) * DotProduct(0.0, fixed)
              + ConstantKernel(np.exp(log[d]), fixed) * RBF(np.exp(log[:d]), fixed)
              + WhiteKernel(fit.noise / fit.y_scale ** 2, fixed))
    return kernel


@pytest.mark.parametrize("rbf, ard", [(True, True), (True, False), (False, True)])
def test_posterior_equals_scikit_learns_gp_with_the_same_hyperparameters(rbf, ard):
    X, y = _table(40)
    fit = fit_kernel_regression(X, y, rbf=rbf, ard=ard, random_state=0)
    if not ard:
        assert np.ptp(fit.log_params[:3]) == 0              # one length scale
    Z = fit.train_x
    target = (y - fit.y_offset) / fit.y_scale
    ref = GaussianProcessRegressor(_sklearn_gp(fit), optimizer=None).fit(Z, target)
    X_new = _table(15, seed=1)[0]
    Z_new = (X_new - fit.x_mean) / fit.x_scale
    mean_ref, std_ref = ref.predict(Z_new, return_std=True)
    mean, var = kernel_predict(fit, X_new)
    np.testing.assert_allclose(mean, mean_ref * fit.y_scale + fit.y_offset, rtol=1e-6)
    # scikit-learn's std includes the white noise; ours is the latent variance
    np.testing.assert_allclose(var + fit.noise, (std_ref * fit.y_scale) ** 2, rtol=1e-5)


def test_the_rbf_part_is_kept_for_nonlinear_and_dropped_for_linear_tables():
    for n in (30, 120):                              # leave-one-out / five folds
        X, y = _table(n, nonlinear=True)
        assert fit_kernel_mean(X, y, random_state=0).rbf
        X, y = _table(n, nonlinear=False)
        linear = fit_kernel_mean(X, y, random_state=0)
        assert not linear.rbf
        assert np.exp(linear.log_params[3]) == 0.0   # no RBF variance, and a finite log


def test_one_outlying_row_does_not_decide_the_leave_one_out_choice():
    # a nonlinear 30-row table with one gross error (20 noise sd): the RBF part still predicts
    # the other rows better, and the trimmed comparison keeps it (a plain mean of the
    # leave-one-out differences favours the linear model here, by 0.96)
    X, y = _table(30, nonlinear=True)
    y = y.copy()
    y[0] += 30.0
    fit = fit_kernel_mean(X, y, random_state=0)
    assert fit.rbf and not fit.ard
    assert trim_mean(np.r_[np.full(9, -1.0), 100.0], 0.1) == -1.0   # what the choice uses


def test_small_tables_choose_the_same_model_whatever_the_seed():
    # up to LOO_MAX_ROWS rows the fits start from the prior medians only (no random restart)
    X, y = _table(35, d=3)
    fits = [fit_kernel_mean(X, y, random_state=seed) for seed in (0, 1, 7)]
    for fit in fits[1:]:
        assert fit.rbf == fits[0].rbf
        np.testing.assert_array_equal(fit.log_params, fits[0].log_params)


def test_a_noise_free_curve_gets_a_large_signal_variance():
    # an exponential curve without noise: the broad variance prior lets the GP follow it
    x = np.linspace(0.0, 1.0, 15)[:, None]
    y = np.exp(4.0 * x[:, 0])
    fit = fit_kernel_mean(x, y, random_state=0)
    x_new = np.array([[0.53], [1.05]])                # inside, and just beyond the range
    mean, var = kernel_predict(fit, x_new)
    sd = np.sqrt(var + fit.noise)
    assert np.all(np.abs(mean - np.exp(4.0 * x_new[:, 0])) < 3 * sd)
    assert abs(mean[0] - np.exp(4.0 * 0.53)) < 0.01 * np.std(y)


def test_results_do_not_depend_on_the_targets_units():
    X, y = _table(50)
    a, b = fit_kernel_mean(X, y, random_state=0), fit_kernel_mean(X, 1e-4 * y, random_state=0)
    np.testing.assert_allclose(a.log_params, b.log_params, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(1e-4 * kernel_predict(a, X[:5])[0], kernel_predict(b, X[:5])[0],
                               rtol=1e-6)


def test_forward_with_the_gate_open_and_closed():
    X, y = _table(30, d=2)
    fit = fit_kernel_mean(X, y, random_state=0)
    module = KernelMean(2, n_tasks=1)
    module.set([fit], scale_floor=0.05)
    x = torch.as_tensor(X[:4])
    mean, var = kernel_predict(fit, X[:4])
    heads = (torch.tensor([[[1.0, 0.5], [-1.0, 2.0]]] * 4, dtype=torch.float64),)
    s = module.scale.item()
    assert s == pytest.approx(max(np.sqrt(fit.noise), 0.05 * fit.y_scale))
    out = module(x, heads)[0].numpy()                                 # gate open
    np.testing.assert_allclose(out[:, :, 0], mean[:, None] + s * np.array([1.0, -1.0]),
                               rtol=1e-9)
    np.testing.assert_allclose(out[:, :, 1] ** 2,
                               var[:, None] + (s * np.array([0.5, 2.0])) ** 2, rtol=1e-9)
    np.testing.assert_allclose(out[:, :, 2], np.sqrt(var)[:, None] * np.ones(2), rtol=1e-9)
    module.set_gate([0.0])                                            # the GP alone
    out = module(x, heads)[0].numpy()
    np.testing.assert_allclose(out[:, :, 0], mean[:, None] * np.ones(2), rtol=1e-9)
    np.testing.assert_allclose(out[:, :, 1] ** 2, (var + fit.noise)[:, None] * np.ones(2),
                               rtol=1e-9)


def test_stacking_weight_maximises_the_mixtures_held_out_log_density():
    rng = np.random.default_rng(0)
    a, b = rng.normal(1.0, 0.5, 200), rng.normal(1.0, 0.5, 200)
    grid = np.linspace(0, 1, 2001)
    total = [np.logaddexp(np.log(max(w, 1e-300)) - a, np.log(max(1 - w, 1e-300)) - b).sum()
             for w in grid]
    assert stacking_weight(a, b) == pytest.approx(grid[int(np.argmax(total))], abs=1e-3)
    assert stacking_weight(a, a + 5.0) == 1.0 and stacking_weight(a + 5.0, a) == 0.0
    with np.errstate(all="raise"):       # the first better on all rows but one, far worse there
        assert 0.0 < stacking_weight(np.r_[a - 0.1, 40.0], np.r_[a, 3.0]) < 1.0


def test_a_mixture_predicts_its_components_mean_and_variance():
    X, y = _table(120, d=2)
    rbf = fit_kernel_regression(X, y, rbf=True, random_state=0)
    linear = fit_kernel_regression(X, y, rbf=False, random_state=0)
    mixture = KernelMixture([rbf, linear], np.array([0.3, 0.7]))
    X_new = _table(6, d=2, seed=2)[0]
    (m1, v1), (m2, v2) = kernel_predict(rbf, X_new), kernel_predict(linear, X_new)
    mean, latent = kernel_predict(mixture, X_new)
    np.testing.assert_allclose(mean, 0.3 * m1 + 0.7 * m2, rtol=1e-12)
    second = 0.3 * (v1 + rbf.noise + m1 ** 2) + 0.7 * (v2 + linear.noise + m2 ** 2)
    np.testing.assert_allclose(latent + mixture.noise, second - mean ** 2, rtol=1e-9)
    module = KernelMean(2, n_tasks=1)                  # the module predicts the same
    module.set([mixture])
    module.set_gate([0.0])
    out = module(torch.as_tensor(X_new), (torch.zeros(6, 2, 2, dtype=torch.float64),))[0]
    np.testing.assert_allclose(out[:, 0, 0].numpy(), mean, rtol=1e-9)
    np.testing.assert_allclose(out[:, 0, 1].numpy() ** 2, latent + mixture.noise, rtol=1e-9)
    assert module.mix.tolist() == [[0.3, 0.7]]


def test_a_refit_keeps_the_model_and_reaches_the_full_fits_optimum():
    # refit_kernel_mean (the regressor's GP refit on every row when the networks' gate closes,
    # above RESELECT_MAX_ROWS rows): the same model (RBF or not, the mixture's weights), its
    # hyperparameters re-optimised on the new rows from the old optimum: the posterior mode
    # a fit of that model from scratch reaches
    X, y = _table(160, d=2)
    part = fit_kernel_mean(X[:120], y[:120], random_state=0)
    mixture = KernelMixture([fit_kernel_regression(X[:120], y[:120], rbf=True, random_state=0),
                             fit_kernel_regression(X[:120], y[:120], rbf=False)],
                            np.array([0.4, 0.6]))
    for first in (part, mixture):
        again = refit_kernel_mean(first, X, y)
        assert type(again) is type(first) and again.rbf == first.rbf
        for (w0, f0), (w1, f1) in zip(components(first), components(again)):
            assert w0 == w1 and f0.rbf == f1.rbf and len(f1.alpha) == 160
            scratch = fit_kernel_regression(X, y, rbf=f0.rbf, ard=f0.ard, random_state=0)
            assert f1.neg_log_posterior <= scratch.neg_log_posterior + 1e-3
            np.testing.assert_allclose(kernel_predict(f1, X[:5])[0],
                                       kernel_predict(scratch, X[:5])[0], rtol=0, atol=1e-2)


def test_the_regressor_refits_a_closed_gates_gp_without_keeping_the_first_fits():
    # a linear target: the gate closes and the GP is refitted on every row; the training rows'
    # fits (kept for the refit above RESELECT_MAX_ROWS rows) do not outlive the fit
    import pickle

    import sklmoo.estimators._regressor as module

    X, y = _table(200, nonlinear=False)
    fits = {}
    for limit in (10 ** 6, 100):                 # re-selected / refitted (200 rows > 100)
        original, module.RESELECT_MAX_ROWS = module.RESELECT_MAX_ROWS, limit
        try:
            reg = MTSGDRegressor(n_particles=2, max_epochs=3, random_state=0).fit(X, y)
        finally:
            module.RESELECT_MAX_ROWS = original
        assert not reg.networks_used_.any() and "_first_kernel_fits" not in vars(reg)
        assert "_first_kernel_fits" not in vars(pickle.loads(pickle.dumps(reg)))
        fits[limit] = reg.predict(X[:20])
    # both are the GP of a linear target on every row
    np.testing.assert_allclose(fits[100], fits[10 ** 6], rtol=0, atol=0.05 * y.std())


def test_state_dict_checks_refuse_inconsistent_rows():
    X, y = _table(12, d=2)
    module = KernelMean(2, n_tasks=1)
    module.set([fit_kernel_mean(X, y, random_state=0)])
    state = module.state_dict()
    fresh = KernelMean(2, n_tasks=1)
    fresh.check_state_dict(state)
    fresh.load_state_dict(state)                                      # resized to 12 rows
    assert fresh.train_x.shape == (1, 2, 12, 2)                       # (task, slot, row, x)
    bad = dict(state, alpha=torch.zeros(1, 2, 11, dtype=torch.float64))
    with pytest.raises(ValueError, match="other shapes"):
        fresh.check_state_dict(bad)
    with pytest.raises(ValueError, match="other shapes"):
        KernelMean(3, n_tasks=1).check_state_dict(state)
    with pytest.raises(ValueError, match="n_rows"):
        fresh.check_state_dict(dict(state, n_rows=torch.tensor([[13, 0]])))


def test_default_on_a_small_nonlinear_table_matches_a_gp_and_beats_linear_models():
    X, y = _table(160)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.5, random_state=0)
    from sklearn.preprocessing import StandardScaler
    scaler = StandardScaler().fit(X_tr)
    X_tr, X_te = scaler.transform(X_tr), scaler.transform(X_te)
    reg = MTSGDRegressor(random_state=0).fit(X_tr, y_tr)
    assert reg.mean_function_ == "kernel"
    nll = gaussian_nll(y_te, *reg.predict(X_te, return_std=True))
    gp = GaussianProcessRegressor(ConstantKernel() * RBF(np.ones(3)) + WhiteKernel(),
                                  normalize_y=True, n_restarts_optimizer=2,
                                  random_state=0).fit(X_tr, y_tr)
    linear = BayesianRidge().fit(X_tr, y_tr)
    assert nll < gaussian_nll(y_te, *gp.predict(X_te, return_std=True)) + 0.05
    assert nll < gaussian_nll(y_te, *linear.predict(X_te, return_std=True)) - 0.5
    # members, uncertainty split and std agree with one another
    mean, std = reg.predict(X_te, return_std=True)
    parts = reg.predict_uncertainty(X_te)
    np.testing.assert_allclose(parts["aleatoric"] + parts["epistemic"], std ** 2, rtol=1e-4)


def test_tiny_tables_get_the_gp_alone_and_never_worse_than_the_mean():
    X, y = _table(40, d=1)                       # 30 training rows of a smooth curve
    reg = MTSGDRegressor(random_state=0).fit(X[:30], y[:30])
    assert not reg.networks_used_.any()          # 6 validation rows cannot show they help
    members = reg.predict_members(X[30:])
    np.testing.assert_allclose(members, members[:1] * np.ones_like(members))
    nll = gaussian_nll(y[30:], *reg.predict(X[30:], return_std=True))
    constant = gaussian_nll(y[30:], np.full(10, y[:30].mean()), np.full(10, y[:30].std()))
    assert nll < constant - 0.5


def test_no_advice_about_networks_whose_output_is_ignored():
    # 20 rows: 5 validation rows cannot open the gate, so the networks' repulsion warnings are
    # of no use to anyone; with the linear mean function (networks used) they are kept
    import warnings
    X, y = _table(20, d=2)
    for mean_function, expected in (("auto", 0), ("linear", 1)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            reg = MTSGDRegressor(head_repulsion=100.0, mean_function=mean_function,
                                 random_state=0).fit(X, y)
        repulsion = [w for w in caught if "repulsion outweighs" in str(w.message)]
        assert bool(repulsion) == bool(expected), mean_function
        assert reg.networks_used_.all() == bool(expected)


def test_auto_takes_the_linear_mean_function_on_larger_or_wider_tables():
    rng = np.random.default_rng(0)
    reg = MTSGDRegressor(n_particles=2, max_epochs=1, random_state=0)
    assert reg.fit(rng.normal(size=(1001, 3)), rng.normal(size=1001)).mean_function_ == "linear"
    assert reg.fit(rng.normal(size=(50, 101)), rng.normal(size=50)).mean_function_ == "linear"
    assert reg.fit(rng.normal(size=(50, 3)), rng.normal(size=50)).mean_function_ == "kernel"


def test_linear_model_likelihood_in_weight_space_equals_the_kernel_matrix_one():
    # without its RBF part the GP's marginal likelihood (and its gradient) is computed in the
    # (d + 1)-dimensional weight space: the same as through the n x n kernel matrix, with
    # unequal row weights, over the hyperparameters' range
    from sklmoo.nn import _kernel_mean as km

    rng = np.random.default_rng(0)
    n, d = 120, 4
    X, y = torch.from_numpy(rng.normal(size=(n, d))), torch.from_numpy(rng.normal(size=n))
    inv_w = torch.from_numpy(1.0 / rng.uniform(0.2, 3.0, size=n))
    prior_mean = torch.from_numpy(km._prior_means(d))
    prior_weight = torch.ones(d + 3, dtype=torch.float64)
    prior_weight[:d + 1] = 0.0
    statistics = km._linear_statistics(X, y, inv_w)
    for _ in range(4):
        theta = prior_mean + torch.from_numpy(rng.normal(scale=3.0, size=d + 3))
        theta[d] = km.OFF_LOG_VARIANCE
        theta.requires_grad_(True)
        dense = km._neg_log_posterior(theta, X, y, inv_w, prior_mean, prior_weight)
        weight_space = km._neg_log_posterior(theta, X, y, inv_w, prior_mean, prior_weight,
                                             statistics)
        g_dense, = torch.autograd.grad(dense, theta)
        g_weight, = torch.autograd.grad(weight_space, theta)
        assert float(weight_space.detach()) == pytest.approx(float(dense.detach()), rel=1e-10)
        np.testing.assert_allclose(g_weight.numpy(), g_dense.numpy(), rtol=1e-8, atol=1e-8)


def test_kernel_likelihood_gradient_in_closed_form_equals_autograds():
    # the full kernel's marginal likelihood and its closed-form gradient in the log
    # hyperparameters, against autograd through the kernel matrix and torch's Cholesky
    from sklmoo.nn import _kernel_mean as km

    rng = np.random.default_rng(1)
    n, d = 90, 3
    X, y = torch.from_numpy(rng.normal(size=(n, d))), torch.from_numpy(rng.normal(size=n))
    inv_w = torch.from_numpy(1.0 / rng.uniform(0.2, 3.0, size=n))
    for _ in range(4):
        theta = (torch.from_numpy(km._prior_means(d) + rng.normal(size=d + 3))
                 .requires_grad_(True))
        noise = torch.exp(theta[d + 2]) + km.NOISE_FLOOR
        K = km.kernel_matrix(theta, X, X) + torch.diag(noise * inv_w)
        L = torch.linalg.cholesky(K)
        reference = (0.5 * y @ torch.cholesky_solve(y[:, None], L)[:, 0]
                     + torch.log(torch.diagonal(L)).sum())
        closed = km._KernelNLL.apply(theta, X, y, inv_w)
        g_ref, = torch.autograd.grad(reference, theta)
        g_closed, = torch.autograd.grad(closed, theta)
        assert float(closed.detach()) == pytest.approx(float(reference.detach()), rel=1e-10)
        np.testing.assert_allclose(g_closed.numpy(), g_ref.numpy(), rtol=1e-8, atol=1e-8)
