"""DRA's CEL device selectors (k8s.io/dynamic-resource-allocation/cel): an expression over ``device`` (its
``driver``, ``attributes`` and ``capacity`` by domain, ``allowMultipleAllocations``) evaluated to a bool.

The language is the kept pure-Python CEL implementation ``cel-python`` (celpy: the CEL standard definitions) rather
than a hand-written interpreter; on top of it this module adds what Kubernetes' CEL environment gives DRA selectors
and upstream's tests use: ``quantity()`` and its methods (``compareTo``, ``isGreaterThan``, ``isLessThan``, ``add``,
``sub``, ``asInteger``, ``isInteger``, ``sign``), ``semver()`` and its methods (``compareTo``, ``isGreaterThan``,
``isLessThan``, ``major``, ``minor``, ``patch``), version attributes as semver values, capacities as quantities, and an
unknown attribute domain as an empty map (``newStringInterfaceMapWithDefault``). Not provided: the other Kubernetes
CEL libraries (lists, regex, urls, ip/cidr, format) and ``cel.bind``; an expression using one fails to compile
here, and the prediction says so instead of guessing (``CelError``).

Compiled programs are kept per expression (a handful of distinct selectors in a cluster), and each selector's answer
per device (devices are immutable values), so a device is evaluated once per selector however many predictions ask.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any, cast

import celpy
from celpy import celtypes

from webhook.cluster.quantity import Quantity, parse_quantity
from webhook.errors import QuantityError

MAX_REMEMBERED_DEVICES = 1 << 16


class CelError(Exception):
    """An expression that does not compile, or fails at run time on a device (upstream: the allocator's error)."""


class CelQuantity(celtypes.StringType):
    """A Kubernetes quantity as a CEL value (apiserver/pkg/cel/library/quantity.go); compared by ``compareTo``."""

    value: Fraction

    def __new__(cls, quantity: Quantity) -> CelQuantity:
        found = cast("CelQuantity", super().__new__(cls, str(quantity)))
        found.value = quantity.value
        return found


_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z.-]+))?(?:\+([0-9A-Za-z.-]+))?$")


class CelSemver(celtypes.StringType):
    """A semantic version as a CEL value (apiserver/pkg/cel/library/semverlib.go)."""

    key: tuple[int, int, int, tuple[tuple[int, int | str], ...]]

    def __new__(cls, text: str) -> CelSemver:
        match = _SEMVER.match(text)
        if match is None:
            raise CelError(f"invalid semver {text!r}")
        found = cast("CelSemver", super().__new__(cls, text))
        pre = match.group(4)
        # A version without prerelease ranks above every prerelease of it (semver 2.0.0 §11).
        ids: tuple[tuple[int, int | str], ...] = ((2, 0),) if pre is None else tuple(
            (0, int(p)) if p.isdigit() else (1, p) for p in pre.split("."))
        found.key = (int(match.group(1)), int(match.group(2)), int(match.group(3)), ids)
        return found


def _quantity(text: object) -> CelQuantity:
    try:
        return CelQuantity(parse_quantity(str(text)))
    except QuantityError as exc:
        raise CelError(str(exc)) from exc


def _compare(a: object, b: object) -> celtypes.IntType:
    if isinstance(a, CelQuantity) and isinstance(b, CelQuantity):
        return celtypes.IntType((a.value > b.value) - (a.value < b.value))
    if isinstance(a, CelSemver) and isinstance(b, CelSemver):
        return celtypes.IntType((a.key > b.key) - (a.key < b.key))
    raise CelError(f"no such overload: compareTo({type(a).__name__}, {type(b).__name__})")


def _quantity_op(op: Callable[[Fraction, Fraction], Fraction]) -> Callable[[object, object], CelQuantity]:
    def apply(a: object, b: object) -> CelQuantity:
        if not isinstance(a, CelQuantity):
            raise CelError("no such overload")
        other = b.value if isinstance(b, CelQuantity) else Fraction(int(b))  # type: ignore[call-overload]
        return CelQuantity(Quantity(op(a.value, other)))
    return apply


def _part(index: int) -> Callable[[object], celtypes.IntType]:
    def get(version: object) -> celtypes.IntType:
        if not isinstance(version, CelSemver):
            raise CelError("no such overload")
        return celtypes.IntType(version.key[index])
    return get


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "isQuantity": lambda s: celtypes.BoolType(_is(_quantity, s)),
    "semver": lambda s: CelSemver(str(s)),
    "isSemver": lambda s: celtypes.BoolType(_is(CelSemver, s)),
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: celtypes.BoolType(_compare(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_compare(a, b) < 0),
    "add": _quantity_op(lambda a, b: a + b),
    "sub": _quantity_op(lambda a, b: a - b),
    "asInteger": lambda q: celtypes.IntType(int(q.value)),
    "isInteger": lambda q: celtypes.BoolType(q.value.denominator == 1),
    "sign": lambda q: celtypes.IntType((q.value > 0) - (q.value < 0)),
    "major": _part(0),
    "minor": _part(1),
    "patch": _part(2),
}


