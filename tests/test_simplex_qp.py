import itertools

import numpy as np
import pytest
import torch

from sklmoo.samplers import min_norm_weights, project_to_simplex
from sklmoo.samplers._simplex_qp import _face_enumeration, _projected_gradient, _quadprog


def _random_psd(rng, k, rank=None):
    rank = k if rank is None else rank
    a = rng.normal(size=(k, rank))
    return torch.as_tensor(a @ a.T)


def _simplex_grid(k, n):
    pts = [c for c in itertools.product(range(n + 1), repeat=k - 1) if sum(c) <= n]
    pts = np.array([list(c) + [n - sum(c)] for c in pts], dtype=np.float64) / n
    return torch.as_tensor(pts)


def _objective(u, w):
    return torch.einsum("...i,ij,...j->...", w, u, w)


@pytest.mark.parametrize("k,rank", [(2, 2), (2, 1), (3, 3), (3, 2), (3, 1), (4, 4), (4, 2)])
def test_matches_brute_force_over_simplex(k, rank):
    rng = np.random.default_rng(10 * k + rank)
    grid = _simplex_grid(k, {2: 2000, 3: 300, 4: 60}[k])
    for _ in range(5):
        u = _random_psd(rng, k, rank)
        w = min_norm_weights(u)
        assert torch.isfinite(w).all() and (w >= 0).all()
        assert float(w.sum()) == pytest.approx(1.0, abs=1e-12)
        brute = _objective(u, grid)
        # never worse than the best grid point, and the grid's best is within grid resolution
        assert float(_objective(u, w)) <= float(brute.min()) + 1e-9
        if rank == k:  # unique minimiser: the grid's argmin is close to ours
            best = grid[brute.argmin()]
            assert torch.allclose(w, best, atol=0.05)


@pytest.mark.parametrize("k", [3, 4, 5])
def test_all_solvers_agree(k):
    rng = np.random.default_rng(k)
    for rank in (k, 1, 2):
        u = _random_psd(rng, k, rank)
        ref = float(_objective(u, _quadprog(u)))
        for w in (_face_enumeration(u[None])[0], _projected_gradient(u[None], n_iter=5000)[0]):
            assert float(_objective(u, w)) == pytest.approx(ref, rel=1e-6, abs=1e-9)


def test_batched_equals_single():
    rng = np.random.default_rng(0)
    for k in (2, 3, 4, 10):
        grams = torch.stack([_random_psd(rng, k, max(1, k - 1)) for _ in range(7)])
        batched = min_norm_weights(grams)
        assert batched.shape == (7, k)
        for g, w in zip(grams, batched):
            single = min_norm_weights(g)
            assert float(_objective(g, w)) == pytest.approx(float(_objective(g, single)),
                                                            rel=1e-5, abs=1e-8)


def test_degenerate_inputs_stay_on_simplex():
    for k in (1, 2, 3, 6):
        w = min_norm_weights(torch.zeros(k, k))
        assert torch.allclose(w, torch.full((k,), 1.0 / k))
    # identical directions: every point is optimal, any simplex point is fine
    w = min_norm_weights(torch.ones(3, 3))
    assert (w >= 0).all() and float(w.sum()) == pytest.approx(1.0)
    # huge and tiny scales
    for scale in (1e-20, 1e20):
        u = _random_psd(np.random.default_rng(1), 3) * scale
        w = min_norm_weights(u)
        assert torch.isfinite(w).all() and float(w.sum()) == pytest.approx(1.0)
    # float32
    w = min_norm_weights(_random_psd(np.random.default_rng(2), 4).float())
    assert w.dtype == torch.float32 and float(w.sum()) == pytest.approx(1.0, abs=1e-6)


def test_two_opposite_vectors_closed_form():
    # ||w a - (1-w) 2a||^2 is zero at w = 2/3
    g = torch.tensor([[1.0, -2.0], [-2.0, 4.0]], dtype=torch.float64)
    assert torch.allclose(min_norm_weights(g), torch.tensor([2 / 3, 1 / 3], dtype=torch.float64))


def test_non_finite_or_bad_shape_raises():
    with pytest.raises(FloatingPointError, match="NaN or inf"):
        min_norm_weights(torch.tensor([[1.0, float("nan")], [float("nan"), 1.0]]))
    with pytest.raises(ValueError, match="square"):
        min_norm_weights(torch.ones(2, 3))


def test_project_to_simplex_matches_sorting_reference():
    rng = np.random.default_rng(0)
    v = torch.as_tensor(rng.normal(size=(50, 5)) * 3)
    p = project_to_simplex(v)
    assert torch.allclose(p.sum(-1), torch.ones(50, dtype=torch.float64))
    assert (p >= 0).all()
    # projection optimality: <v - p, q - p> <= 0 for every vertex q
    for i in range(5):
        q = torch.zeros(5, dtype=torch.float64)
        q[i] = 1
        assert ((v - p) * (q - p)).sum(-1).max() <= 1e-10


@pytest.mark.parametrize("dtype, top", [(torch.float32, 3e38), (torch.float64, 1e308)])
@pytest.mark.parametrize("k", [2, 3])
def test_a_gram_near_the_float_maximum_gives_finite_weights(dtype, top, k):
    """Finite input, finite weights: symmetrising must not overflow (it gave NaN)."""
    w = min_norm_weights(torch.eye(k, dtype=dtype) * top)
    torch.testing.assert_close(w, torch.full((k,), 1.0 / k, dtype=dtype))


def test_projection_refuses_what_has_no_projection():
    with pytest.raises(ValueError, match="NaN or inf"):
        project_to_simplex(torch.tensor([float("nan"), 0.0, 1.0]))
    with pytest.raises(ValueError, match="NaN or inf"):
        project_to_simplex(torch.tensor([float("inf"), 0.0]))
    with pytest.raises(ValueError, match="non-empty"):
        project_to_simplex(torch.zeros(0))
    assert torch.equal(project_to_simplex(torch.tensor([3, 0])), torch.tensor([1.0, 0.0]))


def test_a_batch_of_many_tasks_is_solved_as_exactly_as_one_matrix():
    """Beyond face enumeration (K > 8) a batch is solved per matrix: projected gradient's
    answer had been up to 8 % above the minimum on badly scaled problems, breaking Lemma 1."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(6, 10, 12, generator=g, dtype=torch.float64)
    a = a * torch.logspace(-3, 1, 12, dtype=torch.float64)          # badly scaled
    grams = a @ a.transpose(1, 2)
    batched = min_norm_weights(grams)
    for gram, w in zip(grams, batched):
        torch.testing.assert_close(w, min_norm_weights(gram))
        value = w @ gram @ w                                       # Lemma 1's KKT condition
        assert ((gram @ w) - value).min() >= -1e-8 * gram.abs().max()


def test_half_precision_and_integer_grams_are_solved():
    gram = torch.tensor([[2.0, 1.0, 0.0], [1.0, 2.0, 0.0], [0.0, 0.0, 1.0]])
    reference = min_norm_weights(gram.double())
    half = min_norm_weights(gram.half()[None].expand(2, 3, 3))
    assert half.dtype == torch.float16
    torch.testing.assert_close(half.double(), reference.expand(2, 3), atol=1e-3, rtol=0)
    torch.testing.assert_close(min_norm_weights(gram.long()), reference)
