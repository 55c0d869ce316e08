"""A synthetic 7-joint inverse-dynamics problem: the offline stand-in for SARCOS."""

import numbers

import numpy as np
import pandas as pd
from sklearn.utils import Bunch, check_random_state

N_JOINTS = 7
FEATURE_NAMES = ([f"q{j + 1}" for j in range(N_JOINTS)] + [f"dq{j + 1}" for j in range(N_JOINTS)]
                 + [f"ddq{j + 1}" for j in range(N_JOINTS)])
TARGET_NAMES = [f"tau{j + 1}" for j in range(N_JOINTS)]

# the arm: link lengths (m), point masses at the link ends (kg), viscous and Coulomb friction
_LENGTH = np.array([0.40, 0.38, 0.32, 0.28, 0.20, 0.12, 0.08])
_MASS = np.array([4.0, 3.2, 2.4, 1.8, 1.0, 0.6, 0.3])
_VISCOUS = np.array([0.80, 0.70, 0.50, 0.40, 0.20, 0.10, 0.05])
_COULOMB = np.array([1.50, 1.20, 0.80, 0.50, 0.30, 0.15, 0.08])
_GRAVITY = 9.81


def inverse_dynamics_torques(q, dq, ddq):
    r"""Joint torques of the synthetic arm for joint positions, velocities and accelerations.

    The arm is a chain of 7 links with point masses :math:`m_k` at the link ends, moving in a
    vertical plane (absolute link angles :math:`\phi_i = \sum_{k \le i} q_k`), with viscous and
    Coulomb friction at every joint. Lagrange's equations in absolute angles give the forces

    .. math::

        Q_i = \sum_j c_{ij}\,[\cos(\phi_i - \phi_j)\,\ddot\phi_j
              + \sin(\phi_i - \phi_j)\,\dot\phi_j^2] + g\,l_i \cos\phi_i \sum_{k \ge i} m_k,
        \qquad c_{ij} = l_i l_j \sum_{k \ge \max(i, j)} m_k,

    and the joint torques are :math:`\tau_k = \sum_{i \ge k} Q_i + b_k \dot q_k +
    f_k \tanh(\dot q_k / 0.05)`. The torques are nonlinear in the inputs, correlated across
    joints (every torque sums the forces of the links beyond it) and on scales a hundred times
    apart (base joint to wrist), as in SARCOS.

    Parameters
    ----------
    q, dq, ddq : ndarray of shape (n, 7)

    Returns
    -------
    ndarray of shape (n, 7)

    Examples
    --------
    >>> import numpy as np
    >>> from sklmoo.datasets import inverse_dynamics_torques
    >>> rest = np.zeros((1, 7))                  # arm stretched out horizontally, at rest
    >>> tau = inverse_dynamics_torques(rest, rest, rest)
    >>> bool(tau[0, 0] > tau[0, 3] > tau[0, 6] > 0)   # gravity load falls toward the wrist
    True
    """
    q, dq, ddq = (np.asarray(a, dtype=np.float64) for a in (q, dq, ddq))
    phi, dphi, ddphi = (np.cumsum(a, axis=1) for a in (q, dq, ddq))
    tail_mass = np.cumsum(_MASS[::-1])[::-1]                       # sum_{k >= i} m_k
    c = np.outer(_LENGTH, _LENGTH) * tail_mass[np.maximum.outer(np.arange(N_JOINTS),
                                                                np.arange(N_JOINTS))]
    delta = phi[:, :, None] - phi[:, None, :]                       # phi_i - phi_j
    forces = (np.einsum("ij,nij,nj->ni", c, np.cos(delta), ddphi)
              + np.einsum("ij,nij,nj->ni", c, np.sin(delta), dphi ** 2)
              + _GRAVITY * _LENGTH * tail_mass * np.cos(phi))
    torques = np.cumsum(forces[:, ::-1], axis=1)[:, ::-1]           # sum_{i >= k} Q_i
    return torques + _VISCOUS * dq + _COULOMB * np.tanh(dq / 0.05)


