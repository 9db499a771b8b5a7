"""One exception tree for PreemptGuard, mapped once to HTTP statuses and CLI exit codes."""


class PreemptGuardError(Exception):
    """Base of every error PreemptGuard raises on purpose."""

    http_status = 500
    exit_code = 2


class InvalidInput(PreemptGuardError):
    """A request body, file or object that cannot be understood."""

    http_status = 400


class BodyTooLarge(InvalidInput):
    http_status = 413


class SnapshotError(InvalidInput):
    """A cluster snapshot file that cannot be parsed; names the file and document."""


class QuantityError(InvalidInput, ValueError):
    """A Kubernetes resource quantity that does not parse."""


class ConfigError(PreemptGuardError):
    """A configuration file with an unknown key or a wrong type."""

    exit_code = 2


class ClusterUnavailable(PreemptGuardError):
    """The Kubernetes API server cannot be reached or the cache is not ready."""

    http_status = 503
    exit_code = 3


class ApiError(PreemptGuardError):
    """A non-2xx answer of the Kubernetes API server, carrying its ``Status`` (code, reason, message) and the
    warnings it sent; raised by ``webhook.kubeapi`` alone (lightkube's ``ApiError``). Never carries the body: an
    answer about a Secret could echo it."""

    http_status = 503
    exit_code = 3

    def __init__(self, method: str, path: str, code: int, reason: str = "", message: str = "",
                 warnings: tuple[str, ...] = ()) -> None:
        if code == 401 or reason == "Unauthorized":
            # kubectl's words for it (k8s.io/kubectl/pkg/cmd/util/helpers.go, StandardErrorMessage)
            super().__init__(f"You must be logged in to the server ({message or reason or 'Unauthorized'})")
        else:
            super().__init__(f"{method} {path}: HTTP {code}: {message or reason}")
        self.method = method
        self.path = path
        self.code = code
        self.reason = reason
        self.message = message
        self.warnings = warnings

    @property
    def expired(self) -> bool:
        """``410 Gone``: the requested resourceVersion is older than the server's history."""
        return self.code == 410


class Unauthorized(PreemptGuardError):
    http_status = 401


class Forbidden(PreemptGuardError):
    http_status = 403


class PredictionTimeout(PreemptGuardError):
    """A prediction ran past its deadline or budget: nothing is returned (HTTP 503 for /preview; admission allows).

    The predictor raises it from inside its node loops once ``time.monotonic()`` passes the ``deadline`` its caller
    gave, so a caller enforcing a budget leaves no runaway computation behind.
    """

    http_status = 503
    exit_code = 3


class PredictionCancelled(PredictionTimeout):
    """A prediction stopped before its deadline because its caller cancelled it (the request went away, or the
    server is shutting down): nothing is returned."""


class TooManyPods(InvalidInput):
    """A request that asks for more pods than one prediction simulates (``MAX_PODS_PER_REQUEST``); raised before
    any pod is built."""


class PodTooComplex(InvalidInput):
    """A pod beyond a documented limit on the scheduling constraints the predictor evaluates (terms, containers,
    constraints that no real workload needs); the message names the field and the limit."""


class RateLimited(PreemptGuardError):
    """A caller over its rate of dry-run previews (HTTP 429); ``retry_after`` seconds until the next one."""

    http_status = 429

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after
