"""Request validation helpers: JSON schema bodies and query parameters.

Every failure is an APIValidationError (400) naming the field and the bad
value, the way clients show it to users.
"""

from collections.abc import Callable, Sequence
from typing import TypeVar

import jsonschema

from nova import exception

T = TypeVar('T')

# Largest value of the database's INTEGER columns (signed 32 bits), as
# upstream Nova's db.MAX_INT: flavor sizes beyond it cannot be stored.
MAX_INT = 2 ** 31 - 1

_INT_KEYWORD = 'x-integer'


def _integer_in_range(validator, bounds, instance, schema):
    """``x-integer: [min, max]``: an integer, or a string of decimal
    digits with an optional minus sign (clients send both), within the
    bounds."""
    minimum, maximum = bounds
    number = None
    if isinstance(instance, int) and not isinstance(instance, bool):
        number = instance
    elif isinstance(instance, float) and instance.is_integer():
        number = int(instance)
    elif isinstance(instance, str):
        text = instance.strip()
        digits = text[1:] if text.startswith('-') else text
        if digits.isascii() and digits.isdecimal():
            number = int(text)
    if number is None or not minimum <= number <= maximum:
        yield jsonschema.ValidationError(
            '%r is not an integer from %d to %d' % (
                instance, minimum, maximum))


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, {_INT_KEYWORD: _integer_in_range})


def positive_integer(maximum: int = MAX_INT) -> dict:
    """Schema: an integer from 1 to ``maximum``, or a string of digits."""
    return {_INT_KEYWORD: [1, maximum]}


def quota_limit() -> dict:
    """Schema: a quota limit, -1 (unlimited) to MAX_INT, or a string of
    one (upstream accepts both)."""
    return {_INT_KEYWORD: [-1, MAX_INT]}


def non_negative_integer(maximum: int = MAX_INT) -> dict:
    """Schema: an integer from 0 to ``maximum``, or a string of digits."""
    return {_INT_KEYWORD: [0, maximum]}


# A boolean in a request body, spelt the ways upstream accepts (clients
# send "True" and "False" as strings).
_TRUE = (True, 'True', 'TRUE', 'true', '1', 'ON', 'On', 'on',
         'YES', 'Yes', 'yes')
_FALSE = (False, 'False', 'FALSE', 'false', '0', 'OFF', 'Off', 'off',
          'NO', 'No', 'no')
BOOLEAN = {'type': ['boolean', 'string'], 'enum': list(_TRUE + _FALSE)}


def as_bool(value: bool | str) -> bool:
    """The value of a body field that passed ``BOOLEAN``."""
    return value in _TRUE


def validate(body: dict, schema: dict) -> None:
    """Check ``body`` against ``schema``; APIValidationError if it fails."""
    error = jsonschema.exceptions.best_match(
        _Validator(schema).iter_errors(body))
    if error is None:
        return
    field = '/'.join(str(p) for p in error.absolute_path) or 'body'
    if error.validator == 'anyOf':
        reason = '%r is not valid' % (error.instance,)
    else:
        reason = error.message
    raise exception.APIValidationError(field=field, reason=reason)


def boolean(name: str, value: str) -> bool:
    """A query parameter spelled as upstream's strict boolean parsing
    takes it: true/false, t/f, yes/no, y/n, on/off, 1/0, any case."""
    lowered = value.strip().lower()
    if lowered in ('true', 't', '1', 'yes', 'y', 'on'):
        return True
    if lowered in ('false', 'f', '0', 'no', 'n', 'off'):
        return False
    raise exception.APIValidationError(
        field=name, reason='%r is not a boolean (true or false)' % value)


def query_int(req, name: str) -> int | None:
    """A non-negative integer query parameter, or None if absent."""
    value = req.GET.get(name)
    if value is None:
        return None
    if not value.strip().isdecimal():
        raise exception.APIValidationError(
            field=name, reason='%r is not a non-negative integer' % value)
    return int(value)


def id_of_ref(ref: str | int) -> str:
    """The id a reference names: the id itself, or a URL of the resource
    (an ``imageRef``, ``flavorRef`` or a server link), whose last path
    segment is the id."""
    return str(ref).rstrip('/').rsplit('/', 1)[-1]


def paginate(req, items: Sequence[T], key: Callable[[T], object]
             ) -> Sequence[T]:
    """Apply ``marker`` (the ``key`` of the last item seen) and
    ``limit``."""
    marker = req.GET.get('marker')
    if marker is not None:
        # Keys may be integers (ids); the marker is a string.
        keys = [str(key(item)) for item in items]
        if marker not in keys:
            raise exception.APIValidationError(
                field='marker', reason='marker %r matches no item' % marker)
        items = items[keys.index(marker) + 1:]
    limit = query_int(req, 'limit')
    return items if limit is None else items[:limit]