def make_inverse_dynamics(n_samples=5000, *, noise=0.02, n_trajectories=20, random_state=None,
                          return_X_y=False, as_frame=False):
    """A synthetic 7-output, 21-input robot-arm regression problem (a stand-in for SARCOS).

    SARCOS (Vijayakumar & Schaal 2000; the MT-SGD paper's multi-output regression experiment)
    maps the 7 joint positions, velocities and accelerations of a robot arm (21 inputs) to its
    7 joint torques. This generator samples states along ``n_trajectories`` smooth random
    trajectories (each joint a sum of two sinusoids, so positions, velocities and
    accelerations are correlated as in recorded motion) and computes the torques of a 7-link
    arm with gravity, Coriolis / centrifugal forces and friction
    (:func:`inverse_dynamics_torques`): nonlinear, correlated outputs on very different
    scales. Each output gets Gaussian noise of ``noise`` times its standard deviation.

    Parameters
    ----------
    n_samples : int, default=5000
    noise : float, default=0.02
        Observation noise as a fraction of each torque's standard deviation.
    n_trajectories : int, default=20
    random_state : int, RandomState instance or None
        Seeds the trajectories, the sampled times and the noise.
    return_X_y : bool, default=False
        Return ``(X, y)`` instead of a Bunch.
    as_frame : bool, default=False
        ``X`` and ``y`` as DataFrames with columns ``q1..q7, dq1..dq7, ddq1..ddq7`` and
        ``tau1..tau7``.

    Returns
    -------
    Bunch with ``data`` (n, 21), ``target`` (n, 7), ``feature_names``, ``target_names``,
    ``noise_std`` (7,) (the standard deviation of the added noise, per output), ``frame`` (if
    ``as_frame``) and ``DESCR``; or ``(X, y)`` with ``return_X_y=True``.

    Examples
    --------
    >>> from sklmoo.datasets import make_inverse_dynamics
    >>> X, y = make_inverse_dynamics(1000, random_state=0, return_X_y=True)
    >>> X.shape, y.shape
    ((1000, 21), (1000, 7))
    >>> bool(y[:, 0].std() > 10 * y[:, 6].std())   # the base joint needs far more torque
    True
    """
    for name, value in (("n_samples", n_samples), ("n_trajectories", n_trajectories)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if (isinstance(noise, bool) or not isinstance(noise, numbers.Real)
            or not (np.isfinite(noise) and noise >= 0)):
        raise ValueError(f"noise must be a finite number >= 0, got {noise!r}")
    n, rng = int(n_samples), check_random_state(random_state)
    shape = (int(n_trajectories), 2, N_JOINTS)
    amplitude = rng.uniform(0.2, 1.0, shape) * np.array([1.0, 0.4])[None, :, None]
    frequency = rng.uniform(0.1, 0.5, shape) * np.array([1.0, 2.5])[None, :, None]
    phase = rng.uniform(0, 2 * np.pi, shape)
    offset = rng.uniform(-np.pi / 2, np.pi / 2, (int(n_trajectories), N_JOINTS))
    traj = rng.randint(0, int(n_trajectories), n)
    t = rng.uniform(0, 20, n)[:, None, None]
    a, w, p = amplitude[traj], 2 * np.pi * frequency[traj], phase[traj]
    q = offset[traj] + (a * np.sin(w * t + p)).sum(1)
    dq = (a * w * np.cos(w * t + p)).sum(1)
    ddq = (-a * w ** 2 * np.sin(w * t + p)).sum(1)
    torques = inverse_dynamics_torques(q, dq, ddq)
    noise_std = noise * torques.std(axis=0)
    target = torques + rng.standard_normal(torques.shape) * noise_std
    data = np.hstack([q, dq, ddq])
    if as_frame:
        data = pd.DataFrame(data, columns=FEATURE_NAMES)
        target = pd.DataFrame(target, columns=TARGET_NAMES)
    if return_X_y:
        return data, target
    bunch = Bunch(data=data, target=target, feature_names=list(FEATURE_NAMES),
                  target_names=list(TARGET_NAMES), noise_std=noise_std,
                  DESCR=make_inverse_dynamics.__doc__)
    if as_frame:
        bunch.frame = pd.concat([data, target], axis=1)
    return bunch