def _is(make: Callable[[Any], object], value: object) -> bool:
    try:
        make(str(value))
    except CelError:
        return False
    return True


class _DomainMap(celtypes.MapType):
    """``device.attributes`` / ``device.capacity``: a domain the device does not name is an empty map."""

    def __getitem__(self, key: Any) -> Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            return celtypes.MapType({})


@functools.cache
def _environment() -> celpy.Environment:
    """Built at the first selector, not at import: its parser takes 0.1 s to build, which every run of the plugin
    and every start of the server paid for clusters without a device selector."""
    return celpy.Environment()


@functools.lru_cache(maxsize=256)
def compile_selector(expression: str) -> DeviceSelector:
    """The selector of a CEL expression (compiled once per process); ``CelError`` when it does not compile."""
    environment = _environment()
    try:
        program = environment.program(environment.compile(expression), functions=FUNCTIONS)
    except Exception as exc:  # celpy raises its parser's and its own errors
        raise CelError(f"compilation failed: {exc}") from exc
    return DeviceSelector(expression, program)


AttributeValues = Mapping[str, tuple[str, object]]


def _value(kind: str, value: object) -> Any:
    if kind == "int":
        return celtypes.IntType(int(value))  # type: ignore[call-overload]
    if kind == "bool":
        return celtypes.BoolType(bool(value))
    if kind == "version":
        return CelSemver(str(value))
    return celtypes.StringType(str(value))


def device_activation(driver: str, attributes: AttributeValues, capacity: Mapping[str, Quantity],
                      allow_multiple_allocations: bool) -> dict[str, Any]:
    """The ``device`` variable (``DeviceMatches``): qualified names split by domain, the driver's by default."""
    by_domain: dict[str, dict[Any, Any]] = {}
    for name, (kind, value) in attributes.items():
        domain, _, short = name.rpartition("/")
        by_domain.setdefault(domain or driver, {})[celtypes.StringType(short)] = _value(kind, value)
    capacities: dict[str, dict[Any, Any]] = {}
    for name, quantity in capacity.items():
        domain, _, short = name.rpartition("/")
        capacities.setdefault(domain or driver, {})[celtypes.StringType(short)] = CelQuantity(quantity)
    return {"device": celtypes.MapType({
        celtypes.StringType("driver"): celtypes.StringType(driver),
        celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(allow_multiple_allocations),
        celtypes.StringType("attributes"): _DomainMap(
            {celtypes.StringType(d): celtypes.MapType(v) for d, v in by_domain.items()}),
        celtypes.StringType("capacity"): _DomainMap(
            {celtypes.StringType(d): celtypes.MapType(v) for d, v in capacities.items()}),
    })}


class DeviceSelector:
    """One compiled selector, with its answers per device (``matches``)."""

    __slots__ = ("answers", "expression", "program")

    def __init__(self, expression: str, program: Any) -> None:
        self.expression = expression
        self.program = program
        self.answers: dict[Any, bool | str] = {}

    def matches(self, key: Any, activation: Callable[[], dict[str, Any]]) -> bool:
        """Whether the device (``key``: any hashable identity of it) is selected; ``CelError`` at run time.
        ``activation`` builds the ``device`` variable only when the answer is not known yet."""
        found = self.answers.get(key)
        if found is None:
            found = self._evaluate(activation())
            if len(self.answers) >= MAX_REMEMBERED_DEVICES:
                self.answers.clear()
            self.answers[key] = found
        if isinstance(found, str):
            raise CelError(found)
        return found

    def _evaluate(self, activation: dict[str, Any]) -> bool | str:
        try:
            result = self.program.evaluate(activation)
        except CelError as exc:
            return str(exc)
        except Exception as exc:  # celpy's CELEvalError and the Python errors of its built-ins
            message = str(exc)
            if "KeyError" in message or "no such key" in message:
                return f"no such key: {message}"
            return message
        if isinstance(result, Exception):
            return str(result)
        if not isinstance(result, (bool, celtypes.BoolType)):
            return f"CEL result of type {type(result).__name__} could not be converted to bool"
        return bool(result)
