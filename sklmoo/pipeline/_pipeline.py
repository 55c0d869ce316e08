"""scikit-learn's Pipeline, plus the sklmoo methods that take ``X`` and return predictions."""

from sklearn import pipeline as _sk_pipeline
from sklearn.utils.metaestimators import available_if

#: methods of sklmoo estimators a :class:`Pipeline` forwards after transforming ``X``
FORWARDED_METHODS = ("predict_uncertainty", "predict_proba_samples", "predict_proba_members",
                     "predict_members", "diagnose")


def _final_estimator_has(method):
    def check(self):
        return hasattr(self._final_estimator, method)

    return check


class Pipeline(_sk_pipeline.Pipeline):
    """:class:`sklearn.pipeline.Pipeline` that also forwards sklmoo's uncertainty methods.

    scikit-learn's ``Pipeline`` exposes only the standard methods (``predict``,
    ``predict_proba``, ...). This subclass also offers the final estimator's
    ``predict_uncertainty``, ``predict_proba_samples``, ``predict_proba_members``,
    ``predict_members`` and ``diagnose`` (each only when the final estimator has it): ``X``
    goes through the transformers first, exactly as for ``predict``. Everything else,
    including ``clone``, ``GridSearchCV`` over ``step__param`` and slicing, is scikit-learn's.

    Parameters
    ----------
    steps, transform_input, memory, verbose
        As in :class:`sklearn.pipeline.Pipeline`.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.preprocessing import StandardScaler
    >>> from sklmoo import L2ESamplerClassifier
    >>> from sklmoo.pipeline import make_pipeline
    >>> X, y = load_iris(return_X_y=True)
    >>> pipe = make_pipeline(StandardScaler(), L2ESamplerClassifier(   # the chains predict
    ...     n_chains=2, max_epochs=6, n_draws=3, linear_gate=False, random_state=0)).fit(X, y)
    >>> sorted(pipe.predict_uncertainty(X[:3]))          # through the scaler
    ['aleatoric', 'epistemic', 'total']
    >>> pipe.predict_proba_samples(X[:3]).shape           # 2 chains x 3 draws
    (6, 3, 3)
    """

    def _forward(self, method, X, **params):
        Xt = X
        for _, _, transformer in self._iter(with_final=False):
            Xt = transformer.transform(Xt)
        return getattr(self._final_estimator, method)(Xt, **params)

    @available_if(_final_estimator_has("predict_uncertainty"))
    def predict_uncertainty(self, X, **params):
        """Transform ``X``, then the final estimator's ``predict_uncertainty``."""
        return self._forward("predict_uncertainty", X, **params)

    @available_if(_final_estimator_has("predict_proba_samples"))
    def predict_proba_samples(self, X, **params):
        """Transform ``X``, then the final estimator's ``predict_proba_samples``."""
        return self._forward("predict_proba_samples", X, **params)

    @available_if(_final_estimator_has("predict_proba_members"))
    def predict_proba_members(self, X, **params):
        """Transform ``X``, then the final estimator's ``predict_proba_members``."""
        return self._forward("predict_proba_members", X, **params)

    @available_if(_final_estimator_has("predict_members"))
    def predict_members(self, X, **params):
        """Transform ``X``, then the final estimator's ``predict_members`` (e.g.
        ``return_std=True`` for the regressor)."""
        return self._forward("predict_members", X, **params)

    @available_if(_final_estimator_has("diagnose"))
    def diagnose(self, X, **params):
        """Transform ``X``, then the final estimator's ``diagnose``."""
        return self._forward("diagnose", X, **params)


def make_pipeline(*steps, memory=None, transform_input=None, verbose=False):
    """:func:`sklearn.pipeline.make_pipeline` building a :class:`sklmoo.pipeline.Pipeline`
    (the uncertainty methods pass through it).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.preprocessing import StandardScaler
    >>> from sklmoo import MTSGDMultiTaskClassifier
    >>> from sklmoo.pipeline import make_pipeline
    >>> X, y = load_iris(return_X_y=True)
    >>> pipe = make_pipeline(StandardScaler(), MTSGDMultiTaskClassifier(
    ...     n_particles=3, max_epochs=5, random_state=0)).fit(X, y)
    >>> pipe.predict_uncertainty(X[:2])["epistemic"].shape
    (2,)
    >>> pipe.predict_proba_members(X[:2]).shape           # 3 particles
    (3, 2, 3)
    """
    steps = _sk_pipeline.make_pipeline(*steps).steps
    return Pipeline(steps, memory=memory, transform_input=transform_input, verbose=verbose)
