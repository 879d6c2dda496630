"""The noise-source interface: what every solver asks of a common noise."""

from __future__ import annotations

import abc
import functools
import inspect
import numbers
import threading

import numpy as np

from .._validate import as_float

__all__ = ["NoiseSource", "NoiseField", "check_noise", "noise_dimension"]


def field_points(x, d: int, name: str = "x") -> np.ndarray:
    """Points (N, d) at which a noise field is evaluated, as float64; complex or non-numeric input raises."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "biuf":
        if np.iscomplexobj(arr):
            raise TypeError(f"{name} must be real, got a complex array (dtype {arr.dtype})")
        raise TypeError(f"{name} must be an array of real numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    if arr.ndim != 2 or arr.shape[1] != d:
        raise ValueError(f"{name} must have shape (N, {d}), got {arr.shape}")
    return arr


class NoiseField(abc.ABC):
    """The increment ΔW = W(t1, ·) - W(t0, ·) of a noise source over one step, evaluable at points.

    Attributes
    ----------
    t0, t1 : float
    coeffs : ndarray (d, n_real) or None
        Real harmonic coefficients of each ambient component when the field is a finite
        harmonic expansion of degree ``lmax`` (lets grid solvers synthesise it by a fast
        transform); None otherwise.
    lmax : int or None
    omega : ndarray (d, d) or None
        The matrix Ω when the field is linear, ΔW(x) = Ω x (a rotation generator when skew);
        None otherwise.
    """

    coeffs: np.ndarray | None = None
    lmax: int | None = None
    omega: np.ndarray | None = None

    @property
    def dt(self) -> float:
        return self.t1 - self.t0

    @abc.abstractmethod
    def __call__(self, x) -> np.ndarray:
        """ΔW(x) in R^d at points x of shape (N, d); returns (N, d) (ambient, not projected)."""

    def scaled(self, sigma: float) -> "NoiseField":
        """The increment σ ΔW (``coeffs`` and ``omega`` times σ too).

        The default wraps this field; a subclass whose values are a linear function of its own
        data may return a scaled copy of itself instead (a :class:`~meanfield.noise.FieldIncrement`
        does, so solvers keep its fast paths).
        """
        return _ScaledField(self, sigma)


class _ScaledField(NoiseField):
    """σ times another field: values, harmonic coefficients and linear generator all scaled."""

    def __init__(self, inner: NoiseField, sigma: float):
        self.inner, self.sigma = inner, float(sigma)
        self.t0, self.t1, self.lmax = inner.t0, inner.t1, inner.lmax
        self.coeffs = None if inner.coeffs is None else self.sigma * np.asarray(inner.coeffs)
        self.omega = None if inner.omega is None else self.sigma * np.asarray(inner.omega)

    def __call__(self, x, **kwargs) -> np.ndarray:
        return self.sigma * np.asarray(self.inner(x, **kwargs))


# The σ mechanism of NoiseSource. A subclass implements the field of unit strength; the base
# class adds the ``sigma`` keyword to its constructor and multiplies what ``field`` returns
# by σ (only at the outermost call, so a subclass's ``field`` may call ``super().field``).
_UNSET = object()
_LOCAL = threading.local()


def _accept_sigma(init):
    params = inspect.signature(init).parameters
    if "sigma" in params:
        raise TypeError(f"{init.__qualname__} declares a parameter 'sigma': NoiseSource adds the noise strength "
                        "sigma to every subclass's constructor itself; rename the parameter (the field a subclass "
                        "implements is the one of unit strength)")

    @functools.wraps(init)
    def __init__(self, *args, sigma=_UNSET, **kwargs):
        if sigma is not _UNSET:
            sigma = as_float(sigma, "sigma", min_value=0.0)
        init(self, *args, **kwargs)
        if sigma is not _UNSET:
            self._sigma = sigma

    sig = inspect.signature(init)
    ps = list(sig.parameters.values())
    extra = inspect.Parameter("sigma", inspect.Parameter.KEYWORD_ONLY, default=1.0)
    at = len(ps) if not ps or ps[-1].kind is not inspect.Parameter.VAR_KEYWORD else len(ps) - 1
    __init__.__signature__ = sig.replace(parameters=ps[:at] + [extra] + ps[at:])
    return __init__


def _apply_sigma(field):
    @functools.wraps(field)
    def wrapped(self, t0, t1, *args, **kwargs):
        active = getattr(_LOCAL, "active", None)
        if active is None:
            active = _LOCAL.active = set()
        if id(self) in active:  # an inner call (super().field): the outermost one scales
            return field(self, t0, t1, *args, **kwargs)
        active.add(id(self))
        try:
            out = field(self, t0, t1, *args, **kwargs)
        finally:
            active.discard(id(self))
        return out if self.sigma == 1.0 else out.scaled(self.sigma)

    wrapped._applies_sigma = True
    return wrapped


class NoiseSource(abc.ABC):
    """Base class of the common noise W(t, x), an R^d-valued random field on S^{d-1} × [0, t_max].

    A subclass sets, in ``__init__``, the attributes below and implements :meth:`field`;
    every solver (particles, transformer, SPDE) then accepts it. ``describe()`` gives the
    metadata stored with results.

    Noise strength σ: every subclass's constructor accepts the keyword ``sigma`` (>= 0,
    default 1), added by this base class. The subclass implements the field of unit strength
    and sets its unit ``kappa1`` (and ``kernel``); the source then delivers σ ΔW from
    :meth:`field` (values, ``coeffs`` and ``omega`` scaled), and reports ``kappa1`` =
    σ² κ_σ(1) and ``kernel`` = σ² κ_σ, so the Itô correction of every solver and the
    Lyapunov exponent λ_1 = ½[(d-3)κ'(1) - (d-1)κ(1)] scale by σ². A subclass must not declare
    a ``sigma`` parameter itself.

    Attributes
    ----------
    d : int
        Ambient dimension (tokens on S^{d-1}).
    t_max : float
        Horizon of the path.
    sigma : float
        Noise strength σ (read-only; set by the ``sigma`` keyword of the constructor).
    kappa1 : float
        σ² κ_σ(1): E|ΔW_a(x)|² / dt for each ambient component a (the Itô correction rate).
        A subclass assigns the unit-strength value; reading it gives the scaled one.
    kernel : Kernel or None
        σ² κ_σ, the covariance the field carries (None if the subclass sets none). A subclass
        assigns the unit-strength kernel.
    kept_fraction : float
        κ_σ(1) / κ(1) for a truncated field (1.0 when nothing is truncated).
    refinable : bool
        Whether the increment over [t0, t1] equals the sum of the increments over any
        partition of it (the same path seen at every step size).
    supports_flow : bool
        Whether the source is a rigid rotation with generator ``omega(t0, t1)`` (the SPDE's
        ``noise_map="flow"``).
    """

    d: int
    t_max: float
    kept_fraction: float = 1.0
    refinable: bool = False
    supports_flow: bool = False
    #: Names of the attributes copied into :meth:`describe`, in order.
    _describe_fields: tuple[str, ...] = ("t_max",)
    _sigma: float = 1.0
    _unit_kappa1: float = float("nan")
    _unit_kernel = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        own = vars(cls)
        if "__init__" in own:
            cls.__init__ = _accept_sigma(own["__init__"])
        if "field" in own and not getattr(own["field"], "__isabstractmethod__", False) \
                and not getattr(own["field"], "_applies_sigma", False):
            cls.field = _apply_sigma(own["field"])
        for name in ("kappa1", "kernel"):
            if isinstance(own.get(name), property):
                raise TypeError(f"{cls.__name__}.{name} is a property: NoiseSource scales {name} by the noise "
                                f"strength; assign the unit-strength value to self.{name} in __init__ instead")

    @property
    def sigma(self) -> float:
        """Noise strength σ: the field is σ times the unit-strength field of the subclass."""
        return self._sigma

    @property
    def kappa1(self) -> float:
        """σ² κ_σ(1), the pointwise variance rate of each component of the field (Itô correction)."""
        return self._sigma**2 * self._unit_kappa1

    @kappa1.setter
    def kappa1(self, value) -> None:
        self._unit_kappa1 = float(value)

    @property
    def kernel(self):
        """σ² κ_σ, the covariance kernel the field carries (None when the source sets none)."""
        k = self._unit_kernel
        return k if k is None or self._sigma == 1.0 else k.scaled(self._sigma**2)

    @kernel.setter
    def kernel(self, value) -> None:
        self._unit_kernel = value

    @abc.abstractmethod
    def field(self, t0: float, t1: float) -> NoiseField:
        """The increment ΔW over [t0, t1] as a :class:`NoiseField` (σ times the subclass's unit field)."""

    def describe(self) -> dict:
        """Plain-dict description for metadata: type, d, σ, σ² κ_σ(1), kept fraction, parameters, seed, kernel."""
        info = {"type": type(self).__name__, "d": self.d, "sigma": float(self.sigma), "kappa1": float(self.kappa1),
                "kept_fraction": float(self.kept_fraction)}
        for name in self._describe_fields:
            info[name] = getattr(self, name)
        seed = getattr(self, "seed", None)
        if isinstance(seed, numbers.Integral):
            info["seed"] = int(seed)
        elif seed is not None:
            info["seed"] = repr(seed)
        src = getattr(self, "source_kernel", None)
        if src is not None:
            info["kernel"] = repr(src)
        return info

    def check_dimension(self, d: int) -> None:
        """Raise if the source does not live in dimension d."""
        if self.d != d:
            raise ValueError(f"noise has dimension d = {self.d} but the tokens have d = {d}")


def check_noise(noise, d: int | None = None, *, t_end: float | None = None, name: str = "noise") -> None:
    """Validate a noise argument of a solver: a :class:`NoiseSource` of dimension d covering [0, t_end].

    Raises
    ------
    TypeError
        ``noise`` is not a :class:`NoiseSource`.
    ValueError
        Wrong dimension or too short a horizon.
    """
    if not isinstance(noise, NoiseSource):
        raise TypeError(f"{name} must be a meanfield.noise.NoiseSource (NoisePath, RandomFeatureNoise, RotationNoise "
                        f"or a subclass of NoiseSource), got {type(noise).__name__}")
    if d is not None and noise.d != d:
        raise ValueError(f"{name} has dimension d = {noise.d} but the tokens have d = {d}")
    if t_end is not None and t_end > noise.t_max * (1 + 1e-12):
        raise ValueError(f"{name} covers [0, {noise.t_max}] but the run needs [0, {t_end}]; "
                         f"build it with t_max >= {t_end}")


def noise_dimension(noise, d) -> int:
    """The ambient dimension of a solver run: ``noise.d`` (checked against ``d`` if given), or ``d``
    when ``noise`` is None (the deterministic equation, where ``d`` is required)."""
    if noise is None:
        if d is None:
            raise ValueError("d must be given when noise is None (deterministic equation)")
        return d
    check_noise(noise)
    if d is not None and int(d) != int(noise.d):
        raise ValueError(f"the noise lives in dimension d = {noise.d} but d = {d} was requested")
    return noise.d
